// Search snippets are a page's text: its math would show as TeX source
// ("\(k+1\)^N"). Before Sphinx's search reads a page's text, each math
// element becomes plain text ("(k+1)ᴺ"): Greek letters and operators as
// characters, simple super- and subscripts as such, braces dropped.
(() => {
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", lambda: "λ",
    mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Delta: "Δ",
    Sigma: "Σ", sum: "Σ", prod: "∏", int: "∫", partial: "∂", nabla: "∇",
    cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠",
    neq: "≠", approx: "≈", infty: "∞", to: "→", in: "∈", sqrt: "√",
    lvert: "|", rvert: "|", vert: "|", ldots: "…", cdots: "⋯",
  };
  const SUPER = { 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷",
    8: "⁸", 9: "⁹", "+": "⁺", "-": "⁻", n: "ⁿ", i: "ⁱ", k: "ᵏ", N: "ᴺ", T: "ᵀ" };
  const SUB = { 0: "₀", 1: "₁", 2: "₂", 3: "₃", 4: "₄", 5: "₅", 6: "₆", 7: "₇",
    8: "₈", 9: "₉", "+": "₊", "-": "₋", a: "ₐ", i: "ᵢ", j: "ⱼ", k: "ₖ", n: "ₙ" };
  const scripted = (text, table, mark) =>
    [...text].every((c) => c in table) ? [...text].map((c) => table[c]).join("")
      : `${mark}(${text})`;
  const plain = (tex) =>
    tex
      .replace(/^\s*\\[([]/, "")
      .replace(/\\[)\]]\s*$/, "")
      .replace(/\\(?:left|right|big|Big|,|;|!|quad)/g, " ")
      .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
      .replace(/\\sqrt\{([^{}]*)\}/g, "√($1)")
      .replace(/\\([A-Za-z]+)/g, (all, name) => SYMBOLS[name] ?? name)
      .replace(/\^\{([^{}]*)\}|\^(\S)/g, (all, group, one) =>
        scripted(group ?? one, SUPER, "^"))
      .replace(/_\{([^{}]*)\}|_(\S)/g, (all, group, one) => scripted(group ?? one, SUB, "_"))
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  const install = () => {
    if (typeof Search === "undefined") return; // not the search page
    const toText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const page = new DOMParser().parseFromString(htmlString, "text/html");
      page.querySelectorAll(".math").forEach((math) => {
        math.textContent = plain(math.textContent);
      });
      return toText(page.documentElement.outerHTML, anchor);
    };
  };
  document.addEventListener("DOMContentLoaded", install);
})();

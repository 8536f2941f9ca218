"""The Python blocks of the documentation's pages (docs/**/*.md), and a way
to run them as a reader would: a page's blocks in order, in one namespace.

A block is a fenced ```python block, or a ```{code-block} python directive;
its `:class:` option says where it runs:

  (none)          here, under `bazel test //...` (tests/docs/test_doc_examples.py)
  gpu             on a machine with a CUDA GPU (tools/device_check.py)
  multiprocess    in several processes (tests/sharding/test_multiprocess.py)

    python3 tests/support/doc_blocks.py docs/guides/tutorial.md ...   # run pages' blocks
    python3 tests/support/doc_blocks.py --one-device docs/semantics.md  # on one device
    python3 tests/support/doc_blocks.py --standalone docs/semantics.md  # block by block

Block by block, each block runs in a fresh namespace after exactly the
earlier blocks the site's note above it names (docs/sphinx/block_needs.py),
as a reader who lands on it would.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys

try:
    import block_needs
except ImportError:  # from a checkout, or runfiles without Bazel's Python path
    sys.path.append(str(pathlib.Path(__file__).absolute().parents[2] / "docs" / "sphinx"))
    import block_needs

PLACES = ("here", "gpu", "multiprocess")
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: pathlib.Path
    line: int  # where the code starts, 1-based
    code: str
    place: str  # one of PLACES

    def compiled(self):
        # Padded so that tracebacks name the page's own line numbers.
        return compile("\n" * (self.line - 1) + self.code, str(self.page), "exec")


def blocks(page: pathlib.Path) -> list[Block]:
    """Every Python block of `page`, in order."""
    lines = page.read_text().splitlines()
    found, k = [], 0
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        if not opening:
            k += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip()
        end = next(
            (j for j in range(k + 1, len(lines)) if lines[j].strip() == fence[0] * len(fence)), None
        )
        if end is None:
            raise ValueError(f"{page}:{k + 1}: a code fence that never closes")
        body, start = lines[k + 1 : end], k + 2
        language = re.match(r"\{code-block\}\s+(\S+)|(\S*)", info)
        language = language.group(1) or language.group(2)
        if language == "python":
            options = {}
            while body and re.match(r"^:[\w-]+:", body[0]):
                name, _, value = body[0][1:].partition(":")
                options[name] = value.strip()
                body, start = body[1:], start + 1
            place = options.get("class", "here")
            if place not in PLACES:
                raise ValueError(f"{page}:{k + 1}: class {place!r} is none of {PLACES}")
            found.append(Block(page, start, "\n".join(body) + "\n", place))
        k = end + 1
    return found


def run(page: pathlib.Path, place: str = "here") -> dict:
    """Runs `page`'s blocks for `place` in order in one namespace; returns it."""
    namespace = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.place == place:
            exec(block.compiled(), namespace)
    return namespace


def run_standalone(page: pathlib.Path, place: str = "here") -> int:
    """Runs each of `page`'s blocks for `place` in a namespace of its own,
    after the earlier blocks it needs; returns how many ran. Raises what the
    first failing block raises, naming it."""
    chain = [block for block in blocks(page) if block.place == place]
    for block, needed in zip(chain, block_needs.needs([b.code for b in chain])):
        namespace = {"__name__": "__docs__"}
        try:
            for earlier in needed:
                exec(chain[earlier].compiled(), namespace)
            exec(block.compiled(), namespace)
        except Exception as error:
            lines = [chain[earlier].line for earlier in needed]
            raise AssertionError(
                f"{page}:{block.line}: the block fails when run after only the blocks it "
                f"needs (at lines {lines}): {type(error).__name__}: {error}"
            ) from error
    return len(chain)


def set_up_devices() -> None:
    """What the pages assume, set before jax starts: 8 CPU devices (the
    sharding guide's mesh), unless the environment says otherwise."""
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
        )


def run_on_one_device(pages: list[pathlib.Path]) -> int:
    """Each page in a process of its own with one CPU device, as on a
    reader's laptop, unless the page sets up more itself (XLA_FLAGS before
    its first use of jax): a child forked after jax and xlabind are imported,
    never initialised (a backend starts in each child, after the page's own
    flags), so the pages share the imports' second. Prints "<page>: N blocks
    ran" for each page that passed; a failing page's traceback follows
    "== <page>" on stderr. Returns how many failed."""
    import os
    import traceback

    # XLA's other flags (a test runner's compile speed) stay; one BLAS thread
    # so that nothing runs beside the fork.
    flags = os.environ.get("XLA_FLAGS", "").split()
    kept = [f for f in flags if not f.startswith("--xla_force_host_platform_device_count")]
    os.environ["XLA_FLAGS"] = " ".join(kept)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import jax  # noqa: F401

    import xlabind  # noqa: F401

    failed = 0
    for page in pages:
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0:
            code = 0
            try:
                run(page)
                print(f"{page}: {sum(b.place == 'here' for b in blocks(page))} blocks ran")
            except BaseException:
                print(f"== {page}", file=sys.stderr)
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # not the parent's exit handlers
        _, status = os.waitpid(child, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed += 1
            print(f"== {page}: exit status {os.waitstatus_to_exitcode(status)}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    arguments = sys.argv[1:]
    standalone = "--standalone" in arguments
    if standalone:
        arguments.remove("--standalone")
    if "--one-device" in arguments:
        arguments.remove("--one-device")
        sys.exit(1 if run_on_one_device([pathlib.Path(a) for a in arguments]) else 0)
    set_up_devices()
    for argument in arguments:
        page = pathlib.Path(argument)
        if standalone:
            print(f"{page}: {run_standalone(page)} blocks ran, each on its own")
        else:
            run(page)
            print(f"{page}: {sum(b.place == 'here' for b in blocks(page))} blocks ran")

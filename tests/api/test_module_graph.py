"""xlabind's package in layers: each module imports only modules of its own
layer or below (type-checking-only imports included), never in a cycle, so
each can be read, tested and changed from the ones it imports.

  0  leaves: _jax_internals (jax's private APIs), _compatibility, _platforms
  1  _primitive: the one primitive, what a bound function is, its rules
  2  _runtime: the compiled modules and how a call runs
  3  _lowering: the custom call each platform gets, sharded programs
  4  the public modules (callback, linear, ..., cuda, jaxbind, ops)

The core compiled module is loaded by _runtime/extension.py alone, the ops'
by xlabind/ops/_native.py alone; the primitive loads none of them. xlabind.ops
is a client: it uses the public API (and the runtime's mark_unavailable),
and nothing outside it imports it but the package's __init__, last. tools/
uses the public API and xlabind.testing only."""

import ast
import re
from pathlib import Path

import xlabind

PACKAGE = Path(xlabind.__file__).parent
CORE_MODULE = "xlabind._xlabind"
OPS_MODULES = {"xlabind._xlabind_ops", "xlabind._xlabind_cuda_ops"}
COMPILED = {CORE_MODULE} | OPS_MODULES
LEAVES = {"xlabind._jax_internals", "xlabind._compatibility", "xlabind._platforms"}
LAYERS = {"_primitive": 1, "_runtime": 2, "_lowering": 3}


def imports() -> dict[str, set[str]]:
    """Module name -> the xlabind modules it imports, anywhere in the file."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("xlabind",) + path.relative_to(PACKAGE).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "xlabind" or node.module in {
                    "xlabind._primitive",
                    "xlabind._runtime",
                    "xlabind._lowering",
                    "xlabind.ops",
                }:
                    found.update(f"{node.module}.{a.name}" for a in node.names)
                elif node.module.startswith("xlabind."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("xlabind"))
        graph[name] = found
    return graph


def layer(module: str) -> int:
    if module in LEAVES:
        return 0
    parts = module.split(".")
    return LAYERS.get(parts[1], 4) if len(parts) > 1 else 4


def test_the_package_reads_its_layers():
    graph = imports()
    for module in (
        "xlabind._primitive.primitive",
        "xlabind._primitive.factors",
        "xlabind._runtime.extension",
        "xlabind._lowering.partitioning",
    ):
        assert module in graph
    assert {layer(m) for m in graph} == {0, 1, 2, 3, 4}


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module, imported in imports().items():
        for other in imported - COMPILED:
            other_layer = layer(other) if other != "xlabind" else 4
            if other_layer > layer(module):
                wrong.append(
                    f"{module} (layer {layer(module)}) imports {other} (layer {other_layer})"
                )
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_imports_itself_through_others():
    graph = imports()
    modules = {m for m in graph if m != "xlabind"}  # the package imports what it exports

    def reachable(start):
        seen, stack = set(), [start]
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt in modules and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    cycles = sorted(m for m in modules if m in reachable(m))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_only_the_extension_module_loads_the_core_module():
    loaders = sorted(m for m, imported in imports().items() if CORE_MODULE in imported)
    assert loaders == ["xlabind._runtime.extension"], loaders


def test_only_the_ops_load_their_modules():
    loaders = sorted(m for m, imported in imports().items() if imported & OPS_MODULES)
    assert loaders == ["xlabind.ops._native"], loaders


def test_nothing_but_the_package_imports_the_ops():
    """The ops are a client of the package: the core knows nothing of them;
    the package's __init__ imports them last, so that `import xlabind`
    registers every target a program it exported may name."""
    users = sorted(
        m
        for m, imported in imports().items()
        if not m.startswith("xlabind.ops") and any(i.startswith("xlabind.ops") for i in imported)
    )
    assert users == ["xlabind"], users


def test_the_primitive_is_a_leaf_of_its_layer():
    imported = imports()["xlabind._primitive.primitive"]
    allowed = {
        "xlabind._jax_internals",
        "xlabind._primitive.static_kwargs",
        "xlabind._primitive.explicit_sharding",
    }
    assert imported <= allowed, imported
    # Which it types its results by: factor algebra only.
    assert imports()["xlabind._primitive.explicit_sharding"] == {"xlabind._primitive.factors"}


def test_the_factor_algebra_is_a_leaf():
    assert imports()["xlabind._primitive.factors"] == set()


def test_the_ops_use_the_public_api_only():
    for module, imported in imports().items():
        if module.startswith("xlabind.ops"):
            private = {
                m
                for m in imported - OPS_MODULES
                if m != "xlabind" and not m.startswith("xlabind.ops")
            }
            # One hook: why a CUDA target is missing, when the CUDA module is.
            if module == "xlabind.ops._native":
                assert private == {"xlabind._runtime.extension"}, private
                hooked = [
                    alias.name
                    for node in ast.walk(ast.parse((PACKAGE / "ops" / "_native.py").read_text()))
                    if isinstance(node, ast.ImportFrom)
                    and node.module == "xlabind._runtime.extension"
                    for alias in node.names
                ]
                assert hooked == ["mark_unavailable"], hooked
            else:
                assert not private, (module, private)


def private_uses(source: str) -> list[str]:
    """What `source` (a tool's code) reaches of the package's private modules
    and names: imports of them, and the same spelled in the code it hands to
    another interpreter (strings)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Attribute):
            names = [ast.unparse(node)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = re.findall(r"\bxlabind(?:\.\w+)+|\bfrom xlabind import \w+", node.value)
            names = [n.replace("from xlabind import ", "xlabind.") for n in names]
        else:
            continue
        found += [n for n in names if n.startswith("xlabind.") and _private(n)]
    return sorted(set(found))


def _private(name: str) -> bool:
    return any(p.startswith("_") and not p.endswith("__") for p in name.split(".")[1:])


def test_tools_reach_the_runtime_through_xlabind_testing():
    """The benchmarks and the build and GPU checks (tools/) use the public API
    and xlabind.testing, never a private module or name of the package: what
    they need of the runtime's internals has one home."""
    tools = sorted(Path("tools").rglob("*.py"))
    assert len(tools) > 10, tools
    uses = {str(path): private_uses(path.read_text()) for path in tools}
    assert not {path: found for path, found in uses.items() if found}, uses


def test_private_uses_finds_each_spelling():
    source = (
        "from xlabind._runtime import extension\n"
        "import xlabind._lowering.status_exchange\n"
        "from xlabind import _xlabind, callback\n"
        "n = xlabind._runtime.REGISTRATIONS\n"
        "code = 'from xlabind import _xlabind_cuda_ops'\n"
        "fine = xlabind.testing.NOOP_TARGET, xlabind.__version__\n"
    )
    assert private_uses(source) == [
        "xlabind._lowering.status_exchange",
        "xlabind._runtime",
        "xlabind._runtime.REGISTRATIONS",
        "xlabind._runtime.extension",
        "xlabind._xlabind",
        "xlabind._xlabind_cuda_ops",
    ]

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
imported from the modules that define it, never through the package, whose
__init__ imports xlabind.ops last (no arrow runs back up); nothing outside it
imports it but that __init__. tools/ uses the public API and xlabind.testing
only."""

import ast
import importlib
import re
from pathlib import Path

import xlabind

PACKAGE = Path(xlabind.__file__).parent
CORE_MODULE = "xlabind._xlabind"
OPS_MODULES = {"xlabind._xlabind_ops", "xlabind._xlabind_cuda_ops"}
COMPILED = {CORE_MODULE} | OPS_MODULES
LEAVES = {"xlabind._jax_internals", "xlabind._compatibility", "xlabind._platforms"}
LAYERS = {"_primitive": 1, "_runtime": 2, "_lowering": 3}


def is_module(name: str) -> bool:
    """Whether `name` (xlabind.x.y) is one of the package's modules."""
    path = PACKAGE.joinpath(*name.split(".")[1:])
    return name in COMPILED or path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(source: str) -> set[str]:
    """The xlabind modules `source` imports, anywhere in it: `from m import
    name` imports m.name where that is a module, else m itself (`from xlabind
    import linear, BoundFunction` imports xlabind.linear and the package,
    whose __init__ binds BoundFunction)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "xlabind" or node.module.startswith("xlabind."):
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    found.add(submodule if is_module(submodule) else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "xlabind")
    return found


def imports() -> dict[str, set[str]]:
    """Module name -> the xlabind modules it imports, anywhere in the file."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("xlabind",) + path.relative_to(PACKAGE).with_suffix("").parts)
        graph[name.removesuffix(".__init__")] = imported_modules(path.read_text())
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


def in_cycles(graph: dict[str, set[str]]) -> list[str]:
    """The modules of `graph` that import themselves through others."""

    def reachable(start):
        seen, stack = set(), [start]
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt in graph and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return sorted(m for m in graph if m in reachable(m))


def test_no_module_imports_itself_through_others():
    """The package's __init__ among them: it imports every public module and
    xlabind.ops, none of which may import it back (each takes what it needs
    from the module that defines it)."""
    graph = imports()
    assert "xlabind" in graph and "xlabind.ops" in graph["xlabind"]
    cycles = in_cycles(graph)
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_in_cycles_finds_an_op_that_imports_the_package():
    # What xlabind.ops did: `import xlabind` for xlabind.linear and the rest.
    graph = {
        "xlabind": {"xlabind.linear", "xlabind.ops"},
        "xlabind.linear": set(),
        "xlabind.ops": {"xlabind.ops.map_coordinates.op"},
        "xlabind.ops.map_coordinates.op": imported_modules("import xlabind\n"),
    }
    assert in_cycles(graph) == ["xlabind", "xlabind.ops", "xlabind.ops.map_coordinates.op"]
    graph["xlabind.ops.map_coordinates.op"] = imported_modules(
        "from xlabind.linear import linear\n"
    )
    assert in_cycles(graph) == []


def test_imported_modules_reads_each_spelling():
    source = (
        "import xlabind\n"
        "import xlabind._runtime.extension\n"
        "from xlabind import _jax_internals, BoundFunction\n"
        "from xlabind._primitive import batching\n"
        "from xlabind._primitive.definition import EFFECTS\n"
        "from xlabind.ops import modes\n"
        "import jax\n"
    )
    assert imported_modules(source) == {
        "xlabind",
        "xlabind._runtime.extension",
        "xlabind._jax_internals",
        "xlabind._primitive.batching",
        "xlabind._primitive.definition",
        "xlabind.ops.modes",
    }


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
    """Outside xlabind.ops, an op imports only names the package exports (from
    the modules that define them, the same objects), never the package
    itself; and one hook: why a CUDA target is missing, when the CUDA
    module is."""
    for path in sorted((PACKAGE / "ops").rglob("*.py")):
        module = ".".join(("xlabind",) + path.relative_to(PACKAGE).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        assert "xlabind" not in imported_modules(path.read_text()), (
            f"{module} imports the package, whose __init__ imports xlabind.ops: "
            "import each name from the module that defines it"
        )
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            if not node.module.startswith("xlabind.") or node.module.startswith("xlabind.ops"):
                continue
            for alias in node.names:
                if module == "xlabind.ops._native" and (node.module, alias.name) == (
                    "xlabind._runtime.extension",
                    "mark_unavailable",
                ):
                    continue
                name = alias.name
                assert name in xlabind.__all__, (module, node.module, name)
                defined = getattr(importlib.import_module(node.module), name)
                assert defined is getattr(xlabind, name), (module, node.module, name)


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

"""xlabind's modules import each other without a cycle (type-checking-only
imports included): each can be read, tested and changed from the ones it
imports, and the primitive stays a leaf that rules register on."""

import ast
from pathlib import Path

import xlabind

PACKAGE = Path(xlabind.__file__).parent


def imports() -> dict[str, set[str]]:
    """Module name -> the xlabind modules it imports, anywhere in the file."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("xlabind",) + path.relative_to(PACKAGE).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "xlabind":
                    found.update(f"xlabind.{a.name}" for a in node.names)
                elif node.module.startswith("xlabind."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("xlabind."))
        graph[name] = found
    return graph


def test_the_package_reads_its_modules():
    graph = imports()
    assert {"xlabind.primitive", "xlabind.sharding", "xlabind.bound_function"} <= set(graph)


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


def test_the_primitive_is_a_leaf_of_the_bound_function_layer():
    assert not imports()["xlabind.primitive"] & {"xlabind.bound_function", "xlabind.sharding",
                                                 "xlabind.lowering", "xlabind.call_status"}

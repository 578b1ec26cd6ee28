"""No import cycle among pyreduce's modules, function-level imports included.

The layers themselves are checked by import-linter (``lint-imports``, the
contract in pyproject.toml); a layers contract lets modules of one layer import
each other, so this test checks what it leaves open: that no module reaches,
through any chain of imports, back to itself. Run it alone with
``python -m pytest tests/test_layers.py``, or ``python tests/test_layers.py`` to
print the cycles.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")


def import_graph() -> dict[str, set[str]]:
    """Each module of pyreduce -> the modules of pyreduce it imports, wherever in
    the module the import statement is (grimp reads the source, not the
    interpreter's state)."""
    graph = grimp.build_graph("pyreduce", cache_dir=None)
    modules = set(graph.modules)
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, without recursion), and the modules that import themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(cycles(edges)) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_are_in_the_graph():
    # explain imports the CUDA toolchain's module inside a function, on purpose:
    # the graph must see it, or a cycle could hide in such an import
    assert "pyreduce.backends.cubins" in import_graph()["pyreduce.explain"]


def test_no_import_cycle_among_the_modules():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


if __name__ == "__main__":
    found = cycles(import_graph())
    for component in found:
        print(" <-> ".join(component))
    print(f"{len(found)} import cycle(s) among pyreduce's modules")
    raise SystemExit(1 if found else 0)

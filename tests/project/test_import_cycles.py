"""No import cycle anywhere in the package, between packages or between single modules.

The layers contract (pyproject.toml, checked by test_layering.py) orders the
top-level packages; this scan covers what it cannot see: cycles between the
modules inside one package, and packages the contract does not list yet. It
reads the import graph through grimp's public API (``build_graph``,
``find_modules_directly_imported_by``), the graph library import-linter uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")


def cycles(nodes: Iterable[str], edges: Callable[[str], Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges(root))))]
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
                    work.append((child, iter(sorted(edges(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def module_cycles(*, type_checking: bool) -> list[frozenset[str]]:
    graph = grimp.build_graph("rlmesh_trio", exclude_type_checking_imports=not type_checking)
    return cycles(graph.modules, graph.find_modules_directly_imported_by)


def package_cycles() -> list[frozenset[str]]:
    """Cycles between the top-level packages (``rlmesh_trio.x``), TYPE_CHECKING imports too."""
    graph = grimp.build_graph("rlmesh_trio")

    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        targets = {top(t) for t in graph.find_modules_directly_imported_by(module)}
        edges.setdefault(top(module), set()).update(targets - {top(module)})
    return cycles(edges, lambda package: edges.get(package, set()))


def test_the_scan_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges, lambda n: edges[n]) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": set()}, lambda n: ()) == []


def test_no_module_imports_itself_back_at_run_time() -> None:
    assert module_cycles(type_checking=False) == []


def test_no_cycle_even_through_type_checking_imports() -> None:
    # An annotation that needs the other module's class is a dependency too: name a
    # Protocol instead (as transport.client._reading's ReaderOwner does).
    found = module_cycles(type_checking=True)
    assert found == [], "modules that import each other (TYPE_CHECKING counted): " + str(
        [sorted(c) for c in found]
    )


def test_no_two_top_level_packages_import_each_other() -> None:
    assert package_cycles() == []

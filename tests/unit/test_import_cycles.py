"""No module of shoal imports itself back, however long the way round.

import-linter's contracts (pyproject.toml) keep the layers in order, but only between the
modules they name: two modules of one layer, or of one package, may still import each
other. A circle makes a module's meaning depend on the order the others are loaded in,
and a reader cannot start anywhere; so every import counts here, those made only for type
checking too, and the test names each circle it finds.
"""

from __future__ import annotations

import grimp


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of the import graph with more than one module (or a
    module importing itself): each is at least one circle. Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, rest = work[-1]
            step = next(rest, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(imports.get(step, ())))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == module:
                        break
                if len(part) > 1 or module in imports.get(module, ()):
                    found.append(sorted(part))
    return found


def test_the_finder_finds_a_circle_and_passes_a_tree() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph("shoal", include_external_packages=False)
    imports = {
        module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }
    assert len(imports) > 100  # the scan saw the package
    assert circles(imports) == []

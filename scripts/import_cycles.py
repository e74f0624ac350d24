#!/usr/bin/env python3
"""File-level import cycles in ``gateway/``, type-only imports (``if TYPE_CHECKING:``) included.

    .venv/bin/python scripts/import_cycles.py [gateway.pool gateway.pipeline ...]

Builds the import graph with grimp (import-linter's engine) from this checkout, finds its strongly
connected components (Tarjan) and prints each cycle with the imports that close it; with package
names, only the cycles that touch them. Exits 1 when a cycle is printed, 0 when none is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's gateway, not an installed one


def import_graph() -> dict[str, list[str]]:
    """Module -> the gateway modules it imports (itself left out)."""
    graph = grimp.build_graph("gateway", exclude_type_checking_imports=False, cache_dir=None)
    return {
        module: sorted(m for m in graph.find_modules_directly_imported_by(module) if m != module)
        for module in sorted(graph.modules)
        if module.startswith("gateway")
    }


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, next_child = work.pop()
            if next_child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = graph.get(node, [])
            if next_child < len(children):
                work.append((node, next_child + 1))
                child = children[next_child]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            for child in children:
                if child in on_stack:
                    low[node] = min(low[node], low[child])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    prefixes = tuple(sys.argv[1:])
    graph = import_graph()
    shown = [c for c in cycles(graph) if not prefixes or any(m.startswith(prefixes) for m in c)]
    for component in shown:
        print("cycle:", " <-> ".join(component))
        for module in component:
            for imported in graph[module]:
                if imported in component:
                    print(f"    {module} -> {imported}")
    print(f"{len(shown)} cycle(s)")
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())

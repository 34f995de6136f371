"""The package's structure: no import cycles among gpuparam's modules (type-only imports
included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    mods = {}
    for root in ("gpuparam", "kernels"):
        for p in (ROOT / root).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            if name.startswith("kernels"):
                name = "gpuparam." + name
            mods[name.removesuffix(".__init__")] = p
    return mods


def _imports(tree: ast.AST, mods: dict) -> set[str]:
    deps: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuparam"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            deps.update(s for s in subs if s in mods)
            if node.module in mods and not all(s in mods for s in subs):
                deps.add(node.module)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name in mods)
    return deps


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    """Type-only (``TYPE_CHECKING``) and function-level imports count too: a cycle is a
    design knot whichever way Python tolerates it."""
    mods = _modules()
    graph = {n: _imports(ast.parse(p.read_text()), mods) for n, p in mods.items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles among: " + "; ".join(", ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]

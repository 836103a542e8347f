"""The package's layering, read from the source (AST), not from what happens to be imported.

Rules (DESIGN.md "Layering"):

1. ``formal.hw`` (the GPU harness) is a leaf: only ``formal.hw`` itself and the CLI
   (``formal.cli``) import it.  ``tools/`` scripts may import it too (they are not in
   ``formal/``).
2. No import cycles between modules (every module of ``formal``, at any depth, is a node).
3. No import cycles between units: a top-level module such as ``formal.layout`` or a whole
   package such as ``formal.wmma`` is one node (two packages that import each other are one
   design, whatever modules the edges start from).

Imports inside functions count as much as module-level ones: a deferred import hides a
cycle from Python, not from the design.  The fix is to move the shared piece to the lower
module, never to defer the import.

Imports are read from the source: ``import``/``from ... import`` statements at any depth.
A module named in a string (``prove``'s optional obligation modules, loaded with
importlib) is a plugin, not an edge.  Edges from a package's ``__init__`` to its own submodules (re-exports) are part of the
package; the root ``formal/__init__`` is the public facade and is left out of the unit
graph (it imports only the catalog eagerly).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "formal"

LEAF = "formal.hw"
MAY_IMPORT_LEAF = ("formal.hw", "formal.cli")

# Unit cycles still open, each with the move that closes it.  The test fails when one
# disappears (remove it here) as much as when a new one appears.
KNOWN_UNIT_CYCLES: set = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py")) if "template" not in p.parts}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@lru_cache(maxsize=1)
def import_edges() -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import of a ``formal`` module, at any depth."""
    mods = _modules()
    edges = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                # ``from . import x`` imports the submodule x when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            found = []
            for t in targets:
                while t and t not in mods:          # formal.hw.wmma_probe.X -> formal.hw.wmma_probe
                    t = t.rpartition(".")[0]
                if t.startswith("formal") and t != mod and t not in found:
                    found.append(t)                 # one edge per statement and module
            edges += [(mod, t, node.lineno) for t in found]
    return edges


def _unit(mod: str) -> str:
    return ".".join(mod.split(".")[:2])


def _where(mod: str) -> str:
    p = _modules()[mod]
    return str(p.relative_to(ROOT))


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle [n0, n1, ..., n0] of a directed graph, or None (iterative DFS)."""
    color: dict[str, int] = {}
    for start in sorted(graph):
        if color.get(start):
            continue
        stack = [(start, iter(sorted(graph.get(start, ()))))]
        path = [start]
        color[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
                path.pop()
            elif color.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not color.get(nxt):
                color[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    return None


def _explain(cycle: list[str], edges, key) -> str:
    lines = []
    for a, b in zip(cycle, cycle[1:]):
        hits = [(m, t, ln) for m, t, ln in edges if key(m) == a and key(t) == b]
        m, t, ln = hits[0]
        lines.append(f"  {a} -> {b}   ({_where(m)}:{ln} imports {t}"
                     f"{f' and {len(hits) - 1} more' if len(hits) > 1 else ''})")
    return "import cycle:\n" + "\n".join(lines)


def unit_graph(edges) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for m, t, _ in edges:
        a, b = _unit(m), _unit(t)
        if a != b and "formal" not in (a, b):
            g.setdefault(a, set()).add(b)
    return g


# ----------------------------------------------------------------------------------

def test_the_graph_is_read():
    """The reader sees the imports it must (guards the rules below against a silent empty graph)."""
    edges = {(m, t) for m, t, _ in import_edges()}
    assert ("formal.evaluate", "formal.catalog") in edges            # module level
    assert ("formal.evaluate", "formal.metadata") in edges           # inside a function
    assert ("formal.hw.capture", "formal.hw.kernels") in edges        # relative, in a package
    assert len(edges) > 150


def test_hw_is_a_leaf():
    bad = [f"  {_where(m)}:{ln} imports {t}" for m, t, ln in import_edges()
           if _unit(t) == LEAF and not m.startswith(MAY_IMPORT_LEAF)]
    assert not bad, ("formal.hw (the GPU harness) is a leaf; only formal.hw and formal.cli may import it:\n"
                     + "\n".join(bad))


def test_no_cycles_between_modules():
    edges = import_edges()
    g: dict[str, set[str]] = {}
    for m, t, _ in edges:
        if "formal" not in (m, t):
            g.setdefault(m, set()).add(t)
    cyc = find_cycle(g)
    assert cyc is None, _explain(cyc, edges, lambda m: m)


def test_no_cycles_between_units():
    edges = import_edges()
    g = unit_graph(edges)
    for pair in KNOWN_UNIT_CYCLES:
        a, b = sorted(pair)
        assert b in g.get(a, ()) and a in g.get(b, ()), f"{a} <-> {b} is no longer a cycle: drop it from KNOWN_UNIT_CYCLES"
        g[a].discard(b)
    cyc = find_cycle(g)
    assert cyc is None, _explain(cyc, edges, _unit)


def test_cycle_finder_reports_the_edge():
    """The checker itself: a planted cycle is found and named edge by edge."""
    g = {"formal.a": {"formal.b"}, "formal.b": {"formal.c"}, "formal.c": {"formal.a"}, "formal.d": {"formal.a"}}
    assert find_cycle(g) == ["formal.a", "formal.b", "formal.c", "formal.a"]
    assert find_cycle({"formal.a": {"formal.b"}, "formal.b": set()}) is None

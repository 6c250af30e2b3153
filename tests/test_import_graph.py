"""The import graph of src/recharness: no cycles, and the runner depends on no particular suite.

Every `import` / `from ... import` in a module counts, at any depth (an import inside a
function is still a dependency; deferring it only hides a cycle). `from pkg import name`
depends on `pkg.name` when that is a module of ours, else on `pkg`. A package's
`__init__` is not implied by importing one of its modules (as in import-linter / pydeps).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "recharness"

# Cycles still being broken elsewhere: each entry is the set of modules of one cycle.
# Empty this when the llmrec judge no longer imports the explanation task.
ALLOWED_CYCLES: list[frozenset[str]] = []

RUNNER = "recharness.runner"
SUITES = ("recharness.tasks.llmrec", "recharness.tasks.perrecbench", "recharness.tasks.recbench_plus")


def module_files(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    out = {}
    for f in sorted((src / package).rglob("*.py")):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports."""
    files = module_files(src, package)
    graph: dict[str, set[str]] = {}
    for mod, f in files.items():
        deps: set[str] = set()
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, node, f.name == "__init__.py")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    deps.add(t)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_the_graph_is_read():
    g = import_graph()
    assert "recharness.runner.pipeline" in g and "recharness.matching.parse" in g
    assert "recharness.matching.normalize" in g["recharness.matching.parse"]


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [frozenset({"a", "b", "c"})]


def test_no_import_cycles():
    found = cycles(import_graph())
    unexpected = [sorted(c) for c in found if c not in ALLOWED_CYCLES]
    assert not unexpected, f"import cycles in src/{PACKAGE}: {unexpected}"


def test_runner_imports_no_suite():
    g = import_graph()
    bad = {m: sorted(d for d in deps if d.startswith(SUITES))
           for m, deps in g.items() if m == RUNNER or m.startswith(RUNNER + ".")}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"the runner imports specific suites: {bad}"

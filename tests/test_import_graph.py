"""The import graph of src/recharness: no cycles between modules or packages, and suites are plug-ins.

Every `import` / `from ... import` in a module counts, at any depth (an import inside a
function is still a dependency; deferring it only hides a cycle). `from pkg import name`
depends on `pkg.name` when that is a module of ours, else on `pkg`. A package's
`__init__` is not implied by importing one of its modules (as in import-linter / pydeps).

Packages are the first level under recharness (core, models, data, baselines, execution, runner,
report, ...), with each suite (`recharness.tasks.<suite>`) a package of its own beside
`recharness.tasks` (the task contract and registry). Nothing outside tasks/ imports a suite, nor
names one as a value (a string that is a suite name, e.g. `== "perrecbench"`): only prose (help
text, messages, docstrings) may mention them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "recharness"

# Cycles still being broken elsewhere: each entry is the set of modules of one cycle.
# Empty this when the llmrec judge no longer imports the explanation task.
ALLOWED_CYCLES: list[frozenset[str]] = []

TASKS = "recharness.tasks"
CORE = "recharness.core"


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


def suite_packages(src: Path = SRC, package: str = PACKAGE) -> list[str]:
    """Every sub-package of recharness.tasks (found on disk, none omitted)."""
    return sorted(f"{package}.tasks.{d.name}" for d in (src / package / "tasks").iterdir()
                  if (d / "__init__.py").exists())


def package_of(mod: str, suites: list[str]) -> str:
    for s in suites:
        if mod == s or mod.startswith(s + "."):
            return s
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    suites = suite_packages()
    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        a = package_of(m, suites)
        out.setdefault(a, set())
        for d in deps:
            b = package_of(d, suites)
            if a != b:
                out[a].add(b)
    return out


def test_every_suite_is_found():
    assert {"recharness.tasks.llmrec", "recharness.tasks.perrecbench", "recharness.tasks.recbench",
            "recharness.tasks.recbench_plus"} <= set(suite_packages())


def test_package_cycle_finder_sees_a_package_loop():
    g = {"recharness.a.x": {"recharness.b.y"}, "recharness.b.y": set(), "recharness.b.z": {"recharness.a.w"},
         "recharness.a.w": set()}
    assert cycles(package_graph(g)) == [frozenset({"recharness.a", "recharness.b"})]


def test_no_package_cycles():
    found = cycles(package_graph(import_graph()))
    assert not found, f"import cycles between packages of src/{PACKAGE}: {[sorted(c) for c in found]}"


def test_core_imports_nothing_else_of_the_package():
    bad = {m: sorted(d for d in deps if not d.startswith(CORE)) for m, deps in import_graph().items()
           if m.startswith(CORE + ".") or m == CORE}
    assert not {m: d for m, d in bad.items() if d}, bad


def test_no_module_outside_tasks_imports_a_suite():
    suites = tuple(suite_packages())
    bad = {m: sorted(d for d in deps if d.startswith(suites)) for m, deps in import_graph().items()
           if not m.startswith(TASKS + ".") and m != TASKS}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"modules outside tasks/ import a suite: {bad}"


def test_no_suite_imports_another_suite():
    """Suites are plug-ins: each may be removed without breaking another (what two share lives under
    tasks/ itself, e.g. tasks.wording, or lower, e.g. matching.answers)."""
    suites = suite_packages()
    bad = {m: sorted(d for d in deps if package_of(d, suites) in suites and package_of(d, suites) != package_of(m, suites))
           for m, deps in import_graph().items() if package_of(m, suites) in suites}
    bad = {m: d for m, d in bad.items() if d}
    assert not bad, f"suites importing another suite: {bad}"


SUITE_NAME = re.compile(r"^(llmrec|perrecbench|recbench|recbench[-_]plus)([:/.][\w./-]*)?$")


def suite_names_as_values(path: Path) -> list[tuple[int, str]]:
    """String constants (not docstrings) that are a suite name, e.g. `info["suite"] == "perrecbench"`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and SUITE_NAME.match(n.value)]


def test_the_suite_name_scan_finds_a_planted_name(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""About perrecbench."""\nif suite == "perrecbench" or t == "recbench:ctr":\n    print("see llmrec docs")\n')
    assert suite_names_as_values(f) == [(2, "perrecbench"), (2, "recbench:ctr")]


def test_no_suite_named_outside_tasks():
    root = SRC / PACKAGE
    files = [f for f in sorted(root.rglob("*.py")) if "tasks" not in f.relative_to(root).parts]
    found = {str(f.relative_to(root)): hits for f in files if (hits := suite_names_as_values(f))}
    assert not found, f"suite names used as values outside tasks/: {found}"


def test_executors_have_no_stubs():
    for f in sorted((SRC / PACKAGE / "execution").rglob("*.py")):
        assert "NotImplementedError" not in f.read_text(encoding="utf-8"), f"{f.name} has a stub"


def test_no_private_method_of_another_class_called_across_modules():
    """`X._name(` / `obj._name(` where the callee is defined in another module of ours: a private API
    crossed (self._x and cls._x are the class's own)."""
    root = SRC / PACKAGE
    defined: dict[str, set[str]] = {}
    trees = {}
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        trees[f] = tree
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("_") \
                    and not n.name.startswith("__"):
                defined.setdefault(n.name, set()).add(str(f))
    bad = []
    for f, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in defined \
                    and not (isinstance(n.func.value, ast.Name) and n.func.value.id in ("self", "cls")) \
                    and str(f) not in defined[n.func.attr]:
                bad.append(f"{f.relative_to(root)}:{n.lineno} {n.func.attr}")
    assert not bad, bad


#: third-party privates with no public equivalent, each read in exactly one place that says why
THIRD_PARTY_PRIVATES = {
    ("models/llama_native.py", "_model"), ("models/llama_native.py", "_ctx"),  # llama-cpp-python's Llama
    ("models/llama_native.py", "_internals"),  # llama_cpp._internals (LlamaContext, LlamaBatch), same helper
    ("metrics/bootstrap.py", "_extract_corpus_statistics"),  # sacrebleu: per-sentence BLEU statistics
}
#: modules another developer is changing now; their private reads go with that change
PENDING_PRIVATES: set[str] = set()


def private_uses(path: Path) -> list[tuple[int, str]]:
    """`x._name` (read or called; x not self/cls) where the module defines no `_name` of its own, and
    `from x import _name`: another module's (or library's) private API used here."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            own.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            own.add(n.id)

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and private(n.attr) and n.attr not in own \
                and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            out.append((n.lineno, n.attr))
        elif isinstance(n, ast.ImportFrom):
            out += [(n.lineno, a.name) for a in n.names if private(a.name)]
    return sorted(out)


def test_the_private_scan_finds_planted_uses(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from kg.graph import _csr\nfrom x import __version__\n\nclass A:\n    def f(self, kg):\n"
                 "        self._own = 1\n        return self._own, kg._item_ptr, kg._own, kg.public\n")
    assert private_uses(f) == [(1, "_csr"), (7, "_item_ptr")]


def test_no_private_name_of_another_module_used():
    root = SRC / PACKAGE
    bad = [f"{rel}:{line} {name}" for f in sorted(root.rglob("*.py"))
           if (rel := str(f.relative_to(root))) not in PENDING_PRIVATES
           for line, name in private_uses(f) if (rel, name) not in THIRD_PARTY_PRIVATES]
    assert not bad, f"private names of other modules used (make them public, or wrap a library's): {bad}"

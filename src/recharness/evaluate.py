"""`recharness eval`: from model specs to one report, in one command (what `make demo` runs).

For each suite's declared runs (`Suite.demo`: tasks, size, options) it prepares the dataset if
missing, builds (seeded; an identical build is kept), answers with every model (resumable: what is
answered is never asked again, so re-running the command makes no model call and a new `-m` only
answers for the new model), optionally fits the heavy references (`train`, kept in the run), scores
and writes each run's report, then one report over every suite and model. The console gets one line
per step and the summary table; the details go to `<out>/eval.log`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from recharness.core.rundir import RunDir


@dataclass
class EvalRun:
    label: str
    suite: str
    tasks: list[str]
    limit: int
    options: list[str]
    path: Path
    built: bool = False
    #: {model name: (new answers, already answered)}
    answered: dict[str, tuple[int, int]] = field(default_factory=dict)


def _options(option: list[str]) -> dict:
    out = {}
    for o in option:
        k, _, v = o.partition("=")
        out[k.strip()] = v.strip()
    return out


def _same_build(rd: RunDir, suite: str, tasks: list[str], seed: int, limit: int, options: dict) -> bool:
    """True when the run directory already holds exactly this build (then it is kept, answers and all)."""
    if not rd.build_json.exists() or not rd.samples_jsonl.exists():
        return False
    try:
        info = json.loads(rd.build_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    from recharness.tasks.options import validate_options

    want = {k: v for k, v in validate_options(suite, tasks, options).items()
            if isinstance(v, (str, int, float, bool, type(None)))}
    return (info.get("suite"), info.get("tasks"), info.get("seed"), info.get("limit"), info.get("options") or {}) == \
        (suite, tasks, seed, limit, want)


def plan(suites: str, out: Path, limit: int | None) -> list[EvalRun]:
    """The runs of the chosen suites (`all`, or names of suites / demo runs, comma-separated)."""
    from recharness.core.errors import ConfigError
    from recharness.tasks.registry import suites as all_suites

    every = sorted(((d, name) for name, s in all_suites().items() for d in s.demo), key=lambda r: r[0].order)
    wanted = None if suites in ("", "all") else {x.strip() for x in suites.split(",") if x.strip()}
    runs = [EvalRun(d.label, name, list(d.tasks), limit or d.limit, list(d.options), out / d.label)
            for d, name in every if wanted is None or d.label in wanted or name in wanted]
    if not runs:
        known = sorted({name for _, name in every} | {d.label for d, _ in every})
        raise ConfigError(f"--suites {suites}: none of {', '.join(known)}")
    return runs


def evaluate(models: list[str], runs: list[EvalRun], *, dataset: str, seed: int = 0, use_cache: bool = True,
             train_references: bool = False, say=print, log=None, generation: dict | None = None,
             system_prompt: str | None = None) -> list[EvalRun]:
    """Build, answer, (train), score and report every run; `say` gets one line per step, `log` the details."""
    from recharness.core.errors import RecharnessError
    from recharness.data.store import load_dataset
    from recharness.report.html import write_report
    from recharness.report.tables import write_scores
    from recharness.runner import pipeline
    from recharness.specs import default_name, resolve_spec
    from recharness.tasks.registry import get_suite

    log = log or (lambda msg: None)
    try:
        load_dataset(dataset)
    except RecharnessError:
        from recharness.data.prepare import prepare_dataset

        say(f"preparing {dataset}…")
        prepare_dataset(dataset, progress=False)
    for r in runs:
        rd = RunDir(r.path)
        opts = _options(r.options)
        t0 = time.perf_counter()
        if not _same_build(rd, r.suite, r.tasks, seed, r.limit, opts):
            info = pipeline.build(r.suite, dataset, r.path, tasks=r.tasks, seed=seed, limit=r.limit, options=opts)
            r.built = True
            log(f"{r.label}: built {info['counts']} in {time.perf_counter() - t0:.1f} s → {rd.path}")
        for spec in models:
            name = default_name(spec)
            backend = resolve_spec(spec, r.path)
            t1 = time.perf_counter()
            path, stats = pipeline.run(r.path, backend, name, use_cache=use_cache, generation=generation,
                                       system_prompt=system_prompt)
            r.answered[name] = (stats.done, stats.skipped)
            log(f"{r.label}: {name}: {stats.done} answered ({stats.cached} from the cache, {stats.invalid} invalid), "
                f"{stats.skipped} already done, {time.perf_counter() - t1:.1f} s → {path}")
            if not stats.complete:
                raise RecharnessError(f"{r.label}: {name} left {stats.total - stats.skipped - stats.done} samples "
                                      f"unanswered ({stats.stopped or dict(stats.undone)}); run the command again")
        if train_references and not rd.reference_files():
            from recharness.runner.train import train

            for p in train(r.path, seed=seed, progress=log):
                log(f"{r.label}: reference → {p}")
        rows = pipeline.score(r.path, seed=seed)
        paper = get_suite(r.suite).paper_tables
        md = None
        if paper:
            import inspect

            kw = {"dataset": dataset} if "dataset" in inspect.signature(paper).parameters else {}
            md = paper(rows, **kw) or None
        write_scores(rows, r.path, extra_md=md)
        report = write_report(rows, r.path, sections={"In the paper's layout": md} if md else None)
        new = sum(a for a, _ in r.answered.values())
        per = ", ".join(f"{m} {a}" for m, (a, _) in r.answered.items())
        say(f"{r.label}: {', '.join(r.tasks)} · {r.limit} per task · " + ("built" if r.built else "build kept")
            + (f" · new answers: {per}" if new else " · nothing to answer (no model call)"))
        log(f"{r.label}: scores → {rd.scores('md')}; report → {report}")
    return runs


def summary(runs: list[EvalRun], models: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the compact table: per run and task, the headline metric of each model (its
    interval as given by the tables) and of each reference."""
    from recharness.report.html import headline_metric
    from recharness.report.tables import columns, load_scores, value_text
    from recharness.runner.coverage import label
    from recharness.specs import default_name

    names = [default_name(m) for m in models]
    header = ["suite", "task", "metric", *names, "references"]
    out = []
    for r in runs:
        rows = load_scores(r.path)
        for task in dict.fromkeys(x.task for x in rows):
            trows = [x for x in rows if x.task == task]
            key = headline_metric(r.suite, task, columns(trows))
            if key is None:
                continue

            def cell(x) -> str:
                cov = label(x.coverage)
                return value_text(x, key) + (f" ({cov})" if cov else "")

            by = {x.method: x for x in trows}
            out.append([r.label, task, key, *(cell(by[n]) if n in by else "–" for n in names),
                        "; ".join(f"{x.method} {cell(x)}" for x in trows if x.kind == "reference") or "–"])
    return header, out

"""`recharness eval`: from model specs to one report, in one command (what `make demo` runs).

For each suite's declared runs (`Suite.demo`: tasks, size, options) it prepares the dataset if
missing, builds (seeded; an identical build is kept; a build with other settings, e.g. another --limit,
sets the earlier build's answers aside in `earlier-builds/<build>/` and puts them back when that build
is made again), answers with every model (resumable: what is
answered is never asked again, so re-running the command makes no model call and a new `-m` only
answers for the new model), fits the reference models the tasks call for (`train`, kept in the run:
a re-run refits none; the few too slow for a few-minute run, `SLOW_REFERENCES`, only with
`references="all"`), scores and writes each run's report, then one report over every suite and model.
The console gets one line per step and the summary table; the details go to `<out>/eval.log`; each
run's `commands.jsonl` gets the eval command and the stage commands it amounts to (build, run, train,
score), so the report's "What was run" names them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from recharness.core.rundir import RunDir
from recharness.runner.earlier_builds import put_back, set_aside
from recharness.report.tables import STRONGEST

#: references `eval` trains only with `--references all` (`recharness train -b NAME` fits any of them on a run):
#: on the demo builds (2 cores) each takes minutes where the others take seconds. A baseline registered with
#: `demo=False` (and the reason as `demo_skip="..."`) is left out the same way; `opt_in` ones are only ever named.
SLOW_REFERENCES: dict[str, str] = {
    "dnn_semantic": "embeds every catalog item with MiniLM first, about 6 min on 2 cores until cached",
    **{n: "SASRec over every training sequence, many epochs: over 16 CPU-minutes on the demo build"
       for n in ("sasrec", "sasrec-1l", "sasrec-3l", "sasrec-4l")},
    **{n: "MiniLM embeddings, an RQ-VAE, then a SASRec over semantic IDs: many minutes on 2 cores"
       for n in ("sid-sasrec", "sid-sasrec-free")},
}
#: single-sample calls timed per reference for its latency (`train --latency-runs`; `train` itself: RecBench's 1000)
EVAL_LATENCY_RUNS = 100


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
    #: {model name: its new answers served from the response cache (no model call)}
    cached: dict[str, int] = field(default_factory=dict)
    #: {model name: its new answers that are invalid (a failed request included)}: said on the console too
    invalid: dict[str, int] = field(default_factory=dict)
    #: references fitted by this call, those already trained on this build (kept), those left out {name: why}
    trained: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    train_s: float = 0.0


def _options(option: list[str]) -> dict:
    out = {}
    for o in option:
        k, _, v = o.partition("=")
        out[k.strip()] = v.strip()
    return out


def _same_build(rd: RunDir, suite: str, tasks: list[str], seed: int, limit: int, options: dict,
                dataset: str | None = None) -> bool:
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
    same = (info.get("suite"), info.get("tasks"), info.get("seed"), info.get("limit"), info.get("options") or {}) == \
        (suite, tasks, seed, limit, want) and (dataset is None or info.get("dataset") == dataset)
    if same:  # a build killed between its samples and build.json is not this build: built again, not kept
        from recharness.core.errors import InputError
        from recharness.core.rundir import check_samples_file

        try:
            check_samples_file(rd.samples_jsonl, info, rd.build_json)
        except InputError:
            return False
    return same


def plan(suites: str, out: Path, limit: int | None, option: str = "--suites") -> list[EvalRun]:
    """The runs of the chosen suites (`all`, or names of suites / demo runs, comma-separated); a name that is
    none of them is refused, naming `option`."""
    from recharness.core.errors import ConfigError
    from recharness.tasks.registry import suites as all_suites

    every = sorted(((d, name) for name, s in all_suites().items() for d in s.demo), key=lambda r: r[0].order)
    wanted = None if suites in ("", "all") else {x.strip() for x in suites.split(",") if x.strip()}
    known = sorted({name for _, name in every} | {d.label for d, _ in every})
    unknown = sorted((wanted or set()) - set(known))
    if unknown:  # one right name beside a wrong one ran the right one alone, silently
        raise ConfigError(f"{option} {suites}: {', '.join(unknown)} is none of {', '.join(known)}")
    runs = [EvalRun(d.label, name, list(d.tasks), limit if limit is not None else d.limit, list(d.options),
                    out / d.label)
            for d, name in every if wanted is None or d.label in wanted or name in wanted]
    if not runs:
        raise ConfigError(f"{option} {suites}: none of {', '.join(known)}")
    return runs


def check_references(which: str) -> None:
    """`--references` is quick or all (a ConfigError naming it otherwise)."""
    if which not in ("quick", "all"):
        from recharness.core.errors import ConfigError

        raise ConfigError(f"--references {which}: quick (every reference but the slow ones) or all")


def references_plan(run_dir: Path, which: str = "quick") -> tuple[list[str], dict[str, str]]:
    """(the references to train on the build in `run_dir`, {left out: why}). `which`: "quick" (every one
    the build's tasks call for but the slow and opt-in ones) or "all"."""
    from recharness.baselines import BASELINES
    from recharness.tasks.references import serving
    from recharness.tasks.registry import get_task

    check_references(which)
    info = json.loads(RunDir(run_dir).build_json.read_text(encoding="utf-8"))
    names = list(dict.fromkeys(n for t in info["tasks"] for n in serving(get_task(info["suite"], t))))
    train, skipped = [], {}
    for n in names:
        meta = BASELINES.meta(n)
        if which == "all":
            train.append(n)
        elif meta.get("opt_in"):
            skipped[n] = f"opt-in: trained only when named (recharness train -b {n})"
        elif n in SLOW_REFERENCES or meta.get("demo") is False:
            skipped[n] = "slow: " + (meta.get("demo_skip") or SLOW_REFERENCES.get(n) or "minutes to train")
        else:
            train.append(n)
    return train, skipped


class _AnswerCounter:
    """`pipeline.run`'s on_total / on_progress as one status line: "<what> k/n answered"."""

    def __init__(self, show, what: str):
        self.show, self.what, self.done, self.of = show, what, 0, None

    def total(self, n: int) -> None:
        self.of = n
        self.show(f"{self.what} 0/{n} answered")

    def advance(self, k: int) -> None:
        self.done += k
        self.show(f"{self.what} {self.done}/{self.of} answered")


def check_distinct_names(models: list[str]) -> None:
    """Each model answers into its own file, named by `default_name`: two specs of one name (one model on two
    servers) would share it, and the second would find every sample done and never be asked."""
    from recharness.core.errors import ConfigError
    from recharness.models.registry import public_spec
    from recharness.specs import default_name

    seen: dict[str, str] = {}
    for spec in models:
        name = default_name(spec)
        if name in seen and seen[name] != spec:
            raise ConfigError(f"-m {public_spec(seen[name])} and -m {public_spec(spec)} both answer as {name!r} (one "
                              "answer file per name): eval them into separate --out folders, or use `recharness "
                              "run ... --name` for each")
        seen[name] = spec


def evaluate(models: list[str], runs: list[EvalRun], *, dataset: str, seed: int = 0, use_cache: bool = True,
             train_references: bool = True, references: str = "quick", say=print, log=None,
             generation: dict | None = None, system_prompt: str | None = None, system_prompt_file: Path | None = None,
             record=None, progress=None) -> list[EvalRun]:
    """Build, answer, train, score and report every run; `say` gets one line per step, `log` the details,
    `record(run_dir, stage, *args, **options)` each stage as the command line it amounts to, `progress` a
    status line while a model answers ("llmrec: fake 12/40 answered"), not logged."""
    from recharness.core.errors import ConfigError, RecharnessError
    from recharness.data.store import load_dataset
    from recharness.report.html import write_report
    from recharness.report.tables import write_scores
    from recharness.runner import pipeline
    from recharness.specs import default_name, resolve_spec
    from recharness.tasks.registry import get_suite, get_task

    log = log or (lambda msg: None)
    record = record or (lambda *a, **k: None)
    gen = {k: v for k, v in (generation or {}).items() if v is not None}
    # what can be checked without work is checked before any: a typo is one error line, not one after minutes
    from recharness.models.registry import check_model_spec

    check_references(references)
    for spec in models:
        if spec.partition(":")[0] not in ("baseline", "ft"):  # those name files a run directory holds
            check_model_spec(spec)
    check_distinct_names(models)
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
        if not _same_build(rd, r.suite, r.tasks, seed, r.limit, opts, dataset):
            from recharness.core.paths import shown_path

            aside = set_aside(rd)
            try:
                info = pipeline.build(r.suite, dataset, r.path, tasks=r.tasks, seed=seed, limit=r.limit, options=opts)
            except BaseException:  # the directory still holds the earlier build: its answers go back at once
                if aside is not None:
                    put_back(rd, aside[1].name)
                raise
            r.built = True
            back = put_back(rd, info["fingerprint"])
            if aside is not None and back is None:
                old, where = aside
                say(f"{r.label}: rebuilt with limit {r.limit}, seed {seed} on {dataset}; the answers to its earlier "
                    f"build (limit {old.get('limit')}, seed {old.get('seed')} on {old.get('dataset')}) are kept in "
                    f"{shown_path(where)} (back when that build is made again)")
            elif back is not None:
                say(f"{r.label}: made again as before (limit {r.limit}, seed {seed}): its answers kept in "
                    f"{shown_path(back)} are back" + ("; the other build's are kept beside them" if aside else ""))
            for note in info.get("notes", []):
                say(f"{r.label}: note: {note}")
            log(f"{r.label}: built {info['counts']} in {time.perf_counter() - t0:.1f} s → {rd.path}")
            record(r.path, "build", r.suite, dataset=dataset, task=r.tasks, out=r.path, seed=seed, limit=r.limit,
                   option=r.options)
        elif (fp := rd.build_info().get("fingerprint")) and (kept := put_back(rd, fp)) is not None:
            # answers set aside by an eval killed before its rebuild: this build is in the directory, they return
            from recharness.core.paths import shown_path

            say(f"{r.label}: its answers kept in {shown_path(kept)} are back (an earlier eval stopped before "
                "rebuilding)")
        for spec in models:
            name = default_name(spec)
            backend = resolve_spec(spec, r.path)
            serves = getattr(backend, "answers_task", None)  # a reference (-m baseline:NAME) answers the tasks asking it
            built_tasks = rd.build_info()["tasks"] if serves is not None else []
            if serves is not None and not any(serves(get_task(r.suite, t)) for t in built_tasks):
                say(f"{r.label}: {spec} answers none of its tasks ({', '.join(built_tasks)}): left out")
                continue
            t1 = time.perf_counter()
            own = [t for t in r.tasks if get_task(r.suite, t).request == "custom"]
            run_gen, run_sys = generation, system_prompt
            if own and (gen or system_prompt is not None):  # such a task sets its own calls' decoding
                run_gen, run_sys = None, None
                say(f"{r.label}: {', '.join(own)} drive{'s' if len(own) == 1 else ''} the model with several calls "
                    "of their own decoding settings, so the generation settings and system prompt given are not "
                    f"used anywhere in {r.label} (its answers are one method, asked one way)")
            counter = _AnswerCounter(progress, f"{r.label}: {name}") if progress is not None else None
            from recharness.core.errors import NameTaken

            try:
                path, stats = pipeline.run(r.path, backend, name, use_cache=use_cache, generation=run_gen,
                                           system_prompt=run_sys, on_total=counter and counter.total,
                                           on_progress=counter and counter.advance)
            except NameTaken as e:  # run's advice (--name, --overwrite) is no option of eval's
                raise ConfigError(f"{r.label}: {e.what}. eval keeps one answer file per model in {r.path}: eval "
                                  "into another --out to keep both, or use `recharness run ... --name`") from None
            r.answered[name] = (stats.done, stats.skipped)
            r.cached[name] = stats.cached
            r.invalid[name] = stats.invalid
            if stats.done:
                from recharness.models.registry import public_spec

                record(r.path, "run", r.suite, dataset=dataset, model=public_spec(spec), out=r.path, name=name,
                       no_cache=not use_cache, **({} if run_gen is None else {
                           "temperature": gen.get("temperature"), "top_p": gen.get("top_p"),
                           "max_tokens": gen.get("max_tokens"), "seed": gen.get("seed")}),
                       system_prompt=system_prompt_file if run_sys is not None else None)
            log(f"{r.label}: {name}: {stats.done} answered ({stats.cached} from the cache, {stats.invalid} invalid), "
                f"{stats.skipped} already done, {time.perf_counter() - t1:.1f} s → {path}")
            if not stats.complete:
                from recharness.core.errors import Unfinished

                raise Unfinished(f"{r.label}: {name} left {stats.total - stats.skipped - stats.done} samples "
                                 f"unanswered ({stats.stopped or dict(stats.undone)}); run the command again",
                                 4 if stats.stopped else 3)
        if train_references:
            names, r.skipped = references_plan(r.path, references)
            for n in [n for n in r.skipped if rd.reference(n).exists()]:  # trained before (e.g. `train -b n`): kept
                r.skipped.pop(n)
                r.kept.append(n)
            if names:
                from recharness.baselines.training import epoch_lines
                from recharness.runner.train import train

                before = {n: _mtime(rd.reference(n)) for n in names}
                t2 = time.perf_counter()
                with epoch_lines(lambda m, label=r.label: log(f"{label}: {m}")):  # every epoch in eval.log
                    train(r.path, baselines=names, seed=seed, latency_runs=EVAL_LATENCY_RUNS,
                          progress=lambda m, label=r.label: log(f"{label}: {m}"))
                r.train_s = time.perf_counter() - t2
                r.trained = [n for n in names if _mtime(rd.reference(n)) != before[n]]
                r.kept = [n for n in names if n not in r.trained] + r.kept
                if r.trained:
                    record(r.path, "train", r.suite, out=r.path, baseline=r.trained, seed=seed,
                           latency_runs=EVAL_LATENCY_RUNS)
                log(f"{r.label}: references trained {', '.join(r.trained) or 'none'} in {r.train_s:.1f} s; kept "
                    f"{', '.join(r.kept) or 'none'}; left out "
                    + ("; ".join(f"{n} ({why})" for n, why in r.skipped.items()) or "none"))
        rows = pipeline.score(r.path, seed=seed)
        record(r.path, "score", r.suite, dataset=dataset, out=r.path, seed=seed)
        paper = get_suite(r.suite).paper_tables
        md = None
        if paper:
            import inspect

            kw = {"dataset": dataset} if "dataset" in inspect.signature(paper).parameters else {}
            md = paper(rows, **kw) or None
        write_scores(rows, r.path, extra_md=md)
        report = write_report(rows, r.path, sections={"In the paper's layout": md} if md else None)
        new = sum(a for a, _ in r.answered.values())
        def said(m: str, a: int) -> str:  # what is new in the file, and how much of it no model call made
            notes = [f"{r.cached[m]} from the cache"] if r.cached.get(m) else []
            notes += [f"{r.invalid[m]} invalid"] if r.invalid.get(m) else []
            return f"{m} {a}" + (f" ({', '.join(notes)})" if notes else "")

        per = ", ".join(said(m, a) for m, (a, _) in r.answered.items())
        say(f"{r.label}: {', '.join(r.tasks)} · {r.limit} per task · " + ("built" if r.built else "build kept")
            + (f" · new answers: {per}" if new else " · nothing to answer (no model call)") + _references_text(r))
        log(f"{r.label}: scores → {rd.scores('md')}; report → {report}")
    return runs


def _mtime(path: Path) -> int | None:
    return path.stat().st_mtime_ns if path.exists() else None


def _references_text(r: EvalRun) -> str:
    """The run's references in a few words: trained now (seconds), kept, left out (how many: `skipped_note`)."""
    parts = []
    if r.trained:
        parts.append(f"trained {len(r.trained)} references ({r.train_s:.0f} s)")
    if r.kept:
        parts.append(f"{len(r.kept)} references already trained")
    if r.skipped:
        parts.append(f"{len(r.skipped)} left out")
    return "".join(" · " + p for p in parts)


def references_note(runs: list[EvalRun], train_references: bool = True) -> list[str]:
    """The summary's lines on the references: which each run has trained, which were left out and why
    (grouped by reason), or that none were trained."""
    if not train_references:
        return ["references: not trained (--no-train-references); the rows shown are those `score` fits on the fly"]
    lines = []
    for r in runs:
        have = r.trained + r.kept
        if have:
            lines.append(f"{r.label}: references trained: {', '.join(have)}")
    why: dict[str, list[str]] = {}
    for r in runs:
        for n, reason in r.skipped.items():
            if n not in why.setdefault(reason, []):
                why[reason].append(n)
    for reason, names in why.items():
        lines.append(f"left out: {', '.join(names)} — {reason}")
    if why:
        lines.append("(`--references all` trains the left-out references; `recharness train -b NAME` one of them)")
    return lines


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
                v = (x.extra or {}).get("vs_strongest_reference") or {}
                versus = f" {VERSUS_MARK[v['verdict']]} {STRONGEST}" if v.get("metric") == key else ""
                return value_text(x, key) + (f" ({cov})" if cov else "") + versus

            def ref(x) -> str:
                mark = f" {STRONGEST}" if (x.extra or {}).get("strongest_reference") == key else ""
                return f"{x.method}{mark} {cell(x)}"

            by = {x.method: x for x in trows}
            out.append([r.label, task, key, *(cell(by[n]) if n in by else "–" for n in names),
                        "; ".join(ref(x) for x in trows if x.kind == "reference") or "–"])
    return header, out


#: a model cell's verdict against the strongest reference (`STRONGEST`), by the tables' paired test
VERSUS_MARK = {"beats": ">", "below": "<", "not distinguishable": "≈"}
#: the summary's legend line for those marks
VERSUS_LEGEND = (f"{STRONGEST} = the strongest reference of a task; a model's > / < / ≈ {STRONGEST}: above it, below it, "
                 "or not distinguishable from it by the paired test (scores.md says how)")

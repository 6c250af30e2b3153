"""The stages as functions over a run directory; the CLI is a thin layer on these.

Run directory layout (default `<data home>/runs/<suite>/<dataset>`):
  build.json                 what was built, with which seed and options
  samples.jsonl              one task sample per line
  predictions/<model>.jsonl  one prediction per sample, appended as they finish
  predictions/reference/<baseline>.jsonl   reference models' predictions, written whole by `train`
  scores.json / .md / .csv   metrics per method and task, references included
  report.html                tables and plots
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from recharness.data.store import load_dataset
from recharness.errors import BuildMismatch, ConfigError, InputError
from recharness.metrics.bootstrap import DEFAULT_RESAMPLES
from recharness.models.base import ModelBackend
from recharness.paths import runs_dir
from recharness.runner.jsonl import atomic_write_text, read_jsonl, write_jsonl_atomic
from recharness.runner.run import RunStats, run_samples, with_model
from recharness.tasks.base import BuildConfig, ScoreRow
from recharness.tasks.options import validate_options
from recharness.tasks.registry import get_suite, get_task


def default_run_dir(suite: str, dataset: str) -> Path:
    return runs_dir() / suite / dataset


def suite_context(suite: str, dataset, options: dict | None, *, seed: int = 0, limit: int | None = None):
    """The suite's per-build context (built once, shared by its tasks), or None if the suite has none."""
    s = get_suite(suite)
    factory = s.context
    if factory is None:
        return None
    return factory(dataset, BuildConfig(seed=seed, limit=limit, options=dict(options or {})))


def fingerprint(samples_path: Path, settings: dict | None = None) -> str:
    """Identifies one build, stamped on every prediction: the hash of its samples file and of the
    settings that made it (seed, options: they also shape side files such as training pairs)."""
    h = hashlib.sha256()
    with open(samples_path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if settings:
        h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_name(name: str) -> str:
    """A predictions file name stays a plain file inside the run directory."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only (no '/', no leading '.')")
    return name


def build(suite: str, dataset_name: str, out: Path, *, tasks: list[str] | None = None, seed: int = 0,
          limit: int | None = None, options: dict | None = None) -> dict:
    before = _prediction_files(out)
    s = get_suite(suite)
    tasks = tasks or s.default_tasks
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    options = validate_options(suite, tasks, options)
    ds = load_dataset(dataset_name)
    out.mkdir(parents=True, exist_ok=True)
    config = BuildConfig(seed=seed, limit=limit, options=dict(options or {}), out=out,
                         context=suite_context(suite, ds, options, seed=seed, limit=limit))
    samples: list[dict] = []
    counts = {}
    for t in tasks:
        task = get_task(suite, t)
        built = list(task.build(ds, config))
        counts[t] = len(built)
        samples.extend(built)
    ids = [x["id"] for x in samples]
    if len(ids) != len(set(ids)):
        raise RuntimeError("builder produced duplicate sample ids")
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out / "samples.jsonl", samples)
    fp = fingerprint(out / "samples.jsonl", {"suite": suite, "tasks": tasks, "seed": seed, "limit": limit,
                                              "options": options})
    _stamp_imported_predictions(out, fp, before)
    info = {"suite": suite, "dataset": dataset_name, "tasks": tasks, "seed": seed, "limit": limit,
            "options": {k: v for k, v in config.options.items() if isinstance(v, (str, int, float, bool, type(None)))},
            "counts": counts, "fingerprint": fp, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_text(out / "build.json", json.dumps(info, indent=2))
    return info


def _prediction_files(out: Path) -> dict[Path, int]:
    pred_dir = out / "predictions"
    return {pf: pf.stat().st_mtime_ns for pf in pred_dir.glob("*.jsonl")} if pred_dir.exists() else {}


def _stamp_imported_predictions(out: Path, fp: str, before: dict[Path, int]) -> None:
    """Predictions a builder wrote itself (e.g. imported PerRecBench outputs) belong to this build."""
    for pf, mtime in _prediction_files(out).items():
        if before.get(pf) != mtime:
            write_jsonl_atomic(pf, [{**r, "build": fp} for r in read_jsonl(pf)])


def load_build(out: Path) -> tuple[dict, list[dict]]:
    info_path = out / "build.json"
    if not info_path.exists():
        raise ConfigError(f"no build in {out}: run `recharness build` first (or pass the right --out)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(info_path, f"not valid JSON ({e})") from None
    samples = list(read_jsonl(out / "samples.jsonl"))
    # builds made before fingerprints existed get theirs from the file itself
    info.setdefault("fingerprint", fingerprint(out / "samples.jsonl"))
    for key in ("suite", "dataset", "tasks"):
        if key not in info:
            raise InputError(info_path, "missing key", field=key)
    try:
        validate_options(info["suite"], info["tasks"], info.get("options"))
    except ConfigError as e:
        raise InputError(info_path, str(e), field="options") from None
    for i, smp in enumerate(samples, 1):
        for key in ("id", "task"):
            if key not in smp:
                raise InputError(out / "samples.jsonl", "missing key", line=i, field=key)
    return info, samples


def run(out: Path, backend: ModelBackend, model_slug: str, *, limit: int | None = None, use_cache: bool = True,
        max_retries: int = 1, concurrency: int | None = None, on_progress=None, on_total=None,
        tasks: list[str] | None = None) -> tuple[Path, RunStats]:
    """Answer the build's samples (only those of `tasks` when given; then the first `limit`) into
    predictions/<model_slug>.jsonl. A task left out has no rows for this model in `score` (shown "–"),
    so e.g. a single-format fine-tune can be run on its own format alone."""
    check_name(model_slug)
    if max_retries < 0:
        raise ConfigError(f"--max-retries must be 0 or more, got {max_retries}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    info, samples = load_build(out)
    if tasks:
        unknown = [t for t in tasks if t not in info["tasks"]]
        if unknown:
            raise ConfigError(f"--task {', '.join(unknown)}: this build's tasks are {', '.join(info['tasks'])}")
        samples = [s for s in samples if s["task"] in tasks]
    if limit is not None:
        samples = samples[:limit]
    ds = load_dataset(info["dataset"])
    context = suite_context(info["suite"], ds, info.get("options"), seed=info.get("seed", 0), limit=info.get("limit"))
    tasks = {}
    for t in info["tasks"]:
        task = get_task(info["suite"], t)
        task.setup(ds, context)
        tasks[t] = task
    pred_path = out / "predictions" / f"{model_slug}.jsonl"
    if on_total:
        on_total(len(samples))
    stats = with_model(backend, lambda model: run_samples(
        samples, tasks, model, pred_path, max_retries=max_retries, concurrency=concurrency, on_progress=on_progress,
        build=info["fingerprint"]), use_cache=use_cache, buffered=True)
    return pred_path, stats


def _latency_summary(records: list[dict]) -> dict[str, float]:
    lat = [r["latency_s"] for r in records if r.get("latency_s") is not None and not r.get("cached")]
    lat_all = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    out = {}
    if lat_all:
        out["latency_s"] = statistics.fmean(lat_all)
    if lat:
        out["latency_uncached_s"] = statistics.fmean(lat)
    ct = [r["completion_tokens"] for r in records if r.get("completion_tokens") is not None]
    if ct:
        out["completion_tokens"] = statistics.fmean(ct)
    return out


#: trained reference models' predictions live in predictions/reference/<baseline>.jsonl: a model's
#: name cannot hold '/', so its file can never be taken for a reference's (nor the other way round)
REFERENCE_DIR = "reference"


def reference_dir(out: Path) -> Path:
    return out / "predictions" / REFERENCE_DIR


def _checked_records(pf: Path, fp: str, redo: str = "re-run the model (`recharness run ... --name NEW`)") -> list[dict]:
    records = list(read_jsonl(pf, tolerate_torn_tail=True))
    for r in records:
        if r.get("build") != fp:
            raise BuildMismatch(
                f"{pf} answers another build of this run directory (build {r.get('build') or 'unknown'}, samples now "
                f"{fp}): {redo} or move the file out of predictions/")
    return records


def _records_by_task(pf: Path, fp: str, **kw) -> dict[str, dict[str, dict]]:
    """A predictions file read once: {task: {sample id: record}} (the last line for an id wins; there is one)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in _checked_records(pf, fp, **kw):
        out[r.get("task")][r["id"]] = r
    return out


def _score_row(task, t: str, samples: list[dict], recs: dict[str, dict], method: str, kind: str, extra: dict) -> ScoreRow:
    metrics = task.score(samples, recs)
    metrics.update(_latency_summary(list(recs.values())))
    if kind == "reference":  # the `train` stage's timings, stamped on every record of a trained model
        metrics.pop("latency_uncached_s", None)
        first = next(iter(recs.values()), {})
        metrics.update({k: float(first[k]) for k in ("train_s", "throughput_per_s") if first.get(k) is not None})
    breakdown = task.breakdown(samples, recs)
    if breakdown:
        extra["breakdown"] = breakdown
    return ScoreRow(method=method, task=t, metrics=metrics, n=len(samples), kind=kind, extra=extra)


def score(out: Path, *, seed: int = 0, references: bool = True, resamples: int = DEFAULT_RESAMPLES,
          ci_seed: int = 0) -> list[ScoreRow]:
    """Every predictions file, then the reference rows: from the `train` stage's files where they
    exist, else computed on the fly by the task (as before `train` existed). Each task's rows then
    get 95% bootstrap intervals (`resamples` of them, seeded by `ci_seed`; 0: none) and the marks
    of which rows are not distinguishable from the best (`add_confidence_intervals`)."""
    if resamples < 0:
        raise ConfigError(f"--resamples must be 0 or more, got {resamples}")
    rows: list[ScoreRow] = []
    for t, task, task_samples, methods in _methods_by_task(out, seed=seed, references=references):
        scored = [(_score_row(task, t, task_samples, recs, name, kind, extra), recs)
                  for name, kind, recs, extra in methods]
        if resamples:
            add_confidence_intervals(task, task_samples, scored, resamples=resamples, seed=ci_seed)
        rows.extend(r for r, _ in scored)
    return rows


def _methods_by_task(out: Path, *, seed: int = 0, references: bool = True, only: set[str] | None = None):
    """(task name, task, its samples, [(method, kind, {id: record}, extra)]) per task of the build:
    predictions files first, then reference rows (`train`'s files, else computed by the task).
    `only`: just these methods (references are then computed only if one of them is asked for)."""
    from recharness.baselines import serving

    info, samples = load_build(out)
    fp = info["fingerprint"]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    pred_dir = out / "predictions"
    pred_files = sorted(pred_dir.glob("*.jsonl")) if pred_dir.exists() else []
    ref_files = sorted(reference_dir(out).glob("*.jsonl")) if references and reference_dir(out).exists() else []
    if only is not None:
        pred_files = [pf for pf in pred_files if pf.stem in only]
        ref_files = [pf for pf in ref_files if pf.stem in only]
    preds = {pf: _records_by_task(pf, fp) for pf in pred_files}
    refs = {pf: _records_by_task(pf, fp, redo="re-run `recharness train`") for pf in ref_files}
    ds = None
    for t, task_samples in by_task.items():
        task = get_task(info["suite"], t)
        task.run_dir = out  # tasks that read side files (e.g. judgments) find them even if the run moved
        methods: list[tuple[str, str, dict, dict]] = []
        for pf in pred_files:
            recs = preds[pf].get(t)
            if recs:
                model = next(iter(recs.values())).get("model", {})
                methods.append((pf.stem, "model", recs, {"model": model, "answered": len(recs)}))
        if references:
            trained = {pf.stem: refs[pf][t] for pf in ref_files if refs[pf].get(t)}
            served = serving(info["suite"], t)
            cheap = serving(info["suite"], t, on_the_fly=True)
            computed: dict[str, dict[str, dict]] = {}
            wanted = only is None or bool(only - {pf.stem for pf in pred_files} - set(trained))
            if wanted and (not served or not set(cheap) <= set(trained)):  # something `train` did not write
                if ds is None:
                    ds = load_dataset(info["dataset"])
                computed = task.references(ds, task_samples, seed=seed)
            for name in dict.fromkeys([*computed, *served, *trained]):
                if only is not None and name not in only:
                    continue
                recs = trained[name] if name in trained else computed.get(name)
                if recs is not None:
                    methods.append((name, "reference", recs, {}))
        yield t, task, task_samples, methods


# ------------------------------------------------------------------ confidence intervals


#: seconds the generic path (re-scoring resampled samples, for a task without `units`) may take per task
GENERIC_BUDGET_S = 60.0
#: p-values at or above this: a row is not distinguishable from the best
SIGNIFICANCE = 0.05


def _resampled_score(task, samples: list[dict], recs: dict[str, dict]):
    """score(indices) for the generic path: the samples at `indices` (with repeats, renamed apart)."""
    def fn(idx: np.ndarray) -> dict[str, float]:
        ss, rr = [], {}
        for k, j in enumerate(idx.tolist()):
            s = samples[j]
            sid = f"{s['id']}\x1f{k}"
            ss.append({**s, "id": sid})
            if s["id"] in recs:
                rr[sid] = recs[s["id"]]
        return task.score(ss, rr)
    return fn


def _units(task, samples: list[dict], recs: dict[str, dict], metrics: dict[str, float]) -> dict:
    """The task's units for the metrics that get an interval, each checked against the scored value."""
    import logging

    from recharness.metrics.bootstrap import is_number
    from recharness.metrics.registry import wants_ci

    out = {}
    try:
        units = task.units(samples, recs) or {}
    except Exception as ex:  # a task's units must not sink the whole score: its rows only lose these intervals
        logging.getLogger(__name__).warning("%s: units failed (%s: %s): no intervals from units", task.name,
                                            type(ex).__name__, ex)
        return out
    for m, u in units.items():
        v = metrics.get(m)
        if not (wants_ci(m) and is_number(v)):
            continue
        pt = u.point()
        if not abs(pt - v) <= 1e-9 * max(1.0, abs(v)):
            logging.getLogger(__name__).warning("%s: units of %s give %r, the score %r: no interval", task.name, m, pt, v)
            continue
        out[m] = u
    return out


def add_confidence_intervals(task, samples: list[dict], scored: list[tuple[ScoreRow, dict[str, dict]]], *,
                             resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                             generic_budget_s: float = GENERIC_BUDGET_S) -> None:
    """Fill `row.ci` for the rows of one task (all scored on the same `samples`).

    Metrics with units (`task.units`) are resampled as counts over their units, the same counts
    for every row (paired); the rest of the metrics that get an interval (registry `ci`), when the
    task has no units at all, by re-scoring resampled samples (`generic`; within
    `generic_budget_s` per task, at least 200 resamples). Then, per metric with a better side, the
    best row and the rows whose paired bootstrap p-value against it is >= 0.05 are `top`.
    """
    from recharness.metrics.bootstrap import generic_replicates, is_number, percentile_ci, resample_counts
    from recharness.metrics.registry import wants_ci

    reps: dict[tuple[int, str], np.ndarray] = {}
    keys: dict[tuple[int, str], tuple] = {}
    info: dict[tuple[int, str], dict] = {}
    jobs: dict[tuple, list[tuple[int, str, object]]] = defaultdict(list)
    generic: list[tuple[int, list[str]]] = []
    for i, (row, recs) in enumerate(scored):
        units = _units(task, samples, recs, row.metrics)
        if units:
            for m, u in units.items():
                if u.support() < 2:  # one unit: every resample is that unit, a zero-width "interval"
                    row.extra.setdefault("no_interval", {})[m] = "1 unit" if u.support() == 1 else "no units"
                    continue
                jobs[u.key()].append((i, m, u))
                keys[(i, m)] = u.key()
                info[(i, m)] = {"how": u.how, "generic": False}
        else:
            wanted = [m for m, v in row.metrics.items() if wants_ci(m) and is_number(v)]
            if wanted:
                generic.append((i, wanted))
    for key, items in jobs.items():
        u0 = items[0][2]
        parts: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
        for w in resample_counts(u0.n, resamples, seed, u0.strata):
            for i, m, u in items:
                parts[(i, m)].append(u.replicates(w))
        for k, v in parts.items():
            reps[k] = np.concatenate(v)
    if generic:
        ids_key = ("generic", len(samples), hash(tuple(s["id"] for s in samples)))
        per_row = generic_budget_s / len(generic)
        for i, wanted in generic:
            got = generic_replicates(_resampled_score(task, samples, scored[i][1]), len(samples), wanted, resamples,
                                     seed, budget_s=per_row)
            for m, r in got.items():
                reps[(i, m)], keys[(i, m)] = r, ids_key
                info[(i, m)] = {"how": "re-scored resampled samples", "generic": True}
    for (i, m), r in reps.items():
        ci = percentile_ci(r)
        if ci is None:
            continue
        scored[i][0].ci[m] = {"lo": ci[0], "hi": ci[1], "resamples": int(np.isfinite(r).sum()), **info[(i, m)]}
    _mark_best([row for row, _ in scored], reps, keys)
    _breakdown_intervals(task, samples, scored, resamples=resamples, seed=seed)
    for row, _ in scored:
        row.extra["ci_settings"] = {"resamples": resamples, "seed": seed, "level": 0.95,
                                    "best": f"paired bootstrap p >= {SIGNIFICANCE}"}


def _breakdown_intervals(task, samples: list[dict], scored: list[tuple[ScoreRow, dict[str, dict]]], *,
                         resamples: int, seed: int) -> None:
    """95% intervals for the per-group tables (`row.extra["breakdown_ci"][group][metric]`): the task's
    units over the group's samples (`task.breakdown_members`), each checked against the group's value."""
    from recharness.metrics.bootstrap import percentile_ci, resample_counts

    members = task.breakdown_members(samples)
    if not members:
        return
    for row, recs in scored:
        table = row.extra.get("breakdown") or {}
        out: dict[str, dict] = {}
        for label, idx in members.items():
            if label not in table or not idx:
                continue
            for m, u in _units(task, [samples[j] for j in idx], recs, table[label]).items():
                if u.support() < 2:
                    continue
                r = np.concatenate([u.replicates(w) for w in resample_counts(u.n, resamples, seed, u.strata)])
                ci = percentile_ci(r)
                if ci is not None:
                    out.setdefault(label, {})[m] = {"lo": ci[0], "hi": ci[1]}
        if out:
            row.extra["breakdown_ci"] = out


def _mark_best(rows: list[ScoreRow], reps: dict[tuple[int, str], np.ndarray], keys: dict[tuple[int, str], tuple]) -> None:
    """Per metric with a better side: p_vs_best (paired bootstrap) and `top` on each row's interval."""
    from recharness.metrics.bootstrap import bootstrap_p
    from recharness.metrics.registry import metric_info

    metrics = dict.fromkeys(m for r in rows for m in r.ci)
    for m in metrics:
        info = metric_info(m)
        if info is None or info.higher_is_better is None:
            continue
        have = [i for i, r in enumerate(rows) if m in r.ci]
        if not have:
            continue
        sign = 1.0 if info.higher_is_better else -1.0
        best = max(have, key=lambda i: sign * rows[i].metrics[m])
        for i in have:
            c = rows[i].ci[m]
            if i == best:
                c.update(p_vs_best=None, top=True)
                continue
            a, b = reps[(i, m)], reps[(best, m)]
            if keys[(i, m)] == keys[(best, m)]:
                k = min(a.size, b.size)  # the generic path may have done fewer: a common prefix is paired
                p = bootstrap_p(a[:k] - b[:k])
                c.update(p_vs_best=p, top=bool(p >= SIGNIFICANCE) or rows[i].metrics[m] == rows[best].metrics[m])
            else:  # not resampled alike: fall back to overlapping intervals
                bc = rows[best].ci[m]
                c.update(p_vs_best=None, top=bool(c["hi"] >= bc["lo"] and c["lo"] <= bc["hi"]), overlap=True)


# ------------------------------------------------------------------ paired comparison of two methods


def compare(out: Path, models: list[str] | None = None, task: str | None = None, *, seed: int = 0,
            resamples: int = DEFAULT_RESAMPLES, permutations: int = DEFAULT_RESAMPLES, ci_seed: int = 0,
            generic_budget_s: float = GENERIC_BUDGET_S) -> list[dict]:
    """Paired comparison of two methods on the samples both answered, per task and metric.

    `models`: two method names (predictions files, `train`'s reference files or on-the-fly
    references); default: every pair of the run's predictions files, or with only one, that one
    against each reference. Each result: the two values (the task's own scorer on the common
    samples, so invalid answers count as in the tables), the difference A - B with its paired
    bootstrap 95% CI and p-value, a permutation-test p-value, and how many samples only one
    method answered (left out).
    """
    from recharness.metrics.bootstrap import generic_replicates, is_number, paired_bootstrap, paired_permutation
    from recharness.metrics.bootstrap import bootstrap_p, percentile_ci
    from recharness.metrics.registry import wants_ci

    if models is not None and len(models) != 2:
        raise ConfigError(f"--models takes two method names, got {len(models)}")
    info, _ = load_build(out)
    if task is not None and task not in info["tasks"]:
        raise ConfigError(f"--task {task!r}: this run has {', '.join(info['tasks'])}")
    results: list[dict] = []
    absent: dict[str, list[str]] = {}
    for t, task_obj, samples, methods in _methods_by_task(out, seed=seed, only=set(models) if models else None):
        if task is not None and t != task:
            continue
        by_name = {name: (kind, recs) for name, kind, recs, _ in methods}
        if models is not None:
            missing = [m for m in models if m not in by_name]
            if missing:  # a method of some tasks only (e.g. a reference of the condition tasks): skip this task
                absent[t] = missing
                continue
            pairs = [tuple(models)]
        else:
            mods = [n for n, (k, _) in by_name.items() if k == "model"]
            refs = [n for n, (k, _) in by_name.items() if k == "reference"]
            pairs = [(a, b) for i, a in enumerate(mods) for b in mods[i + 1:]] or [(m, r) for m in mods for r in refs]
        for a, b in pairs:
            ra, rb = by_name[a][1], by_name[b][1]
            common = [s for s in samples if s["id"] in ra and s["id"] in rb]
            base = {"task": t, "a": a, "b": b, "n": len(common), "n_task": len(samples),
                    "only_a": sum(s["id"] in ra and s["id"] not in rb for s in samples),
                    "only_b": sum(s["id"] in rb and s["id"] not in ra for s in samples)}
            if not common:
                results.append({**base, "metric": None, "note": "no sample answered by both"})
                continue
            ra = {s["id"]: ra[s["id"]] for s in common}  # scorers that read every record see only these
            rb = {s["id"]: rb[s["id"]] for s in common}
            ma, mb = task_obj.score(common, ra), task_obj.score(common, rb)
            wanted = [m for m in ma if wants_ci(m) and is_number(ma[m]) and is_number(mb.get(m))]
            ua, ub = _units(task_obj, common, ra, ma), _units(task_obj, common, rb, mb)
            slow: list[dict] = []
            for m in wanted:
                row = {**base, "metric": m, "value_a": ma[m], "value_b": mb[m], "diff": ma[m] - mb[m]}
                results.append(row)
                if m in ua and m in ub:
                    boot = paired_bootstrap(ua[m], ub[m], resamples, ci_seed)
                    perm = paired_permutation(ua[m], ub[m], permutations, ci_seed)
                    row.update(lo=boot["lo"], hi=boot["hi"], p_boot=boot["p"], p_perm=perm["p"],
                               resamples=boot["resamples"], permutations=perm["permutations"], exact=perm["exact"],
                               how=ua[m].how, generic=False)
                elif not ua and not ub:  # the task has no units: re-score resampled / swapped samples
                    slow.append(row)
                else:
                    row["note"] = "no units for one of the two methods: no interval"
            if slow:
                ms = [r["metric"] for r in slow]
                n, quarter = len(common), generic_budget_s / 4
                ga = generic_replicates(_resampled_score(task_obj, common, ra), n, ms, resamples, ci_seed, budget_s=quarter)
                gb = generic_replicates(_resampled_score(task_obj, common, rb), n, ms, resamples, ci_seed, budget_s=quarter)
                perm = _generic_permutation(task_obj, common, ra, rb, ms, permutations, ci_seed, budget_s=2 * quarter)
                for r in slow:
                    m = r["metric"]
                    k = min(ga[m].size, gb[m].size)  # the same counts: a common prefix is paired
                    d = ga[m][:k] - gb[m][:k]
                    ci = percentile_ci(d)
                    r.update(lo=ci[0] if ci else float("nan"), hi=ci[1] if ci else float("nan"), p_boot=bootstrap_p(d),
                             resamples=int(np.isfinite(d).sum()), how="re-scored resampled samples", generic=True,
                             **perm[m])
    if not results and models is None:
        raise ConfigError(f"nothing to compare in {out}: that needs two predictions files, or one and a reference "
                          "(or name two methods with --models)")
    if absent and not results:
        t, missing = next(iter(absent.items()))
        raise ConfigError(f"no task of {out} has predictions of both {' and '.join(models or [])} "
                          f"({t}: none of {', '.join(missing)})")
    return results


def _generic_permutation(task, samples, ra, rb, metrics, permutations, seed, *, budget_s: float) -> dict[str, dict]:
    """Permutation test by re-scoring: each sample's two answers swapped at random, both methods scored."""
    import time

    from recharness.metrics.bootstrap import _perm_p, is_number, swap_masks

    def values(pred: dict) -> dict[str, float]:
        got = task.score(samples, pred)
        return {m: float(got[m]) if is_number(got.get(m)) else float("nan") for m in metrics}

    va, vb = values(ra), values(rb)
    observed = {m: va[m] - vb[m] for m in metrics}
    chunks, exact, count = swap_masks(len(samples), permutations, seed)
    null: dict[str, list[float]] = {m: [] for m in metrics}
    t0, done = time.perf_counter(), 0
    limit = count
    for chunk in chunks:
        for sw in chunk:
            if done >= limit:
                break
            a2 = {s["id"]: (rb if x else ra)[s["id"]] for s, x in zip(samples, sw)}
            b2 = {s["id"]: (ra if x else rb)[s["id"]] for s, x in zip(samples, sw)}
            va, vb = values(a2), values(b2)
            for m in metrics:
                null[m].append(va[m] - vb[m])
            done += 1
            if done == 5 and not exact:
                per = (time.perf_counter() - t0) / done
                limit = min(count, max(200, int(budget_s / per) if per > 0 else count))
        if done >= limit:
            break
    return {m: {"p_perm": _perm_p(np.asarray(null[m]), observed[m], exact and done == count), "permutations": done,
                "exact": exact and done == count} for m in metrics}

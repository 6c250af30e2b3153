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

from recharness.data.store import load_dataset
from recharness.errors import BuildMismatch, ConfigError, InputError
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
        max_retries: int = 1, concurrency: int | None = None, on_progress=None, on_total=None) -> tuple[Path, RunStats]:
    check_name(model_slug)
    if max_retries < 0:
        raise ConfigError(f"--max-retries must be 0 or more, got {max_retries}")
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    info, samples = load_build(out)
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


def score(out: Path, *, seed: int = 0, references: bool = True) -> list[ScoreRow]:
    """Every predictions file, then the reference rows: from the `train` stage's files where they
    exist, else computed on the fly by the task (as before `train` existed)."""
    from recharness.baselines import serving

    info, samples = load_build(out)
    fp = info["fingerprint"]
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    rows: list[ScoreRow] = []
    pred_dir = out / "predictions"
    pred_files = sorted(pred_dir.glob("*.jsonl")) if pred_dir.exists() else []
    ref_files = sorted(reference_dir(out).glob("*.jsonl")) if references and reference_dir(out).exists() else []
    preds = {pf: _records_by_task(pf, fp) for pf in pred_files}
    refs = {pf: _records_by_task(pf, fp, redo="re-run `recharness train`") for pf in ref_files}
    ds = None
    for t, task_samples in by_task.items():
        task = get_task(info["suite"], t)
        task.run_dir = out  # tasks that read side files (e.g. judgments) find them even if the run moved
        for pf in pred_files:
            recs = preds[pf].get(t)
            if recs:
                model = next(iter(recs.values())).get("model", {})
                rows.append(_score_row(task, t, task_samples, recs, pf.stem, "model", {"model": model, "answered": len(recs)}))
        if not references:
            continue
        trained = {pf.stem: refs[pf][t] for pf in ref_files if refs[pf].get(t)}
        served = serving(info["suite"], t)
        cheap = serving(info["suite"], t, on_the_fly=True)
        computed: dict[str, dict[str, dict]] = {}
        if not served or not set(cheap) <= set(trained):  # something `train` did not write: compute as before
            if ds is None:
                ds = load_dataset(info["dataset"])
            computed = task.references(ds, task_samples, seed=seed)
        for name in dict.fromkeys([*computed, *served, *trained]):
            recs = trained[name] if name in trained else computed.get(name)
            if recs is not None:
                rows.append(_score_row(task, t, task_samples, recs, name, "reference", {}))
    return rows

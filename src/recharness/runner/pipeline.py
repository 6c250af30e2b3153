"""The stages as functions over a run directory; the CLI is a thin layer on these.

Run directory layout (default `<data home>/runs/<suite>/<dataset>`):
  build.json                 what was built, with which seed and options
  samples.jsonl              one task sample per line
  predictions/<model>.jsonl  one prediction per sample, appended as they finish
  scores.json / .md / .csv   metrics per method and task, references included
  report.html                tables and plots
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from recharness.data.store import load_dataset
from recharness.errors import ConfigError, InputError
from recharness.models.base import ModelBackend
from recharness.paths import runs_dir
from recharness.runner.cache import ResponseCache
from recharness.runner.jsonl import read_jsonl, write_jsonl_atomic
from recharness.runner.run import CachedModel, RunStats, run_samples
from recharness.tasks.base import BuildConfig, ScoreRow
from recharness.tasks.registry import get_suite, get_task


def default_run_dir(suite: str, dataset: str) -> Path:
    return runs_dir() / suite / dataset


def build(suite: str, dataset_name: str, out: Path, *, tasks: list[str] | None = None, seed: int = 0,
          limit: int | None = None, options: dict | None = None) -> dict:
    s = get_suite(suite)
    tasks = tasks or s["default_tasks"]
    ds = load_dataset(dataset_name)
    out.mkdir(parents=True, exist_ok=True)
    config = BuildConfig(seed=seed, limit=limit, options=dict(options or {}), out=out)
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
    info = {"suite": suite, "dataset": dataset_name, "tasks": tasks, "seed": seed, "limit": limit,
            "options": {k: v for k, v in config.options.items() if isinstance(v, (str, int, float, bool, type(None)))}, "counts": counts, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    (out / "build.json").write_text(json.dumps(info, indent=2))
    return info


def load_build(out: Path) -> tuple[dict, list[dict]]:
    info_path = out / "build.json"
    if not info_path.exists():
        raise ConfigError(f"no build in {out}: run `recharness build` first (or pass the right --out)")
    info = json.loads(info_path.read_text())
    samples = list(read_jsonl(out / "samples.jsonl"))
    for i, smp in enumerate(samples, 1):
        for key in ("id", "task"):
            if key not in smp:
                raise InputError(out / "samples.jsonl", "missing key", line=i, field=key)
    return info, samples


def run(out: Path, backend: ModelBackend, model_slug: str, *, limit: int | None = None, use_cache: bool = True,
        max_retries: int = 1, concurrency: int | None = None, on_progress=None, on_total=None) -> tuple[Path, RunStats]:
    info, samples = load_build(out)
    if limit is not None:
        samples = samples[:limit]
    ds = load_dataset(info["dataset"])
    tasks = {}
    for t in info["tasks"]:
        task = get_task(info["suite"], t)
        if hasattr(task, "setup"):
            task.setup(ds)
        tasks[t] = task
    pred_path = out / "predictions" / f"{model_slug}.jsonl"
    if on_total:
        on_total(len(samples))
    cache = ResponseCache() if use_cache else None
    model = CachedModel(backend, cache)

    async def go():
        try:
            return await run_samples(samples, tasks, model, pred_path, max_retries=max_retries,
                                     concurrency=concurrency, on_progress=on_progress)
        finally:
            await backend.aclose()

    try:
        stats = asyncio.run(go())
    finally:
        if cache is not None:
            cache.close()
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


def score(out: Path, *, seed: int = 0, references: bool = True) -> list[ScoreRow]:
    info, samples = load_build(out)
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    rows: list[ScoreRow] = []
    pred_dir = out / "predictions"
    pred_files = sorted(pred_dir.glob("*.jsonl")) if pred_dir.exists() else []
    ds = None
    for t, task_samples in by_task.items():
        task = get_task(info["suite"], t)
        if hasattr(task, "run_dir"):
            task.run_dir = out  # tasks that read side files (e.g. judgments) find them even if the run moved
        for pf in pred_files:
            recs = {}
            for r in read_jsonl(pf):
                if r.get("task") == t:
                    recs[r["id"]] = r  # last line for an id wins (there is one per id)
            if not recs:
                continue
            metrics = task.score(task_samples, recs)
            metrics.update(_latency_summary(list(recs.values())))
            model = next(iter(recs.values())).get("model", {})
            extra = {"model": model, "answered": len(recs)}
            if hasattr(task, "breakdown"):
                extra["breakdown"] = task.breakdown(task_samples, recs)
            rows.append(ScoreRow(method=pf.stem, task=t, metrics=metrics, n=len(task_samples), kind="model", extra=extra))
        if references:
            if ds is None:
                ds = load_dataset(info["dataset"])
            for name, recs in task.references(ds, task_samples, seed=seed).items():
                extra = {"breakdown": task.breakdown(task_samples, recs)} if hasattr(task, "breakdown") else {}
                rows.append(ScoreRow(method=name, task=t, metrics=task.score(task_samples, recs), n=len(task_samples),
                                     kind="reference", extra=extra))
    return rows

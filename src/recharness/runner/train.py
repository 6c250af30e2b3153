"""The `train` stage: fit a suite's reference models once and keep their predictions.

`score` then scores `predictions/reference/<baseline>.jsonl` like any model's file (rows marked
`kind="reference"`) instead of refitting them on every call; a baseline without a file is still
computed on the fly by its task. Models learn only from `TrainData` (the build's training part),
never from a sample's held-out target.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from pathlib import Path

from recharness.baselines import BASELINES, TrainData, fit, serving
from recharness.data.store import load_dataset
from recharness.errors import ConfigError
from recharness.runner.jsonl import write_jsonl_atomic
from recharness.runner.pipeline import load_build, reference_dir


#: RecBench's latency: the mean time of a single-sample prediction over this many runs (fewer samples: cycled)
LATENCY_RUNS = 1000


def timed_predict(model, samples: list[dict], runs: int = LATENCY_RUNS) -> tuple[dict[str, dict], dict]:
    """The model's records for `samples` (one batched call, timed: throughput) and its single-sample
    latency as RecBench defines it: the mean time of `predict([s])` over `runs` calls, samples cycled."""
    t0 = time.perf_counter()
    records = model.predict(samples)
    batch_s = time.perf_counter() - t0
    timing = {"throughput_per_s": round(len(samples) / batch_s, 3) if batch_s > 0 else None}
    if samples and runs > 0:
        one = []
        for k in range(runs):
            s = samples[k % len(samples)]
            t0 = time.perf_counter()
            model.predict([s])
            one.append(time.perf_counter() - t0)
        timing.update(latency_s=round(statistics.fmean(one), 9), latency_runs=runs)
    return records, timing


def train(out: Path, *, suite: str | None = None, baselines: list[str] | None = None, seed: int = 0,
          latency_runs: int = LATENCY_RUNS, progress=None) -> list[Path]:
    """Fit each baseline serving the build's tasks (or only `baselines`) and write its predictions
    for every sample of those tasks as one whole file. Returns the files written."""
    info, samples = load_build(out)
    if suite is not None and suite != info["suite"]:
        raise ConfigError(f"{out} holds a {info['suite']} build, not {suite}")
    by_task: dict[str, list[dict]] = defaultdict(list)
    for s in samples:
        by_task[s["task"]].append(s)
    served = {t: serving(info["suite"], t) for t in by_task}
    available = list(dict.fromkeys(n for names in served.values() for n in names))
    for name in baselines or []:
        BASELINES.meta(name)  # an unknown name: one error line with the known ones
        if name not in available:
            raise ConfigError(f"baseline {name!r} serves none of this build's tasks ({', '.join(by_task)}); "
                              f"these do: {', '.join(available) or 'none'}")
    names = list(dict.fromkeys(baselines)) if baselines else available
    if not names:
        raise ConfigError(f"no reference model serves the tasks of this {info['suite']} build ({', '.join(by_task)}); "
                          "`score` computes their references on the fly")
    train_data = TrainData.of_build(load_dataset(info["dataset"]), out, info["suite"])
    written = []
    for name in names:
        if progress is not None:
            progress(f"training {name}…")
        model, seconds = fit(name, train_data, seed)
        save = getattr(model, "save", None)
        if callable(save):  # trained weights kept beside the run: `score`/`report` never retrain
            save(out / "models" / name)
        stamp = {"build": info["fingerprint"], "kind": "reference", "model": model.identity(), "train_s": round(seconds, 6)}
        records = []
        for t, task_samples in by_task.items():
            if name not in served[t]:
                continue
            if progress is not None:
                progress(f"{name}: predicting {len(task_samples)} {t} samples, timing {latency_runs} single-sample calls…")
            recs, timing = timed_predict(model, task_samples, latency_runs)
            records += [{"id": r["id"], "task": t, **r, **stamp, **timing} for r in recs.values()]
        path = reference_dir(out) / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(path, records)
        written.append(path)
    return written

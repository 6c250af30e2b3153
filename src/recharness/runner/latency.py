"""RecBench's latency of a trained model: one batched call (throughput) and single-sample calls.

Its own module so the local train stage and the Ray tasks time models the same way without
importing each other.
"""

from __future__ import annotations

import statistics
import time

#: RecBench's latency: the mean time of a single-sample prediction over this many runs (fewer samples: cycled)
LATENCY_RUNS = 1000


def timed_predict(model, samples: list[dict], runs: int = LATENCY_RUNS, *, task=None) -> tuple[dict[str, dict], dict]:
    """The model's records for `samples` (one batched call, timed: throughput) and its single-sample
    latency as RecBench defines it: the mean time of `predict([s])` over `runs` calls, samples cycled.
    `task`: the samples' task, which turns a ranker's answers into its records (`Task.reference_answer`)."""
    t0 = time.perf_counter()
    records = model.predict(samples, task)
    batch_s = time.perf_counter() - t0
    timing = {"throughput_per_s": round(len(samples) / batch_s, 3) if batch_s > 0 else None}
    if samples and runs > 0:
        one = []
        for k in range(runs):
            s = samples[k % len(samples)]
            t0 = time.perf_counter()
            model.predict([s], task)
            one.append(time.perf_counter() - t0)
        timing.update(latency_s=round(statistics.fmean(one), 9), latency_runs=runs)
    return records, timing

"""RecBench's latency of a trained model: one batched call (throughput) and single-sample calls.

Its own module so the local train stage and the Ray tasks time models the same way without
importing each other. Only the answer is timed: work a task adds for evaluation alone (LLMRec
direct's full-catalog rank of the target, which needs the label) is left out of the timed calls
(`answering_only`), and the records kept are computed apart, untimed, with it.
"""

from __future__ import annotations

import contextvars
import statistics
import time

#: RecBench's latency: the mean time of a single-sample prediction over this many runs (fewer samples: cycled)
LATENCY_RUNS = 1000

_ANSWER_ONLY = contextvars.ContextVar("recharness_answer_only", default=False)


def answering_only() -> bool:
    """True inside a timed call: a task leaves out what it computes for evaluation alone."""
    return _ANSWER_ONLY.get()


def timed_predict(model, samples: list[dict], runs: int = LATENCY_RUNS, *, task=None,
                  own_latency: bool = False) -> tuple[dict[str, dict], dict]:
    """The model's records for `samples` and its timing: the throughput of one batched call and the
    single-sample latency as RecBench defines it, the mean time of `predict([s])` over `runs` calls,
    samples cycled; both time the answer alone. `task`: the samples' task, which turns a ranker's answers
    into its records (`Task.reference_answer`); one that adds evaluation-only work to them
    (`evaluation_work = True`) has its records computed once more, untimed, with that work.
    `own_latency`: the model times each answer itself (each record's `latency_s`) and remembers its answers
    (title-cbs), so a second call would time the memory: the throughput is then its answers over the sum of
    their own seconds, and nothing else is timed."""
    if own_latency:
        records = model.predict(samples, task)
        spent = sum(float(r.get("latency_s") or 0.0) for r in records.values())
        return records, {"throughput_per_s": round(len(records) / spent, 3) if spent > 0 and records else None}
    extra = bool(getattr(task, "evaluation_work", False))
    records = model.predict(samples, task) if extra else None
    token = _ANSWER_ONLY.set(True)
    try:
        t0 = time.perf_counter()
        answered = model.predict(samples, task)
        batch_s = time.perf_counter() - t0
        # per answer given: a model that answers only some of the samples (a sample cap, e.g. title-cbs's
        # first 100) spent the batch's time on those alone
        timing = {"throughput_per_s": round(len(answered) / batch_s, 3) if batch_s > 0 and answered else None}
        if samples and runs > 0:
            one = []
            for k in range(runs):
                s = samples[k % len(samples)]
                t0 = time.perf_counter()
                model.predict([s], task)
                one.append(time.perf_counter() - t0)
            timing.update(latency_s=round(statistics.fmean(one), 9), latency_runs=runs)
    finally:
        _ANSWER_ONLY.reset(token)
    return (records if extra else answered), timing

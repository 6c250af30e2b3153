"""RecBench's timing of a trained model (runner.latency): the batched call's throughput is per answer given."""

from __future__ import annotations

import time

from recharness.runner.latency import timed_predict


class Capped:
    """Answers the first `cap` samples of a call, 10 ms each (as title-cbs answers its first 100 and skips the rest)."""

    def __init__(self, cap: int):
        self.cap = cap

    def predict(self, samples, task=None):
        out = {}
        for s in samples[: self.cap]:
            time.sleep(0.01)
            out[s["id"]] = {"parsed": [], "valid": True}
        return out


def test_throughput_counts_the_answers_given_not_the_samples_passed():
    """Before, 10 answers in ~0.1 s over 200 samples passed read as ~2,000 answers/s; it is ~100."""
    samples = [{"id": f"s{i}"} for i in range(200)]
    recs, timing = timed_predict(Capped(10), samples, runs=3)
    assert len(recs) == 10
    # each answer sleeps at least 10 ms, so at most 100 answers a second (the old rate: 200 samples over the
    # same >= 0.1 s, above 100 unless the call took over 2 s)
    assert 0 < timing["throughput_per_s"] <= 100
    assert timing["latency_s"] >= 0.01  # a single-sample call answers its one sample
    _, none = timed_predict(Capped(0), samples, runs=0)
    assert none["throughput_per_s"] is None  # no answer: no rate, not 0 or infinity

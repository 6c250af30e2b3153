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


def test_seqrec_reference_latency_times_its_top_10_not_the_targets_rank():
    """RecBench SeqRec: a ranker's records carry the target's full-catalog rank (evaluation, needing the label),
    computed once untimed; the timed calls ask for the top-10 list alone, the answer an LLM row is timed on."""
    from recharness.baselines.markov import Markov
    from recharness.tasks.recbench.seqrec import SeqrecTask
    from tests.test_strong_baselines import _train

    model = Markov.create(seed=0).fit(_train())
    samples = [{"id": f"s{k}", "task": "seqrec", "target": t, "history": h, "user_id": u}
               for k, (t, h, u) in enumerate([("c", ["a", "b"], "u1"), ("d", ["b", "c"], "u3"), ("b", ["a"], "u2")])]
    ranked, listed = [], []
    real_both, real_tops = model.target_ranks_and_tops, model.top_ks
    model.target_ranks_and_tops = lambda q, k: ranked.append(len(q)) or real_both(q, k)
    model.top_ks = lambda q, k: listed.append(len(q)) or real_tops(q, k)
    recs, timing = timed_predict(model, samples, runs=4, task=SeqrecTask())
    assert ranked == [3]  # the records' untimed call only
    assert listed == [3, 1, 1, 1, 1]  # the batched timed call, then 4 single-sample calls
    assert recs == model.predict(samples, SeqrecTask())
    assert all("rank" in r["parsed"] and len(r["parsed"]["top"]) <= 10 for r in recs.values())

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
    targets = []
    model.top_ks = lambda q, k: listed.append(len(q)) or targets.extend(t for t, _, _ in q) or real_tops(q, k)
    recs, timing = timed_predict(model, samples, runs=4, task=SeqrecTask())
    assert ranked == [3]  # the records' untimed call only
    assert listed == [3, 1, 1, 1, 1]  # the batched timed call, then 4 single-sample calls
    # no label reaches a timed call: SASRec's top-k shared its scoring with the target's rank, which it computed
    assert set(targets) == {""}
    assert recs == model.predict(samples, SeqrecTask())
    assert all("rank" in r["parsed"] and len(r["parsed"]["top"]) <= 10 for r in recs.values())


class Remembering:
    """Times each new answer itself (50 ms) and remembers it, as title-cbs does: a second call only reads memory."""

    def __init__(self):
        self.answered: dict[str, dict] = {}

    def predict(self, samples, task=None):
        out = {}
        for s in samples:
            if s["id"] not in self.answered:
                t0 = time.perf_counter()
                time.sleep(0.05)
                self.answered[s["id"]] = {"parsed": [], "valid": True, "latency_s": time.perf_counter() - t0}
            out[s["id"]] = self.answered[s["id"]]
        return out


def test_a_model_that_times_and_remembers_its_answers_is_rated_by_its_own_seconds():
    """title-cbs (own_latency): the records' untimed call answered every sample, so the timed batch read them
    from memory and the throughput came out in the hundreds of thousands a second; it is answers over their own
    seconds (at most 20 a second here), and nothing is timed again."""
    from recharness.tasks.recbench.seqrec import SeqrecTask

    model = Remembering()
    samples = [{"id": f"s{k}", "task": "seqrec"} for k in range(6)]
    recs, timing = timed_predict(model, samples, runs=0, task=SeqrecTask(), own_latency=True)
    assert len(recs) == 6 and set(timing) == {"throughput_per_s"}
    assert 0 < timing["throughput_per_s"] <= 20
    assert timing["throughput_per_s"] == round(6 / sum(r["latency_s"] for r in recs.values()), 3)
    # the old path on the same model: the remembered answers timed as if they were new
    _, fooled = timed_predict(model, samples, runs=0, task=SeqrecTask())
    assert fooled["throughput_per_s"] > 1000

"""LLMRec direct: retriever candidates (`--option negatives=retriever:NAME`), full-catalog metrics of the
trained references, and the flag when their order on sampled candidates and on the whole catalog differ.

Retriever data (leave-last-out; each user's last item is the target, min_history=1):
    u1: i0 i1 i2      u2: i0 i1 i3      u3: i0 i1 i3 i4      u4: i5 i1 i6 i7
Training part: u1 i0 i1, u2 i0 i1, u3 i0 i1 i3, u4 i5 i1 i6. Counts: i1 4, i0 3, i3 1, i5 1, i6 1
(ties by id). Markov transitions: i0→i1 ×3, i1→i3, i5→i1, i1→i6.
"""

from __future__ import annotations

import math

import polars as pl
import pytest

from recharness.baselines import fit
from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, ScoreRow
from recharness.data.store import Dataset
from recharness.tasks.llmrec.common import order_swaps, sampled_vs_full, training_data
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.options import validate_options

SEQS = {"u1": ["i0", "i1", "i2"], "u2": ["i0", "i1", "i3"], "u3": ["i0", "i1", "i3", "i4"],
        "u4": ["i5", "i1", "i6", "i7"]}


def dataset(seqs: dict[str, list[str]], items: list[str]) -> Dataset:
    rows = [(u, i, t) for u, seq in seqs.items() for t, i in enumerate(seq, 1)]
    inter = pl.DataFrame({"user_id": [r[0] for r in rows], "item_id": [r[1] for r in rows],
                          "rating": [4.0] * len(rows), "timestamp": [r[2] for r in rows]},
                         schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64})
    titles = pl.DataFrame({"item_id": items, "title": [f"Film {i} (1990)" for i in items]})
    return Dataset("tiny", inter, titles, pl.DataFrame({"user_id": list(seqs)}))


def build(ds, seed=0, users=None, **opts) -> list[dict]:
    return list(DirectTask().build(ds, BuildConfig(seed=seed, options={"min_history": 1, **opts},
                                                   users=tuple(users) if users else None)))


def picked(samples) -> dict[str, list[str]]:
    """Each user's negatives, sorted: which items the retriever picked (the prompt shows them shuffled)."""
    return {u: sorted(v) for u, v in negatives(samples).items()}


def negatives(samples) -> dict[str, list[str]]:
    """Each user's candidates but the target, in the order given."""
    return {s["user_id"]: [c for c in s["candidates"] if c != s["target"]] for s in samples}


@pytest.fixture(scope="module")
def ds():
    return dataset(SEQS, [f"i{k}" for k in range(10)])


def test_popularity_retriever_picks_the_most_popular_unseen_items(ds):
    samples = build(ds, negatives="retriever:popularity", n_candidates=3)
    assert picked(samples) == {"u1": ["i3", "i5"], "u2": ["i5", "i6"], "u3": ["i5", "i6"], "u4": ["i0", "i3"]}
    assert [s["target"] for s in samples] == ["i2", "i3", "i4", "i7"]


def test_markov_retriever_picks_what_followed_the_last_item(ds):
    samples = build(ds, negatives="retriever:markov", n_candidates=3)
    # u1 after i1: i3, i6 (once each, equally popular: by id); u2: i6 then (i3 is the
    # target) the most popular item left, i5; u3, u4: nothing followed i3 / i6: popularity order
    assert picked(samples) == {"u1": ["i3", "i6"], "u2": ["i5", "i6"], "u3": ["i5", "i6"], "u4": ["i0", "i3"]}
    s = samples[0]
    assert s["retriever"] == "retriever:markov"
    assert s["retriever_model"] == {"baseline": "markov", "settings": {"order": 1, "decay": 0.5}}
    assert build(ds, negatives="retriever:markov", n_candidates=3) == samples  # seeded
    positions = {tuple(s["candidates"].index(s["target"]) for s in build(ds, seed=k, negatives="retriever:markov",
                                                                        n_candidates=3)) for k in range(8)}
    assert len(positions) > 1  # the target's position is drawn, not always first or last
    # and the negatives are shown in a seeded random order, not the retriever's (best first)
    shown = {tuple(negatives(build(ds, seed=k, negatives="retriever:markov", n_candidates=3))["u2"]) for k in range(8)}
    assert shown == {("i6", "i5"), ("i5", "i6")}


def test_retriever_ranking_its_own_candidates_scores_its_full_catalog_rank(ds):
    """Its candidates are its own top items: the target's rank among them is min(full rank, n), so its
    sampled metrics are its full-catalog ones (the hardest negatives for it, not the easiest)."""
    for name in ("markov", "popularity"):
        samples = build(ds, negatives=f"retriever:{name}", n_candidates=3)
        model = fit(name, training_data(ds, {"split": "leave_last_out"}))[0]
        recs = model.predict(samples, DirectTask())
        got = [(recs[s["id"]]["parsed"]["ranking"].index(s["target"]) + 1, recs[s["id"]]["parsed"]["full_rank"])
               for s in samples]
        assert all(r == min(f if f is not None else 3, 3) for r, f in got), (name, got)
        assert any(r < 3 for r, _ in got), (name, got)  # not all at the bottom: the check compares something


def test_a_references_latency_times_its_answer_not_the_full_catalog_rank(ds):
    """The full-catalog rank of the target (evaluation, needing the label) is computed once, untimed, for the
    records kept; the throughput call and the single-sample calls rank the candidates alone."""
    from recharness.runner.latency import timed_predict

    samples = build(ds, n_candidates=3)
    model = fit("markov", training_data(ds, {"split": "leave_last_out"}))[0]
    calls = []
    real = model.target_ranks
    model.target_ranks = lambda queries: calls.append(len(queries)) or real(queries)
    recs, timing = timed_predict(model, samples, runs=5, task=DirectTask())
    assert calls == [len({(s["user_id"], s["target"]) for s in samples})]  # the records' call only
    assert all("full_rank" in r["parsed"] for r in recs.values()) and timing["latency_runs"] == 5
    assert recs == model.predict(samples, DirectTask())  # the records as an untimed call gives them


def test_unknown_retriever_is_one_line_listing_the_allowed_ones(ds):
    allowed = ("allowed: uniform, popularity, retriever:popularity, retriever:itemknn, retriever:ease, "
               "retriever:als, retriever:markov")
    for bad in ("retriever:sasrec", "retriever:random", "markov"):
        with pytest.raises(ConfigError) as e:
            validate_options("llmrec", ["direct"], {"negatives": bad})
        assert str(e.value) == f"--option negatives={bad}: not a way to draw candidates; {allowed} (llmrec/direct)"
        with pytest.raises(ConfigError, match=f"--option negatives={bad}: not a way to draw candidates; {allowed}$"):
            build(ds, negatives=bad)


# swap data: the user u has h then j1 (the target). From h, two users went on to j2 and one to j1; j1 and
# j2 are equally popular (2 each, j1 first by id) behind a, b, c, h (4 each).
SWAP = {"p1": ["a", "b", "c", "h", "j2", "z"], "p2": ["a", "b", "c", "h", "j2", "z"],
        "p3": ["a", "b", "c", "h", "j1", "z"], "p4": ["a", "b", "c", "j1", "z"], "u": ["h", "j1"]}


def test_two_references_that_swap_order_are_flagged():
    fillers = [f"f{k}" for k in range(8)]  # never interacted with: both rank them last
    ds = dataset(SWAP, ["a", "b", "c", "h", "j1", "j2", "z", *fillers])
    assert [s["target"] for s in build(ds, users=["u"], n_candidates=10)] == ["j1"]
    samples = [{"id": "direct-u", "task": "direct", "user_id": "u", "candidates": ["j2", *fillers, "j1"],
                "target": "j1", "seen": ["h"]}]
    task = DirectTask()
    train = training_data(ds, {"split": "leave_last_out"})
    rows = []
    for name in ("popularity", "markov"):
        recs = fit(name, train)[0].predict(samples, task)
        m = task.score(samples, recs)
        units = task.units(samples, recs)
        assert units["NDCG@10 (full)"].point() == pytest.approx(m["NDCG@10 (full)"])
        rows.append(ScoreRow(method=name, task="direct", metrics=m, n=1, kind="reference"))
    pop, markov = (r.metrics for r in rows)
    # candidates: popularity puts j1 first (tie with j2, by id), markov puts j2 (2 transitions) first
    assert pop["NDCG@10"] == 1.0 and markov["NDCG@10"] == pytest.approx(1 / math.log2(3))
    # whole catalog, h left out: popularity a b c j1 → rank 4; markov j2 j1 → rank 2
    assert pop["NDCG@10 (full)"] == pytest.approx(1 / math.log2(5))
    assert markov["NDCG@10 (full)"] == pytest.approx(1 / math.log2(3))
    assert order_swaps(rows) == [("popularity", "markov")]
    note = sampled_vs_full(rows)
    assert "**Order differs**" in note and "popularity above markov sampled (1.0000 vs 0.6309) but below it on the " \
                                         "whole catalog (0.4307 vs 0.6309) (no intervals to judge it by)" in note
    # with intervals: overlapping ones say the swap may be noise, separate ones say so too
    ci = lambda lo, hi: {"lo": lo, "hi": hi}  # noqa: E731
    rows[0].ci = {"NDCG@10": ci(0.9, 1.0), "NDCG@10 (full)": ci(0.3, 0.7)}
    rows[1].ci = {"NDCG@10": ci(0.5, 0.8), "NDCG@10 (full)": ci(0.5, 0.8)}
    assert "(their 95% intervals overlap on NDCG@10 (full): the swap may be noise)" in sampled_vs_full(rows)
    rows[0].ci["NDCG@10 (full)"] = ci(0.3, 0.45)
    assert "(their 95% intervals are apart on both)" in sampled_vs_full(rows)
    # the same two rows in agreeing order: no flag
    rows[0].metrics["NDCG@10 (full)"] = 0.9
    assert order_swaps(rows) == [] and "Order differs" not in sampled_vs_full(rows)
    assert "keep their order" in sampled_vs_full(rows)


def test_random_and_models_get_no_full_catalog_metric(ds):
    samples = build(ds, n_candidates=3)
    refs = DirectTask().references(ds, samples, seed=0)
    task = DirectTask()
    assert "NDCG@10 (full)" not in task.score(samples, refs["random"])
    # popularity's full ranks: u1 i2 and u3 i4 are never counted (None: a miss), u2 i3 is third of i1 i0 i3,
    # i0 and i1 seen → 1; u4 i7 never counted
    assert [refs["popularity"][s["id"]]["parsed"]["full_rank"] for s in samples] == [None, 1, None, None]
    assert task.score(samples, refs["popularity"])["HR@10 (full)"] == 0.25
    model = {s["id"]: {"id": s["id"], "parsed": {"ranking": s["candidates"]}, "valid": True} for s in samples}
    assert "NDCG@10 (full)" not in task.score(samples, model)


def test_popularity_negatives_weigh_the_training_part_only():
    """negatives=popularity draws by training interactions: an item that is only ever a test target (every
    other user's last item) has none and is never drawn, though over the whole data it is the most popular;
    items with training interactions are drawn (the check compares something)."""
    seqs = {f"u{k}": ["i0", f"i{k % 3 + 1}", "z"] for k in range(1, 7)}
    seqs["w"] = ["i4", "i5", "i0"]  # i4 and i5 get one training interaction each
    seqs["v"] = ["i1", "i2", "i3"]  # never had z: z could be its negative, if any weight fell on it
    ds = dataset(seqs, ["i0", "i1", "i2", "i3", "i4", "i5", "z"])
    drawn = set()
    for seed in range(30):
        (s,) = build(ds, seed=seed, users=["v"], negatives="popularity", n_candidates=3)
        drawn |= set(s["candidates"]) - {s["target"]}
    assert "z" not in drawn and drawn <= {"i0", "i4", "i5"} and "i0" in drawn  # over the whole data z has 6

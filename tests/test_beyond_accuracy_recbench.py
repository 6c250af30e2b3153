"""Beyond-accuracy metrics (coverage@10, Gini@10, ARP@10, novelty@10, HR@10 head / tail) in RecBench
seqrec and RecBench+: hand-worked on a 6-item catalog with known training popularity, Gini against an
independent formula, the top-10 lists the references now give beside their rank (equal to their own
full orders), and an old rank-only reference file that still scores (ranks, no list metrics)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from recharness.baselines import TrainData, fit
from recharness.baselines.base import SEQUENCE_PARTS
from recharness.core.io import read_jsonl
from recharness.core.rundir import RunDir
from recharness.tasks.recbench.seqrec import SeqrecTask, sample_list
from recharness.tasks.recbench_plus.condition_tasks import ExplicitTask

CATALOG = list("abcdef")
BA = ("coverage@10", "Gini@10", "ARP@10", "novelty@10")


def mad_gini(x) -> float:
    """Gini as the mean absolute difference over twice the mean (not the sorted-rank formula the code uses)."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean()))


def exposure(lists: list[list[str]]) -> list[int]:
    return [sum(i in lst for lst in lists) for i in CATALOG]


def si(users_of: int, users: int) -> float:
    return -math.log2((users_of + 1) / (users + 1))


# ---------------------------------------------------------------- RecBench seqrec


@pytest.fixture
def seqrec_task(tmp_path):
    """A seqrec task whose popularity comes from a run's training sequences: positives a 5 (u1..u5),
    b 3 (u1..u3), c 2 (u1, u2), d 1 (u4), e 1 (u5), f 0; the head (20% of 6 items) is {a}."""
    rows = [("u1", ["a", "b"], "c", ), ("u2", ["a", "b"], "c"), ("u3", ["a"], "b"), ("u4", ["a"], "d"),
            ("u5", ["a"], "e")]
    schema = {"user_id": pl.Utf8, "history": pl.List(pl.Utf8), "target": pl.Utf8}
    run = tmp_path / "run"
    path = RunDir(run).pairs("recbench", SEQUENCE_PARTS["train"])
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, schema=schema, orient="row").write_parquet(path)
    # the dataset's own interactions would give other counts (f the most): they must not be read
    inter = pl.DataFrame({"user_id": ["x"] * 6, "item_id": ["f"] * 6})
    dataset = SimpleNamespace(name="toy", items=pl.DataFrame({"item_id": CATALOG, "title": CATALOG}), interactions=inter)
    task = SeqrecTask()
    task.run_dir = run
    task.prepare_scoring(dataset)
    return task


def _seq(k: int, history: list[str], target: str) -> dict:
    return {"id": f"s{k}", "task": "seqrec", "user_id": f"u{k}", "history": history, "target": target, "n_recs": 10}


SEQ_SAMPLES = [_seq(1, ["f"], "b"), _seq(2, ["e"], "c"), _seq(3, ["b"], "a")]
SEQ_PREDS = {
    # an LLM: history item f and the repeated a dropped → [a, b], b at rank 2 (a hit)
    "s1": {"id": "s1", "parsed": {"strings": ["A", "B", "F", "A"], "items": ["a", "b", "f", "a"]}, "valid": True},
    # a reference: rank and top-10 list; its history item e is dropped from the list → [a, d]
    "s2": {"id": "s2", "parsed": {"rank": 12, "top": ["e", "a", "d"]}, "valid": True},
    # an LLM naming only c: the target a is not ranked (a miss)
    "s3": {"id": "s3", "parsed": {"strings": ["C"], "items": ["c"]}, "valid": True},
}


def test_seqrec_popularity_is_the_builds_training_sequences(seqrec_task):
    pop = seqrec_task.popularity
    assert pop.interactions == {"a": 5, "b": 3, "c": 2, "d": 1, "e": 1, "f": 0}
    assert pop.users == 5 and pop.head == frozenset({"a"})


def test_seqrec_hand_worked(seqrec_task):
    lists = [sample_list(s, SEQ_PREDS[s["id"]]) for s in SEQ_SAMPLES]
    assert lists == [["a", "b"], ["a", "d"], ["c"]]
    m = seqrec_task.score(SEQ_SAMPLES, SEQ_PREDS)
    assert m["HR@10"] == pytest.approx(1 / 3)
    assert m["coverage@10"] == pytest.approx(4 / 6)  # a, b, c, d of six items
    # exposure a 2, b 1, c 1, d 1, e 0, f 0 → sorted 0 0 1 1 1 2, (2i − 7) = −5 −3 −1 1 3 5: Σ = −1 + 1 + 3 + 10 = 13
    assert m["Gini@10"] == pytest.approx(13 / (6 * 5))
    assert m["Gini@10"] == pytest.approx(mad_gini(exposure(lists)))  # independent formula
    assert m["ARP@10"] == pytest.approx(((5 + 3) / 2 + (5 + 1) / 2 + 2) / 3)  # = 3
    assert m["ARP@10"] == pytest.approx(3.0)
    # self-information −log2((users of i + 1) / (5 + 1)): a 0, b log2 1.5, c 1, d log2 3
    assert m["novelty@10"] == pytest.approx((math.log2(1.5) / 2 + math.log2(3) / 2 + 1) / 3)
    assert m["novelty@10"] == pytest.approx(np.mean([np.mean([si(5, 5), si(3, 5)]), np.mean([si(5, 5), si(1, 5)]),
                                                     si(2, 5)]))
    # targets b (tail, hit), c (tail, miss at rank 12), a (head, miss)
    assert m["HR@10 head"] == 0.0 and m["HR@10 tail"] == pytest.approx(0.5)


def test_seqrec_units_agree_with_score_and_cluster_by_user(seqrec_task):
    samples = [*SEQ_SAMPLES, {**_seq(4, ["f"], "d"), "user_id": "u1"}]  # a second sample of user u1
    preds = {**SEQ_PREDS, "s4": {"id": "s4", "parsed": {"rank": 1, "top": ["d", "b"]}, "valid": True}}
    m = seqrec_task.score(samples, preds)
    units = seqrec_task.units(samples, preds)
    for name in (*BA, "HR@10 head", "HR@10 tail"):
        assert units[name].point() == pytest.approx(m[name]), name
    assert m["coverage@10"] == pytest.approx(4 / 6) and m["HR@10 tail"] == pytest.approx(2 / 3)
    assert units["ARP@10"].independent == 3  # four samples, three users


def test_rank_only_records_keep_their_ranks_and_get_no_list_metrics(seqrec_task):
    old = {s["id"]: {"id": s["id"], "parsed": {"rank": r}, "valid": True} for s, r in zip(SEQ_SAMPLES, (2, 12, None))}
    m = seqrec_task.score(SEQ_SAMPLES, old)
    # rank 12 is beyond the 10 titles an LLM is asked for: no reciprocal rank in MRR, only in the ranker's own
    # whole-catalog MRR
    assert m["HR@10"] == pytest.approx(1 / 3) and m["MRR"] == pytest.approx((1 / 2) / 3)
    assert m["MRR (full)"] == pytest.approx((1 / 2 + 1 / 12) / 3) and m["Recall@20 (full)"] == pytest.approx(2 / 3)
    assert not set(BA) & set(m)  # the lists were never stored: not measured as empty
    assert m["HR@10 head"] == 0.0 and m["HR@10 tail"] == pytest.approx(0.5)  # these read the rank only
    assert not set(BA) & set(seqrec_task.units(SEQ_SAMPLES, old))
    # one record without its list is enough to leave the method's list metrics out
    mixed = {**SEQ_PREDS, "s2": old["s2"]}
    assert not set(BA) & set(seqrec_task.score(SEQ_SAMPLES, mixed))
    # no popularity (scored outside the score stage): nothing beyond accuracy, the rest unchanged
    assert not {*BA, "HR@10 head"} & set(SeqrecTask().score(SEQ_SAMPLES, SEQ_PREDS))


# ---------------------------------------------------------------- the references' top-10 lists


def _cyclic(n_users: int = 40, n_items: int = 30, length: int = 16, seed: int = 0):
    from recharness.tasks.recbench.seqrec_data import windows

    rng = np.random.default_rng(seed)
    rows, samples = [], []
    for u in range(n_users):
        start, step = int(rng.integers(n_items)), int(rng.choice([1, 3]))
        seq = [f"i{(start + step * k) % n_items}" for k in range(length)]
        rows += [(f"u{u}", h, t, "train") for h, t in windows(seq[:-2], 6)]
        rows.append((f"u{u}", seq[-8:-2], seq[-2], "valid"))
        samples.append({"id": f"t{u}", "task": "seqrec", "user_id": f"u{u}", "history": seq[-7:-1], "target": seq[-1]})
    seqs = pl.DataFrame(rows, schema={"user_id": pl.Utf8, "history": pl.List(pl.Utf8), "target": pl.Utf8,
                                      "part": pl.Utf8}, orient="row")
    inter = (seqs.filter(pl.col("part") == "train")
             .select("user_id", pl.concat_list("history", "target").alias("item_id")).explode("item_id").unique())
    return TrainData(inter, [f"i{k}" for k in range(n_items)], sequences=seqs), samples


@pytest.fixture(scope="module")
def cyclic():
    return _cyclic()


def _full_order_top(model, s: dict, items: list[str], k: int = 10) -> list[str]:
    """The first k items of the model's own full order, read off its target ranks (each item asked as
    the target): an independent path to the list `top` must equal."""
    ranks = model.target_ranks([(i, s["history"], s["user_id"]) for i in items if i not in s["history"]])
    by_rank = {r["rank"]: i for r, i in zip(ranks, [i for i in items if i not in s["history"]])}
    return [by_rank[r] for r in range(1, k + 1) if r in by_rank]


@pytest.mark.parametrize("name", ["popularity", "itemknn", "ease"])
def test_ranker_tops_are_their_full_orders_and_match_the_rank(cyclic, name):
    data, samples = cyclic
    model = fit(name, data)[0]
    recs = model.predict(samples[:6], SeqrecTask())
    within = 0
    for s in samples[:6]:
        p = recs[s["id"]]["parsed"]
        assert set(p) == {"rank", "top"} and len(p["top"]) == 10 and not set(p["top"]) & set(s["history"])
        assert p["top"] == _full_order_top(model, s, data.items)
        assert p["top"] == model.top_ks([(s["target"], s["history"], s["user_id"])], 10)[0]
        if p["rank"] is not None and p["rank"] <= 10:
            within += 1
            assert p["top"][p["rank"] - 1] == s["target"]
        else:
            assert s["target"] not in p["top"]
    assert within  # the rank/top agreement was checked on at least one target within the top 10


def test_sasrec_top_from_the_same_scores_is_its_full_order(cyclic):
    from recharness.baselines.sasrec import SASRec1L

    data, samples = cyclic
    model = SASRec1L(seed=0, threads=1, progress=False, hidden=16, inner=32, max_epochs=1, batch_size=256).fit(data)
    recs = model.predict(samples[:5], SeqrecTask())
    for s in samples[:5]:
        p = recs[s["id"]]["parsed"]
        assert len(p["top"]) == 10 and p["top"] == _full_order_top(model, s, data.items)
        assert p["rank"] == model.target_ranks([(s["target"], s["history"], None)])[0]["rank"]


def test_sasrec_top_indices_break_ties_as_the_ranks_do():
    from recharness.baselines.sasrec import top_indices
    from recharness.metrics.full_ranking import target_ranks

    scores = np.array([[1.0, 3.0, 3.0, np.nan, 3.0, 0.5]])
    top = top_indices(scores, 4, [np.array([2])])[0]
    assert top == [1, 4, 0, 5]  # ties by lower index, history item 2 out, NaN last
    assert [int(target_ranks(scores, [j], [[2]])[0]) for j in top] == [1, 2, 3, 4]


def test_sid_sasrec_top_is_its_first_ten_decoded_items(cyclic):
    from recharness.baselines.sid_sasrec import SIDSASRec
    from recharness.data.semantic_ids import SemanticIds, disambiguate

    data, samples = cyclic
    raw = np.random.default_rng(1).integers(0, 8, size=(len(data.items), 3)).astype(np.int32)
    sid = SemanticIds(list(data.items), disambiguate(raw), "given", 3, 8, 0, 0, "none", 0.0, [1.0] * 3, 0.0)
    model = SIDSASRec(seed=0, threads=1, progress=False, sid=sid, hidden=16, inner=32, max_epochs=1, beams=20,
                      valid_rows=5, batch_size=256).fit(data)
    recs = model.predict(samples[:3], SeqrecTask())
    for s in samples[:3]:
        p = recs[s["id"]]["parsed"]
        assert p["top"] == p["items"][:10] and len(p["items"]) > 10  # 20 beams: the list is cut at ten


# ---------------------------------------------------------------- an old rank-only file, through the score stage


def test_an_old_rank_only_reference_file_still_scores(ml1m, tmp_path):
    from recharness.runner import pipeline
    from recharness.runner.train import train

    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=12, options={"train_sequences": 300})
    train(out, suite="recbench", baselines=["popularity", "itemknn"], latency_runs=0)
    new = {r.method: r for r in pipeline.score(out)}
    path = RunDir(out).reference_dir / "itemknn.jsonl"
    recs = list(read_jsonl(path))
    tops = [r["parsed"]["top"] for r in recs if isinstance(r.get("parsed"), dict) and "top" in r["parsed"]]
    assert len(tops) == 12
    catalog = ml1m.items.height
    assert new["itemknn"].metrics["coverage@10"] == pytest.approx(len({i for t in tops for i in t}) / catalog)
    for name in BA:
        assert name in new["popularity"].metrics and name in new["itemknn"].metrics
    assert {"lo", "hi"} <= set(new["itemknn"].ci["ARP@10"])  # means over samples: with an interval
    # the file as `train` wrote it before `top` existed: ranks only
    lines = []
    for r in recs:
        if isinstance(r.get("parsed"), dict):
            r["parsed"].pop("top", None)
        lines.append(json.dumps(r))
    path.write_text("\n".join(lines) + "\n")
    old = {r.method: r for r in pipeline.score(out)}
    assert old["itemknn"].n == 12
    for name in ("NDCG@10", "HR@10", "MRR", "MRR (full)", "Recall@20 (full)"):
        assert old["itemknn"].metrics[name] == pytest.approx(new["itemknn"].metrics[name])
    assert not set(BA) & set(old["itemknn"].metrics)
    assert set(BA) <= set(old["popularity"].metrics)  # the other rows keep theirs
    heads = [k for k in new["itemknn"].metrics if k.startswith("HR@10 ")]
    assert heads and all(old["itemknn"].metrics[k] == pytest.approx(new["itemknn"].metrics[k]) for k in heads)


# ---------------------------------------------------------------- RecBench+


@pytest.fixture
def plus_task():
    """Interactions in time order per user, each user's last one (f) held out: training counts a 4,
    b 2, c 1, d 1, e 0, f 0 (the whole data would give f 4)."""
    rows = [("u1", "a"), ("u1", "b"), ("u1", "c"), ("u1", "f"), ("u2", "a"), ("u2", "b"), ("u2", "f"),
            ("u3", "a"), ("u3", "d"), ("u3", "f"), ("u4", "a"), ("u4", "f")]
    inter = pl.DataFrame(rows, schema=["user_id", "item_id"], orient="row")
    task = ExplicitTask()
    task.prepare_scoring(SimpleNamespace(items=pl.DataFrame({"item_id": CATALOG}), interactions=inter))
    return task


def _q(sid: str, gt: list[str], k: int | None = None) -> dict:
    return {"id": sid, "task": "explicit", "gt": gt, "k": k, "with_history": sid.endswith("-h"), "history": []}


PLUS_SAMPLES = [_q("explicit-q1-h", ["a", "b"]), _q("explicit-q1-n", ["a", "b"]), _q("explicit-q2-n", ["c"]),
                _q("explicit-q3-n", ["d", "e"])]


def _ans(sid: str, ids: list[str | None], ftr: bool = False) -> dict:
    return {"id": sid, "parsed": {"strings": [str(i) for i in ids], "item_ids": ids, "ftr": ftr}, "valid": True}


PLUS_PREDS = {
    "explicit-q1-h": _ans("explicit-q1-h", ["a", None, "c"]),  # an unmatched title keeps its slot, not counted
    "explicit-q1-n": _ans("explicit-q1-n", ["f", "a"]),
    "explicit-q2-n": _ans("explicit-q2-n", [], ftr=True),  # declines: no list
    # ten entries before d: only the first ten slots count (b and nine unmatched titles)
    "explicit-q3-n": _ans("explicit-q3-n", ["b", *[None] * 9, "d"]),
}


def test_recbench_plus_popularity_is_the_training_part(plus_task):
    assert plus_task.popularity.interactions == {"a": 4, "b": 2, "c": 1, "d": 1, "e": 0, "f": 0}
    assert plus_task.popularity.users == 4


def test_recbench_plus_hand_worked(plus_task):
    m = plus_task.score(PLUS_SAMPLES, PLUS_PREDS)
    lists = [["a", "c"], ["f", "a"], [], ["b"]]
    assert m["coverage@10"] == pytest.approx(4 / 6)  # a, b, c, f; d came eleventh
    # exposure a 2, b 1, c 1, d 0, e 0, f 1 → sorted 0 0 1 1 1 2: 13 / (6 · 5)
    assert m["Gini@10"] == pytest.approx(13 / 30)
    assert m["Gini@10"] == pytest.approx(mad_gini(exposure(lists)))
    assert m["ARP@10"] == pytest.approx(((4 + 1) / 2 + (0 + 4) / 2 + 2) / 3)  # the declined query has no list
    assert m["novelty@10"] == pytest.approx((math.log2(5 / 2) / 2 + math.log2(5) / 2 + math.log2(5 / 3)) / 3)
    assert not [k for k in m if k.endswith((" head", " tail"))]  # a set of relevant items: no single target
    units = plus_task.units(PLUS_SAMPLES, PLUS_PREDS)
    for name in BA:
        assert units[name].point() == pytest.approx(m[name]), name
    assert units["ARP@10"].independent == 3  # q1's two answers move together


def test_recbench_plus_fixed_k_cuts_the_list_first(plus_task):
    samples = [_q("explicit-q1-n", ["a"], k=1)]  # asked for one item: L is its first entry only
    m = plus_task.score(samples, {"explicit-q1-n": _ans("explicit-q1-n", ["b", "c"])})
    assert m["coverage@10"] == pytest.approx(1 / 6) and m["ARP@10"] == pytest.approx(2.0)


def test_sid_sasrec_weights_do_not_depend_on_the_beams_it_decodes_with(cyclic):
    """The CBS and free variants share one fit whose key leaves `beams` out, but early stopping decoded the
    validation rows with the model's own beams: weights chosen under 2 beams served a 30-beam variant. Early
    stopping now decodes with a fixed VALID_BEAMS."""
    from recharness.baselines import sid_sasrec
    from recharness.baselines.sid_sasrec import SIDSASRec
    from recharness.data.semantic_ids import SemanticIds, disambiguate

    data, _ = cyclic
    raw = np.random.default_rng(1).integers(0, 8, size=(len(data.items), 3)).astype(np.int32)
    sid = SemanticIds(list(data.items), disambiguate(raw), "given", 3, 8, 0, 0, "none", 0.0, [1.0] * 3, 0.0)
    logs = []
    for beams in (2, 30):
        sid_sasrec._FITTED.clear()  # a fit of its own, not the other's shared weights
        m = SIDSASRec(seed=0, threads=1, progress=False, sid=sid, hidden=16, inner=32, max_epochs=2, beams=beams,
                      valid_rows=8, batch_size=256).fit(data)
        logs.append((m.log["best_epoch"], m.log["best_valid_ndcg@10"]))
    sid_sasrec._FITTED.clear()
    assert logs[0] == logs[1], logs

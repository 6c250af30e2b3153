"""RecBench list-wise (seqrec): the split checked from the raw ratings (never through the builder's own
code), full-catalog metrics against brute force and by hand, scoring of LLM and reference records,
SASRec learning a sequential pattern, seeded and saved, and the pipeline end to end."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from itertools import pairwise

import numpy as np
import polars as pl
import pytest

from recharness.baselines import BASELINES, TrainData, fit, pairs_path
from recharness.baselines import sasrec as sasrec_mod
from recharness.baselines.base import SEQUENCE_PARTS
from recharness.core.errors import ConfigError, InputError
from recharness.core.io import read_jsonl
from recharness.core.rundir import RunDir
from recharness.metrics.full_ranking import rank_metrics, target_ranks
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.train import train
from recharness.tasks.recbench.seqrec import SeqrecTask, list_rank
from recharness.tasks.recbench.seqrec_data import windows
from recharness.tasks.references import serving
from recharness.tasks.registry import get_task

N_USERS = 120


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("seqrec") / "run"
    info = pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=N_USERS)
    samples = list(read_jsonl(out / "samples.jsonl"))
    train_df = pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["train"]))
    valid_df = pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["valid"]))
    return out, info, samples, train_df, valid_df


@pytest.fixture(scope="module")
def positives(ml1m):
    """Each user's rating > 3 items in stored order (user, time, file order), each item once."""
    by_user, seen = defaultdict(list), set()
    for u, i, r in ml1m.interactions.select("user_id", "item_id", "rating").iter_rows():
        if r > 3 and (u, i) not in seen:
            seen.add((u, i))
            by_user[u].append(i)
    return by_user


# ---------------------------------------------------------------- (a) the split, from the raw ratings


def test_test_and_validation_rows_are_each_users_last_two_positives(built, positives):
    _, info, samples, _, valid_df = built
    assert info["counts"]["seqrec"] == len(samples) == N_USERS
    valid = {u: (h, t) for u, h, t in valid_df.iter_rows()}
    assert set(valid) == {s["user_id"] for s in samples}
    for s in samples:
        pos = positives[s["user_id"]]
        assert s["target"] == pos[-1] and s["history"] == pos[-21:-1] and s["id"] == f"seqrec-{s['user_id']}"
        assert valid[s["user_id"]] == (pos[-22:-2], pos[-2])
        user_turn = s["messages"][-1]["content"]
        assert user_turn.startswith("User behavior sequence:\n(1) ") and user_turn.count("\n(") == len(s["history"])
        assert "Recommend the next 10 movies." in user_turn and s["n_recs"] == 10
    assert max(len(s["history"]) for s in samples) == 20


def test_training_windows_cover_every_users_positives_before_the_last_two_and_nothing_after(built, positives):
    _, _, samples, train_df, _ = built
    by_user = defaultdict(list)
    for u, h, t in train_df.iter_rows():  # written by user, then time
        by_user[u].append(h + [t])
    tested = {s["user_id"] for s in samples}
    for u, pos in positives.items():
        trainable = pos[:-2]
        rows = by_user.get(u, [])
        # consecutive windows of at most 21 items sharing one item: together exactly the trainable part
        assert all(2 <= len(r) <= 21 for r in rows)
        assert all(a[-1] == b[0] for a, b in pairwise(rows))
        joined = rows[0][:1] + [i for r in rows for i in r[1:]] if rows else []
        assert joined == (trainable if len(trainable) >= 2 else [])
        if u in tested:  # no test or validation target of the user in any of their training rows
            assert not {pos[-1], pos[-2]} & {i for r in rows for i in r}
    assert train_df.height == sum(map(len, by_user.values())) < 40_000  # ml-1m has fewer: all kept


def test_windows_and_the_training_sample(ml1m, tmp_path):
    assert windows(list("abcdefg"), 3) == [(["a", "b", "c"], "d"), (["d", "e", "f"], "g")]
    assert windows(list("abcdefgh"), 3) == [(["a"], "b"), (["b", "c", "d"], "e"), (["e", "f", "g"], "h")]
    assert windows(list("ab"), 3) == [(["a"], "b")] and windows(["a"], 3) == []
    out = tmp_path / "small"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=10, options={"train_sequences": 500})
    small = pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["train"]))
    assert small.height == 500
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=10, options={"train_sequences": 500})
    assert pl.read_parquet(pairs_path(out, "recbench", SEQUENCE_PARTS["train"])).equals(small)  # seeded


def test_options_and_separate_runs_for_ctr_and_seqrec(ml1m, built, tmp_path):
    with pytest.raises(ConfigError, match="train_sequences"):
        pipeline.build("recbench", "ml-1m", tmp_path, tasks=["seqrec"], options={"train_sequence": 3})
    with pytest.raises(ConfigError, match="n_recs"):
        pipeline.build("recbench", "ml-1m", tmp_path, tasks=["seqrec"], options={"n_recs": 0})
    out, *_ = built
    both = tmp_path / "both"
    pipeline.build("recbench", "ml-1m", both, tasks=["ctr"], limit=5, options={"train_pairs": 200})
    with pytest.raises(ConfigError, match="own --out"):  # ctr's pairs are of another split
        pipeline.build("recbench", "ml-1m", both, tasks=["seqrec"], limit=5)
    seq = pairs_path(out, "recbench", SEQUENCE_PARTS["train"])
    pairs_path(both, "recbench", SEQUENCE_PARTS["train"]).write_bytes(seq.read_bytes())
    with pytest.raises(InputError, match="it recorded none here"):  # not a file this build wrote
        TrainData.of_build(ml1m, both, "recbench")
    info = json.loads(RunDir(both).build_json.read_text())
    info.pop("side_files")  # a build from before side files were recorded: the two splits are still refused
    RunDir(both).build_json.write_text(json.dumps(info))
    with pytest.raises(ConfigError, match="separate --out"):
        TrainData.of_build(ml1m, both, "recbench")


# ---------------------------------------------------------------- (b) full-catalog metrics


def _brute_rank(scores, target, exclude) -> int:
    order = [j for j in np.argsort(-scores, kind="stable") if j == target or j not in set(exclude)]
    return order.index(target) + 1


def test_target_ranks_equal_a_brute_force_ranking():
    rng = np.random.default_rng(0)
    for n_items, ties in ((7, True), (30, True), (50, False)):
        scores = rng.integers(0, 4, size=(40, n_items)).astype(float) if ties else rng.normal(size=(40, n_items))
        scores[0, :] = -np.inf  # all tied at -inf
        targets = rng.integers(0, n_items, size=40)
        exclude = [list(rng.integers(0, n_items, size=rng.integers(0, 8))) for _ in range(40)]
        exclude[1] = [targets[1], targets[1]]  # the target is never excluded
        got = target_ranks(scores, targets, exclude)
        assert got.tolist() == [_brute_rank(s, t, e) for s, t, e in zip(scores, targets, exclude)]
        assert target_ranks(scores, targets).tolist() == [_brute_rank(s, t, []) for s, t in zip(scores, targets)]


def test_full_ranking_equals_scipy_and_sklearn():
    """The reference libraries, row by row over the items left after the exclusions: the rank is SciPy's
    `rankdata(-scores, method="ordinal")` (ties in catalog order; here with ties), and with distinct scores
    NDCG@10 is scikit-learn's `ndcg_score` of a one-hot relevance and MRR its
    `label_ranking_average_precision_score` (one relevant item: 1 / its rank)."""
    from scipy.stats import rankdata
    from sklearn.metrics import label_ranking_average_precision_score, ndcg_score

    rng = np.random.default_rng(7)
    for tied in (True, False):
        n_items = 40
        scores = rng.integers(0, 5, size=(60, n_items)).astype(float) if tied else rng.normal(size=(60, n_items))
        targets = rng.integers(0, n_items, size=60)
        exclude = [list(rng.choice(n_items, size=rng.integers(0, 12), replace=False)) for _ in range(60)]
        ranks = target_ranks(scores, targets, exclude)
        per = rank_metrics(ranks, ks=(10,), per_sample=True)
        assert 0 < sum(r <= 10 for r in ranks) < 60  # hits and misses both checked
        for row, t, ex, rank, nd, mrr in zip(scores, targets, exclude, ranks, per["ndcg@10"], per["mrr"]):
            kept = [j for j in range(n_items) if j == t or j not in set(ex)]
            assert rank == rankdata(-row[kept], method="ordinal")[kept.index(t)]
            if not tied:
                truth = np.array([[float(j == t) for j in kept]])
                assert nd == pytest.approx(ndcg_score(truth, row[kept][None, :], k=10), abs=1e-12)
                assert mrr == pytest.approx(label_ranking_average_precision_score(truth, row[kept][None, :]), abs=1e-12)


def test_rank_metrics_equal_a_brute_force_and_a_hand_worked_example():
    # hand-worked: item 3 (0.9) beats the target 2 (0.5); item 1 (0.9) is excluded -> rank 2
    assert target_ranks(np.array([[0.1, 0.9, 0.5, 0.9, 0.3]]), [2], [[1]]).tolist() == [2]
    assert target_ranks(np.array([[1.0, 1.0, 1.0]]), [1]).tolist() == [2]  # a tie: the lower index first
    assert target_ranks(np.array([[1.0, 1.0, 1.0]]), [1], [[0]]).tolist() == [1]
    m = rank_metrics([1, 3, 11, math.inf], ks=(5, 10, 20))
    assert m["hr@5"] == m["recall@5"] == 0.5 and m["hr@10"] == 0.5 and m["hr@20"] == m["recall@20"] == 0.75
    assert m["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / 4)
    assert m["ndcg@20"] == pytest.approx((1 + 0.5 + 1 / math.log2(12)) / 4)
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 11) / 4)
    assert rank_metrics([0, -1, float("nan")])["mrr"] == 0.0  # 0 / negative / NaN: not ranked
    rng = np.random.default_rng(1)
    ranks = rng.integers(1, 40, size=200).astype(float)
    ranks[::7] = np.inf
    per = rank_metrics(ranks, ks=(10,), per_sample=True)
    for r, nd, mrr in zip(ranks, per["ndcg@10"], per["mrr"]):
        assert nd == pytest.approx(1 / math.log2(r + 1) if r <= 10 else 0.0)
        assert mrr == pytest.approx(0.0 if math.isinf(r) else 1 / r)


# ---------------------------------------------------------------- (c) scoring LLM and reference records


def _s(k: int, history: list[str], target: str) -> dict:
    return {"id": f"s{k}", "task": "seqrec", "user_id": f"u{k}", "history": history, "target": target, "n_recs": 10}


def test_score_reads_llm_lists_and_reference_ranks_alike():
    samples = [_s(0, ["a", "b"], "c"), _s(1, ["a"], "d"), _s(2, ["a"], "e"), _s(3, ["a"], "f"), _s(4, ["a"], "g")]
    llm = {"strings": ["a", "x", "b", "c"], "items": ["a", "b", "b", "c"]}  # history and a repeat first: c is 4th
    preds = {"s0": {"id": "s0", "parsed": llm, "valid": True},
             "s1": {"id": "s1", "parsed": {"rank": 3}, "valid": True},
             "s2": {"id": "s2", "parsed": {"rank": None}, "valid": True},  # a reference that cannot rank it
             "s3": {"id": "s3", "parsed": None, "valid": False, "error": "http_400"}}  # s4: no line at all
    m = SeqrecTask().score(samples, preds)
    assert m["MRR"] == pytest.approx((1 / 4 + 1 / 3) / 5) and m["HR@10"] == m["Recall@10"] == pytest.approx(2 / 5)
    assert m["NDCG@10"] == pytest.approx((1 / math.log2(5) + 1 / math.log2(4)) / 5)
    assert m["valid_rate"] == 0.6 and m["missing"] == 1.0 and m["matched_share"] == 1.0
    assert list_rank(["x", "a", "y", "x", "t"], "t", {"a"}) == 3 and list_rank(["x"], "t", set()) == math.inf
    # asked for 10, the 15th title named is no hit (it scored Recall@20 and MRR 1/15, out of a compliant answer's reach)
    from recharness.tasks.recbench.seqrec import sample_list, sample_rank

    sample = {"target": "t", "history": ["h1"], "n_recs": 10}
    items = [f"o{i}" for i in range(14)] + ["t"]
    assert sample_rank(sample, {"parsed": {"items": items}}) == math.inf
    assert sample_rank(sample, {"parsed": {"items": ["h1"] + items[6:]}}) == 10.0  # the history title spends a place
    assert sample_rank(sample, {"parsed": {"items": ["h1"] + items[5:]}}) == math.inf
    # the first 10 titles *listed* are the answer: 10 invented titles then the target is a miss, however many
    # more it names (before, only matched titles were counted: the 11th listed was rank 1)
    invented = {"strings": [f"x{i}" for i in range(10)] + ["t"], "slots": [None] * 10 + ["t"], "items": ["t"]}
    assert sample_rank(sample, {"parsed": invented}) == math.inf
    assert sample_list(sample, {"parsed": invented}) == []
    # a history title listed spends its place too, and so does an invented one: the target is third as listed
    listed = {"slots": ["h1", None, "t"] + [f"o{i}" for i in range(7)], "items": ["h1", "t"]}
    assert sample_rank(sample, {"parsed": listed}) == 3.0
    assert sample_rank(sample, {"parsed": {"slots": ["h1"] + items[5:], "items": ["h1"] + items[5:]}}) == math.inf


def test_free_text_answers_are_matched_to_the_catalog(ml1m):
    task = SeqrecTask()
    task.setup(ml1m)
    p = task.parse({}, "1. Toy Story (1995)\n2. A Film That Does Not Exist (2031)\n3. Heat (1995)")
    assert p.valid and len(p.value["items"]) == 2 and len(p.value["unmatched"]) == 1
    assert not task.parse({}, "I'm sorry, I cannot recommend anything.").valid


# ---------------------------------------------------------------- (d) SASRec


def _cyclic(n_users: int = 300, n_items: int = 40, length: int = 24, seed: int = 0) -> tuple[TrainData, list[dict]]:
    """Users walk the items in a cycle with their own step (1 or 3) from a random start: the next item
    needs the last two items, and every item is equally popular."""
    rng = np.random.default_rng(seed)
    rows, samples = [], []
    for u in range(n_users):
        start, step = int(rng.integers(n_items)), int(rng.choice([1, 3]))
        seq = [f"i{(start + step * k) % n_items}" for k in range(length)]
        rows += [(f"u{u}", h, t, "train") for h, t in windows(seq[:-2], 10)]
        rows.append((f"u{u}", seq[-12:-2], seq[-2], "valid"))
        samples.append({"id": f"t{u}", "task": "seqrec", "user_id": f"u{u}", "history": seq[-11:-1], "target": seq[-1]})
    seqs = pl.DataFrame(rows, schema={"user_id": pl.Utf8, "history": pl.List(pl.Utf8), "target": pl.Utf8,
                                      "part": pl.Utf8}, orient="row")
    inter = seqs.filter(pl.col("part") == "train").select("user_id", pl.concat_list("history", "target").alias("item_id")) \
        .explode("item_id").unique()
    return TrainData(inter, [f"i{k}" for k in range(n_items)], sequences=seqs), samples


SMALL = {"hidden": 32, "inner": 64, "batch_size": 512, "max_epochs": 12, "patience": 3, "dropout": 0.1, "lr": 5e-3}


@pytest.fixture(scope="module")
def cyclic():
    return _cyclic()


@pytest.fixture(scope="module")
def fitted(cyclic):
    data, _ = cyclic
    return sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **SMALL).fit(data)


def test_sasrec_learns_a_sequential_pattern_popularity_cannot(cyclic, fitted):
    data, samples = cyclic
    task = SeqrecTask()
    ours = task.score(samples, fitted.predict(samples, task))
    pop = task.score(samples, fit("popularity", data)[0].predict(samples, task))
    assert ours["NDCG@10"] > 0.8 and pop["NDCG@10"] < 0.35, (ours, pop)
    assert fitted.log["best_valid_ndcg@10"] > 0.8 and fitted.log["samples_per_s"] > 0
    assert all(r["parsed"]["rank"] >= 1 for r in fitted.predict(samples, task).values())


def test_sasrec_is_seeded_and_saves_and_loads_the_same_predictions(cyclic, fitted, tmp_path):
    data, samples = cyclic
    again = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **SMALL).fit(data)
    assert all(torch_equal(a, b) for a, b in zip(fitted.net.state_dict().values(), again.net.state_dict().values()))
    task = SeqrecTask()
    assert again.predict(samples, task) == fitted.predict(samples, task)
    other = sasrec_mod.SASRec1L(seed=1, threads=1, progress=False, **{**SMALL, "max_epochs": 1}).fit(data)
    first = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **{**SMALL, "max_epochs": 1}).fit(data)
    assert not torch_equal(other.net.item.weight, first.net.item.weight)
    path = fitted.save(tmp_path / "m")
    loaded = sasrec_mod.SASRec.load(path)
    assert type(loaded) is sasrec_mod.SASRec1L and loaded.settings() == fitted.settings()
    assert loaded.predict(samples, task) == fitted.predict(samples, task)
    with pytest.raises(ValueError, match="does not answer click requests"):
        loaded.predict([{"id": "x", "task": "ctr"}], get_task("recbench", "ctr"))
    with pytest.raises(ConfigError, match="seqrec"):
        sasrec_mod.SASRec().fit(TrainData(data.interactions, data.items))


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_registered_names_and_popularity_ranks_from_training_sequences_only(built, ml1m):
    assert serving(get_task("recbench", "seqrec")) == ["popularity", "itemknn", "ease", "als", "markov", "sasrec",
                                                       "sasrec-1l", "sasrec-3l", "sasrec-4l", "sid-sasrec",
                                                       "sid-sasrec-free", "title-cbs"]
    assert serving(get_task("recbench", "seqrec"), on_the_fly=True) == ["popularity"]
    assert all(BASELINES.meta(n)["heavy"] for n in serving(get_task("recbench", "seqrec"))[1:])
    assert all(BASELINES.meta(n)["trainable"] for n in serving(get_task("recbench", "seqrec"))[1:-1])  # title-cbs learns nothing
    out, _, samples, train_df, _ = built
    data = TrainData.of_build(ml1m, out, "recbench")
    assert data.pairs is None and data.sequences.height == train_df.height + len(samples)
    users = defaultdict(set)
    for u, h, t in train_df.iter_rows():
        for i in h + [t]:
            users[i].add(u)
    pop = fit("popularity", data)[0]
    assert pop.counts == {i: len(us) for i, us in users.items()}  # never a validation or test target
    s = samples[0]
    order = [i for i in sorted(users, key=lambda i: (-len(users[i]), i)) if i not in set(s["history"])]
    want = order.index(s["target"]) + 1 if s["target"] in order else None
    # the rank, and the top-10 list beside it (beyond-accuracy metrics): the same order, history excluded
    assert pop.predict([s], SeqrecTask())[s["id"]]["parsed"] == {"rank": want, "top": order[:10]}


# ---------------------------------------------------------------- (e) end to end


def test_build_run_train_score(ml1m, tmp_path, monkeypatch):
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=12, options={"train_sequences": 300})
    _, stats = pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    assert stats.done == 12 and stats.complete
    before = {r.method: r for r in pipeline.score(out)}
    assert set(before) == {"fake", "popularity"}  # sasrec is heavy: only from `train`
    monkeypatch.setitem(sasrec_mod.DEFAULTS, "max_epochs", 1)
    monkeypatch.setitem(sasrec_mod.DEFAULTS, "hidden", 16)
    train(out, suite="recbench", baselines=["popularity", "sasrec"], latency_runs=5)
    assert (out / "models" / "sasrec" / "model.pt").exists()
    rows = {r.method: r for r in pipeline.score(out)}
    assert set(rows) == {"fake", "popularity", "sasrec"}
    for r in rows.values():
        # on equal terms: every row's ranks cut at the 10 titles an LLM is asked for; Recall@20 and the
        # whole-catalog MRR only as a ranker's own "(full)" columns
        assert r.n == 12 and {"NDCG@10", "HR@10", "MRR", "Recall@5", "Recall@10"} <= set(r.metrics)
        assert "Recall@20" not in r.metrics
        full = {"MRR (full)", "Recall@20 (full)"}
        assert full <= set(r.metrics) if r.method != "fake" else not full & set(r.metrics), r.method
        assert r.metrics.get("MRR (full)", r.metrics["MRR"]) >= r.metrics["MRR"]
    assert rows["sasrec"].metrics["train_s"] > 0 and rows["sasrec"].metrics["latency_s"] > 0
    assert rows["popularity"].metrics["NDCG@10"] == pytest.approx(before["popularity"].metrics["NDCG@10"])
    # a second `train` keeps both (SASRec's fit-decided max_len is no change of settings: it was fitted again)
    said: list[str] = []
    fitted_at = (out / "models" / "sasrec" / "model.pt").stat().st_mtime_ns
    train(out, suite="recbench", baselines=["popularity", "sasrec"], latency_runs=5, progress=said.append)
    assert any("kept: popularity, sasrec" in m for m in said), said
    assert not any("settings changed" in m for m in said), said
    assert (out / "models" / "sasrec" / "model.pt").stat().st_mtime_ns == fitted_at


def test_a_nan_score_never_ranks_first():
    from recharness.metrics.full_ranking import target_ranks

    # a diverged model's NaN: as the target's score it ranks last, elsewhere it beats nothing
    assert target_ranks(np.array([[np.nan, 1.0, 2.0]]), [0]).tolist() == [3]
    assert target_ranks(np.array([[np.nan, 1.0, 2.0]]), [1]).tolist() == [2]
    # a model that scored nothing: every target last (before: rank = catalog index, target 0 a hit at 1)
    nan5 = np.full((3, 5), np.nan)
    assert target_ranks(nan5, [0, 2, 4]).tolist() == [5, 5, 5]
    assert target_ranks(nan5, [0, 2, 4], [[1], [], [0, 3]]).tolist() == [4, 5, 3]  # history taken out first
    # a NaN target among -inf scores loses those ties too; a finite target's ties stay by catalog index
    assert target_ranks(np.array([[-np.inf, np.nan, -np.inf]]), [1]).tolist() == [3]
    assert target_ranks(np.array([[1.0, 1.0, 1.0]]), [1]).tolist() == [2]


def test_popularity_target_rank_equals_the_full_listing():
    from recharness.baselines.popularity import PopularityRanker

    pop = PopularityRanker()
    pop._count(pl.DataFrame({"item_id": ["a", "b", "c", "d", "e"], "count": [9, 7, 5, 3, 1]}))
    for target, history in (("d", ["a", "c", "c"]), ("a", ["b"]), ("e", []), ("z", ["a"]), ("b", ["e", "z"])):
        listed = pop.top_k(10**9, exclude=set(history))
        slow = listed.index(target) + 1 if target in listed else None
        assert pop.target_rank(target, history) == slow


def test_strided_windows_predict_each_item_once_with_the_context_test_rows_have():
    """The build's windows chained back into each user's sequence, then cut every `stride` items: every item
    but the first predicted exactly once, from the items just before it — at least max_len - stride + 1 of
    them where there are that many, at most max_len; stride 1 is one window per prediction (RecBole's samples),
    and a sampled build's gap is not bridged."""
    L = 5
    seqs = [[(u, k) for k in range(n)] for u, n in enumerate((2, 3, 6, 7, 13, 26))]  # (user, position)
    users, rows = [], []
    for seq in seqs:
        for h, t in windows(seq, L):
            users.append(seq[0][0])
            rows.append(h + [t])
    assert sasrec_mod.chained(users, rows) == seqs
    for stride in (1, 2, 3, 5):
        out, first = sasrec_mod.strided_windows(seqs, L, stride)
        predicted = []
        for w, f in zip(out, first):
            assert len(w) <= L + 1 and 0 <= f < len(w) - 1 and len(w) - 1 - f <= stride
            assert all(b == (a[0], a[1] + 1) for a, b in zip(w, w[1:]))  # consecutive items of one sequence
            for p in range(f, len(w) - 1):
                user, i = w[p + 1]
                context = p + 1  # the items before it in the window: w[0..p]
                assert min(i, L - stride + 1) <= context <= min(i, L), (stride, w, p)
                predicted.append(w[p + 1])
        assert sorted(predicted) == sorted(x for seq in seqs for x in seq[1:]), stride  # each once
        if stride == 1:  # RecBole's samples: one window per prediction with its full (≤ L) history
            assert all(len(w) - 1 - f == 1 and len(w) - 1 == min(w[-1][1], L) for w, f in zip(out, first))
    # rows of one user that do not chain stay apart (a sampled build): no made-up transition
    assert sasrec_mod.chained(["u", "u"], [[1, 2, 3], [7, 8]]) == [[1, 2, 3], [7, 8]]
    assert sasrec_mod.chained(["u", "v"], [[1, 2, 3], [3, 8]]) == [[1, 2, 3], [3, 8]]


def test_sasrec_with_overlapping_windows_trains_the_same_predictions_and_learns(cyclic, fitted):
    data, samples = cyclic
    strided = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **SMALL, stride=2).fit(data)
    plain, task = fitted.log["epochs"][0], SeqrecTask()
    assert strided.log["epochs"][0]["samples"] == plain["samples"]  # each next item once per epoch, both ways
    assert strided.log["train_positions"] / strided.log["train_samples"] > \
        fitted.log["train_positions"] / fitted.log["train_samples"]
    assert task.score(samples, strided.predict(samples, task))["NDCG@10"] > 0.8
    assert strided.settings()["stride"] == 2
    with pytest.raises(ConfigError, match="stride must be between 1 and max_len"):
        sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **{**SMALL, "max_epochs": 1}, stride=0).fit(data)


def _recbole_forward(net, seqs):
    """RecBole 1.2.1's SASRec forward written out (explicit softmax attention, no SDPA): LayerNorm of item +
    position embeddings, then per layer LN(x + Dense(Attn(x))) and LN(x + FFN(x)), no final LayerNorm."""
    import math

    import torch
    import torch.nn.functional as F

    h = net.item(seqs) + net.position.weight[: seqs.shape[1]]
    h = F.layer_norm(h, (h.shape[-1],), net.input_norm.weight, net.input_norm.bias, eps=1e-12)
    t = seqs.shape[1]
    causal = torch.ones(t, t).tril().bool()
    for blk in net.blocks:
        b, _, d = h.shape
        dh = d // blk.heads
        q, k, v = (w.view(b, t, blk.heads, dh).transpose(1, 2) for w in blk.qkv(h).split(d, dim=-1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        scores = scores.masked_fill(~causal, -10000.0)  # RecBole's additive mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        h = F.layer_norm(h + blk.out(ctx), (d,), blk.norm1.weight, blk.norm1.bias, eps=1e-12)
        f = blk.ff2(F.gelu(blk.ff1(h)))
        h = F.layer_norm(h + f, (d,), blk.norm2.weight, blk.norm2.bias, eps=1e-12)
    return h


def test_post_block_network_is_recboles_sasrec_written_out():
    import torch

    torch.manual_seed(0)
    net = sasrec_mod.SASRecNet(30, 8, hidden=16, layers=2, heads=2, inner=32, dropout=0.2, block="post",
                               attn_dropout=0.3)
    with torch.no_grad():  # LayerNorm parameters away from their (1, 0) start, so a swapped or missing norm shows
        for m in net.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    seqs = torch.tensor([[3, 7, 1, 9, 0, 0, 0, 0], [5, 6, 7, 8, 9, 10, 11, 12]])
    net.eval()
    got, want = net(seqs), _recbole_forward(net, seqs)
    real = seqs > 0
    assert torch.allclose(got[real], want[real], atol=1e-5), (got - want).abs().max()
    assert isinstance(net.norm, torch.nn.Identity) and net.blocks[0].norm1.eps == 1e-12
    pre = sasrec_mod.SASRecNet(30, 8, hidden=16, layers=2, heads=2, inner=32, dropout=0.2)
    pre.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("input_norm")}
                        | {"norm.weight": torch.ones(16), "norm.bias": torch.zeros(16)})
    pre.eval()
    assert not torch.allclose(pre(seqs)[real], want[real], atol=1e-3)  # the pre-LN network is another model
    # attention dropout acts while training only (hidden dropout off here, so it is the only random part)
    net2 = sasrec_mod.SASRecNet(30, 8, hidden=16, layers=1, heads=2, inner=32, dropout=0.0, block="post",
                                attn_dropout=0.5)
    net2.eval()
    quiet = net2(seqs)
    net2.train()
    assert not torch.allclose(net2(seqs), quiet)
    net2.blocks[0].attn_dropout = 0.0
    assert torch.allclose(net2(seqs), quiet, atol=1e-6)


def test_attention_dropout_is_written_out_attention_with_dropped_weights():
    """Training with attention dropout takes `Block._dropped_attention` (not SDPA's unfused dropout path):
    with its dropout a no-op it is SDPA's causal attention, values and gradients; with p = 0.5 it drops
    about half of the weights, scales the kept ones by 2 and never attends to a later position. A dropout
    `Dropout` cannot take is a ConfigError when SASRec is made, not an error once it trains."""
    import torch
    import torch.nn.functional as F

    with pytest.raises(ConfigError, match="attn_dropout: dropout 1e-06 rounds to 0"):
        sasrec_mod.SASRec(attn_dropout=1e-6)
    with pytest.raises(ConfigError, match="sasrec: dropout: dropout must be in"):
        sasrec_mod.SASRec(dropout=1.5)

    torch.manual_seed(0)
    block = sasrec_mod.Block(16, 2, 32, dropout=0.0, post=True, attn_dropout=0.5)
    x = torch.randn(3, 7, 16)
    block.eval()
    x1 = x.clone().requires_grad_()
    want = block(x1)
    want.square().sum().backward()
    block.train()
    block.attn_drop = torch.nn.Identity()
    x2 = x.clone().requires_grad_()
    got = block(x2)
    got.square().sum().backward()
    assert torch.allclose(got, want, atol=1e-5) and torch.allclose(x2.grad, x1.grad, atol=1e-4)

    seen = []

    class Recorder(sasrec_mod.Dropout):
        def forward(self, w):
            out = super().forward(w)
            seen.append((w.detach(), out.detach()))
            return out

    block.attn_drop = Recorder(0.5)
    x = torch.randn(64, 20, 16)
    block(x)
    (w, out), = seen
    assert w.shape == (64 * 2, 20, 20)
    later = torch.ones(20, 20).triu(1).bool()
    assert (w[:, later] == 0).all() and torch.allclose(w.sum(-1), torch.ones(128, 20), atol=1e-5)
    allowed = w[:, ~later]
    kept = out[:, ~later] != 0
    assert 0.47 < 1 - kept.float().mean() < 0.53
    assert torch.allclose(out[:, ~later][kept], allowed[kept] * block.attn_drop.scale)
    # and the dropped weights are what averages the values
    q, k, v = torch.randn(3, 4, 2, 9, 8).unbind(0)
    got = block._dropped_attention(q, k, v)
    _, out = seen[-1]
    assert torch.allclose(got, (out @ v.reshape(8, 9, 8)).view(4, 2, 9, 8), atol=1e-6)
    assert not torch.allclose(got, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-3)


def test_a_step_in_parts_trains_as_one_step(cyclic, monkeypatch):
    """A step of many windows (RecBole's samples, stride 1) goes through the network `MICRO_POSITIONS` at a
    time, its parts' gradients weighed by their share of the step's predictions: without dropout, the same
    epoch's losses and weights as in one piece (up to float rounding)."""
    import torch

    data, _ = cyclic
    settings = {**SMALL, "max_epochs": 2, "dropout": 0.0, "stride": 1}
    calls = []
    real = sasrec_mod.linear_cross_entropy

    def counted(h, *args, **kwargs):
        calls.append(h.shape[0])
        return real(h, *args, **kwargs)

    monkeypatch.setattr(sasrec_mod, "linear_cross_entropy", counted)
    whole = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **settings).fit(data)
    steps = len(calls)
    monkeypatch.setattr(sasrec_mod, "MICRO_POSITIONS", 7 * 9)  # a few windows a part
    calls.clear()
    parts = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **settings).fit(data)
    assert len(calls) > 3 * steps and sum(calls) == whole.log["train_samples"]
    for a, b in zip(whole.log["epochs"], parts.log["epochs"]):
        assert a["samples"] == b["samples"] and abs(a["loss"] - b["loss"]) < 1e-4, (a, b)
    hidden = SMALL["hidden"]
    for (name, a), b in zip(whole.net.state_dict().items(), parts.net.state_dict().values()):
        if name.endswith("qkv.bias"):
            # the keys' bias has no gradient (a softmax ignores a shift), only rounding noise, which Adam's
            # normalised step makes lr-sized: it is compared apart, loosely
            assert torch.allclose(a[hidden:2 * hidden], b[hidden:2 * hidden], atol=1e-3)
            a, b = torch.cat([a[:hidden], a[2 * hidden:]]), torch.cat([b[:hidden], b[2 * hidden:]])
        assert torch.allclose(a, b, atol=1e-5), (name, (a - b).abs().max())


def test_sasrec_as_recboles_network_learns_saves_and_checks_its_settings(cyclic, tmp_path):
    data, samples = cyclic
    model = sasrec_mod.SASRec1L(seed=0, threads=1, progress=False, **SMALL, block="post", attn_dropout=0.1).fit(data)
    task = SeqrecTask()
    assert task.score(samples, model.predict(samples, task))["NDCG@10"] > 0.8
    assert model.settings()["block"] == "post" and "input_norm.weight" in model.net.state_dict()
    loaded = sasrec_mod.SASRec.load(model.save(tmp_path / "post"))
    assert loaded.settings() == model.settings() and loaded.predict(samples, task) == model.predict(samples, task)
    with pytest.raises(ConfigError, match="block must be one of pre, post"):
        sasrec_mod.SASRec(block="mid")
    with pytest.raises(ConfigError, match="attn_dropout must be in"):
        sasrec_mod.SASRec(attn_dropout=1.0)


def test_an_llm_list_and_a_ranker_with_the_same_top_ten_hits_score_alike():
    """Equal terms: the LLM is asked for 10 titles, so a ranker's target at place 11 is a miss too. Before, the
    ranker's MRR counted 1/11 and its Recall@20 a hit no LLM answer could reach, so the bold marks and verdicts
    on those columns favoured rankers by construction."""
    samples = [{"id": f"s{k}", "task": "seqrec", "user_id": f"u{k}", "history": ["h"], "target": "t", "n_recs": 10}
               for k in (1, 2)]
    llm = {"s1": {"parsed": {"strings": ["A", "B", "T"], "items": ["a", "b", "t"]}, "valid": True},
           "s2": {"parsed": {"strings": [f"X{i}" for i in range(10)], "items": [f"x{i}" for i in range(10)]},
                  "valid": True}}
    ranker = {"s1": {"parsed": {"rank": 3}, "valid": True}, "s2": {"parsed": {"rank": 11}, "valid": True}}
    a, b = SeqrecTask().score(samples, llm), SeqrecTask().score(samples, ranker)
    for k in ("NDCG@10", "HR@10", "MRR", "Recall@5", "Recall@10"):
        assert a[k] == pytest.approx(b[k]), k
    assert b["MRR"] == pytest.approx((1 / 3) / 2) and "Recall@20" not in a and "Recall@20" not in b
    assert b["MRR (full)"] == pytest.approx((1 / 3 + 1 / 11) / 2) and b["Recall@20 (full)"] == 1.0
    assert "MRR (full)" not in a
    # a beam decoder's rank stops at its beams (SID-SASRec, title-cbs): no whole-catalog columns for it
    beams = {k: {"parsed": {**v["parsed"], "beams": 20, "invalid": 0}, "valid": True} for k, v in ranker.items()}
    assert not {"MRR (full)", "Recall@20 (full)"} & set(SeqrecTask().score(samples, beams))
    units = SeqrecTask().units(samples, ranker)
    assert {k: u.point() for k, u in units.items() if k in b} == pytest.approx({k: b[k] for k in units if k in b})


def test_an_invented_repeated_or_history_title_holds_its_place_in_an_llm_list():
    """The target's rank is its place in the list as written: a title naming no item, an item named again and a
    history item each spend a place and move no later title up (before, each of them lifted the target)."""
    from recharness.tasks.recbench.seqrec import sample_rank

    s = {"target": "t", "history": ["h"], "n_recs": 10}
    rank = lambda slots: sample_rank(s, {"parsed": {"slots": slots, "items": [i for i in slots if i]}})  # noqa: E731
    assert rank(["x", "y", "t"]) == 3
    assert rank(["x", None, "t"]) == 3
    assert rank(["x", "x", "t"]) == 3
    assert rank(["h", "t"]) == 2
    assert rank([None, "t"]) == 2
    assert rank(["x"] * 10 + ["t"]) == math.inf  # past the titles asked for
    assert sample_rank({**s, "history": ["t"]}, {"parsed": {"slots": ["t"], "items": ["t"]}}) == math.inf
    # a history item whose title also names the target is a hit where it stands, as LLMRec sequential reads it
    # (the review of 2026-11-29: rank 2 here, 1 there, on a dataset with titles shared by two ids)
    twin = {"slots": ["h", "t"], "items": ["h", "t"], "twins": {"h": ["h", "t"], "t": ["h", "t"]}}
    assert sample_rank(s, {"parsed": twin}) == 1
    from recharness.tasks.llmrec.sequential import SequentialTask

    assert SequentialTask().target_rank({**s, "seen": ["h"]}, {"parsed": twin}) == 1
    # the top-10 list beyond accuracy reads is the first 10 places, then what names no new item dropped: asked
    # for 20, five invented titles leave five items (before: ten, reaching places 11-15)
    from recharness.tasks.recbench.seqrec import sample_list

    many = {"target": "i7", "history": [], "n_recs": 20}
    slots = [None] * 5 + [f"i{k}" for k in range(15)]
    assert sample_list(many, {"parsed": {"slots": slots, "items": slots[5:]}}) == [f"i{k}" for k in range(5)]
    assert sample_rank(many, {"parsed": {"slots": slots, "items": slots[5:]}}) == 13

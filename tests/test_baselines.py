"""Reference rankers: popularity counts only training rows; random is seeded; all fit and predict alike."""

import polars as pl

from recharness.baselines import (
    BASELINES,
    Baseline,
    PopularityRanker,
    RandomRanker,
    TrainData,
    fit,
    serving,
    training_rows,
)


def test_popularity_ignores_each_users_held_out_item():
    inter = pl.DataFrame({
        "user_id": ["u1", "u1", "u2", "u2", "u3", "u3"],
        "item_id": ["a", "b", "a", "c", "c", "b"],
    })
    # training rows (last per user dropped): u1:a, u2:a, u3:c → a=2, c=1; b only ever held out
    pop = PopularityRanker(inter)
    assert pop.counts == {"a": 2, "c": 1}
    assert pop.top_k(2) == ["a", "c"]
    assert pop.top_k(2, exclude={"a"}) == ["c"]
    assert pop.rank(["b", "c", "a"]) == ["a", "c", "b"]


def test_random_is_seeded_and_respects_exclusions():
    items = [str(i) for i in range(100)]
    a = RandomRanker(items, seed=1).top_k(10, exclude={"0", "1"})
    assert a == RandomRanker(items, seed=1).top_k(10, exclude={"0", "1"})
    assert a != RandomRanker(items, seed=2).top_k(10, exclude={"0", "1"})
    assert len(set(a)) == 10 and not {"0", "1"} & set(a)
    assert sorted(RandomRanker(items, seed=0).rank(["x", "y", "z"])) == ["x", "y", "z"]


# ---------------------------------------------------------------- the Baseline interface


def _train() -> TrainData:
    inter = pl.DataFrame({"user_id": ["u1", "u1", "u1", "u2", "u2"], "item_id": ["a", "b", "c", "a", "d"]})
    return TrainData(training_rows(inter), ["a", "b", "c", "d", "e"])


def test_training_rows_drop_each_users_last_interaction():
    assert _train().interactions.rows() == [("u1", "a"), ("u1", "b"), ("u2", "a")]


def test_every_registered_baseline_fits_and_predicts_records_its_tasks_score():
    seq = {"id": "s1", "task": "sequential", "n_recs": 2, "seen": ["a"]}
    direct = {"id": "d1", "task": "direct", "candidates": ["e", "b", "a"]}
    for name, cls in BASELINES.items():
        meta = BASELINES.meta(name)
        if not set(meta["tasks"]) & {"llmrec:sequential", "llmrec:direct"}:
            continue  # CTR-only baselines (item_mean): tests/test_recbench_ctr.py
        assert issubclass(cls, Baseline) and isinstance(meta["trainable"], bool) and meta["tasks"]
        model, seconds = fit(name, _train(), seed=0)
        assert seconds >= 0 and model.identity()["baseline"] == name
        out = model.predict([seq, direct])
        assert set(out) == {"s1", "d1"} and all(r["valid"] for r in out.values())
        items = out["s1"]["parsed"]["items"]  # popularity knows only items with training rows
        assert 1 <= len(items) <= 2 and set(items) <= {"b", "c", "d", "e"} and out["s1"]["parsed"]["strings"] == items
        assert sorted(out["d1"]["parsed"]["ranking"]) == ["a", "b", "e"]
        assert model.predict([seq, direct]) == out  # the same samples give the same records
    assert serving("llmrec", "sequential") == serving("llmrec", "direct") == ["popularity", "random"]
    assert serving("llmrec", "rating") == [] and serving("perrecbench", "point") == []


def test_fit_learns_from_the_training_part_only():
    pop = fit("popularity", _train())[0]
    assert pop.counts == {"a": 2, "b": 1}  # c and d were held out
    assert pop.predict([{"id": "s", "task": "sequential", "n_recs": 3, "seen": []}])["s"]["parsed"]["items"] == ["a", "b"]
    assert fit("random", _train(), seed=4)[0].identity() == {"baseline": "random", "settings": {"seed": 4}}

"""Reference rankers: popularity counts only training rows; random is seeded; all fit and predict alike."""

import polars as pl

from recharness.baselines import (
    BASELINES,
    Baseline,
    PopularityRanker,
    RandomRanker,
    TrainData,
    fit,
    training_rows,
)
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.references import serving
from recharness.tasks.registry import get_task


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


def test_random_answers_do_not_depend_on_the_batch():
    """`train` asks a task whole, `-m baseline:random` in batches of 64: the same answers either way, and
    samples 0 and 64 of a batched run do not repeat each other's draws."""
    model = RandomRanker([str(i) for i in range(500)], seed=3)
    samples = [{"id": f"s{i}", "task": "sequential", "n_recs": 10, "seen": []} for i in range(130)]
    whole = model.predict(samples, SequentialTask())
    batched = {k: v for b in range(0, 130, 64) for k, v in model.predict(samples[b:b + 64], SequentialTask()).items()}
    assert whole == batched
    lists = [tuple(whole[s["id"]]["parsed"]["items"]) for s in samples]
    assert lists[0] != lists[64] and len(set(lists)) == 130


# ---------------------------------------------------------------- the Baseline interface


def _train() -> TrainData:
    inter = pl.DataFrame({"user_id": ["u1", "u1", "u1", "u2", "u2"], "item_id": ["a", "b", "c", "a", "d"]})
    return TrainData(training_rows(inter), ["a", "b", "c", "d", "e"])


def test_training_rows_drop_each_users_last_interaction():
    assert _train().interactions.rows() == [("u1", "a"), ("u1", "b"), ("u2", "a")]


def test_every_baseline_of_the_ranking_tasks_fits_and_predicts_records_its_tasks_score():
    seq = {"id": "s1", "task": "sequential", "n_recs": 2, "seen": ["a"]}
    direct = {"id": "d1", "task": "direct", "candidates": ["e", "b", "a"]}
    assert SequentialTask.baselines == DirectTask.baselines == ("popularity", "random", "itemknn", "ease", "als",
                                                                "markov")
    for name in ("popularity", "random"):  # the four personalised ones: tests/test_strong_baselines.py
        cls, meta = BASELINES.get(name), BASELINES.meta(name)
        assert issubclass(cls, Baseline) and isinstance(meta["trainable"], bool) and "ranking" in meta["answers"]
        model, seconds = fit(name, _train(), seed=0)
        assert seconds >= 0 and model.identity()["baseline"] == name
        out = {**model.predict([seq], SequentialTask()), **model.predict([direct], DirectTask())}
        assert set(out) == {"s1", "d1"} and all(r["valid"] for r in out.values())
        items = out["s1"]["parsed"]["items"]  # popularity knows only items with training rows
        assert 1 <= len(items) <= 2 and set(items) <= {"b", "c", "d", "e"} and out["s1"]["parsed"]["strings"] == items
        assert sorted(out["d1"]["parsed"]["ranking"]) == ["a", "b", "e"]
        if name == "popularity":  # counts a 2, b 1: a is seen, b is all it knows; the candidates by count
            assert items == ["b"] and out["d1"]["parsed"]["ranking"] == ["a", "b", "e"]
        again = {**model.predict([seq], SequentialTask()), **model.predict([direct], DirectTask())}
        assert again == out  # the same samples give the same records
    assert serving(get_task("llmrec", "sequential"), on_the_fly=True) == ["popularity", "random"]
    assert serving(get_task("llmrec", "direct")) == list(DirectTask.baselines)
    assert serving(get_task("llmrec", "rating")) == [] and serving(get_task("perrecbench", "point")) == []


def test_fit_learns_from_the_training_part_only():
    pop = fit("popularity", _train())[0]
    assert pop.counts == {"a": 2, "b": 1}  # c and d were held out
    s = {"id": "s", "task": "sequential", "n_recs": 3, "seen": []}
    assert pop.predict([s], SequentialTask())["s"]["parsed"]["items"] == ["a", "b"]
    assert fit("random", _train(), seed=4)[0].identity() == {"baseline": "random", "settings": {"seed": 4}}

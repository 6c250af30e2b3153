"""Reference rankers: popularity counts only training rows; random is seeded."""

import polars as pl

from recharness.baselines import PopularityRanker, RandomRanker


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

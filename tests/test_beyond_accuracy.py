"""Beyond-accuracy metrics (coverage, Gini, ARP, novelty, head/tail accuracy): hand-worked, against an
independent formula, and under resampling equal to recomputing on the resampled lists."""

import numpy as np
import polars as pl
import pytest

from recharness.metrics.beyond_accuracy import Popularity, beyond_accuracy_units, gini

_ROWS = [("1", "a"), ("2", "a"), ("3", "a"), ("4", "a"), ("1", "b"), ("1", "b"), ("2", "b"), ("1", "c"), ("3", "e")]


def _pop(catalog="abcde", **kw) -> Popularity:
    # training interactions: a 4 (users 1,2,3,4), b 3 (user 1 twice, user 2: 2 users), c 1 (user 1), d 0,
    # e 1 (user 3). b's interactions and users differ, so a count read for the other shows
    return Popularity.of(pl.DataFrame(_ROWS, schema=["user_id", "item_id"], orient="row"), list(catalog), **kw)


def test_popularity_head_is_the_top_fifth_by_interactions():
    pop = _pop()
    assert pop.interactions == {"a": 4, "b": 3, "c": 1, "d": 0, "e": 1}
    assert pop.users_of == {"a": 4, "b": 2, "c": 1, "d": 0, "e": 1}
    assert pop.users == 4 and pop.head == frozenset({"a"})  # 20% of 5 items = 1


def test_popularity_head_ties_go_to_the_smaller_id_whatever_the_catalog_order():
    # 60% of 5 items = 3: a (4), b (3), then c and e tie at 1: c by id, though e comes first in the catalog
    assert _pop("abedc", head_share=0.6).head == frozenset("abc")


def test_gini_matches_the_mean_absolute_difference_formula():
    rng = np.random.default_rng(0)
    for x in (np.array([0, 0, 0, 5.0]), np.array([1, 1, 1, 1.0]), rng.integers(0, 9, size=30).astype(float)):
        mad = np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean())
        assert gini(x)[0] == pytest.approx(mad)
    assert gini(np.array([0, 0, 0, 5.0]))[0] == pytest.approx(0.75)  # one of four items takes all: (m-1)/m


def test_hand_worked_lists():
    pop = _pop()
    lists = [["a", "b"], ["a", "zz", "d"], []]  # zz is no catalog item; the third sample recommends nothing
    targets = ["b", "c", "a"]
    hits = [1.0, 0.0, 0.0]
    u = beyond_accuracy_units(["s1", "s2", "s3"], lists, targets, hits, pop, k=2, accuracy="HR@2")
    point = {k: v.point() for k, v in u.items()}
    # s2's top 2 are a, zz: zz spends slot 2 and is not counted; d (slot 3) is beyond k
    assert point["coverage@2"] == pytest.approx(2 / 5)  # a, b
    # exposures a 2, b 1, c 0, d 0, e 0 → sorted 0 0 0 1 2: Σ(2i-6)x = 0*-4 + 0*-2 + 0*0 + 1*2 + 2*4 = 10
    assert point["Gini@2"] == pytest.approx(10 / (5 * 3))
    # ARP counts interactions (b 3), novelty users (b 2 of 4): -log2((users_of + 1) / (users + 1))
    assert point["ARP@2"] == pytest.approx(((4 + 3) / 2 + 4 / 1) / 2)  # 3.75
    # a: -log2(5/5) = 0, b: -log2(3/5); s1's mean (0 + log2(5/3)) / 2, s2's 0 (a alone), s3 has no list
    assert point["novelty@2"] == pytest.approx(np.log2(5 / 3) / 4)  # 0.1842; interactions for users: log2(5/4)/4
    assert point["HR@2 head"] == 0.0  # only s3's target (a) is a head item
    assert point["HR@2 tail"] == pytest.approx(0.5)


def test_resampled_exposure_equals_recomputing_on_the_resampled_lists():
    pop = _pop()
    lists = [["a", "b"], ["c"], ["a", "e"], ["d", "b"]]
    u = beyond_accuracy_units(list("wxyz"), lists, ["a"] * 4, [1.0] * 4, pop, k=2)
    counts = np.array([[2, 0, 1, 1], [0, 0, 4, 0], [1, 1, 1, 1]], dtype=float)
    for stat in ("coverage@2", "Gini@2"):
        reps = u[stat].replicates(counts)
        for row, rep in zip(counts, reps):
            drawn = [lst for lst, c in zip(lists, row) for _ in range(int(c))]
            again = beyond_accuracy_units(list(range(len(drawn))), drawn, ["a"] * len(drawn), [1.0] * len(drawn),
                                          pop, k=2)[stat].point()
            assert rep == pytest.approx(again)


def test_swapping_every_unit_swaps_the_methods():
    pop = _pop()
    a = beyond_accuracy_units(list("xy"), [["a"], ["a"]], ["a", "a"], [1, 1], pop, k=1)["coverage@1"]
    b = beyond_accuracy_units(list("xy"), [["b"], ["c"]], ["a", "a"], [1, 1], pop, k=1)["coverage@1"]
    diff = a.swapped(b, np.array([[0, 0], [1, 1], [1, 0]]))
    assert diff.tolist() == pytest.approx([1 / 5 - 2 / 5, 2 / 5 - 1 / 5, 2 / 5 - 2 / 5])

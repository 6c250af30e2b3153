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


def test_coverage_gini_and_arp_equal_recboles():
    """The reference library: RecBole 1.2.1's `ItemCoverage.get_coverage`, `GiniIndex.get_gini` and
    `AveragePopularity` (`get_pop`, then `metric_info`'s mean at k) on these lists, the catalog a..h as ids 1..8
    and these interaction counts, run in RecBole's own environment (.venv-recbole, benchmarks/bench_recbole.py);
    its values pasted here, as RecBole does not install beside this project's numpy. Full lists of distinct
    catalog items, where RecBole's rows × k and this module's counted exposures are the same denominator."""
    counts = {"a": 4, "b": 3, "c": 1, "d": 0, "e": 1, "f": 0, "g": 2, "h": 5}
    rows = [(f"u{j}-{i}", i) for i, n in counts.items() for j in range(n)]
    pop = Popularity.of(pl.DataFrame(rows, schema=["user_id", "item_id"], orient="row"), list("abcdefgh"))
    lists = [list("abc"), list("adb"), list("aeb"), list("bcf"), list("acd"), list("gab")]
    recbole = {2: (0.75, 0.5, 2.5833333333333335), 3: (0.875, 0.4305555555555556, 2.2777777777777777)}
    for k, (coverage, gini_index, arp) in recbole.items():
        point = {name: u.point() for name, u in beyond_accuracy_units(
            [f"s{i}" for i in range(6)], lists, None, None, pop, k=k).items()}
        assert point[f"coverage@{k}"] == pytest.approx(coverage, abs=1e-12)
        assert point[f"Gini@{k}"] == pytest.approx(gini_index, abs=1e-12)
        assert point[f"ARP@{k}"] == pytest.approx(arp, abs=1e-12)


def test_resampled_exposure_equals_recomputing_on_the_resampled_lists():
    pop = _pop()
    lists = [["a", "b"], ["c"], ["a", "e"], ["d", "b"]]
    u = beyond_accuracy_units(list("wxyz"), lists, ["a"] * 4, [1.0] * 4, pop, k=2)
    counts = np.array([[2, 0, 1, 1], [0, 0, 4, 0], [1, 1, 1, 1]], dtype=float)
    # by hand: row 1 draws w twice, y and z: exposures a 3, b 3, d 1, e 1, c 0 (4 of 5 items; Gini 16 / (5 * 8));
    # row 2 draws y four times: a 4, e 4 (2 of 5; Gini 24 / (5 * 8)); row 3 each once: a 2, b 2, c, d, e 1 (Gini 6 / 35)
    want = {"coverage@2": [0.8, 0.4, 1.0], "Gini@2": [0.4, 0.6, 6 / 35]}
    for stat in ("coverage@2", "Gini@2"):
        reps = u[stat].replicates(counts)
        assert list(reps) == pytest.approx(want[stat])
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


def test_with_candidate_orders_coverage_and_gini_are_each_orders_averaged():
    """`--orders K`: a user's K lists rank the same candidates; a method answering them otherwise under each order
    got the union's coverage (here 4 of 5 items against 2 per order). Hand: order 0 lists [a, b] twice, order 1
    [c, d] twice: per order coverage 2/5 and Gini 0.6 (exposure 2, 2, 0, 0, 0); the union's exposure
    (2, 2, 2, 2, 0): coverage 4/5, Gini 0.2."""
    pop = _pop()
    lists = [["a", "b"], ["a", "b"], ["c", "d"], ["c", "d"]]
    users = np.array([0, 1, 0, 1])
    u = beyond_accuracy_units(list("wxyz"), lists, ["a"] * 4, [1.0] * 4, pop, k=2, clusters=users,
                              orders=[0, 0, 1, 1])
    one = gini(np.array([2, 2, 0, 0, 0.0]))[0]  # sorted (0, 0, 0, 2, 2), coefficients (-4, -2, 0, 2, 4): 12/20
    assert one == pytest.approx(0.6)
    assert u["coverage@2"].point() == pytest.approx(0.4) and u["Gini@2"].point() == pytest.approx(0.6)
    union = beyond_accuracy_units(list("wxyz"), lists, ["a"] * 4, [1.0] * 4, pop, k=2, clusters=users)
    assert union["coverage@2"].point() == pytest.approx(0.8) and union["Gini@2"].point() == pytest.approx(0.2)
    assert "averaged over the orders" in u["coverage@2"].how and "orders" not in union["coverage@2"].how
    # resampled: user 0 drawn twice (its two orders together): order 0 [a, b] x2, order 1 [c, d] x2, as at the point
    assert list(u["coverage@2"].replicates(np.array([[2, 0, 2, 0]]))) == pytest.approx([0.4])
    # a method with one list for every order (the Borda row, a reference): the same with and without orders
    same = [["a", "b"]] * 4
    assert beyond_accuracy_units(list("wxyz"), same, ["a"] * 4, [1.0] * 4, pop, k=2, orders=[0, 0, 1, 1])[
        "coverage@2"].point() == pytest.approx(0.4)
    # the paired test's swap: every unit swapped gives the other side's per-order value
    v = beyond_accuracy_units(list("wxyz"), same, ["a"] * 4, [1.0] * 4, pop, k=2, clusters=users,
                              orders=[0, 0, 1, 1])["coverage@2"]
    assert u["coverage@2"].swapped(v, np.array([[0, 0, 0, 0], [1, 1, 1, 1]])).tolist() == pytest.approx([0.0, 0.0])

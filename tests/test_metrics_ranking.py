import math
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

try:
    import recharness  # noqa: F401
except ImportError:  # package not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from recharness.metrics import rank_of_target, ranking_metrics, target_metrics

TOL = 1e-12


# ---------------------------------------------------------------- hand-worked


def test_leave_one_out_hand_worked():
    ranked = [["a", "b", "c", "d", "e"], ["x", "y"], ["p", "q", "r"]]
    targets = ["c", "x", "z"]  # ranks 3, 1, absent
    assert rank_of_target(ranked, targets).tolist() == [3, 1, 0]
    m = ranking_metrics(ranked, targets, ks=(1, 5, None))
    # HR@1: only list 2 has the target first -> 1/3; HR@5: lists 1 and 2 -> 2/3
    assert m["hr@1"] == pytest.approx(1 / 3, abs=TOL)
    assert m["hr@5"] == pytest.approx(2 / 3, abs=TOL)
    # NDCG@5 = (1/log2(3+1) + 1/log2(1+1) + 0) / 3 = (0.5 + 1) / 3 = 0.5
    assert m["ndcg@5"] == pytest.approx(0.5, abs=TOL)
    # NDCG@1 = (0 + 1 + 0) / 3
    assert m["ndcg@1"] == pytest.approx(1 / 3, abs=TOL)
    # MRR = (1/3 + 1 + 0) / 3 = 4/9 ; MRR@1 = (0 + 1 + 0) / 3
    assert m["mrr"] == pytest.approx(4 / 9, abs=TOL)
    assert m["mrr@5"] == pytest.approx(4 / 9, abs=TOL)
    assert m["mrr@1"] == pytest.approx(1 / 3, abs=TOL)
    # precision@5 = (1/5 + 1/5 + 0) / 3 = 2/15 ; recall@5 = HR@5 for one target
    assert m["precision@5"] == pytest.approx(2 / 15, abs=TOL)
    assert m["recall@5"] == pytest.approx(2 / 3, abs=TOL)
    # open length: precision divides by each list's length: (1/5 + 1/2 + 0) / 3 = 0.7/3
    assert m["precision"] == pytest.approx(0.7 / 3, abs=TOL)
    assert m["hr"] == pytest.approx(2 / 3, abs=TOL)
    assert m["ndcg"] == pytest.approx(0.5, abs=TOL)


def test_multi_relevant_hand_worked():
    ranked = [["a", "b", "c", "d", "e"]]
    relevant = [{"b", "e", "z"}]  # hits at ranks 2 and 5, |relevant| = 3
    m = ranking_metrics(ranked, relevant, ks=(1, 3, 5, None))
    assert m["precision@1"] == 0.0 and m["hr@1"] == 0.0
    assert m["precision@3"] == pytest.approx(1 / 3, abs=TOL)
    assert m["precision@5"] == pytest.approx(2 / 5, abs=TOL)
    assert m["recall@3"] == pytest.approx(1 / 3, abs=TOL)
    assert m["recall@5"] == pytest.approx(2 / 3, abs=TOL)
    assert m["hr@3"] == 1.0
    # DCG@5 = 1/log2(3) + 1/log2(6) = 0.63093 + 0.38685 = 1.0177825608
    # IDCG@5 over min(5, 3) = 3 slots = 1 + 1/log2(3) + 1/log2(4) = 2.1309297536
    # NDCG@5 = 1.0177825608 / 2.1309297536 = 0.4776237035
    assert m["ndcg@5"] == pytest.approx(0.4776237035032179, abs=TOL)
    # NDCG@3 = (1/log2(3)) / 2.1309297536 = 0.2960819110
    assert m["ndcg@3"] == pytest.approx(0.2960819109658652, abs=TOL)
    # NDCG@1: IDCG@1 = 1, DCG@1 = 0
    assert m["ndcg@1"] == 0.0
    assert m["mrr"] == pytest.approx(0.5, abs=TOL)
    assert m["mrr@1"] == 0.0
    # whole list: same as @5 here (IDCG over all 3 relevant), precision over length 5
    assert m["ndcg"] == pytest.approx(0.4776237035032179, abs=TOL)
    assert m["precision"] == pytest.approx(2 / 5, abs=TOL)


def test_duplicates_count_first_occurrence_only():
    # "a" repeats at rank 3: a miss that still occupies its slot, so "c" stays at rank 4.
    m = ranking_metrics([["a", "b", "a", "c"]], [{"a", "c"}], ks=(4,))
    assert m["precision@4"] == pytest.approx(2 / 4, abs=TOL)
    assert m["recall@4"] == pytest.approx(1.0, abs=TOL)
    # DCG = 1 + 1/log2(5) = 1.4306765581 ; IDCG@4 over 2 = 1 + 1/log2(3) = 1.6309297536
    assert m["ndcg@4"] == pytest.approx(0.8772153153380493, abs=TOL)
    # leave-one-out: a duplicated target keeps its first rank
    assert rank_of_target([["b", "a", "a"]], ["a"]).tolist() == [2]
    m = ranking_metrics([["b", "a", "a"]], ["a"], ks=(3,))
    assert m["ndcg@3"] == pytest.approx(1 / math.log2(3), abs=TOL)
    assert m["precision@3"] == pytest.approx(1 / 3, abs=TOL)


def test_empty_lists_and_k_larger_than_list():
    for rel in (["a"], [{"a", "b"}]):
        m = ranking_metrics([[]], rel, ks=(5, None))
        assert all(v == 0.0 for v in m.values()), m  # empty list: precision 0, not NaN
    # list of 2, k = 10: missing slots are misses; precision still divides by k
    m = ranking_metrics([["a", "b"]], ["b"], ks=(10,))
    assert m["hr@10"] == 1.0
    assert m["precision@10"] == pytest.approx(0.1, abs=TOL)
    assert m["ndcg@10"] == pytest.approx(1 / math.log2(3), abs=TOL)
    m = ranking_metrics([["a", "b"]], [{"b", "q"}], ks=(10,))
    # DCG = 1/log2(3); IDCG over min(10, 2) = 1 + 1/log2(3)
    assert m["ndcg@10"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)), abs=TOL)
    assert m["recall@10"] == pytest.approx(0.5, abs=TOL)


def test_open_length_ideal_does_not_shrink_with_list_length():
    # 1-item list holding one of 3 relevant items: NDCG = 1 / (1 + 1/log2 3 + 1/log2 4), not 1.
    m = ranking_metrics([["a"]], [{"a", "b", "c"}], ks=(None,))
    assert m["ndcg"] == pytest.approx(1 / 2.1309297535714578, abs=TOL)
    assert m["precision"] == 1.0
    assert m["recall"] == pytest.approx(1 / 3, abs=TOL)


def test_errors():
    with pytest.raises(ValueError, match="sample 1"):
        ranking_metrics([["a"], ["b"]], [{"a"}, set()])
    with pytest.raises(ValueError):
        ranking_metrics([["a"]], [{"a"}], ks=(0,))
    with pytest.raises(ValueError):
        ranking_metrics([["a"]], [{"a"}, {"b"}])
    with pytest.raises(ValueError):
        rank_of_target([["a"]], ["a", "b"])


def test_per_sample_arrays():
    ranked = [["a", "b", "c"], ["c", "b", "a"]]
    per = ranking_metrics(ranked, ["a", "a"], ks=(1, 3), per_sample=True)
    np.testing.assert_allclose(per["hr@1"], [1.0, 0.0])
    np.testing.assert_allclose(per["ndcg@3"], [1.0, 0.5])  # rank 3 -> 1/log2(4)
    np.testing.assert_allclose(per["mrr"], [1.0, 1 / 3])
    per2 = ranking_metrics(ranked, [{"a"}, {"a"}], ks=(1, 3), per_sample=True)
    assert per.keys() == per2.keys()
    for k in per:
        np.testing.assert_allclose(per[k], per2[k], rtol=0, atol=TOL)


def test_mixed_bare_items_and_sets():
    # a bare string is one item, never split into characters
    m = ranking_metrics([["ab", "a"], ["x", "y"]], ["a", {"y", "x"}], ks=(1,))
    assert m["hr@1"] == pytest.approx(0.5, abs=TOL)


def test_numpy_2d_input_matches_lists():
    rng = np.random.default_rng(7)
    arr = rng.integers(0, 30, size=(200, 10))
    targets = rng.integers(0, 30, size=200)
    a = ranking_metrics(arr, targets, ks=(1, 5, 10, None), per_sample=True)
    b = ranking_metrics(arr.tolist(), targets.tolist(), ks=(1, 5, 10, None), per_sample=True)
    c = ranking_metrics(arr, [{int(t)} for t in targets], ks=(1, 5, 10, None), per_sample=True)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=0, atol=TOL)
        np.testing.assert_allclose(a[k], c[k], rtol=0, atol=TOL)


# ----------------------------------------------------------- reference checks


def _random_lists(seed, n=120, n_items=50, length=10):
    rng = np.random.default_rng(seed)
    ranked = [rng.permutation(n_items)[:length].tolist() for _ in range(n)]
    relevant = []
    for lst in ranked:
        size = int(rng.integers(1, 7))
        rel = set(rng.choice(n_items, size=size, replace=False).tolist())
        if rng.random() < 0.5:  # make sure plenty of rows have hits
            rel.add(lst[int(rng.integers(0, length))])
        relevant.append(rel)
    return ranked, relevant


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ndcg_matches_sklearn(seed):
    n_items = 50
    ranked, relevant = _random_lists(seed, n_items=n_items)
    rng = np.random.default_rng(100 + seed)
    y_true = np.zeros((len(ranked), n_items))
    y_score = np.zeros((len(ranked), n_items))
    for i, (lst, rel) in enumerate(zip(ranked, relevant)):
        y_true[i, list(rel)] = 1
        # unranked items get distinct scores below every ranked one (no ties)
        y_score[i] = -1 - rng.permutation(n_items)
        y_score[i, lst] = np.arange(len(lst), 0, -1) + 100
    per = ranking_metrics(ranked, relevant, ks=(1, 3, 5, 10), per_sample=True)
    for k in (1, 3, 5, 10):
        ref = np.array([ndcg_score(y_true[i : i + 1], y_score[i : i + 1], k=k) for i in range(len(ranked))])
        np.testing.assert_allclose(per[f"ndcg@{k}"], ref, rtol=0, atol=TOL)
        assert ranking_metrics(ranked, relevant, ks=(k,))[f"ndcg@{k}"] == pytest.approx(
            ndcg_score(y_true, y_score, k=k), abs=TOL
        )


def _loop_reference(ranked, relevant, k):
    """Textbook per-list definitions, one list at a time."""
    out = {m: [] for m in ("hr", "precision", "recall", "ndcg", "mrr")}
    for lst, rel in zip(ranked, relevant):
        rel = {rel} if not isinstance(rel, set) else rel
        top = lst if k is None else lst[:k]
        seen, gains = set(), []
        for x in top:
            gains.append(1.0 if (x in rel and x not in seen) else 0.0)
            seen.add(x)
        hits = sum(gains)
        dcg = sum(g / math.log2(r + 2) for r, g in enumerate(gains))
        n_ideal = len(rel) if k is None else min(k, len(rel))
        idcg = sum(1 / math.log2(r + 2) for r in range(n_ideal))
        first = next((r + 1 for r, g in enumerate(gains) if g), None)
        denom = len(lst) if k is None else k
        out["hr"].append(float(hits > 0))
        out["precision"].append(hits / denom if denom else 0.0)
        out["recall"].append(hits / len(rel))
        out["ndcg"].append(dcg / idcg)
        out["mrr"].append(1 / first if first else 0.0)
    return {m: np.array(v) for m, v in out.items()}


@pytest.mark.parametrize("seed", [3, 4])
def test_against_loop_with_duplicates_and_ragged_lengths(seed):
    rng = np.random.default_rng(seed)
    ranked = [rng.integers(0, 15, size=int(rng.integers(0, 14))).tolist() for _ in range(400)]  # dups likely
    relevant = [set(rng.integers(0, 15, size=int(rng.integers(1, 5))).tolist()) for _ in range(400)]
    targets = [int(t) for t in rng.integers(0, 15, size=400)]
    ks = (1, 3, 10, 20, None)
    for rel in (relevant, targets):
        per = ranking_metrics(ranked, rel, ks=ks, per_sample=True)
        for k in ks:
            ref = _loop_reference(ranked, rel, k)
            suffix = "" if k is None else f"@{k}"
            for name, values in ref.items():
                np.testing.assert_allclose(per[name + suffix], values, rtol=0, atol=TOL, err_msg=f"{name}{suffix}")
        np.testing.assert_allclose(per["mrr"], _loop_reference(ranked, rel, None)["mrr"], rtol=0, atol=TOL)


def test_fast_path_equals_general_path():
    rng = np.random.default_rng(11)
    ranked = [rng.integers(0, 40, size=10).tolist() for _ in range(1000)]
    targets = [int(t) for t in rng.integers(0, 40, size=1000)]
    fast = target_metrics(ranked, targets, ks=(1, 5, 10, None), per_sample=True)
    general = ranking_metrics(ranked, [{t} for t in targets], ks=(1, 5, 10, None), per_sample=True)
    assert fast.keys() == general.keys()
    for k in fast:
        np.testing.assert_allclose(fast[k], general[k], rtol=0, atol=TOL, err_msg=k)

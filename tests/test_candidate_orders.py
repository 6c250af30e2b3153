"""Order sensitivity on LLMRec direct (`--option orders=K`): balanced target positions, a hand-worked
Borda aggregation, and the aggregated row scored as its own row through the CLI."""

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.tasks.orders import borda, candidate_orders


def test_orders_keep_the_candidates_and_balance_the_targets_position():
    cand = [f"i{k}" for k in range(20)]
    rng = np.random.default_rng(0)
    orders = candidate_orders(cand, "i7", 4, rng)
    assert orders[0] == cand  # the build's own seeded order is order 0
    assert [o.index("i7") for o in orders] == [7, 12, 17, 2]  # (7 + j*20/4) mod 20
    assert all(sorted(o) == sorted(cand) for o in orders)
    assert candidate_orders(cand, "i7", 4, np.random.default_rng(0)) == orders  # seeded


@pytest.mark.parametrize("negatives", ["uniform", "retriever:popularity"])
def test_order_zero_is_the_single_order_build(ml1m, negatives):
    """Asking for more orders changes no user's candidates: order 0 of an `orders=3` build is the `orders=1`
    build, sample for sample (the later orders come from each user's own seeded stream)."""
    from recharness.core.types import BuildConfig
    from recharness.tasks.llmrec.direct import DirectTask

    def build(orders):
        return list(DirectTask().build(ml1m, BuildConfig(seed=0, limit=8, options={"orders": orders,
                                                                                  "negatives": negatives})))

    single, three = build(1), build(3)
    assert len(three) == 3 * len(single) == 24
    zero = [s for s in three if s["order"] == 0]
    keys = ("user_id", "target", "candidates", "candidate_titles", "messages")
    assert [{k: s[k] for k in keys} for s in zero] == [{k: s[k] for k in keys} for s in single]
    assert build(3) == three  # seeded


def test_borda_hand_worked():
    cands = ["a", "b", "c", "d"]
    # a: 4+3+4 = 11, b: 3+4+1.5 = 8.5 (third ranking names only a, c: b, d share (2+1)/2), c: 2+2+3 = 7, d: 1+1+1.5
    # LLMRank's rule: a left-out candidate gets -10000 in that ranking, so b and d (each left out once) fall
    # below c (named every time, 2 + 2 + 3 = 7) whatever their places: a 11, c 7, then b 7, d 2
    assert borda([["a", "b", "c", "d"], ["b", "a", "c", "d"], ["a", "c"]], cands) == ["a", "c", "b", "d"]
    assert borda([["a"], ["b", "c", "a"]], ["a", "b", "c"]) == ["a", "b", "c"]  # (shared points: b 4.5 first)
    assert borda([["d", "c"], ["c", "d"]], cands) == ["c", "d", "a", "b"]  # c, d tie 7; order of candidates breaks it
    assert borda([], cands) == []
    # partial answers: a candidate no ranking names is not ranked (before: t took the leftover points and the
    # candidate order's tie-break, 2nd in [a, t, b], a hit at 2 that no answer made)
    assert borda([["a"], ["a"]], ["t", "a", "b"], unnamed=False) == ["a"]
    assert borda([["a"], ["b"]], ["t", "a", "b"], unnamed=False) == ["a", "b"]
    # a place as written: a repeat or an entry naming no candidate holds its place, as the per-order metrics read
    # it. [b, b, None, a] puts a at place 3: 2 - 3 = -1 points, b 2; [a, b]: a 2, b 1. So b 3, a 1 (before: the
    # first read as [b, a], a tie 3 : 3 that the candidate order gave to a)
    assert borda([["b", "b", None, "a"], ["a", "b"]], ["a", "b"]) == ["b", "a"]


def test_the_borda_answer_says_how_many_orders_it_rests_on():
    """An order whose answer is invalid adds nothing (as LLMRank's bootstrapping scores it: every candidate
    alike); the aggregate of the valid ones says so; no valid order: an invalid answer."""
    from recharness.tasks.orders import borda_method

    cands = ["a", "b", "c"]
    samples = [{"id": f"u@o{k}", "order_of": "u", "order": k} for k in range(3)]
    recs = {"u@o0": {"r": ["b", "a", "c"]}, "u@o1": {"r": None}, "u@o2": {"r": ["c", "b", "a"]}}
    kw = {"ranking": lambda s, rec: rec["r"], "candidates": lambda ss: cands,
          "answer": lambda s, agg: {"ranking": agg}, "error": "no valid order"}
    (name, out), = borda_method(samples, recs, **kw).items()
    assert name == "(Borda over 3 orders)"
    assert {a["parsed"]["how"] for a in out.values()} == {"borda over 2 of 3 orders"}
    # b 3 + 2 = 5, c 1 + 3 = 4, a 2 + 1 = 3: neither valid answer's order (not the first valid answer taken)
    assert out["u@o0"]["parsed"]["ranking"] == ["b", "c", "a"]
    none = {k: {"r": None} for k in recs}
    assert all(not a["valid"] and a["error"] == "no valid order" for a in borda_method(samples, none, **kw)[name].values())


@pytest.fixture(scope="module")
def ordered_run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    r = CliRunner()
    res = r.invoke(app, ["build", "llmrec", "-t", "direct", "-o", str(out), "-n", "12", "--option", "orders=3"])
    assert res.exit_code == 0, res.output
    res = r.invoke(app, ["run", "llmrec", "-o", str(out), "-m", "fake"])
    assert res.exit_code == 0, res.output
    res = r.invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "100"])
    assert res.exit_code == 0, res.output
    return out


def test_each_user_is_asked_under_every_order(ordered_run):
    samples = [json.loads(x) for x in (ordered_run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 36
    by_user = {}
    for s in samples:
        by_user.setdefault(s["order_of"], []).append(s)
    assert all(len(v) == 3 and len({tuple(sorted(x["candidates"])) for x in v}) == 1 for v in by_user.values())
    assert all(s["candidates"][s["target_position"] - 1] == s["target"] for s in samples)


def test_the_aggregated_row_is_the_borda_of_the_methods_answers(ordered_run, ml1m):
    rows = {r["method"]: r for r in json.loads((ordered_run / "scores.json").read_text())}
    agg = rows["fake (Borda over 3 orders)"]
    samples = [json.loads(x) for x in (ordered_run / "samples.jsonl").read_text().splitlines()]
    preds = {p["id"]: p for p in map(json.loads, (ordered_run / "predictions" / "fake.jsonl").read_text().splitlines())}
    hits = []
    for key in dict.fromkeys(s["order_of"] for s in samples):
        ss = sorted((s for s in samples if s["order_of"] == key), key=lambda s: s["order"])
        rankings = [preds[s["id"]]["parsed"]["ranking"] for s in ss if preds[s["id"]].get("valid", True)
                    and preds[s["id"]].get("parsed")]
        ranking = borda(rankings, ss[0]["candidates"], unnamed=False)  # a candidate no answer named: unranked
        hits += [float(ss[0]["target"] in ranking[:10])] * 3
    assert agg["metrics"]["HR@10"] == pytest.approx(np.mean(hits))
    m = rows["fake"]["metrics"]
    # the order spread: per user the population std of its three orders' NDCG@10, then the mean over users,
    # worked by hand from the answers (a target at place r of the answer gains 1/log2(r + 1) within the top 10;
    # an invalid answer 0); and HR@1 by the target's shown position (position bias), one value per position
    ndcg, top1, orders = {}, {}, set()
    for s in samples:
        p = preds[s["id"]]
        ranking = p["parsed"]["ranking"] if p.get("valid", True) and p.get("parsed") else []
        r = ranking.index(s["target"]) + 1 if s["target"] in ranking[:10] else None
        ndcg.setdefault(s["order_of"], []).append(0.0 if r is None else 1 / math.log2(r + 1))
        top1.setdefault(s["target_position"], []).append(float(r == 1))
        orders.add(s["order"])
    assert m["orders"] == 3 and sorted(orders) == [0, 1, 2] and {len(v) for v in ndcg.values()} == {3}
    assert m["NDCG@10 order spread"] == pytest.approx(float(np.mean([np.std(v) for v in ndcg.values()])), abs=1e-12)
    assert m["NDCG@10 order spread"] > 0  # the orders change some user's answer: the spread is not 0 by default
    assert "order units left out" not in m  # every user answered all three orders
    # the Borda row has one answer per user: no spread (0 by construction) and no position bias of its own
    assert not {k for k in agg["metrics"] if k.endswith("order spread") or k.startswith("target at ")}
    assert {k for k in m if k.startswith("target at ") and k.endswith(": HR@1")} == {f"target at {q}: HR@1" for q in top1}
    assert all(m[f"target at {q}: HR@1"] == pytest.approx(np.mean(v)) for q, v in top1.items())
    assert {k: m[k] for k in m if k.endswith(": samples")} == {f"target at {q}: samples": len(v) for q, v in top1.items()}
    # beyond accuracy, from the lists themselves, with intervals over users
    # coverage: each order's lists' distinct items over the catalog, averaged over the three orders (the union
    # over a user's three lists rewarded a method that answers the same candidates otherwise under each order)
    order_of = {s["id"]: s["order"] for s in samples}
    per_order = [[p["parsed"]["ranking"][:10] for i, p in preds.items() if order_of[i] == o and p.get("valid", True)
                  and p.get("parsed")] for o in (0, 1, 2)]
    covered = [len({i for t in lists for i in t}) / ml1m.items.height for lists in per_order]
    assert m["coverage@10"] == pytest.approx(np.mean(covered))
    union = len({i for lists in per_order for t in lists for i in t}) / ml1m.items.height
    assert union > m["coverage@10"]  # the fake answers each order otherwise: the union was larger
    assert m["ARP@10"] > 0 and 0 < m["Gini@10"] <= 1 and m["novelty@10"] > 0
    assert "coverage@10" in rows["popularity"]["metrics"] and "lo" in rows["fake"]["ci"]["ARP@10"]
    # a user's three samples are one unit: intervals resample 12 users, not 36 samples
    assert rows["fake"]["ci"]["HR@10"]["lo"] <= m["HR@10"] <= rows["fake"]["ci"]["HR@10"]["hi"]


def test_popularity_negatives_follow_training_popularity(ml1m, tmp_path):
    """negatives=popularity draws the other candidates in proportion to training interactions: their mean
    popularity is far above uniform draws', never a seen item, and the build records how they were drawn."""
    from recharness.data.leave_last_out import item_popularity

    counts = dict(item_popularity(ml1m.interactions).iter_rows())
    r = CliRunner()
    means = {}
    for how in ("uniform", "popularity"):
        out = tmp_path / how
        res = r.invoke(app, ["build", "llmrec", "-t", "direct", "-o", str(out), "-n", "40", "--option",
                             f"negatives={how}"])
        assert res.exit_code == 0, res.output
        samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        negs = [c for s in samples for c in s["candidates"] if c != s["target"]]
        assert all(len(set(s["candidates"])) == 20 and s["target"] in s["candidates"] for s in samples)
        means[how] = np.mean([counts.get(c, 0) for c in negs])
        if how == "popularity":
            assert {s["retriever"] for s in samples} == {"popularity-sampled"}
            assert all(counts.get(c, 0) > 0 for c in negs)
    # in expectation sum(c^2)/sum(c) over the mean count: 812 / 256 = 3.2 on ML-1M (less a user's seen items, mostly
    # popular ones); 760 draws a side put 2 several standard errors below that and far above uniform's 1
    assert means["popularity"] > 2 * means["uniform"]


def test_orders_flag_beside_a_bad_option_value_is_an_error_not_a_traceback(ml1m, tmp_path):
    from recharness.core.errors import ConfigError

    r = CliRunner()
    for value in ("abc", "3.0", "2"):
        res = r.invoke(app, ["build", "llmrec", "-t", "direct", "-o", str(tmp_path / value), "-n", "2", "--orders", "3",
                             "--option", f"orders={value}"])
        assert isinstance(res.exception, ConfigError) and "disagree" in str(res.exception), res.output


def test_compare_takes_a_derived_row_by_its_name(ordered_run):
    """`compare --models "fake (Borda over 3 orders)" popularity`: the row derived from fake's answers is compared
    (before, its file was filtered out by the name and the row never existed: "no task has predictions of both")."""
    r = CliRunner()
    res = r.invoke(app, ["compare", str(ordered_run), "fake (Borda over 3 orders)", "popularity", "--resamples", "100"])
    assert res.exit_code == 0, res.output
    assert "Borda over 3 orders" in res.output and "popularity" in res.output


def test_more_orders_than_candidates_are_refused(ml1m, tmp_path):
    """orders=5 over 2 candidates built the same prompt three times as three samples, the target at position 1
    in three orders and 2 in two (the review of 2026-11-29)."""
    from recharness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="a sample shows 2 candidates, so at most 2 orders"):
        candidate_orders(["a", "b"], "a", 3, np.random.default_rng(0))
    two = candidate_orders(["a", "b"], "a", 2, np.random.default_rng(0))
    assert two == [["a", "b"], ["b", "a"]]
    res = CliRunner().invoke(app, ["build", "llmrec", "-t", "direct", "-n", "2", "--option", "n_candidates=2",
                                   "--orders", "5", "-o", str(tmp_path / "r")])
    assert isinstance(res.exception, ConfigError), res.output
    assert str(res.exception).startswith("--orders: a sample shows 2 candidates, so at most 2 orders")
    assert not (tmp_path / "r" / "samples.jsonl").exists()

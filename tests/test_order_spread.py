"""The order spread as a per-unit quantity (review of `--orders K`): the mean over users (PerRecBench: groups) of
the population std of a unit's K values, not the std of the K per-order means (sampling noise); order metrics only
over units that answered every order; a `run --limit` rounded up to whole units, so the Borda row carries its
parent's coverage mark; PerRecBench's spread under the headline's dropping rule; no spread on a Borda row."""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import kendalltau
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.rundir import RunDir
from recharness.runner import pipeline
from recharness.tasks.registry import get_task

SPREAD = "NDCG@10 order spread"


def _sample(user: str, k: int, pos: int) -> dict:
    """One of `user`'s orders: 3 candidates, the target `t` shown at `pos`."""
    cands = ["x", "y"]
    cands.insert(pos - 1, "t")
    return {"id": f"{user}@o{k}", "task": "direct", "user_id": user, "order": k, "order_of": user, "target": "t",
            "target_position": pos, "candidates": cands, "candidate_titles": cands}


def _answer(s: dict, rank: int) -> dict:
    """A ranking with the target at `rank` (NDCG@10: 1 at rank 1, 1/log2(4) = 0.5 at rank 3)."""
    others = [c for c in s["candidates"] if c != "t"]
    return {"id": s["id"], "parsed": {"ranking": others[: rank - 1] + ["t"] + others[rank - 1:], "partial": False,
                                      "out_of_range": 0}, "valid": True}


def _two_users():
    """A: target ranked 1, 3, 3 under its orders (NDCG@10 1, .5, .5), shown at 1, 2, 3; B: 3, 1, 1, shown at
    2, 3, 1. Every order's mean over the two users is .75: the old spread (std of those means) was 0, though
    each user's NDCG@10 moves with the order: std of (1, .5, .5) = 1/(3·√2) = 0.2357 for both."""
    samples = [_sample("A", k, p) for k, p in enumerate((1, 2, 3))] + [_sample("B", k, p) for k, p in
                                                                       enumerate((2, 3, 1))]
    preds = {s["id"]: _answer(s, r) for s, r in zip(samples, (1, 3, 3, 3, 1, 1))}
    return samples, preds


def test_the_spread_is_the_mean_over_users_of_each_users_std_across_orders():
    from recharness.tasks.llmrec.direct import DirectTask

    samples, preds = _two_users()
    task = DirectTask()
    m = task.score(samples, preds)
    assert m[SPREAD] == pytest.approx(1 / (3 * math.sqrt(2)), abs=1e-12)  # (0.2357 + 0.2357) / 2; the old: 0.0
    assert m["orders"] == 3 and "order units left out" not in m
    # hits: A at position 1 (order 0), B at 3 and 1 (orders 1, 2): position 1 2/2, 2 0/2, 3 1/2
    assert {k: v for k, v in m.items() if k.startswith("target at ")} == {
        "target at 1: HR@1": 1.0, "target at 2: HR@1": 0.0, "target at 3: HR@1": 0.5,
        "target at 1: samples": 2.0, "target at 2: samples": 2.0, "target at 3: samples": 2.0,
        "target at 1: chance": 1 / 3, "target at 2: chance": 1 / 3, "target at 3: chance": 1 / 3}
    # units for an interval: a user's 3 samples one cluster, the point value the score's
    u = task.units(samples, preds)[SPREAD]
    assert u.point() == pytest.approx(m[SPREAD], abs=1e-12) and u.independent == 2


def test_a_user_cut_mid_orders_is_left_out_of_the_order_metrics():
    """An interrupted run scored with --partial: C answered orders 0 and 1 only (target ranked 1 at position 2,
    then 1 at position 3). The old per-order means mixed users (orders 0, 1 over A, B, C; order 2 over A, B):
    spread std(5/6, 5/6, 3/4) = 0.039 and C's hits in positions 2 and 3. Now: A and B alone, C counted."""
    from recharness.tasks.llmrec.direct import DirectTask

    samples, preds = _two_users()
    cut = [_sample("C", 0, 2), _sample("C", 1, 3)]
    preds.update({s["id"]: _answer(s, 1) for s in cut})
    m = DirectTask().score(samples + cut, preds)
    assert m[SPREAD] == pytest.approx(1 / (3 * math.sqrt(2)), abs=1e-12)
    assert m["order units left out"] == 1.0 and m["orders"] == 3
    assert m["target at 2: HR@1"] == 0.0 and m["target at 3: HR@1"] == 0.5  # C's hits at 2 and 3 not counted
    # an answered set scored with the missing answer still listed among the samples: the same
    assert DirectTask().score(samples + cut + [_sample("C", 2, 1)], preds)[SPREAD] == pytest.approx(m[SPREAD])


def test_the_borda_row_has_no_order_metrics():
    """One aggregated answer per user: its spread would be 0.000 by construction; it gets none ("–")."""
    from recharness.tasks.llmrec.direct import DirectTask

    samples, preds = _two_users()
    task = DirectTask()
    (name, borda), = task.derived_methods(samples, preds).items()
    m = task.score(samples, borda)
    assert name == "(Borda over 3 orders)" and "HR@1" in m
    assert not {k for k in m if k.endswith(" order spread") or k.startswith("target at ") or k == "orders"}
    assert SPREAD not in task.units(samples, borda)


@pytest.fixture(scope="module")
def limited_run(ml1m, tmp_path_factory):
    """The review's reproduction: 4 users × 3 orders, `run --limit 5`, then `score` without --partial."""
    out = tmp_path_factory.mktemp("limit") / "run"
    r = CliRunner()
    res = r.invoke(app, ["build", "llmrec", "-t", "direct", "-o", str(out), "-n", "4", "--orders", "3"])
    assert res.exit_code == 0, res.output
    return out


def test_a_limit_is_rounded_up_to_whole_users_and_the_borda_row_has_its_parents_mark(limited_run, caplog):
    out = limited_run
    r = CliRunner()
    with caplog.at_level(logging.WARNING, logger="recharness.runner.pipeline"):
        res = r.invoke(app, ["run", "llmrec", "-o", str(out), "-m", "fake", "--limit", "5"])
    assert res.exit_code == 0, res.output
    # no --partial needed (before: the Borda row, on the 1 whole user of 5 samples, was refused: "3 of 12 answered")
    res = r.invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "0"])
    assert res.exit_code == 0, res.output
    assert "--limit 5 rounded up to 6" in caplog.text
    answered = [json.loads(x)["id"] for x in (out / "predictions" / "fake.jsonl").read_text().splitlines()]
    assert len(answered) == 6 and len({i.split("@")[0] for i in answered}) == 2  # two whole users
    rows = {x["method"]: x for x in json.loads((out / "scores.json").read_text())}
    fake, borda = rows["fake"], rows["fake (Borda over 3 orders)"]
    assert fake["coverage"] == borda["coverage"] == {"answered": 6, "of": 12, "why": "limit"}
    assert fake["metrics"]["orders"] == 3 and "order units left out" not in fake["metrics"]
    # scores.md: the Borda row's spread is "–", not 0.000
    table = (out / "scores.md").read_text()
    lines = [ln for ln in table.splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    col = next(i for i, c in enumerate(head) if c.startswith(SPREAD))
    cell = {c[0]: c[col] for c in ([x.strip() for x in ln.strip("|").split("|")] for ln in lines[1:])}
    assert cell["fake (Borda over 3 orders) [limit: n = 6 of 12]"] == "–"
    assert cell["fake [limit: n = 6 of 12]"] != "–"


@pytest.fixture(scope="module")
def groups(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("prb-spread") / "run"
    pipeline.build("perrecbench", "ml-1m", out, tasks=["list"], seed=0, limit=2, options={"orders": 3})
    return RunDir(out).load_build()[1]


def _records(samples, answer, invalid_id):
    out = {}
    for s in samples:
        bad = s["id"] == invalid_id
        out[s["id"]] = {"id": s["id"], "parsed": None if bad else {"ordering": answer(s)}, "valid": not bad}
    return out


def _truth(s):
    rel = s["truth"]["relative_ratings"]
    return [i + 1 for i in sorted(range(len(rel)), key=lambda i: -rel[i])]


def _with(samples, **scoring):
    return [{**s, "scoring": {"compat": None, "invalid": "zero", **scoring}} for s in samples]


def test_perrecbench_spread_follows_the_headlines_dropping_rule(groups):
    """The oracle (the true order under every order) with one group's order 1 invalid. invalid=zero (as the
    headline): that group's taus are 1, 0, 1, std √2/3, so the spread is √2/3 / 6 groups; invalid=drop: the
    group is left out (as the headline drops its answer), the other 5 have std 0, every hit counts. The old
    code took tau with invalid answers as 0 under either rule."""
    task = get_task("perrecbench", "list")
    bad = next(s for s in groups if s["order"] == 1 and s["level"] != "easy")  # a group of 3 orders (a pair has 2)
    recs = _records(groups, _truth, bad["id"])
    zero = task.score(_with(groups), recs)
    assert zero["tau order spread"] == pytest.approx(math.sqrt(2) / 3 / 6, abs=1e-12)
    # the oracle hits at every position but the invalid sample's: (n - 1) / n at its position
    n = sum(s["target_position"] == bad["target_position"] for s in groups)
    assert zero[f"target at {bad['target_position']}: HR@1"] == pytest.approx((n - 1) / n)
    assert "order units left out" not in zero
    drop = task.score(_with(groups, invalid="drop"), recs)
    assert drop["tau"] == pytest.approx(1.0) and drop["tau order spread"] == pytest.approx(0.0, abs=1e-12)
    assert drop["order units left out"] == 1.0
    # the positions the other groups' samples were shown at, each hit every time
    pos = {f"target at {s['target_position']}: HR@1" for s in groups if s["order_of"] != bad["order_of"]}
    assert pos and {k for k in drop if k.startswith("target at ") and k.endswith(": HR@1")} == pos
    assert all(drop[k] == 1.0 for k in pos)


def test_perrecbench_spread_under_compat_is_over_the_originals_taus(groups):
    """compat=perrecbench: the headline is scipy's tau between the predicted and the true ordering (best first);
    the spread is the mean over groups of the std of those taus, a group with an invalid order dropped."""
    task = get_task("perrecbench", "list")
    bad = next(s for s in groups if s["order"] == 2)
    recs = _records(groups, lambda s: list(range(1, len(s["users"]) + 1)), bad["id"])  # users as shown
    taus = defaultdict(list)
    for s in groups:
        true_order = [int(i) + 1 for i in np.argsort(np.asarray(s["truth"]["relative_ratings"], dtype=float))[::-1]]
        taus[s["order_of"]].append(kendalltau(list(range(1, len(s["users"]) + 1)), true_order).statistic)
    kept = [np.std(v) for g, v in taus.items() if g != bad["order_of"]]
    m = task.score(_with(groups, compat="perrecbench"), recs)
    assert len(kept) == 5 and m["order units left out"] == 1.0
    assert m["tau order spread"] == pytest.approx(float(np.mean(kept)), abs=1e-12)
    u = task.units(_with(groups, compat="perrecbench"), recs)["tau order spread"]
    assert u.point() == pytest.approx(m["tau order spread"], abs=1e-12)


def test_position_bias_is_read_against_chance_when_samples_show_different_numbers_of_candidates():
    """PerRecBench's groups of 2-4 users: position 1 exists in every group, 3 and 4 only in the larger ones, so a
    ranker with no position bias has a falling HR@1 by position (the review: 0.358, 0.360, 0.278, 0.238 for a
    random top-1). Each position's expected HR@1 without bias, the mean of 1/n over its samples, is kept beside
    it, and the report draws that, not a flat line. Hand: two groups of 2 and four of 4, each group in as many
    orders as users (the target once at each place), each hit at exactly one order, spread over the positions."""
    from recharness.core.types import ScoreRow
    from recharness.report import fairness, html
    from recharness.tasks.orders import order_metrics

    samples, hits = [], []
    for size, units in ((2, 2), (4, 4)):
        for u in range(units):
            for k in range(size):
                samples.append({"id": f"{size}-{u}@{k}", "order_of": f"{size}-{u}", "order": k,
                                "target_position": k + 1, "users": [{}] * size, "unit_orders": size})
                hits.append(1.0 if k == u else 0.0)  # unit u hits when its target stands at u + 1
    m = order_metrics(samples, hits, hits, "tau")
    at = {p: (m[f"target at {p}: HR@1"], m[f"target at {p}: chance"], m[f"target at {p}: samples"])
          for p in (1, 2, 3, 4)}
    # position 1: hits 1 of 2 (groups of 2) + 1 of 4 (groups of 4) = 2/6; chance (2·1/2 + 4·1/4)/6 = 1/3
    assert at[1] == pytest.approx((1 / 3, 1 / 3, 6)) and at[2] == pytest.approx((1 / 3, 1 / 3, 6))
    assert at[3] == pytest.approx((0.25, 0.25, 4)) and at[4] == pytest.approx((0.25, 0.25, 4))
    rows = [ScoreRow("m", "list", {"tau order spread": 0.1, "orders": 4.0, **m}, 24)]
    text = "".join(fairness.order_parts(rows, html.Palette(rows), samples))
    assert "<th>no position bias (mean 1/n)</th>" in text
    assert "<tr><td>3</td><td>4</td><td>0.250</td><td>0.250</td></tr>" in text
    assert "read a method's bias against that line, not against a flat one" in text
    assert "a flat line means no position bias" not in text and "random ranker" not in text


def test_the_report_says_what_the_spread_is_and_counts_units_left_out():
    from recharness.core.types import ScoreRow
    from recharness.report import fairness, html

    rows = [ScoreRow("m", "direct", {SPREAD: 0.2357, "orders": 3, "order units left out": 1.0,
                                     "target at 1: HR@1": 1.0, "target at 2: HR@1": 0.0}, 6)]
    text = "".join(fairness.order_parts(rows, html.Palette(rows), []))
    assert "whatever the order" not in text
    assert "the standard deviation (population, ddof = 0) of its NDCG@10 across its orders, averaged over the users" \
        in text
    assert "<th>users / groups left out</th>" in text and "<td>m</td><td>3</td><td>0.236</td><td>1</td>" in text

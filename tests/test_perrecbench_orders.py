"""PerRecBench listwise under `--option orders=K` (issue 25 §3): each group asked under K orders of its users,
the most-liked user's position balanced; the users and every per-user truth list permuted alike; tau's order
spread (the mean over groups of the std across a group's orders), the most-liked user's top-1 rate by the position they were shown at, a Borda row aggregating a
group's K rankings, and a group's K samples resampled as one unit. Checked against scipy's Kendall tau."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import kendalltau

from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.core.rundir import RunDir
from recharness.runner import pipeline
from recharness.tasks.registry import get_task

K = 3


@pytest.fixture(scope="module")
def run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("prb-orders") / "run"
    pipeline.build("perrecbench", "ml-1m", out, tasks=["list"], seed=0, limit=2, options={"orders": K})
    info, samples = RunDir(out).load_build()

    def record(s, ordering, name):
        return {"id": s["id"], "task": "list", "build": info["fingerprint"], "output": json.dumps(ordering),
                "parsed": {"ordering": ordering}, "valid": True, "model": {"backend": "test", "model": name}}

    def truth_order(s):  # shown positions, the most-liked first
        rel = s["truth"]["relative_ratings"]
        return [i + 1 for i in sorted(range(len(rel)), key=lambda i: -rel[i])]

    rd = RunDir(out)
    rd.predictions_dir.mkdir(parents=True, exist_ok=True)
    for name, answer in (("oracle", truth_order), ("first-shown", lambda s: list(range(1, len(s["users"]) + 1)))):
        rd.predictions(name).write_text("".join(json.dumps(record(s, answer(s), name)) + "\n" for s in samples))
    return out, samples


def test_each_group_is_shown_in_k_orders_with_its_truth_permuted_alike(run):
    _, samples = run
    by = defaultdict(list)
    for s in samples:
        by[s["order_of"]].append(s)
    # 2 groups x 3 levels, K orders each; a pair (easy) in its 2: a third order repeated its first, the same prompt
    # twice (the review of 2026-11-29)
    assert len(by) == 6 and all(len(v) == min(K, len(v[0]["users"])) for v in by.values())
    assert {len(v) for v in by.values()} == {2, K}
    assert all(s.get("unit_orders") == (2 if s["level"] == "easy" else None) for s in samples)
    assert all(len({tuple(s["shown_order"]) for s in v}) == len(v) for v in by.values())  # no order twice
    for gid, ss in by.items():
        base = next(s for s in ss if s["order"] == 0)
        assert base["shown_order"] == list(range(len(base["users"])))  # order 0 is the group as built
        who = {u["user_id"]: (r, rr) for u, r, rr in zip(base["users"], base["truth"]["relative_ratings"],
                                                          base["truth"]["ratings"])}
        for s in ss:
            assert s["id"] == f"{gid}@o{s['order']}" and sorted(s["shown_order"]) == base["shown_order"]
            assert [u["user_id"] for u in s["users"]] == s["truth"]["user_ids"]
            assert [who[u["user_id"]] for u in s["users"]] == list(zip(s["truth"]["relative_ratings"],
                                                                       s["truth"]["ratings"]))
            best = int(np.argmax(s["truth"]["relative_ratings"]))
            assert s["target_position"] == best + 1
        # balanced: order j puts the most-liked user at (p0 + j*n/K) mod n, distinct positions for n >= K
        n = len(base["users"])
        p0 = base["target_position"] - 1
        k = min(K, n)
        assert sorted(s["target_position"] - 1 for s in ss) == sorted((p0 + j * n // k) % n for j in range(k))


def test_order_metrics_and_the_borda_row_by_hand(run):
    out, samples = run
    rows = {r.method: r for r in pipeline.score(out, references=False, resamples=200)}
    oracle, first = rows["oracle"].metrics, rows["first-shown"].metrics
    assert oracle["tau"] == pytest.approx(1.0) and oracle["tau order spread"] == pytest.approx(0.0)
    assert oracle["groups"] == 6 and oracle["orders"] == K
    positions = {f"target at {s['target_position']}: HR@1" for s in samples}
    assert len(positions) > 1  # the targets stood at several positions
    for m in (oracle, rows["first-shown"].metrics):  # one HR@1 per position a target stood at, no other
        assert {k for k in m if k.startswith("target at ") and k.endswith(": HR@1")} == positions
        assert {k.replace(": samples", ": HR@1") for k in m if k.endswith(": samples")} == positions
    assert all(oracle[k] == 1.0 for k in positions)
    # first-shown ranks users as shown: its tau per sample is scipy's tau between the shown order and the truth;
    # the spread is the mean over groups of the population std of a group's K taus
    taus = defaultdict(list)
    for s in samples:
        n = len(s["users"])
        taus[s["order_of"]].append(kendalltau([n - i for i in range(n)], s["truth"]["relative_ratings"]).statistic)
    assert len(taus) == 6 and {len(v) for v in taus.values()} == {2, K}  # a pair in its 2 orders
    assert first["tau order spread"] == pytest.approx(float(np.mean([np.std(v) for v in taus.values()])), abs=1e-12)
    # its top answer is always the first user shown: a hit exactly when the most-liked user stood first
    assert all(first[k] == (1.0 if k == "target at 1: HR@1" else 0.0) for k in positions)
    borda = rows[f"oracle (Borda over {K} orders)"].metrics
    assert borda["tau"] == pytest.approx(1.0)  # K true orders aggregate to the true order
    assert "tau order spread" not in borda  # one answer per group: no spread of its own (was 0.000 by construction)
    assert f"first-shown (Borda over {K} orders)" in rows


def test_a_groups_orders_are_one_unit_of_resampling(run):
    out, samples = run
    task = get_task("perrecbench", "list")
    recs = {r["id"]: r for r in read_jsonl(RunDir(out).predictions("first-shown"))}
    units = task.units(samples, recs)
    assert len(set(units["tau"].clusters.tolist())) == 6 and len(units["tau"].ids) == 2 * 2 + 4 * K


def test_orders_are_for_the_listwise_task_only(ml1m, tmp_path):
    with pytest.raises(ConfigError, match="only the listwise task"):
        pipeline.build("perrecbench", "ml-1m", tmp_path / "run", tasks=["point"], seed=0, limit=1,
                       options={"orders": 2})


def test_the_report_shows_the_groups_order_sensitivity(run):
    from recharness.report import html
    from recharness.report.tables import write_scores

    out, _ = run
    rows = pipeline.score(out, references=False, resamples=200)
    write_scores(rows, out)
    page = html.write_report(rows, out).read_text(encoding="utf-8")
    sec = page[page.index("<h3>list: order sensitivity</h3>"):]
    assert "standard deviation (population, ddof = 0) of its tau across its orders, averaged over the users" in sec
    assert "alt='HR@1 by target position'" in sec and "whatever the order" not in sec
    assert "<td>oracle</td><td>3</td><td>0.000</td>" in sec  # the oracle's tau is 1 under every order

"""What benchmarks/bench_recbole.py concludes from its runs: RecBole's convergence and the ≤ 1/5 goal,
when a kept run of ours is reused, positions per second. Hand-made results, no training."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_recbole.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_recbole_under_test", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH.parent))


def _curve(*points):
    return [{"train_s": t, "ndcg@10": n} for t, n in points]


def _rb(stopped="patience", best_epoch=3, test=0.15, train_s=6000.0, epochs=8, patience=4):
    return {"best_valid": {"valid": 0.16, "epoch": best_epoch, "test": test, "train_s": train_s},
            "stopped": stopped, "patience": patience, "epochs": [{}] * epochs}


def _ours(curve, train_s=None, name="ours"):
    return {"framework": name, "curve": curve, "train_s": train_s if train_s is not None else curve[-1]["train_s"]}


def test_sustained_crossing_ignores_a_noisy_touch(bench):
    curve = _curve((10, 0.10), (20, 0.151), (30, 0.149), (40, 0.152), (50, 0.155))
    assert bench.sustained_at(curve, 0.15)["train_s"] == 40
    assert bench.sustained_at(curve, 0.16) is None
    assert bench.sustained_at(_curve((10, 0.2), (20, 0.1)), 0.15) is None  # fell below at the end


def test_goal_met_and_not_met(bench):
    rb = _rb(train_s=6000.0, test=0.15)
    fast = _ours(_curve((500, 0.12), (1000, 0.151), (1500, 0.16)), name="fast")
    slow = _ours(_curve((500, 0.12), (1500, 0.151), (2000, 0.152)), name="slow")
    lines = bench.convergence_lines(rb, [fast, slow])
    assert "Converged: more than 4 epochs" in lines[0]
    assert "fast: at or above 0.1500 from 1,000.0 training seconds" in lines[1]
    assert "0.167 of RecBole's 6,000 (6.0× sooner): the ≤ 1/5 goal is met" in lines[1]
    assert "0.250 of RecBole's 6,000 (4.0× sooner): the ≤ 1/5 goal is **not met**" in lines[2]


def test_goal_not_measured_unless_recbole_converged(bench):
    lines = bench.convergence_lines(_rb(stopped="epochs", best_epoch=2, epochs=2), [_ours(_curve((10, 0.2)))])
    assert len(lines) == 1 and "**Not converged**" in lines[0] and "**not measured**" in lines[0]
    assert "0 epoch(s) after its best" in lines[0]


def test_short_budget_is_not_a_miss(bench):
    rb = _rb(train_s=6000.0, test=0.15)
    short = _ours(_curve((300, 0.10), (900, 0.12)))  # 900 s < 1,200 s (1/5 of RecBole's)
    long = _ours(_curve((300, 0.10), (3000, 0.12)))
    assert "**not measured** (give --ours-seconds ≥ 1,200)" in bench.convergence_lines(rb, [short])[1]
    assert "(its best 0.1200): the ≤ 1/5 goal is **not met**" in bench.convergence_lines(rb, [long])[1]


def test_reuse_only_a_finished_run_of_the_same_settings(bench, tmp_path):
    spec = {"precision": "fp32", "budget_s": 900.0, "marks": [100.0, 200.0, 5000.0], "code": "abc", "data_sha256": "d"}
    result = tmp_path / "ours-fp32.json"
    assert bench.reusable(result, spec) is None  # nothing there
    result.write_text(json.dumps({"curve": []}))
    assert bench.reusable(result, spec) is None  # a worker's result the parent never finished
    result.write_text(json.dumps({"curve": [], "wall_s": 950.0, "spec": {**spec, "marks": [100.0, 200.0]}}))
    assert bench.reusable(result, spec)["wall_s"] == 950.0  # 5,000 s is beyond the budget: not needed
    assert bench.reusable(result, {**spec, "marks": [100.0, 300.0]}) is None  # a new point within the budget
    assert bench.reusable(result, {**spec, "code": "abd"}) is None  # other code
    assert bench.reusable(result, {**spec, "data_sha256": "e"}) is None  # other data


def test_positions_per_second(bench):
    rb = {"samples": 1000, "train_s": 2.0}
    assert bench.positions_per_s(rb, 50) == 25_000.0  # one 50-position pass per prediction
    assert bench.positions_per_s({"samples": 1000, "positions": 1200, "train_s": 2.0}) == 600.0
    with pytest.raises(KeyError):  # ours never falls back to RecBole's count
        bench.positions_per_s({"samples": 1000, "train_s": 2.0})

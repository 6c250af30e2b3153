"""What benchmarks/bench_recbole.py concludes from its runs: RecBole's convergence and the ≤ 1/5 goal,
when a kept run of ours is reused, positions per second, NDCG@10 with intervals over test users from
per-user ranks. Hand-made results, no training."""

import argparse
import importlib.util
import json
import math
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


def _epochs(*valid):
    return [{"epoch": i, "valid_ndcg@10": v} for i, v in enumerate(valid, 1)]


def test_ours_chosen_by_its_own_validation_as_recboles_value_is(bench):
    # epochs end at 400 / 800 / 1,200 / 1,600 s; a mid-epoch point (600 s) is not an epoch's weights
    curve = [{"train_s": 400, "epoch": 1, "ndcg@10": 0.12}, {"train_s": 600, "epoch": 2, "ndcg@10": 0.2},
             {"train_s": 800, "epoch": 2, "ndcg@10": 0.152}, {"train_s": 1200, "epoch": 3, "ndcg@10": 0.149},
             {"train_s": 1600, "epoch": 4, "ndcg@10": 0.140}]
    run = _ours(curve, name="ours") | {"epochs": _epochs(0.10, 0.13, 0.13, 0.12)}
    sel = bench.selected_curve(run)
    # epoch 3 ties epoch 2 on validation: a tie counts as better, so epoch 3's test value is chosen
    assert [(p["train_s"], p["ndcg@10"], p["selected_epoch"]) for p in sel] == [
        (400, 0.12, 1), (800, 0.152, 2), (1200, 0.149, 3), (1600, 0.149, 3)]
    lines = bench.convergence_lines(_rb(train_s=6000.0, test=0.148), [run])
    assert "ours: not at or above 0.1480 to the end" in lines[1]  # the raw curve ends at 0.140
    assert ("- ours, its weights chosen by its own validation NDCG@10 as RecBole's are: at or above 0.1480 from "
            "800.0 training seconds on (epoch 2's weights), 0.133 of RecBole's 6,000: met on this reading, on the point "
            "estimates (no paired interval: per-user ranks were not kept of those weights or of RecBole's best).") == lines[2]
    lines = bench.convergence_lines(_rb(train_s=6000.0, test=0.15), [run])
    assert lines[2].endswith("not at or above 0.1500 to the end (its best 0.1520): **not met** on this reading.")


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


# ---------------------------------------------------------------- intervals over test users


def test_user_ndcg_from_ranks(bench):
    ranks = {"u1": 1, "u2": 3, "u3": 10, "u4": 11}
    got = bench.user_ndcg(ranks, ["u4", "u3", "u2", "u1"])  # in the order asked for
    assert got.tolist() == pytest.approx([0.0, 1 / math.log2(11), 0.5, 1.0])


def test_identical_sides_differ_by_exactly_zero(bench):
    ranks = {str(u): r for u, r in enumerate([1, 2, 5, 9, 12, 40, 3, 1, 7, 100])}
    res = bench.user_intervals({"a": ranks, "b": dict(ranks)}, {"a − b": ("a", "b")}, resamples=500, seed=3)
    d = res["diffs"]["a − b"]
    assert (d["diff"], d["lo"], d["hi"]) == (0.0, 0.0, 0.0)
    assert res["points"]["a"] == res["points"]["b"]  # the same resamples of users on both sides
    point = res["points"]["a"]
    assert point["ndcg@10"] == pytest.approx(bench.user_ndcg(ranks, list(ranks)).mean())
    assert point["lo"] < point["ndcg@10"] < point["hi"]


def test_a_side_better_for_every_user_is_above_zero(bench):
    worse = {str(u): 2 + u % 9 for u in range(30)}  # ranks 2..10: one place up is better for every user
    better = {u: r - 1 for u, r in worse.items()}
    res = bench.user_intervals({"better": better, "worse": worse}, {"d": ("better", "worse"), "r": ("worse", "better")})
    assert res["users"] == 30 and res["resamples"] == bench.RESAMPLES
    assert 0 < res["diffs"]["d"]["lo"] <= res["diffs"]["d"]["diff"] <= res["diffs"]["d"]["hi"]
    assert res["diffs"]["r"]["hi"] < 0 and res["diffs"]["d"]["p"] == 0.0


def test_missing_ranks_and_too_few_users_give_no_interval(bench):
    ranks = {str(u): u + 1 for u in range(20)}
    res = bench.user_intervals({"a": ranks, "b": None}, {"d": ("a", "b")}, resamples=200)
    assert res["points"]["b"] is None and res["diffs"]["d"] is None and res["points"]["a"] is not None
    few = {"1": 1, "2": 2, "3": 30}  # under MIN_UNITS users: a bootstrap would claim more than they show
    res = bench.user_intervals({"a": few, "b": few}, {"d": ("a", "b")}, resamples=200)
    assert res["points"] == {"a": None, "b": None} and res["diffs"]["d"] is None


def _full_results(with_ranks: bool, users: int = 40):
    """Hand-made results of a whole run (args, data, rb, runs, loads, wall) for `report`."""
    import numpy as np

    rng = np.random.default_rng(1)
    ids = [str(u) for u in range(1, users + 1)]

    def ranks_record(train_s, epoch, shift=0):
        ranks = {u: int(r) + shift for u, r in zip(ids, rng.integers(1, 25, users))}
        return {"train_s": train_s, "epoch": epoch, "ndcg@10": 0.1, "ndcg@10_from_ranks": 0.1, "ranks": ranks}

    def point(t, epoch, end, n):
        return {"train_s": t, "samples": int(t * 10), "positions": int(t * 100), "epoch": epoch, "end_of_epoch": end,
                "ndcg@10": n, "hit@10": 2 * n, "eval_s": 1.0}

    fp = {"test": "f" * 64, "valid": "e" * 64, "train_pairs": "d" * 64}
    rb = {"framework": "RecBole 1.2.1", "torch": "2.13.0", "threads": 1, "setup_s": 5.0, "users": users,
          "items": 100, "train_samples_per_epoch": 2000, "train_s": 400.0, "samples": 4000, "samples_per_s": 10.0,
          "peak_rss_bytes": 2**30, "sittings": 1, "stopped": "epochs", "patience": None, "fingerprints": fp,
          "settings": {"hidden_size": 64, "n_layers": 2, "n_heads": 2, "inner_size": 256, "hidden_dropout_prob": 0.5,
                       "attn_dropout_prob": 0.5, "train_batch_size": 2048, "learning_rate": 0.001, "seed": 0},
          "curve": [point(100.0, 1, False, 0.05), point(200.0, 1, True, 0.08), point(400.0, 2, True, 0.09)],
          "epochs": [{"epoch": e, "train_s": 200.0, "samples": 2000, "samples_per_s": 10.0, "valid_ndcg@10": v}
                     for e, v in ((1, 0.12), (2, 0.11))],
          "best_valid": {"valid": 0.12, "epoch": 1, "test": 0.08, "train_s": 200.0}}
    ours = {"framework": "recharness SASRec (fp32)", "precision": "fp32", "torch": "2.13.0", "setup_s": 3.0,
            "settings": {"dropout": 0.2}, "train_samples_per_epoch": 2000, "train_s": 500.0, "samples": 20000,
            "positions": 200000, "samples_per_s": 40.0, "peak_rss_bytes": 2**29, "fingerprints": fp,
            "curve": [point(t, 1 + int(t // 250), t == 500.0, 0.02 * i) for i, t in
                      enumerate((100.0, 200.0, 300.0, 400.5, 500.0), 1)],
            "epochs": [{"epoch": 1, "train_s": 250.0, "samples": 10000, "samples_per_s": 40.0, "valid_ndcg@10": 0.2}]}
    if with_ranks:
        rb["ranks"] = {"best": ranks_record(200.0, 1, shift=3), "last": ranks_record(400.0, 2)}
        ours["ranks"] = {"at_recbole_end": ranks_record(400.5, 2), "last": ranks_record(500.0, 2)}
    args = argparse.Namespace(threads=1, dataset="ml-1m", users=users, max_len=50, curve_every=100.0,
                              ours_seconds=None, argv=["--users", str(users)])
    data = {"interactions": 5000, "users": users, "items": 100, "sha256": "a" * 64}
    return args, data, rb, [ours], {"start": 1.0, "after_recbole": 1.0, "end": 1.0}, {"recbole": 500.0, "fp32": 600.0}


def test_report_gives_intervals_over_users(bench, tmp_path):
    args, data, rb, runs, loads, wall = _full_results(with_ranks=True)
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    assert "## NDCG@10 with 95% intervals over test users" in text
    assert "Resampled: the 40 test users" in text and f"{bench.RESAMPLES:,} times" in text
    users = sorted(rb["ranks"]["best"]["ranks"])
    best = bench.user_ndcg(rb["ranks"]["best"]["ranks"], users).mean()
    assert f"| RecBole, best validation NDCG@10 (epoch 1) | 200.0 | {best:.4f} | [" in text
    rows = [line for line in text.splitlines() if line.startswith(("| (a) ", "| (b) "))]
    assert len(rows) == 2 and all("– |" not in row for row in rows)  # both pairs found their ranks
    assert "(a) recharness SASRec (fp32) at RecBole's last training second (400 s) − RecBole, last point" in rows[0]
    assert "Rank check failed" not in text


def test_report_without_ranks_still_renders(bench, tmp_path):
    args, data, rb, runs, loads, wall = _full_results(with_ranks=False)
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    assert "## NDCG@10 with 95% intervals over test users" in text
    assert "Not available for this run: its results hold no per-user ranks" in text
    assert "## Curve: RecBole 1.2.1" in text  # the rest of the report is there


def test_hold_while_paused_waits_for_the_file_and_returns_the_wait(bench, tmp_path):
    import threading

    assert bench.hold_while_paused(None) == 0.0
    pause = tmp_path / "PAUSE"
    assert bench.hold_while_paused(pause) == 0.0  # no file: no wait
    pause.touch()
    threading.Timer(1.2, pause.unlink).start()
    held = bench.hold_while_paused(pause)
    assert 1.2 <= held < 5.0 and not pause.exists()


def test_run_names_carry_precision_network_and_stride_both_ways(bench):
    for precision in ("fp32", "bf16"):
        for stride in (None, 1, 10):
            for block in ("pre", "post"):
                label = bench.run_label(precision, stride, block)
                assert bench.parse_run(label) == (precision, stride, block)
    assert bench.run_label("fp32", None) == "fp32" and bench.run_label("bf16", 1) == "bf16-stride1"
    assert bench.run_label("fp32", 1, "post") == "fp32-post-stride1"
    assert bench.run_name("fp32") == "recharness SASRec (fp32)"
    assert bench.run_name("bf16-post-stride1") == "recharness SASRec (bf16, RecBole's network, stride 1)"
    for bad in ("fp16", "fp32-stride0", "fp32-stride", "fp32-stride-1", "fp32 ", "fp32-stride1-post", "post"):
        with pytest.raises(SystemExit, match="--ours-precision"):
            bench.parse_run(bad)
    assert bench.label_of({"precision": "fp32"}) == "fp32"  # a result written before strides
    assert bench.label_of({"precision": "fp32", "label": "fp32-stride1"}) == "fp32-stride1"


def test_status_of_a_run_in_progress(bench, tmp_path):
    (tmp_path / "recbole").mkdir()
    epochs = [{"epoch": i, "train_s": s, "valid_ndcg@10": v, "paused_s": p, "finished_at": f"t{i}"}
              for i, s, v, p in ((1, 100.0, 0.10, None), (2, 120.0, 0.12, 30.0), (3, 110.0, 0.11, 0.0))]
    epochs[2].update(cpu="AMD EPYC", sitting=2)  # older epochs recorded neither
    curve = [{"epoch": 1, "end_of_epoch": True, "ndcg@10": 0.09}, {"epoch": 2, "end_of_epoch": False, "ndcg@10": 0.5},
             {"epoch": 2, "end_of_epoch": True, "ndcg@10": 0.115}]  # epoch 3's end not evaluated
    (tmp_path / "recbole" / "checkpoint.json").write_text(json.dumps({
        "epochs": epochs, "curve": curve, "best": {"valid": 0.12, "epoch": 2, "test": 0.115, "train_s": 220.0},
        "train_s": 370.0, "within_epoch": {"epoch": 4, "batches": 7}, "sittings": 2}))
    (tmp_path / "recbole_spec.json").write_text(json.dumps({"dropout": 0.2, "patience": 2, "epochs": 50}))
    text = bench.status_text(tmp_path)
    assert "**partial**" in text
    assert "| 1 | 100 | 100 | 0.1000 | 0.0900 | 0 | t1 |" in text
    assert "| 2 | 120 | 220 | 0.1200 | 0.1150 | 30 | t2 |" in text
    assert "| 3 | 110 | 330 | 0.1100 | – | 0 | t3 | 2: AMD EPYC |" in text and "| t1 | ?: ? |" in text
    assert "epoch 4 in progress: 7 batches, 40 training s of it banked" in text
    assert "best validation NDCG@10 0.1200 after epoch 2 (test NDCG@10 there 0.1150, 220 training s); 1 epoch(s) since" in text
    # patience 2: it stops after 3 epochs in a row without a better value; 1 so far -> 2 more, at the median 110 s
    assert "needs at least 2 more epoch(s): ≥ 0.1 training hours at the median epoch (110 s)" in text
    # patience 1: 1 epoch without a better value is not yet more than 1; a fourth epoch below makes 2: converged
    (tmp_path / "recbole_spec.json").write_text(json.dumps({"dropout": 0.2, "patience": 1, "epochs": 50}))
    assert "needs at least 1 more epoch(s)" in bench.status_text(tmp_path)
    epochs.append({"epoch": 4, "train_s": 90.0, "valid_ndcg@10": 0.115, "finished_at": "t4"})
    ckpt = json.loads((tmp_path / "recbole" / "checkpoint.json").read_text())
    (tmp_path / "recbole" / "checkpoint.json").write_text(json.dumps({**ckpt, "epochs": epochs, "within_epoch": None}))
    done = bench.status_text(tmp_path)
    assert "**partial**" not in done and "needs at least" not in done
    assert "**converged** (stopped by early stopping after epoch 4)" in done.splitlines()[0]
    assert "early stopping (patience 1) stopped the run after epoch 4: 2 epochs without a better value than epoch 2's" in done
    with pytest.raises(SystemExit, match="no checkpoint yet"):
        bench.status_text(tmp_path / "elsewhere")


def test_ours_now_guards_and_its_runs_are_reused_by_the_full_run(bench, tmp_path):
    """`--ours-now` needs a kept RecBole checkpoint and a budget within what RecBole has trained (every curve
    point it needs exists); its runs' spec differs from the later full run's only in the marks beyond the
    budget, so `reusable` takes them."""
    args = argparse.Namespace(work=tmp_path, ours_seconds=None, users=None, seed=0)
    with pytest.raises(SystemExit, match="--work DIR and --ours-seconds"):
        bench.ours_now(args)
    args.ours_seconds = 500.0
    with pytest.raises(SystemExit, match="no RecBole checkpoint yet"):
        bench.ours_now(args)
    (tmp_path / "recbole").mkdir()
    (tmp_path / "recbole" / "checkpoint.json").write_text(json.dumps(
        {"train_s": 400.0, "curve": [{"train_s": 150.0}, {"train_s": 300.0}], "best": {}}))
    with pytest.raises(SystemExit, match="beyond the 400 seconds RecBole has trained"):
        bench.ours_now(args)
    assert not (tmp_path / "PAUSE").exists()  # refused before pausing anything
    # settings or data other than RecBole's run: refused, named
    args.ours_seconds = 300.0
    args.__dict__.update(threads=2, curve_every=150.0, max_len=50, batch_size=2048, lr=1e-3)
    spec = {**bench.common_settings(args), "data_sha256": "0" * 64}
    (tmp_path / "recbole_spec.json").write_text(json.dumps({**spec, "lr": 5e-3}))
    with pytest.raises(SystemExit, match="lr 0.005 there, 0.001 here"):
        bench.ours_now(args)
    (tmp_path / "recbole_spec.json").write_text(json.dumps(spec))
    with pytest.raises(SystemExit, match="not the file RecBole's run read"):
        bench.ours_now(args)  # no .inter file at all here
    assert not (tmp_path / "PAUSE").exists()
    now = {"budget_s": 300.0, "marks": [150.0, 300.0], "precision": "fp32"}
    (tmp_path / "ours-fp32.json").write_text(json.dumps({"wall_s": 1.0, "spec": now, "curve": []}))
    later = {**now, "marks": [150.0, 300.0, 450.0, 9000.0]}  # RecBole's finished curve: more points, beyond
    assert bench.reusable(tmp_path / "ours-fp32.json", later) is not None
    assert bench.reusable(tmp_path / "ours-fp32.json", {**later, "marks": [150.0, 290.0]}) is None


def test_the_code_fingerprint_covers_the_worker_not_the_report(bench, monkeypatch, tmp_path):
    """Hashed from the file on disk: the worker's functions count, the report's do not."""
    import inspect

    assert bench.ours_worker in bench.WORKER_CODE and bench.report not in bench.WORKER_CODE
    assert "test_metrics" in inspect.getsource(bench.ours_worker)  # its evaluation is inside the worker
    before = bench.code_fingerprint()
    text = BENCH.read_text()
    copy = tmp_path / "bench_recbole.py"
    monkeypatch.setattr(bench, "__file__", str(copy))
    copy.write_text(text.replace('def report(args,', '# a comment\ndef report(args,', 1))
    assert bench.code_fingerprint() == before  # the report's code moved and changed: same fingerprint
    copy.write_text(text.replace('"eval_s": round(time.perf_counter() - t0, 3)})',
                                 '"eval_s": round(time.perf_counter() - t0, 4)})', 1))
    assert bench.code_fingerprint() != before  # the worker's code changed


def test_a_saved_state_restores_elsewhere_checked_and_never_over_a_newer_run(bench, tmp_path):
    """--save-state copies what a resumption reads (spec, last checkpoint and the tensors it names, our kept
    runs) with a MANIFEST of sha256; --restore-state checks it, and leaves a work directory holding a run at
    least as far along alone."""
    work = tmp_path / "work"
    (work / "recbole").mkdir(parents=True)
    (work / "recbole_spec.json").write_text('{"dropout": 0.2}')
    (work / "recbole" / "checkpoint-epoch2.pt").write_bytes(b"tensors of epoch 2")
    (work / "recbole" / "checkpoint-epoch1.pt").write_bytes(b"stale: not named by the checkpoint")
    (work / "recbole" / "checkpoint.json").write_text(json.dumps(
        {"tensors": "checkpoint-epoch2.pt", "epochs": [{}, {}], "train_s": 3000.0}))
    (work / "ours-fp32.json").write_text('{"framework": "ours"}')
    (work / "data").mkdir()  # rebuilt from the dataset, not saved
    (work / "data" / "x.inter").write_text("big")
    state = tmp_path / "state" / "recbole-d0.2"
    assert bench.save_state(work, state) == f"saved 4 files to {state}: 2 epoch(s), 3,000 training s"
    manifest = json.loads((state / "MANIFEST.json").read_text())
    assert sorted(manifest) == ["ours-fp32.json", "recbole/checkpoint-epoch2.pt", "recbole/checkpoint.json",
                                "recbole_spec.json"]
    assert not (state / "data").exists() and not list(state.parent.glob("*.tmp"))

    fresh = tmp_path / "fresh"
    assert bench.restore_state(state, fresh).startswith(f"restored 4 files into {fresh}: 2 epoch(s)")
    assert (fresh / "recbole" / "checkpoint-epoch2.pt").read_bytes() == b"tensors of epoch 2"
    assert "left alone" in bench.restore_state(state, fresh)  # as far along: not overwritten
    (work / "recbole" / "checkpoint.json").write_text(json.dumps(
        {"tensors": "checkpoint-epoch2.pt", "epochs": [{}, {}, {}], "train_s": 4500.0}))
    assert "left alone" in bench.restore_state(state, work)  # further along than the state

    (fresh / "recbole" / "checkpoint.json").write_text('{"tensors": "checkpoint-ep')  # a restore killed mid-write
    assert bench.restore_state(state, fresh).startswith("restored 4 files")
    assert json.loads((fresh / "recbole" / "checkpoint.json").read_text())["train_s"] == 3000.0
    assert not list(fresh.rglob("*.tmp"))

    bench.save_state(work, state)  # saved again over the old one
    assert json.loads((state / "recbole" / "checkpoint.json").read_text())["train_s"] == 4500.0
    (state / "recbole" / "checkpoint-epoch2.pt").write_bytes(b"damaged")
    with pytest.raises(SystemExit, match="checkpoint-epoch2.pt: missing or not the file MANIFEST.json names"):
        bench.restore_state(state, tmp_path / "other")
    with pytest.raises(SystemExit, match="no checkpoint to save"):
        bench.save_state(tmp_path / "nothing", state)


def test_the_report_names_each_sides_cpus_and_flags_a_mix(bench):
    rb = {"epochs": [{"train_s": 1500.0, "cpu": "AMD EPYC"}, {"train_s": 1400.0, "cpu": "AMD EPYC"},
                     {"train_s": 1700.0, "cpu": "AMD EPYC"}, {"train_s": 1300.0, "cpu": "Intel Xeon"}]}
    text = bench.machines_line(rb, [{"cpu": "AMD EPYC"}])
    assert text.startswith("- CPUs: RecBole 3 epoch(s) finished on AMD EPYC (median 1,500 s); 1 epoch(s) finished "
                           "on Intel Xeon (median 1,300 s); ours on AMD EPYC.")
    assert "**Not one CPU model**" in text
    one = bench.machines_line({"epochs": rb["epochs"][:2]}, [{"cpu": "AMD EPYC"}])
    assert one == "- CPUs: RecBole 2 epoch(s) finished on AMD EPYC (median 1,450 s); ours on AMD EPYC."
    old = bench.machines_line({"epochs": [{"train_s": 10.0}]}, [{"cpu": "AMD EPYC"}])  # from before CPUs were kept
    assert old.startswith("- CPUs: RecBole 1 epoch(s) finished on not recorded (median 10 s); ours on AMD EPYC.")
    assert "one model cannot be confirmed" in old and "Not one CPU model" not in old


def test_slow_epochs_are_those_above_their_cpus_median_and_the_fair_time_puts_them_at_it(bench):
    # AMD median of (1,000, 1,100, 1,400, 1,000) = 1,050: 1,400 > 1.15 x 1,050 = 1,207.5 is slow, 1,100 is not;
    # the Intel epoch is its own CPU's median. Epoch 5 comes after the best and is not counted.
    epochs = [{"epoch": 1, "train_s": 1000.0, "cpu": "AMD"}, {"epoch": 2, "train_s": 1100.0, "cpu": "AMD"},
              {"epoch": 3, "train_s": 1400.0, "cpu": "AMD"}, {"epoch": 4, "train_s": 900.0, "cpu": "Intel"},
              {"epoch": 5, "train_s": 1000.0, "cpu": "AMD"}]
    rb = {"epochs": epochs, "best_valid": {"epoch": 4, "train_s": 4400.0}}
    slow, fair = bench.slow_epochs(rb)
    assert [e["epoch"] for e in slow] == [3]
    assert fair == pytest.approx(4400.0 - (1400.0 - 1050.0))
    # records without their time (older runs) are left out rather than failing the report
    assert bench.slow_epochs({"epochs": [{}, {}], "best_valid": {"epoch": 2, "train_s": 10.0}}) == ([], 10.0)


def test_a_state_saved_while_the_driver_commits_a_newer_checkpoint_is_the_newer_one_whole(bench, tmp_path,
                                                                                           monkeypatch):
    """The driver commits a checkpoint (tensors, then the JSON naming them, then removes the older tensors) between
    save_state's read of the JSON and its copy of the tensors: the copy fails, and the save begins again with the
    newer JSON, never a JSON naming tensors that are not beside it."""
    work = tmp_path / "work"
    (work / "recbole").mkdir(parents=True)
    (work / "recbole_spec.json").write_text("{}")
    (work / "recbole" / "checkpoint-epoch2.pt").write_bytes(b"epoch 2")
    (work / "recbole" / "checkpoint.json").write_text(json.dumps(
        {"tensors": "checkpoint-epoch2.pt", "epochs": [{}, {}], "train_s": 3000.0}))
    real, commits = bench.shutil.copy2, []

    def copy2(src, dst):
        if Path(src).suffix == ".pt" and not commits:  # the driver's commit, just before this copy
            commits.append(1)
            (work / "recbole" / "checkpoint-epoch3.pt").write_bytes(b"epoch 3")
            (work / "recbole" / "checkpoint.json").write_text(json.dumps(
                {"tensors": "checkpoint-epoch3.pt", "epochs": [{}, {}, {}], "train_s": 4500.0}))
            (work / "recbole" / "checkpoint-epoch2.pt").unlink()
        return real(src, dst)

    monkeypatch.setattr(bench.shutil, "copy2", copy2)
    state = tmp_path / "state"
    assert bench.save_state(work, state).endswith("3 epoch(s), 4,500 training s") and commits == [1]
    assert sorted(json.loads((state / "MANIFEST.json").read_text())) == [
        "recbole/checkpoint-epoch3.pt", "recbole/checkpoint.json", "recbole_spec.json"]
    assert (state / "recbole" / "checkpoint-epoch3.pt").read_bytes() == b"epoch 3"
    assert not (state / "recbole" / "checkpoint-epoch2.pt").exists()


def test_a_kept_run_of_ours_is_reused_from_another_checkout(bench, tmp_path):
    """Carried to another path by --save-state/--restore-state, our kept run still answers the same spec: only
    its paths differ (the data is pinned by its sha256); other settings or data are not reused."""
    spec = {"seed": 0, "budget_s": 100.0, "data_sha256": "abc", "code": "c1", "marks": [50.0, 150.0],
            "inter": "/old/checkout/.bench-work/x.inter", "result": "/old/checkout/.bench-work/ours-fp32.json"}
    path = tmp_path / "ours-fp32.json"
    path.write_text(json.dumps({"spec": spec, "wall_s": 120.0, "curve": []}))
    moved = {**spec, "inter": "/new/place/x.inter", "result": str(path)}
    assert bench.reusable(path, moved)["wall_s"] == 120.0
    assert bench.reusable(path, {**moved, "data_sha256": "other"}) is None
    assert bench.reusable(path, {**moved, "seed": 1}) is None


def _recbole_early_stopping(value, best, cur_step, max_step):
    """RecBole 1.2.1's `recbole.utils.utils.early_stopping` (bigger=True), as it is written there: the reference."""
    stop_flag = update_flag = False
    if value >= best:
        cur_step, best, update_flag = 0, value, True
    else:
        cur_step += 1
        if cur_step > max_step:
            stop_flag = True
    return best, cur_step, stop_flag, update_flag


def test_patience_best_is_recboles_early_stopping(bench):
    # hand-worked: epoch 3 ties epoch 2 (a tie counts as better); 4, 5, 6 are not better: with patience 2 the
    # third of them is more than 2 in a row, so it stops after epoch 6 keeping epoch 3
    epochs = _epochs(0.10, 0.13, 0.13, 0.12, 0.11, 0.11, 0.20)
    kept, stop = bench.patience_best(epochs, 2)
    assert (kept["epoch"], stop) == (3, 6)
    assert bench.patience_best(epochs, 3) == (epochs[6], None)  # never 4 in a row: epoch 7 is better
    assert bench.patience_best(epochs, None) == (epochs[6], None)
    assert bench.patience_best([{"epoch": 1}], 2) == (None, None)  # no validation value
    # against RecBole's function on random sequences (its trainer starts from best = -inf)
    import random

    rng = random.Random(0)
    for _ in range(300):
        vals = [round(rng.random(), 1) for _ in range(rng.randint(1, 25))]
        patience = rng.randint(0, 5)
        best, step, want_stop, want_kept = float("-inf"), 0, None, None
        for i, v in enumerate(vals, 1):
            best, step, stop, update = _recbole_early_stopping(v, best, step, patience)
            want_kept = i if update else want_kept
            if stop:
                want_stop = i
                break
        kept, stop = bench.patience_best(_epochs(*vals), patience)
        assert (kept["epoch"], stop) == (want_kept, want_stop), (vals, patience)


def test_ours_stopped_as_recbole_is(bench):
    curve = [{"train_s": 400, "epoch": 1, "ndcg@10": 0.12}, {"train_s": 800, "epoch": 2, "ndcg@10": 0.151},
             {"train_s": 1200, "epoch": 3, "ndcg@10": 0.149}, {"train_s": 1600, "epoch": 4, "ndcg@10": 0.160}]
    # every evaluated point's ranks, as runs since 2026-11-30 keep them: epoch 2's (800 s) is the paired row's
    run = _ours(curve, name="ours") | {"epochs": _epochs(0.10, 0.13, 0.12, 0.11),
                                        "point_ranks": {"users": ["1", "2"], "ranks": ["1,2", "3,4", "5,6", "7,8"]}}
    assert bench.converged_ranks(run, 1) == {"epoch": 2, "train_s": 800, "ranks": {"1": 3, "2": 4}}
    rb = _rb(train_s=6000.0, test=0.15, patience=1)
    line = bench.convergence_lines(rb, [run])[-1]
    assert line == ("- ours, stopped as RecBole is (patience 1, on its own validation NDCG@10): its best after epoch 2, "
                    "800.0 training seconds (stopped after epoch 4, 1,600 s); test NDCG@10 there 0.1510 against "
                    "RecBole's 0.1500 (+0.0010; its paired interval over users: row (c) of the table below), kept after 0.133 of "
                    "RecBole's 6,000 s: met on the point estimates.")
    # an older run (a few chosen points' ranks, found by their training second): of epoch 2's point, the row is
    # paired; of another point only (or none), no paired interval is claimed
    older = {k: v for k, v in run.items() if k != "point_ranks"}
    kept = {"train_s": 800, "epoch": 2, "ranks": {"1": 3}}
    assert bench.converged_ranks(older | {"ranks": {"converged": kept}}, 1)["ranks"] == {"1": 3}
    for ranks in ({"converged": {**kept, "train_s": 1200, "epoch": 3}}, {}):
        assert bench.converged_ranks(older | {"ranks": ranks}, 1) is None
        line = bench.convergence_lines(rb, [older | {"ranks": ranks}])[-1]
        assert "(+0.0010; no paired interval: the run kept no per-user ranks of those weights)" in line
    # a patience the run never exhausts keeps no weights: nothing to pair
    assert bench.converged_ranks(run, 2) is None
    below = bench.convergence_lines(_rb(train_s=6000.0, test=0.152, patience=1), [run])[-1]
    assert below.endswith("(-0.0010; its paired interval over users: row (c) of the table below), kept after 0.133 of RecBole's "
                          "6,000 s: **not met**: its converged value is below RecBole's.")
    slow = bench.convergence_lines(_rb(train_s=3000.0, test=0.15, patience=1), [run])[-1]
    assert slow.endswith("kept after 0.267 of RecBole's 3,000 s: **not met** on the point estimates.")
    unstopped = bench.convergence_lines(_rb(train_s=6000.0, test=0.15, patience=2), [run])[-1]
    assert "not stopped within its 1,600 training seconds (best validation so far after epoch 2)" in unstopped


def test_report_pairs_ours_as_recbole_stops_it_with_recboles_best(bench, tmp_path):
    args, data, rb, runs, loads, wall = _full_results(with_ranks=True)
    rb["patience"] = 1
    ours = runs[0]
    # epochs 2 and 3 below epoch 1: RecBole's rule (patience 1) stops after epoch 3 and keeps epoch 1, whose last
    # evaluated point is at 200 s
    ours["epochs"] = [{**ours["epochs"][0], "epoch": e, "valid_ndcg@10": v} for e, v in ((1, 0.2), (2, 0.1), (3, 0.1))]
    # an older run's ranks of another point only (epoch 2's): no (c) row
    ours["ranks"]["converged"] = {**ours["ranks"]["at_recbole_end"], "epoch": 2}
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    assert "| (c) " not in text
    users = sorted(rb["ranks"]["best"]["ranks"])
    for kept in ("older", "every point"):
        if kept == "older":  # the older form, of the kept epoch's point
            ours["ranks"]["converged"] = {**ours["ranks"]["last"], "epoch": 1, "train_s": 200.0}
            conv = ours["ranks"]["converged"]["ranks"]
        else:  # every point's ranks, as runs since 2026-11-30 keep them; the older records are then not read
            per_point = [[(i * 7 + j) % 30 + 1 for j in range(len(users))] for i in range(len(ours["curve"]))]
            ours["point_ranks"] = {"users": users, "ranks": [",".join(map(str, r)) for r in per_point]}
            conv = dict(zip(users, per_point[1]))
        text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
        diff = (bench.user_ndcg(conv, users) - bench.user_ndcg(rb["ranks"]["best"]["ranks"], users)).mean()
        row = next(line for line in text.splitlines() if line.startswith("| (c) "))
        assert ("(c) recharness SASRec (fp32), the weights RecBole's early stopping keeps (epoch 1) − RecBole, best "
                "validation NDCG@10 (epoch 1)") in row, kept
        assert f"| {diff:+.4f} | [" in row, kept
        assert "| recharness SASRec (fp32), the weights RecBole's early stopping keeps (epoch 1) | 200.0 |" in text


def test_ours_read_as_recbole_reads_its_epochs(bench):
    # RecBole rounds its validation NDCG@10 to 4 decimals before comparing: these three tie there (a tie counts as
    # better), so epoch 3 is kept and patience 1 never stops; unrounded, epoch 1 is kept and it stops after 3
    curve = [{"train_s": 100.0 * i, "epoch": i, "ndcg@10": 0.1, "end_of_epoch": True} for i in range(1, 5)]
    run = _ours(curve) | {"epochs": _epochs(0.150049, 0.149951, 0.14996, 0.1)}
    kept, stop = bench.patience_best(run["epochs"], 1)
    assert (kept["epoch"], stop) == (1, 3)
    kept, stop = bench.patience_best(bench.rule_epochs(run), 1)
    assert (kept["epoch"], stop) == (3, None)
    # a budget's unfinished last epoch (its last point not an epoch's end) is not an epoch RecBole would validate;
    # a NaN value is left out
    curve[-1]["end_of_epoch"] = False
    run = _ours(curve) | {"epochs": _epochs(0.13, 0.12, float("nan"), 0.11)}
    assert [e["epoch"] for e in bench.rule_epochs(run)] == [1, 2]
    assert bench.patience_best(bench.rule_epochs(run), 1) == (bench.rule_epochs(run)[0], None)


def test_every_reading_is_also_read_against_the_median_corrected_time(bench):
    # RecBole's best at 6,000 s, of which a slow epoch's excess makes 1,500 s: 4,500 s corrected. Ours keeps
    # weights at 1,100 s: 0.183 of 6,000 (met) but 0.244 of 4,500 (not met), on all three readings
    curve = [{"train_s": 500.0, "epoch": 1, "ndcg@10": 0.12}, {"train_s": 1100.0, "epoch": 2, "ndcg@10": 0.152},
             {"train_s": 1600.0, "epoch": 3, "ndcg@10": 0.153}, {"train_s": 2100.0, "epoch": 4, "ndcg@10": 0.151}]
    run = _ours(curve) | {"epochs": _epochs(0.10, 0.13, 0.12, 0.11)}
    rb = _rb(train_s=6000.0, test=0.15, patience=1)
    rb["epochs"] = [{"epoch": i, "train_s": s} for i, s in enumerate((1500.0, 1500.0, 3000.0, 1500.0, 1500.0), 1)]
    rb["best_valid"]["epoch"] = 3
    lines = bench.convergence_lines(rb, [run])
    assert "RecBole's best came after 4,500 training seconds" in lines[1]
    # the floor: 3 epochs at the run's fastest (1,500 s) — here equal to the median-corrected time
    assert lines[2].endswith("(epoch 1, 1,500 s), its best would have come after 4,500 training seconds.")
    floors = "; against the median-corrected 4,500 s, 0.244: **not met**; against the fastest-epoch floor 4,500 s, 0.244: **not met**."
    assert lines[3].endswith("0.183 of RecBole's 6,000 (5.5× sooner): the ≤ 1/5 goal is met, on the point estimates "
                             "(no paired interval: per-user ranks were not kept of those weights or of RecBole's best)"
                             + floors)
    assert lines[4].endswith("0.183 of RecBole's 6,000: met on this reading, on the point estimates (no paired "
                             "interval: per-user ranks were not kept of those weights or of RecBole's best)" + floors)
    assert ("met on the point estimates" + floors) in lines[5]


def test_verdicts_use_recboles_unrounded_value_and_flag_a_last_point_touch(bench):
    curve = [{"train_s": 400.0, "epoch": 1, "ndcg@10": 0.12}, {"train_s": 800.0, "epoch": 2, "ndcg@10": 0.15004},
             {"train_s": 1200.0, "epoch": 3, "ndcg@10": 0.149}, {"train_s": 1600.0, "epoch": 4, "ndcg@10": 0.140}]
    run = _ours(curve) | {"epochs": _epochs(0.10, 0.13, 0.12, 0.11)}
    rb = _rb(train_s=6000.0, test=0.15, patience=1)  # RecBole reports 0.1500: unrounded it was 0.15004..0.15005
    assert "(+0.0000; " in bench.convergence_lines(rb, [run])[-1]
    assert bench.convergence_lines(rb, [run])[-1].endswith("met on the point estimates.")
    rb["ranks"] = {"best": {"epoch": 3, "ndcg@10_from_ranks": 0.150049}}
    assert bench.recbole_best_exact(rb) == 0.150049
    line = bench.convergence_lines(rb, [run])[-1]
    assert "against RecBole's 0.1500 (-0.0000; " in line and line.endswith("its converged value is below RecBole's.")
    rb["ranks"]["best"]["epoch"] = 2  # ranks of another epoch than the best: the reported value stands
    assert bench.recbole_best_exact(rb) == 0.15
    # a curve at or above the target only at its last point: said so
    touch = _ours(_curve((500, 0.12), (1000, 0.14), (1100, 0.151)))
    assert "(every later point too) (its last point only: one evaluation, not a level held)" in \
        bench.convergence_lines(_rb(train_s=6000.0, test=0.15), [touch])[1]


def test_machines_line_skips_an_epoch_without_its_time(bench):
    rb = {"epochs": [{"epoch": 1, "train_s": 100.0, "cpu": "A"}, {"epoch": 2, "cpu": "A"}]}
    assert "1 epoch(s) finished on A (median 100 s)" in bench.machines_line(rb, [{"cpu": "A"}])


def test_readings_use_recboles_unrounded_best_and_a_floor_that_needs_no_grouping(bench):
    # RecBole reports 0.1468; unrounded its best is 0.146753. Ours at 0.14676 from 1,000 s is at or above the
    # unrounded value (the rounded one would have put the reading at 2,000 s)
    curve = [{"train_s": 500.0, "epoch": 1, "ndcg@10": 0.12}, {"train_s": 1000.0, "epoch": 2, "ndcg@10": 0.14676},
             {"train_s": 2000.0, "epoch": 3, "ndcg@10": 0.147}]
    run = _ours(curve) | {"epochs": _epochs(0.10, 0.13, 0.14)}
    rb = _rb(train_s=4400.0, test=0.1468, patience=1)
    rb["ranks"] = {"best": {"epoch": 3, "ndcg@10_from_ranks": 0.146753}}
    # epochs' times (none slow): the fastest of the run (900 s) came after the best; the floor is 3 x 900 s
    rb["epochs"] = [{"epoch": i, "train_s": s} for i, s in enumerate((1000.0, 1000.0, 1100.0, 900.0, 1000.0), 1)]
    assert bench.fastest_bound(rb) == (2700.0, rb["epochs"][3])
    lines = bench.convergence_lines(rb, [run])
    assert lines[1] == ("- A floor that needs no grouping by machine (a hypothetical, favourable to RecBole): had "
                        "each of RecBole's 3 epochs up to its best gone at the pace of its fastest epoch of the whole "
                        "run, on whichever machine (epoch 4, 900 s), its best would have come after 2,700 training "
                        "seconds.")
    assert lines[2].startswith("- ours: at or above 0.1468 from 1,000.0 training seconds on (every later point too), "
                               "0.227 of RecBole's 4,400 (4.4× sooner): the ≤ 1/5 goal is **not met**; against the "
                               "fastest-epoch floor 2,700 s, 0.370: **not met**.")
    assert "from 1,000.0 training seconds on (epoch 2's weights)" in lines[3]
    # without epoch times there is no floor line
    rb["epochs"] = [{}] * 5
    assert not any("floor" in line for line in bench.convergence_lines(rb, [run]))


def test_ours_stopped_as_recbole_says_what_its_patience_is_in_seconds_on_each_side(bench):
    curve = [{"train_s": 20.0 * i, "epoch": i, "ndcg@10": 0.151} for i in range(1, 5)]
    run = _ours(curve) | {"epochs": [{"epoch": i, "valid_ndcg@10": v, "train_s": 20.0}
                                     for i, v in enumerate((0.10, 0.13, 0.12, 0.11), 1)]}
    rb = _rb(train_s=6000.0, test=0.15, patience=1)
    rb["epochs"] = [{"epoch": i, "train_s": 1400.0} for i in range(1, 9)]
    line = bench.convergence_lines(rb, [run])[-1]
    assert line.endswith("Patience counts epochs: 1 epoch(s) of ours (median 20 s) ≈ 20 training seconds; of "
                         "RecBole's (median 1,400 s) ≈ 1,400.")


def test_report_pairs_the_weights_each_reading_keeps_with_recboles_best(bench, tmp_path):
    args, data, rb, runs, loads, wall = _full_results(with_ranks=True)
    rb["stopped"], rb["patience"] = "patience", 1
    rb["best_valid"]["train_s"] = 4000.0  # ours' readings within 1/5 of it: "met, on the point estimates"
    rb["ranks"]["best"]["ndcg@10_from_ranks"] = 0.1  # RecBole's best, unrounded: the readings' target
    ours = runs[0]
    # reading 1 holds from 300 s, a point inside epoch 2 (no ranks kept of it); reading 2 from 400.5 s, where
    # epoch 2's weights (its best validation) reach 0.11
    ours["curve"] = [{"train_s": t, "samples": 10, "positions": 100, "epoch": e, "end_of_epoch": end, "ndcg@10": n,
                      "hit@10": 2 * n, "eval_s": 1.0}
                     for t, e, end, n in ((100.0, 1, False, 0.05), (200.0, 1, True, 0.09), (300.0, 2, False, 0.12),
                                          (400.5, 2, True, 0.11), (500.0, 3, True, 0.105))]
    ours["epochs"] = [{"epoch": e, "train_s": 200.0, "samples": 10, "samples_per_s": 40.0, "loss": 1.0,
                       "valid_ndcg@10": v} for e, v in ((1, 0.1), (2, 0.3), (3, 0.2))]
    users = sorted(rb["ranks"]["best"]["ranks"])
    epoch2 = {u: max(1, r - 2) for u, r in rb["ranks"]["best"]["ranks"].items()}
    mid2 = {u: max(1, r - 1) for u, r in rb["ranks"]["best"]["ranks"].items()}  # 300 s, inside epoch 2
    best = rb["ranks"]["best"]["ranks"]
    # every point's ranks in the curve's order, each a line of numbers in `users`' order, as the worker writes them
    per_point = ([best[u] + 9 for u in users], [best[u] + 5 for u in users], [mid2[u] for u in users],
                 [epoch2[u] for u in users], [best[u] for u in users])
    ours["point_ranks"] = {"users": users, "ranks": [",".join(map(str, r)) for r in per_point]}
    # the worker's own choice (unrounded validation) named another epoch: (d) follows reading 2's, epoch 2
    ours["ranks"]["selected"] = {"train_s": 500.0, "epoch": 3, "ndcg@10": 0.105, "ranks": best}
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    rows = {line[2:5]: line for line in text.splitlines() if line.startswith(("| (d) ", "| (e) ", "| (f) "))}
    assert set(rows) == {"(d)", "(e)", "(f)"}

    def diff_of(ranks):
        return (bench.user_ndcg(ranks, users) - bench.user_ndcg(best, users)).mean()

    assert diff_of(epoch2) > 0 and diff_of(mid2) > 0 and diff_of(mid2) != diff_of(epoch2)
    for k in ("(d)", "(f)"):
        assert f"| {diff_of(epoch2):+.4f} | [" in rows[k]
    assert "its weights of best validation NDCG@10 over its run (epoch 2)" in rows["(d)"]
    assert "reading 2's weights at its first point at or above RecBole's best (epoch 2's, chosen at 400.5 s)" in rows["(f)"]
    assert "reading 1's first point at or above RecBole's best (300.0 s)" in rows["(e)"]
    assert f"| {diff_of(mid2):+.4f} | [" in rows["(e)"]  # a point inside an epoch: its ranks are kept too
    assert "| recharness SASRec (fp32), reading 1's first point at or above RecBole's best (300.0 s) | 300.0 |" in text
    assert ("at or above 0.1000 from 400.5 training seconds on (epoch 2's weights)" in text
            and "row (f) of the table below" in text and "row (e) of the table below" in text)
    # ranks of another length than the users (a damaged record): no ranks for that row, the report still renders
    ours["point_ranks"]["ranks"][2] = "1,2"
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    assert next(line for line in text.splitlines() if line.startswith("| (e) ")).endswith("| – | – | – |")
    # RecBole not converged: no reading rows
    rb["stopped"] = "epochs"
    text = bench.report(args, data, rb, runs, loads, wall, tmp_path / "r.md")
    assert "| (e) " not in text and "| (f) " not in text and "| (d) " in text


def test_the_code_fingerprint_names_the_recharness_files_that_decide_our_numbers(bench, tmp_path):
    files = bench.worker_sources()
    assert {"baselines/sasrec.py", "baselines/linear_cross_entropy.py", "baselines/training.py",
            "metrics/full_ranking.py", "tasks/recbench/seqrec_data.py"} <= set(files)
    assert "core/io.py" not in files and all(len(d) == 12 for d in files.values())
    # a kept run refused for a file of them says which; one from before files were recorded says so
    spec = {"seed": 0, "budget_s": 100.0, "marks": [50.0], "code": "x", "code_files": files}
    kept = tmp_path / "ours-fp32.json"
    changed = {**files, "metrics/full_ranking.py": "0" * 12}
    kept.write_text(json.dumps({"spec": {**spec, "code": "y", "code_files": changed}, "wall_s": 1.0}))
    assert bench.reusable(kept, spec) is None
    assert bench.not_reusable_why(kept, spec) == "differs in recharness files: metrics/full_ranking.py"
    kept.write_text(json.dumps({"spec": {**spec, "code": "y"}, "wall_s": 1.0}))
    assert bench.not_reusable_why(kept, spec) == "differs in code: this script's worker functions or torch's version"
    old = {k: v for k, v in spec.items() if k != "code_files"}
    kept.write_text(json.dumps({"spec": {**old, "code": "y", "seed": 1}, "wall_s": 1.0}))
    assert bench.not_reusable_why(kept, spec) == "differs in recharness files: not recorded by that run; seed"
    kept.write_text(json.dumps({"spec": {**spec, "marks": []}, "wall_s": 1.0}))
    assert bench.not_reusable_why(kept, spec) == "lacks 1 RecBole curve point(s) it needs"

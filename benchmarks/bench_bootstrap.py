"""Time the bootstrap intervals of recharness.metrics.bootstrap on benchmark-sized inputs.

Run by hand:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_bootstrap.py [--resamples 1000] [--coverage]
Writes benchmarks/results/bootstrap.md (table, machine info, date). `--coverage` then also runs the
cluster-bootstrap coverage simulation (benchmarks/bench_bootstrap_coverage.py: 500 simulated datasets with
user effects, `--datasets N`; does the 95% interval hold the truth 93-97% of the time, resampling users vs
resampling samples; the cluster bootstrap's time on 20,000 CTR pairs of 6,000 users), which writes
benchmarks/results/bootstrap_coverage.md; it takes minutes, so it is asked for.

Workloads (fixed seeds), each 1,000 resamples and a 95% percentile interval:
* AUC of 20,000 (score, label) samples (RecBench CTR's test set size): count weights over one sort;
* GAUC of the same samples over 5,000 users (4 pairs each), resampling users, for each of the
  three weightings (impressions, positives, uniform);
* NDCG@10 of 5,000 ranked lists (RecBench seqrec's test users), resampling lists;
* the paired comparison of two CTR models (bootstrap of the AUC difference + 1,000-permutation test).
Each is set beside the naive way (re-scoring every resample with scikit-learn / our metric
functions), timed on a few resamples and extrapolated; and every vectorised interval is checked
against an explicit re-scoring of its first resamples, so a fast wrong answer cannot pass.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from machine import cpu_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
try:
    import recharness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))

import scipy
from sklearn.metrics import roc_auc_score

from recharness.metrics.bootstrap import (
    AUCUnits,
    mean_units,
    paired_bootstrap,
    paired_permutation,
    percentile_ci,
    resample_counts,
)
from recharness.metrics.classification import gauc, gauc_units
from recharness.metrics.ranking import target_metrics

RESULTS = ROOT / "benchmarks" / "results" / "bootstrap.md"


def interval(units, resamples: int, seed: int = 0):
    reps = np.concatenate([units.replicates(w) for w in resample_counts(units.n, resamples, seed, units.strata)])
    return percentile_ci(reps), reps


def timed(fn, repeats: int = 3):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def naive(score_one, n: int, resamples: int, seed: int = 0, tries: int = 20) -> tuple[float, np.ndarray]:
    """Seconds per resample of re-scoring (the first `tries` resamples of the same counts), and their values."""
    rows = np.concatenate(list(resample_counts(n, tries, seed)))
    t = time.perf_counter()
    vals = np.array([score_one(np.repeat(np.arange(n), r.astype(np.int64))) for r in rows])
    return (time.perf_counter() - t) / tries, vals


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--coverage", action="store_true",
                    help="also run the coverage simulation (bench_bootstrap_coverage.py; minutes)")
    ap.add_argument("--datasets", type=int, default=500, help="simulated datasets for --coverage")
    args = ap.parse_args()
    B = args.resamples
    load0 = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    rows = []

    # CTR: 20,000 samples of 5,000 users, 4 each; ~40% clicks; scores with some signal and ties
    users = np.repeat(np.arange(5000), 4)
    y = (rng.random(20000) < 0.4).astype(np.int8)
    s = np.round(rng.random(20000) + 0.35 * y, 3)
    ids = [f"ctr-{i}" for i in range(20000)]
    au = AUCUnits(ids, s, y)
    t, (ci, reps) = timed(lambda: interval(au, B))
    per, vals = naive(lambda idx: roc_auc_score(y[idx], s[idx]), 20000, B)
    assert np.allclose(vals, reps[: vals.size], atol=1e-12), "AUC replicates differ from re-scoring"
    rows.append(("AUC, 20,000 samples", t, per * B, "`roc_auc_score` per resample", f"{au.point():.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"))

    for w in ("impressions", "positives", "uniform"):
        gu = gauc_units(y, s, users, w)
        t, (ci, reps) = timed(lambda gu=gu: interval(gu, B))
        if w == "impressions":
            t_units, _ = timed(lambda: gauc_units(y, s, users, "impressions"))
            order = np.argsort(users, kind="stable")
            starts = np.searchsorted(users[order], np.arange(5000))

            def regauc(uidx):  # resampled users, each with all its pairs (renamed apart), scored by gauc()
                pos = (starts[uidx][:, None] + np.arange(4)).ravel()
                return gauc(y[order][pos], s[order][pos], np.repeat(np.arange(uidx.size), 4)).weighted

            per, vals = naive(regauc, 5000, B)
            assert np.allclose(vals, reps[: vals.size], atol=1e-12), "GAUC replicates differ from re-scoring"
            ref = (per * B, "`gauc()` on the resampled users per resample")
            note = f" (+{t_units:.3f} s once for the per-user AUCs)"
        else:
            ref, note = (None, ""), ""
        rows.append((f"GAUC ({w}), 5,000 users{note}", t, ref[0], ref[1], f"{gu.point():.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"))

    # seqrec: 5,000 lists, the target's rank (0: not ranked) -> per-list NDCG@10
    ranks = np.where(rng.random(5000) < 0.4, rng.integers(1, 40, 5000), 0)
    lists = [[f"i{k}" for k in range(1, 21)] for _ in range(5000)]
    targets = [f"i{r}" if r else "none" for r in ranks]
    t_per, per_sample = timed(lambda: target_metrics(lists, targets, ks=(10,), per_sample=True))
    nu = mean_units([f"u{i}" for i in range(5000)], per_sample["ndcg@10"])
    t, (ci, reps) = timed(lambda: interval(nu, B))
    per, vals = naive(lambda idx: target_metrics([lists[i] for i in idx], [targets[i] for i in idx], ks=(10,))["ndcg@10"],
                      5000, B)
    assert np.allclose(vals, reps[: vals.size], atol=1e-12), "NDCG replicates differ from re-scoring"
    rows.append((f"NDCG@10, 5,000 lists (+{t_per:.3f} s once for the per-list values)", t, per * B,
                 "`target_metrics` per resample", f"{nu.point():.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"))

    # paired: two CTR models on the same samples
    s2 = np.round(0.7 * s + 0.3 * rng.random(20000), 3)
    bu = AUCUnits(ids, s2, y)
    t, res = timed(lambda: paired_bootstrap(au, bu, B), repeats=1)
    rows.append((f"paired bootstrap of the AUC difference, 20,000 samples, {B:,} resamples", t, None, "",
                 f"{res['diff']:+.4f} [{res['lo']:+.4f}, {res['hi']:+.4f}], p " + (f"< {1 / B:g}" if res["p"] == 0 else f"= {res['p']:.3g}")))
    t, res = timed(lambda: paired_permutation(au, bu, B), repeats=1)
    rows.append((f"permutation test of the AUC difference, 20,000 samples, {B:,} permutations", t, None,
                 "", f"p = {res['p']:.3g}"))

    # a whole RecBench CTR score table: 14 rows (LLMs, DLRMs, references) on the same 20,000 samples
    from recharness.core.types import ScoreRow
    from recharness.runner.intervals import add_confidence_intervals
    from recharness.tasks.recbench.ctr import CtrTask

    task = CtrTask()
    samples = [{"id": i, "user_id": int(u), "label": int(lab)} for i, u, lab in zip(ids, users, y)]
    scored = []
    for m in range(14):
        sm = np.clip(np.round(s * (0.5 + m / 28) + rng.random(20000) * (1 - m / 28), 3), 0, 1)
        recs = {i: {"parsed": {"p_yes": float(v)}, "valid": True} for i, v in zip(ids, sm)}
        scored.append((ScoreRow(f"m{m}", "ctr", task.score(samples, recs), 20000), recs))
    t0 = time.perf_counter()
    add_confidence_intervals(task, samples, scored, resamples=B, seed=0)
    t = time.perf_counter() - t0
    assert all(len(r.ci) == 6 for r, _ in scored)
    top = sum(r.ci["AUC"]["top"] for r, _ in scored)
    rows.append(("a whole RecBench CTR table: 14 rows x (AUC, 3 GAUCs, log loss, invalid rate), units from "
                 "the task, marks of the best", t, None, "", f"{top} row(s) in bold for AUC"))

    load1 = os.getloadavg()[0]
    lines = [
        "# Bootstrap confidence intervals: benchmark\n",
        f"Generated by `benchmarks/bench_bootstrap.py` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.\n",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}. Times: best of 3 (1 for the paired rows). 1-minute load "
        f"average {load0:.1f} at the start and {load1:.1f} at the end (a shared machine).\n",
        f"Each row: {B:,} resamples and a 95% percentile interval (`metrics.bootstrap`). The naive column "
        "re-scores each resample (20 timed, extrapolated); the first 20 vectorised replicates were checked "
        "to equal those re-scorings to 1e-12.\n",
        "| workload | vectorised (s) | naive re-scoring (s, extrapolated) | naive | value [95% CI] |",
        "|---|---:|---:|---|---|",
    ]
    for name, t, ref, how, val in rows:
        lines.append(f"| {name} | {t:.3f} | {'' if ref is None else f'{ref:.1f}'} | {how} | {val} |")
    lines.append("\nFor scale: running an LLM over the 20,000 CTR samples takes hours (SmolLM2-135M: 0.63 s per sample "
                 "on 2026-11-28, about 3.5 h; benchmarks/results/recbench_ctr.md), training the DLRMs about 3 minutes.")
    lines.append("\nWhether the intervals are right, not only fast: the cluster bootstrap's coverage by simulation "
                 "(`--coverage`, or `benchmarks/bench_bootstrap_coverage.py`) is in "
                 "benchmarks/results/bootstrap_coverage.md.")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.coverage:
        run_coverage(args.datasets, B)


def run_coverage(datasets: int, resamples: int) -> None:
    """The coverage simulation of benchmarks/bench_bootstrap_coverage.py, with these settings."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_bootstrap_coverage

    argv, sys.argv = sys.argv, [bench_bootstrap_coverage.__file__, "--datasets", str(datasets),
                                "--resamples", str(resamples)]
    try:
        bench_bootstrap_coverage.main()
    finally:
        sys.argv = argv


if __name__ == "__main__":
    main()

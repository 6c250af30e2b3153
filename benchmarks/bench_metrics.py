"""Time recharness.metrics against scikit-learn / scipy on benchmark-sized inputs.

Run by hand:  .venv/bin/python benchmarks/bench_metrics.py [--quick]
Writes benchmarks/results/metrics.md (table, machine info, date).

Workloads (fixed seeds):
* CTR: 1,000,000 (user, label, score) rows over ~100,000 users -> AUC, GAUC, log loss.
* Ranking: 100,000 ranked lists of 10 string item ids -> HR/precision/recall/NDCG/MRR @1,5,10
  (leave-one-out targets, and relevant sets of 1-5 items).
* Kendall tau-b per user over the same 1,000,000 rows.
Every timed pair is also checked to agree to 1e-9, so a fast wrong answer cannot pass.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from machine import cpu_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
try:
    import recharness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))

import scipy
import sklearn
from scipy.stats import kendalltau
from sklearn.metrics import log_loss, ndcg_score, roc_auc_score

from recharness.metrics import auc, gauc, kendall_tau_groups, logloss, ranking_metrics

RESULTS = ROOT / "benchmarks" / "results" / "metrics.md"


def best_of(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def sk_log_loss(y, p):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return log_loss(y, y_proba=p)
        except TypeError:
            return log_loss(y, p)


def check(name, ours, ref, tol=1e-9):
    if not abs(ours - ref) <= tol:
        raise SystemExit(f"{name}: recharness {ours!r} != reference {ref!r}")


def bench_ctr(n, n_users, loop_users, rows):
    rng = np.random.default_rng(0)
    users = rng.integers(0, n_users, n)
    affinity = rng.normal(0, 1, n_users)[users]
    y = (rng.random(n) < 1 / (1 + np.exp(-(affinity - 1.5)))).astype(np.int8)
    score = (1 / (1 + np.exp(-(0.8 * y + affinity + rng.normal(0, 1, n) - 1.5)))).astype(np.float32)
    score = np.round(score, 4)  # some ties, as from a quantised model output

    t_ours, a = best_of(lambda: auc(y, score), 3)
    t_sk, a_ref = best_of(lambda: roc_auc_score(y, score), 3)
    check("AUC", a, a_ref)
    rows.append((f"AUC, {n:,} samples", t_ours, t_sk, "`roc_auc_score`", f"{a:.6f}"))

    t_ours, g = best_of(lambda: gauc(y, score, users), 3)
    # scikit-learn has no GAUC: the usual per-user loop, timed on a subset of users, extrapolated.
    order = np.argsort(users, kind="stable")
    u_sorted = users[order]
    starts = np.flatnonzero(np.r_[True, u_sorted[1:] != u_sorted[:-1]])
    bounds = np.r_[starts, n]
    n_groups = starts.size

    def loop(n_take):
        aucs, w = [], []
        for i in range(n_take):
            idx = order[bounds[i] : bounds[i + 1]]
            yy = y[idx]
            if yy.min() == yy.max():
                continue
            aucs.append(roc_auc_score(yy, score[idx]))
            w.append(idx.size)
        return np.array(aucs), np.array(w, dtype=float)

    t_sub, _ = best_of(lambda: loop(loop_users), 1)
    t_loop = t_sub * n_groups / loop_users
    # correctness of the full GAUC against the full loop would take minutes; check the subset's groups.
    sub_mask = np.isin(users, u_sorted[starts[:loop_users]])
    aucs, w = loop(loop_users)
    g_sub = gauc(y[sub_mask], score[sub_mask], users[sub_mask])
    check("GAUC (subset)", g_sub.weighted, float(np.dot(aucs, w) / w.sum()))
    check("GAUC unweighted (subset)", g_sub.unweighted, float(aucs.mean()))
    rows.append(
        (
            f"GAUC, {n:,} samples / {n_groups:,} users ({g.n_groups:,} with both classes)",
            t_ours,
            t_loop,
            f"per-user `roc_auc_score` loop: {t_sub:.2f} s for {loop_users:,} users, extrapolated x{n_groups / loop_users:.0f}",
            f"{g.weighted:.6f} (unweighted {g.unweighted:.6f})",
        )
    )

    p = score.astype(np.float64)
    t_ours, ll = best_of(lambda: logloss(y, p), 3)
    t_sk, ll_ref = best_of(lambda: sk_log_loss(y, p), 3)
    check("logloss", ll, ll_ref)
    rows.append((f"log loss, {n:,} samples", t_ours, t_sk, "`log_loss`", f"{ll:.6f}"))
    return users, y, score


def bench_kendall(users, rows, loop_users):
    rng = np.random.default_rng(1)
    n = users.size
    truth = rng.integers(1, 6, n).astype(np.float64)  # 1-5 ratings: many ties
    pred = truth + rng.normal(0, 1.5, n)
    t_ours, (ids, taus, _) = best_of(lambda: kendall_tau_groups(truth, pred, users), 3)
    order = np.argsort(users, kind="stable")
    u_sorted = users[order]
    starts = np.flatnonzero(np.r_[True, u_sorted[1:] != u_sorted[:-1]])
    bounds = np.r_[starts, n]

    def loop():
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(loop_users):
                idx = order[bounds[i] : bounds[i + 1]]
                out.append(kendalltau(truth[idx], pred[idx]).statistic)
        return np.array(out)

    t_sub, ref = best_of(loop, 1)
    got = taus[:loop_users]
    if not (np.array_equal(np.isnan(got), np.isnan(ref)) and np.nanmax(np.abs(got - ref)) <= 1e-9):
        raise SystemExit("Kendall tau per group disagrees with scipy")
    ok = ~np.isnan(taus)
    rows.append(
        (
            f"Kendall tau-b per user, {n:,} samples / {ids.size:,} users",
            t_ours,
            t_sub * ids.size / loop_users,
            f"per-user `scipy.stats.kendalltau` loop: {t_sub:.2f} s for {loop_users:,} users, extrapolated",
            f"mean {taus[ok].mean():.6f} over {int(ok.sum()):,} users",
        )
    )


def bench_ranking(n_lists, rows):
    rng = np.random.default_rng(2)
    n_items, length = 20_000, 10
    names = np.array([f"item{i}" for i in range(n_items)])
    ids = rng.integers(0, n_items, size=(n_lists, length))
    ranked = names[ids].tolist()
    tgt_ids = rng.integers(0, n_items, n_lists)
    hit = rng.random(n_lists) < 0.4  # ~40% of targets somewhere in the list
    tgt_ids[hit] = ids[hit, rng.integers(0, length, hit.sum())]
    targets = names[tgt_ids].tolist()
    ks = (1, 5, 10)

    # scikit-learn input: one row per list, columns = the 10 ranked items + the target if missing.
    def dense(rel_ids_per_row, extra):
        cols = length + extra
        y_true = np.zeros((n_lists, cols))
        y_score = np.tile(np.arange(cols, 0, -1, dtype=np.float64), (n_lists, 1))
        for i, rel in enumerate(rel_ids_per_row):
            row = ids[i]
            seen = set()
            for j, item in enumerate(row.tolist()):
                if item in rel and item not in seen:  # duplicates: first occurrence only
                    y_true[i, j] = 1
                seen.add(item)
            missing = [r for r in rel if r not in seen]
            y_true[i, length : length + len(missing)] = 1
        return y_true, y_score

    t_ours, m = best_of(lambda: ranking_metrics(ranked, targets, ks=ks), 3)
    y_true, y_score = dense([{t} for t in tgt_ids.tolist()], 1)
    t_sk, ref = best_of(lambda: ndcg_score(y_true, y_score, k=10), 1)
    t_sk_fast, ref2 = best_of(lambda: ndcg_score(y_true, y_score, k=10, ignore_ties=True), 3)
    check("NDCG@10 (leave-one-out)", m["ndcg@10"], ref)
    check("NDCG@10 (leave-one-out, ignore_ties)", m["ndcg@10"], ref2)
    label = f"{n_lists:,} lists x {length}, one target: HR/P/R/NDCG/MRR @1,5,10 + MRR"
    rows.append((label, t_ours, t_sk, "`ndcg_score(k=10)` (NDCG@10 only; dense matrix built outside the timer)", f"NDCG@10 {m['ndcg@10']:.6f}, HR@10 {m['hr@10']:.6f}"))
    rows.append((label, t_ours, t_sk_fast, "`ndcg_score(k=10, ignore_ties=True)` (same)", ""))

    t_np, m_np = best_of(lambda: ranking_metrics(ids, tgt_ids, ks=ks), 3)
    check("2-D int array path", m_np["ndcg@10"], m["ndcg@10"])
    rows.append((f"{n_lists:,} lists as a 2-D int array, one target", t_np, t_sk_fast, "`ndcg_score(k=10, ignore_ties=True)`", ""))

    sizes = rng.integers(1, 6, n_lists)
    rel_ids = [set(rng.integers(0, n_items, s).tolist()) | ({int(t)} if h else set()) for s, t, h in zip(sizes, tgt_ids, hit)]
    relevant = [set(names[list(r)].tolist()) for r in rel_ids]
    t_ours, m = best_of(lambda: ranking_metrics(ranked, relevant, ks=ks), 3)
    y_true, y_score = dense(rel_ids, 6)
    t_sk, ref = best_of(lambda: ndcg_score(y_true, y_score, k=10), 1)
    check("NDCG@10 (relevant sets)", m["ndcg@10"], ref)
    rows.append(
        (
            f"{n_lists:,} lists x {length}, 1-6 relevant items each: same metrics",
            t_ours,
            t_sk,
            "`ndcg_score(k=10)` (NDCG@10 only)",
            f"NDCG@10 {m['ndcg@10']:.6f}, recall@10 {m['recall@10']:.6f}",
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10x smaller inputs, results not written")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    load_before = os.getloadavg()[0]
    rows: list[tuple[str, float, float, str, str]] = []
    users, _, _ = bench_ctr(1_000_000 // scale, 100_000 // scale, 2_000 // scale, rows)
    bench_kendall(users, rows, 2_000 // scale)
    bench_ranking(100_000 // scale, rows)

    lines = [
        "# recharness.metrics benchmark",
        "",
        f"Generated by `benchmarks/bench_metrics.py` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}.",
        "",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"scikit-learn {sklearn.__version__}. Single process; times are the best of 3 runs "
        "(1 run for the slow reference loops and the default `ndcg_score`). "
        f"1-minute load average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
        "(a shared machine inflates both columns; the ratio is the more stable figure).",
        "",
        "Every row was checked to agree with the reference to 1e-9 before it was written.",
        "",
        "| workload | recharness (s) | reference (s) | reference / recharness | reference | value |",
        "|---|---:|---:|---:|---|---|",
    ]
    for label, ours, ref, how, value in rows:
        ratio = ref / ours
        speed = f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2f}x"
        lines.append(f"| {label} | {ours:.3f} | {ref:.3f} | {speed} | {how} | {value} |")
    lines += [
        "",
        "Notes:",
        "- The ranking times for recharness start from Python lists of string ids and include "
        "finding the hits (one `list.index` per list for single targets, a set lookup per item otherwise) "
        "and all 16 metrics; scikit-learn's time covers one metric (NDCG@10) on a ready-made dense matrix.",
        "- GAUC and per-user Kendall references are Python loops over users; they were timed on the first "
        "users (sorted by id) and scaled linearly by the number of users, as noted in each row. "
        "Agreement was checked on those users.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

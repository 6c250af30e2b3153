"""Does the DLRMs' user-id field help? DeepFM with and without it, on the same RecBench CTR build.

RecBench's Eq. 2 feeds a DLRM the history only; recharness adds a user-id field by default
(`use_user=True`: histories hold clicks only, so without it a model cannot tell a generous rater from a
strict one). This trains DeepFM both ways on the same training pairs with the same seed and settings,
and states for each: its best validation AUC (the held-out slice of the training pairs its early
stopping reads) and its test AUC / GAUC / logloss, with the paired difference over the test users
(users resampled and permuted together with their pairs, as `recharness compare`).

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_user_field.py [--out DIR]
Writes benchmarks/results/user_field.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.baselines import TrainData, fit  # noqa: E402
from recharness.data.store import load_dataset  # noqa: E402
from recharness.metrics.bootstrap import paired_bootstrap, paired_permutation  # noqa: E402
from recharness.runner import pipeline  # noqa: E402
from recharness.runner.latency import timed_predict  # noqa: E402
from recharness.tasks.registry import get_task  # noqa: E402

OUT = Path(__file__).parent / "results" / "user_field.md"
METRICS = ("AUC", "GAUC", "logloss")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-user-field"), help="the build's run directory")
    ap.add_argument("--model", default="deepfm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--result", type=Path, default=OUT)
    args = ap.parse_args()

    load = os.getloadavg()[0]
    pipeline.build("recbench", "ml-1m", args.out, tasks=["ctr"], seed=args.seed)
    _, samples = pipeline.load_build(args.out)
    samples = [s for s in samples if s["task"] == "ctr"]
    task = get_task("recbench", "ctr")
    data = TrainData.of_build(load_dataset("ml-1m"), args.out, "recbench")
    side = {}
    for use_user in (False, True):
        model, seconds = fit(args.model, data, args.seed, {"use_user": use_user})
        recs, _ = timed_predict(model, samples, 0, task=task)
        side[use_user] = {"valid": model.log.best_auc, "epoch": model.log.best_epoch, "seconds": seconds,
                          "metrics": task.score(samples, recs), "units": task.units(samples, recs)}
        print(f"use_user={use_user}: valid AUC {model.log.best_auc:.4f}, test AUC "
              f"{side[use_user]['metrics']['AUC']:.4f} ({seconds:.0f} s)", file=sys.stderr)

    a, b = side[True], side[False]
    lines = [
        f"# {args.model}: the user-id field, with and without (RecBench CTR, ML-1M)", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}; load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end",
        f"- build: `recharness build recbench -t ctr -d ml-1m --seed {args.seed}` (defaults: "
        f"{data.pairs.height:,} training pairs, {len(samples):,} test pairs of "
        f"{len({s['user_id'] for s in samples}):,} users); both models: the default settings but `use_user`, "
        f"seed {args.seed}, trained one after the other in this run",
        "- validation AUC: the best epoch's AUC on the held-out slice of the training pairs (what early stopping "
        "reads); test: the build's test pairs. Paired differences: users resampled "
        f"({args.resamples:,} bootstrap resamples) and permuted ({args.resamples:,} permutations) with their pairs, "
        "seed 0, as `recharness compare`",
        "",
        "| inputs | validation AUC (best epoch) | test AUC | test GAUC | test logloss | train (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for use_user, label in ((False, "history + item (RecBench Eq. 2, `use_user=False`)"),
                            (True, "history + item + user id (`use_user=True`, the default)")):
        s = side[use_user]
        m = s["metrics"]
        lines.append(f"| {label} | {s['valid']:.4f} ({s['epoch']}) | {m['AUC']:.4f} | {m['GAUC']:.4f} | "
                     f"{m['logloss']:.4f} | {s['seconds']:.1f} |")
    lines += ["", "| with − without the user field | difference [95% CI] | p (bootstrap) | p (permutation) |",
              "|---|---:|---:|---:|"]
    for metric in METRICS:
        boot = paired_bootstrap(a["units"][metric], b["units"][metric], args.resamples, 0)
        perm = paired_permutation(a["units"][metric], b["units"][metric], args.resamples, 0)
        lines.append(f"| {metric} | {boot['diff']:+.4f} [{boot['lo']:+.4f}, {boot['hi']:+.4f}] | "
                     f"{_p(boot['p'])} | {_p(perm['p'])} |")
    lines += ["", "One seed each: the validation figures carry no interval (one slice, one training run)."]
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


if __name__ == "__main__":
    main()

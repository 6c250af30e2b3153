"""RecBench CTR on ML-1M: every conventional model trained here, timed, on the paper's split sizes.

Builds `recbench -t ctr -d ml-1m --seed 0` with the default (Table 2) sizes — test ≈ 20,000 pairs
of ≈ 5,000 users, ≈ 100,000 training pairs with a validation slice — then runs the `train` stage
over every reference model (nine DLRMs with item as ID, DNN with text and with semantic embedding,
item-mean, popularity, random), scores them and writes the table with AUC, GAUC, logloss, the
training seconds and RecBench's latency per sample (mean of 1,000 single-sample predictions).
With `--llm-run DIR` it adds that run's scores (zero-shot LLMs beside the same trained models, on
the run's own samples) in the Table 3/4 layout.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbench_ctr.py [--out DIR] [--llm-run DIR]
Writes benchmarks/results/recbench_ctr.md. Targets: DeepFM AUC >= 0.75 and above item_mean; the
whole training < 15 min on this machine.
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

from recharness.runner import pipeline  # noqa: E402
from recharness.runner.train import train  # noqa: E402
from recharness.tasks.recbench.tables import across_datasets, latency_label  # noqa: E402

OUT = Path(__file__).parent / "results" / "recbench_ctr.md"


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.4f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/recbench-ctr-full"))
    ap.add_argument("--llm-run", type=Path, default=None, help="a ctr run with LLM predictions, trained too")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    pipeline.build("recbench", "ml-1m", args.out, tasks=["ctr"], seed=args.seed)
    build_s = time.perf_counter() - t0
    split = (args.out / "recbench" / "split.json").read_text()
    t0 = time.perf_counter()
    train(args.out, suite="recbench", seed=args.seed, progress=lambda m: print(m, file=sys.stderr, flush=True))
    train_total = time.perf_counter() - t0
    rows = [r for r in pipeline.score(args.out, seed=args.seed) if r.kind == "reference"]

    lines = [
        "# RecBench CTR on ML-1M: conventional models trained here",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- build: `recharness build recbench -t ctr -d ml-1m --seed {args.seed}` (defaults), {build_s:.1f} s; split:",
        "",
        "```json",
        split.strip(),
        "```",
        "",
        f"- `recharness train recbench` over every model: **{train_total / 60:.1f} min** in all (target < 15 min), "
        "including the latency timing (1,000 single-sample predictions per model).",
        "",
        "| model | AUC ↑ | GAUC ↑ | logloss ↓ | train (s) | latency / sample | batched samples/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: -(r.metrics.get("AUC") or 0)):
        m = r.metrics
        lines.append(f"| {r.method} | {_fmt(m.get('AUC'))} | {_fmt(m.get('GAUC'))} | {_fmt(m.get('logloss'))} | "
                     f"{m.get('train_s', 0):.1f} | {latency_label(m.get('latency_s'))} | "
                     f"{m.get('throughput_per_s', 0):,.0f} |")
    auc = {r.method: r.metrics.get("AUC") for r in rows}
    if "deepfm" in auc and "item_mean" in auc:
        ok = auc["deepfm"] >= 0.75 and auc["deepfm"] > auc["item_mean"]
        lines += ["", f"DeepFM AUC {auc['deepfm']:.4f} vs item_mean {auc['item_mean']:.4f}: "
                      f"{'meets' if ok else 'MISSES'} the target (≥ 0.75 and above item-mean)."]
    if args.llm_run is not None:
        llm_rows = pipeline.score(args.llm_run, seed=args.seed)
        n = llm_rows[0].n if llm_rows else 0
        lines += ["", f"## LLMs zero-shot beside the trained models, on the same {n} test samples (`{args.llm_run}`)",
                  "", across_datasets({"ML-1M": llm_rows}) or ""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

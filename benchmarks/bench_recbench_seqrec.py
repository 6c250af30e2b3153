"""RecBench list-wise (seqrec) on ML-1M: SASRec with 1, 2 and 4 layers and popularity, trained here.

Builds `recharness build recbench -t seqrec -d ml-1m --seed 0` with the default (Table 2) sizes —
5,000 test users (each user's last positive; history the 20 before), their validation rows, the
training windows (≤ 40,000) — then runs the `train` stage for popularity and the SASRec variants,
scores them over the full catalog (history excluded) and writes NDCG@10, HR@10, MRR, Recall@k, the
training samples/s and seconds (from each model's saved fit log) and the latency per sample.

Then a speed probe on RecBole's setting: all of ML-1M's ratings as positives, every user, max
length 50, hidden 64, 2 layers, batch 2,048, `--threads` threads, `--probe-epochs` epoch(s): the
training samples/s to hold against RecBole's 632 samples/s on the same setting (the figure the
issue gives). RecBole itself, side by side on the same split in one run (samples/s, peak memory,
test NDCG@10 vs training seconds): benchmarks/bench_recbole.py → results/recbole_side_by_side.md.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbench_seqrec.py [--threads 2]
Writes benchmarks/results/recbench_seqrec.md. Target: SASRec samples/s ≥ 5 × 632 in the probe.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.baselines import TrainData  # noqa: E402
from recharness.baselines.sasrec import SASRec  # noqa: E402
from recharness.data.store import load_dataset  # noqa: E402
from recharness.runner import pipeline  # noqa: E402
from recharness.runner.train import train  # noqa: E402
from recharness.tasks.recbench.tables import latency_label  # noqa: E402

OUT = Path(__file__).parent / "results" / "recbench_seqrec.md"
MODELS = ["popularity", "sasrec-1l", "sasrec", "sasrec-4l"]
RECBOLE_SAMPLES_PER_S = 632


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.4f}"


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def probe(out: Path, threads: int, epochs: int, seed: int) -> dict:
    """RecBole's setting: every rating a positive, every user, max length 50; samples/s of 2-layer SASRec."""
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=seed,
                   options={"all_users": True, "history_len": 50, "positives": "all"})
    data = TrainData.of_build(load_dataset("ml-1m"), out, "recbench")
    model = SASRec(seed=seed, threads=threads, max_epochs=epochs, patience=epochs, batch_size=2048)
    model.fit(data)
    log = model.log
    return {"threads": threads, "epochs": len(log["epochs"]), "train_rows": int((data.sequences["part"] == "train").sum()),
            "samples_per_epoch": log["epochs"][0]["samples"], "samples_per_s": log["samples_per_s"],
            "per_epoch": [e["samples_per_s"] for e in log["epochs"]], "train_step_s": log["train_step_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/seqrec-run"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="torch threads for training (the RecBole comparison's 2)")
    ap.add_argument("--probe-threads", type=int, nargs="*", default=None, help="threads for the speed probe (default: --threads)")
    ap.add_argument("--probe-epochs", type=int, default=1)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--skip-train", action="store_true", help="score the models already trained in --out")
    ap.add_argument("--skip-probe", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    if not args.skip_train:
        pipeline.build("recbench", "ml-1m", args.out, tasks=["seqrec"], seed=args.seed)
    build_s = time.perf_counter() - t0
    split = json.loads((args.out / "recbench" / "seqrec_split.json").read_text())
    t0 = time.perf_counter()
    if not args.skip_train:
        train(args.out, suite="recbench", seed=args.seed, baselines=args.models, progress=_log)
    train_total = time.perf_counter() - t0
    rows = {r.method: r for r in pipeline.score(args.out, seed=args.seed) if r.kind == "reference"}

    lines = [
        "# RecBench list-wise (seqrec) on ML-1M: SASRec and popularity trained here",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
         f"{args.threads} torch thread(s); the cores are shared with other jobs (load average "
         f"{os.getloadavg()[0]:.1f} at the end), so speeds vary between runs"),
        f"- build: `recharness build recbench -t seqrec -d ml-1m --seed {args.seed}` (defaults), {build_s:.1f} s; split:",
        "",
        "```json",
        json.dumps(split, indent=2),
        "```",
        "",
        (f"- `recharness train recbench --baseline {' --baseline '.join(args.models)}`: {train_total / 60:.1f} min "
         "in all, including the latency timing (1,000 single-sample predictions per model)."),
        ("- ranking over the whole catalog, each user's history excluded for every method; NDCG@10 is the paper's "
         "Table 5 metric. SASRec: hidden 64, 2 heads, FFN 256, dropout 0.2, Adam 1e-3, batch 2,048 samples, "
         "early stopping on validation NDCG@10 (patience 3); samples/s counts next-item predictions trained."),
        "",
        ("| model | layers | NDCG@10 ↑ | HR@10 ↑ | MRR ↑ | Recall@5 | Recall@20 | best / epochs | valid NDCG@10 | "
         "train samples/s | train (s) | latency / sample |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in args.models:
        r = rows.get(name)
        if r is None:
            continue
        m = r.metrics
        cfg_path = args.out / "models" / name / "config.json"
        log = json.loads(cfg_path.read_text())["log"] if cfg_path.exists() else {}
        layers = json.loads(cfg_path.read_text())["settings"]["layers"] if cfg_path.exists() else "–"
        epochs = f"{log['best_epoch']} / {len(log['epochs'])}" if log else "–"
        rate = f"{log['samples_per_s']:,.0f}" if log.get("samples_per_s") else "–"
        lines.append(f"| {name} | {layers} | {_fmt(m.get('NDCG@10'))} | {_fmt(m.get('HR@10'))} | {_fmt(m.get('MRR'))} | "
                     f"{_fmt(m.get('Recall@5'))} | {_fmt(m.get('Recall@20'))} | {epochs} | "
                     f"{_fmt(log.get('best_valid_ndcg@10'))} | {rate} | {m.get('train_s', 0):.1f} | "
                     f"{latency_label(m.get('latency_s'))} |")
    if not args.skip_probe:
        lines += ["", "## Training speed on RecBole's setting", "",
                  ("All 1,000,209 ratings as positives, every user tested (leave-one-out), max length 50, hidden 64, "
                   "2 layers, batch 2,048 samples; one sample = one (prefix → next item) prediction, as RecBole counts "
                   f"them. RecBole's SASRec: {RECBOLE_SAMPLES_PER_S} samples/s on this setting with 2 threads (the "
                   "issue's figure; RecBole itself, side by side in one run: `benchmarks/bench_recbole.py`, "
                   "results in `recbole_side_by_side.md`)."), "",
                  "| threads | training rows | samples / epoch | epochs | samples/s (per epoch) | samples/s | × RecBole |",
                  "|---:|---:|---:|---:|---|---:|---:|"]
        for th in args.probe_threads or [args.threads]:
            _log(f"speed probe, {th} thread(s)…")
            p = probe(args.out.with_name(args.out.name + "-recbole"), th, args.probe_epochs, args.seed)
            lines.append(f"| {p['threads']} | {p['train_rows']:,} | {p['samples_per_epoch']:,} | {p['epochs']} | "
                         f"{', '.join(f'{v:,.0f}' for v in p['per_epoch'])} | {p['samples_per_s']:,.0f} | "
                         f"{p['samples_per_s'] / RECBOLE_SAMPLES_PER_S:.1f} |")
    lines += ["", "Notes:", "",
              "- popularity counts, per item, the users with it in their training windows (never a validation or "
              "test target) and ranks the items it has counts for; its numbers were checked against an independent "
              "count over the raw ratings.",
              "- thread counts: the two cores are shared with other jobs; with one of them busy, two OpenMP threads "
              "spend much of each step waiting for each other, so one thread can be the faster setting here (an idle "
              "machine was not available to measure two threads without that contention)."]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""LoRA fine-tuning of SmolLM2-135M for RecBench CTR on ML-1M (text, ID or semantic-ID items), beside zero-shot.

Builds `recbench -t ctr -d ml-1m` (test users → 4 test pairs each; training pairs from the build's
training split only), scores the zero-shot model (the built-in GGUF through transformers, the same
numerics as training) and, for each --lr, fine-tunes with `recharness.finetune.finetune`, exports
`hf:DIR` and scores it through the hf backend on the same test samples. `--items id` / `--items sid`
(repeatable) add RecBench's Groups D / F: the same training pairs with items as new identifier tokens,
scored by `finetune.api.answer_build` (`run -m ft:DIR`) (P(Yes) from the logits, as the text model); the md then shows the
paper's Table 3/4 layout (zero-shot in Table 3, fine-tunes in Table 4's groups beside the references). Writes training tokens/s,
peak memory (RSS), wall times, AUC / GAUC / logloss with 95% bootstrap intervals, and the paired
bootstrap p-value of each fine-tune against zero-shot.

Small check (what was run here; ~40 min on 2 busy cores):
  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_finetune.py --test-users 50 --train 256 --batch 16 \
      --history-len 5 --lr 1e-3
Full (the issue's >= 1,000 test samples; see results/finetune.md for the expected time):
  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_finetune.py --run /tmp/bench-finetune-full \
      --test-users 250 --train 4096 --batch 16 --history-len 10 --lr 1e-3 --lr 1e-4
Writes benchmarks/results/finetune.md (or --md).
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

from recharness.runner import compare, pipeline  # noqa: E402

OUT = Path(__file__).parent / "results" / "finetune.md"


def _ci(row, metric: str) -> str:
    v = row.metrics.get(metric)
    if v is None:
        return "–"
    ci = row.ci.get(metric) or {}
    if ci.get("lo") is not None:
        return f"{v:.4f} [{ci['lo']:.4f}, {ci['hi']:.4f}]"
    return f"{v:.4f}"


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=Path("/tmp/bench-finetune"))
    ap.add_argument("--test-users", type=int, default=50, help="4 test pairs each")
    ap.add_argument("--train", type=int, default=256, help="training examples (a seeded sample of the training pairs)")
    ap.add_argument("--history-len", type=int, default=5, help="titles in each prompt (paper: 20; fewer = faster)")
    ap.add_argument("--lr", type=float, action="append", help="learning rates to try (repeat)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--alpha", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--items", action="append", choices=["text", "id", "sid"],
                    help="item representations to fine-tune (repeat; default text)")
    ap.add_argument("--md", type=Path, default=OUT)
    args = ap.parse_args()
    lrs = args.lr or [1e-3]
    kinds = args.items or ["text"]

    from recharness.finetune import finetune
    from recharness.finetune.api import answer_build
    from recharness.models.builtin import fetch_model
    from recharness.models.hf import HFBackend

    t0 = time.perf_counter()
    info = pipeline.build("recbench", "ml-1m", args.run, tasks=["ctr"], seed=args.seed, limit=args.test_users,
                          options={"history_len": args.history_len})
    log(f"built {info['counts']} in {time.perf_counter() - t0:.1f} s")
    gguf = fetch_model("smollm2-135m")
    timings: dict[str, dict] = {}

    def score_with(backend, name):
        t = time.perf_counter()
        pipeline.run(args.run, backend, name, use_cache=False)
        timings.setdefault(name, {})["score_s"] = time.perf_counter() - t
        log(f"{name}: scored in {timings[name]['score_s']:.0f} s")

    if not (args.run / "predictions" / "smollm2-zeroshot.jsonl").exists():
        score_with(HFBackend(str(gguf)), "smollm2-zeroshot")
    runs = []
    for kind in kinds:
        for lr in lrs:
            name = f"smollm2-ft-lr{lr:g}" if kind == "text" else f"smollm2-ft-{kind}-lr{lr:g}"
            log(f"fine-tuning {name}…")
            res = finetune("recbench", "ctr", args.run, "smollm2-135m", args.run / "finetuned" / name, items=kind,
                           lr=lr, epochs=args.epochs, batch=args.batch, micro_batch=args.micro_batch,
                           examples=args.train, rank=args.rank, alpha=args.alpha, seed=args.seed, checkpoint_every=10,
                           on_step=lambda i: log(f"  step {i['step']}/{i['total']} loss {i['loss']:.4f} "
                                                 f"{i['tokens_per_s']:.0f} tok/s"),
                           on_status=log)
            runs.append((name, lr, res))
            if (args.run / "predictions" / f"{name}.jsonl").exists():
                continue
            if kind == "text":
                score_with(HFBackend(str(res.out)), name)
            else:
                t = time.perf_counter()
                answer_build(args.run, res.out, name)
                timings.setdefault(name, {})["score_s"] = time.perf_counter() - t
    scored = pipeline.score(args.run, seed=args.seed)
    rows = {r.method: r for r in scored if r.task == "ctr"}
    cmp = {}
    for name, _, _ in runs:
        try:
            res = compare.compare(args.run, [name, "smollm2-zeroshot"], task="ctr", seed=args.seed)
            cmp[name] = [d for d in res if "AUC" in d.values()] or res
        except Exception as e:  # noqa: BLE001 - the table still gets written
            cmp[name] = {"error": str(e)}

    n_test = info["counts"]["ctr"]
    lines = [
        "# LoRA fine-tuning on CPU: SmolLM2-135M for RecBench CTR (ML-1M, text items)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}; load average at the end "
        f"{os.getloadavg()[0]:.1f} (other long jobs shared the 2 cores)",
        f"- build: `recharness build recbench -t ctr -d ml-1m --seed {args.seed} -n {args.test_users} "
        f"--option history_len={args.history_len}`: {n_test} test pairs of {args.test_users} users",
        "- starting weights: the built-in SmolLM2-135M-Instruct Q4_1 GGUF dequantised to float32 by transformers; "
        "zero-shot is scored through the same loader (hf backend), so the rows differ only by the fine-tune",
        f"- LoRA r={args.rank} α={args.alpha} on q/k/v/o, dropout 0.05, AdamW (constant lr), batch {args.batch} "
        f"(micro-batch {args.micro_batch}, gradient accumulation), {args.epochs} epoch(s) over {args.train} training "
        "examples (a seeded sample of the build's training pairs, never a test pair); loss on the answer token",
        f"- command: `{' '.join(['python', 'benchmarks/bench_finetune.py', *sys.argv[1:]])}`",
        "",
        "## Training",
        "",
        "| model | items | lr | examples | steps | train wall s | tokens/s | peak RSS MB | final loss | total wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, lr, res in runs:
        t = res.train
        lines.append(f"| {name} | {res.items} | {lr:g} | {res.examples} | {t.steps} | {t.total_seconds:.0f} | "
                     f"{(t.total_tokens / t.total_seconds if t.total_seconds else 0):.0f} | {t.peak_rss_mb:.0f} | "
                     f"{t.final_loss if t.final_loss is None else round(t.final_loss, 4)} | {res.wall_s:.0f} |")
    lines += ["", f"## AUC on the same {n_test} test pairs (95% bootstrap intervals)", "",
              "| method | AUC | GAUC | logloss | invalid | scoring s |", "|---|---|---|---|---|---|"]
    for m, r in rows.items():
        lines.append(f"| {m} | {_ci(r, 'AUC')} | {_ci(r, 'GAUC')} | {_ci(r, 'logloss')} | "
                     f"{r.metrics.get('invalid_rate', 0):.3f} | {timings.get(m, {}).get('score_s', float('nan')):.0f} |")
    lines += ["", "## Fine-tuned vs zero-shot (paired)", ""]
    for name, c in cmp.items():
        for d in c if isinstance(c, list) else [c]:
            if "diff" not in d:
                lines.append(f"- {name}: {d.get('error', d)}")
                continue
            lines.append(f"- {name} − {d['b']}, {d['metric']} on {d['n']} shared samples: {d['diff']:+.4f} "
                         f"[{d['lo']:+.4f}, {d['hi']:+.4f}], paired bootstrap p = {d['p_boot']:.3f}, "
                         f"permutation p = {d['p_perm']:.3f}")
    from recharness.tasks.recbench.tables import paper_tables

    lines += ["", "## The paper's layout (Tables 3 and 4; ± = half-width of the 95% bootstrap interval)", "",
              paper_tables(scored, "ML-1M") or "(no rows)"]
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text("\n".join(lines) + "\n")
    log(f"wrote {args.md}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

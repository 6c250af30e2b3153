"""RecBench Table 5 on ML-1M: SASRec by layers, SID-SASRec with and without CBS, the zero-shot title LLM.

One seqrec build (`--out`, default the one `bench_recbench_seqrec.py` trained SASRec in; built with
the defaults if missing: 5,000 test users, history <= 20, full-catalog ranking, history excluded):

1. semantic IDs of ML-1M's items (`data.semantic_ids` defaults: MiniLM title embeddings -> RQ-VAE,
   4 x 256 + disambiguation level; cached per dataset): codebook usage per level, collision rate;
2. SID-SASRec (2 layers) fitted by the `train` stage for `--epochs` epochs (fewer than SASRec's
   early-stopped 19: the CPU budget), both decodings (`sid-sasrec`: conditional beam search,
   `sid-sasrec-free`: plain beam search, invalid code tuples counted) from one training run, each
   timed over 1,000 single-sample predictions as the other reference models;
3. the zero-shot title LLM (`title-cbs`, SmolLM2-135M, beam search over a trie of the catalog's
   titles) on the first `--llm-samples` test samples, latency per sample measured per answer;
4. the fine-tuned LLMs of Groups I (item IDs) and J (semantic IDs), `--finetune`: SmolLM2-135M with
   LoRA on `--ft-examples` of the build's training windows each (`recharness finetune recbench -t seqrec
   --items id|sid`), answered by CBS over the trie of valid items on the title LLM's samples, every
   returned beam checked against the catalog;
5. SASRec 1/2/3/4 layers: the predictions `bench_recbench_seqrec.py` wrote into the same build when
   present (same samples), else their numbers read from benchmarks/results/recbench_seqrec.md;
6. `recharness score`'s Table 5 layout (`tasks.recbench.tables.table5`), and every method on the
   LLM's samples only (the like-for-like comparison for the capped row).

Run by hand (about 25 min of CPU; the RQ-VAE's ~5 min only the first time):
    RECHARNESS_HOME=... OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recbench_table5.py
Writes benchmarks/results/recbench_table5.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.baselines import sid_sasrec as sid_mod  # noqa: E402
from recharness.baselines import title_cbs as title_mod  # noqa: E402
from recharness.core.io import read_jsonl  # noqa: E402
from recharness.core.types import ScoreRow  # noqa: E402
from recharness.data.semantic_ids import semantic_ids  # noqa: E402
from recharness.data.store import load_dataset  # noqa: E402
from recharness.finetune.api import (
    answer_build,  # noqa: E402
    finetune,  # noqa: E402
)
from recharness.finetune.export import read_info  # noqa: E402
from recharness.runner import pipeline  # noqa: E402
from recharness.runner.train import train  # noqa: E402
from recharness.tasks.recbench.seqrec import SeqrecTask  # noqa: E402
from recharness.tasks.recbench.tables import latency_label, table5  # noqa: E402

OUT = Path(__file__).parent / "results" / "recbench_table5.md"
SEQREC_MD = Path(__file__).parent / "results" / "recbench_seqrec.md"
SASRECS = ["sasrec-1l", "sasrec", "sasrec-3l", "sasrec-4l"]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _score(out: Path) -> list[ScoreRow]:
    return pipeline.score(out)  # with the default 95% bootstrap intervals: Table 5's cells show ±


def _sasrec_from_results_md() -> list[ScoreRow]:
    """SASRec rows from recbench_seqrec.md's table (NDCG@10, latency) when the build has no predictions."""
    rows = []
    if not SEQREC_MD.exists():
        return rows
    for line in SEQREC_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 12 and cells[0] in SASRECS:
            lat = re.match(r"([\d.]+)(ms|s)", cells[-1])
            seconds = float(lat.group(1)) / (1000 if lat.group(2) == "ms" else 1) if lat else None
            rows.append(ScoreRow(cells[0], "seqrec", {"NDCG@10": float(cells[2]), "latency_s": seconds}, 5000,
                                 "reference", {"source": SEQREC_MD.name}))
    return rows


def _finetune_notes(ft_infos: dict, timings: dict) -> list[str]:
    """Groups I/J: how each LLM was trained and how valid its CBS answers are (counted over every beam)."""
    lines = []
    for kind, (info, recs) in ft_infos.items():
        s = info.get("settings") or {}
        beams = sum(r["parsed"]["beams"] for r in recs)
        invalid = sum(r["parsed"]["invalid"] for r in recs)
        top1_bad = sum(bool(r["parsed"]["top1_invalid"]) for r in recs)
        cbs = timings.get(f"cbs-{kind}", {})
        lines.append(
            f"- {kind}-smollm2 (Group {'I' if kind == 'id' else 'J'}): SmolLM2-135M (Q4_1 GGUF dequantised) + LoRA "
            f"r={s.get('rank')} α={s.get('alpha')} on q/k/v/o, lr {s.get('lr')}, batch {s.get('batch')}, "
            f"{info.get('examples')} training windows (a seeded sample of the build's training split), "
            f"{info.get('steps')} steps, {info.get('train_s', 0) / 60:.1f} min training at {info.get('tokens_per_s')} "
            f"tokens/s, peak RSS {info.get('peak_rss_mb')} MB, final loss {info.get('final_loss'):.3f}; "
            f"{'one new token per item' if kind == 'id' else 'the semantic-ID tokens above'} added to the tokenizer "
            f"(trained through peft's trainable_token_indices). Decoded by CBS on {len(recs)} samples: "
            f"{invalid} invalid of {beams:,} returned beams, {top1_bad} answers without a valid top-1 "
            f"({'100% valid items' if invalid == 0 and top1_bad == 0 else 'NOT all valid'}); "
            + (f"{cbs['wall_s'] / max(len(recs), 1):.2f} s per answer wall." if cbs else "timed per answer."))
    return lines


def _sasrec_epochs(run: Path) -> str:
    """Each trained SASRec's best epoch of those run and its training time, from the saved model's log."""
    parts, missing = [], []
    for name in SASRECS:
        cfg = run / "models" / name / "config.json"
        if not cfg.exists():
            missing.append(name)
            continue
        log = json.loads(cfg.read_text())["log"]
        parts.append(f"{name}: best epoch {log['best_epoch']} of {len(log['epochs'])}, "
                     f"{log['train_step_s'] / 60:.1f} min training at {log['samples_per_s']:,.0f} samples/s")
    text = "; ".join(parts)
    if missing:
        text += f"; not trained for this table: {', '.join(missing)} (`recharness train recbench -b NAME`)"
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/seqrec-run"), help="a recbench seqrec build (made if missing)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (training)")
    ap.add_argument("--epochs", type=int, default=3, help="SID-SASRec training epochs (best on validation kept)")
    ap.add_argument("--beams", type=int, default=20)
    ap.add_argument("--llm-samples", type=int, default=100)
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--skip-sid", action="store_true", help="score the SID-SASRec predictions already in --out")
    ap.add_argument("--finetune", action="store_true", help="fine-tune SmolLM2 with item IDs and semantic IDs "
                    "(Groups I/J) and answer the title LLM's samples by CBS (resumes; skips what is done)")
    ap.add_argument("--ft-examples", type=int, default=1024, help="training windows per fine-tune (seeded sample)")
    ap.add_argument("--ft-lr", type=float, default=1e-3)
    ap.add_argument("--ft-batch", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    started, load0 = time.perf_counter(), os.getloadavg()[0]
    cpu0 = time.process_time()

    if not (args.out / "samples.jsonl").exists():
        _log(f"building {args.out}…")
        pipeline.build("recbench", "ml-1m", args.out, tasks=["seqrec"], seed=args.seed)
    split = json.loads((args.out / "recbench" / "seqrec_split.json").read_text())
    ds = load_dataset("ml-1m")

    _log("semantic IDs (RQ-VAE, 4 x 256; cached after the first run)…")
    t0 = time.perf_counter()
    sid = semantic_ids("ml-1m", ds.items, levels=sid_mod.DEFAULTS["sid_levels"],
                       codebook_size=sid_mod.DEFAULTS["sid_codebook"], method=sid_mod.DEFAULTS["sid_method"])
    sid_load_s = time.perf_counter() - t0

    timings_path = args.out / "table5_timings.json"  # a re-scoring run (--skip-*) reports the stages it skipped
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    sid_mod.DEFAULTS.update(max_epochs=args.epochs, patience=args.epochs, beams=args.beams)
    if not args.skip_sid:
        _log(f"SID-SASRec: {args.epochs} epochs, then both decodings over the test samples…")
        t0, c0 = time.perf_counter(), time.process_time()
        train(args.out, suite="recbench", seed=args.seed, baselines=["sid-sasrec", "sid-sasrec-free"], progress=_log)
        timings["sid"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    if not args.skip_llm:
        title_mod.DEFAULTS.update(max_samples=args.llm_samples, beams=args.beams)
        _log(f"title-cbs on {args.llm_samples} samples…")
        t0, c0 = time.perf_counter(), time.process_time()
        train(args.out, suite="recbench", seed=args.seed, baselines=["title-cbs"], latency_runs=0, progress=_log)
        timings["llm"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    ft_infos = {}
    for kind in ("id", "sid") if args.finetune else ():
        ft_dir = args.out / "finetuned" / f"smollm2-seqrec-{kind}"
        pred = args.out / "predictions" / f"{kind}-smollm2.jsonl"
        if not (ft_dir / "finetune.json").exists():
            _log(f"fine-tuning SmolLM2 with {kind} items on {args.ft_examples} training windows…")
            t0, c0 = time.perf_counter(), time.process_time()
            finetune("recbench", "seqrec", args.out, "smollm2-135m", ft_dir, items=kind, examples=args.ft_examples,
                     lr=args.ft_lr, batch=args.ft_batch, seed=args.seed, checkpoint_every=10,
                     on_step=lambda i: _log(f"  step {i['step']}/{i['total']} loss {i['loss']:.4f} "
                                            f"{i['tokens_per_s']:.0f} tok/s") if i["step"] % 8 == 0 else None)
            timings[f"ft-{kind}"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        if not pred.exists():
            _log(f"{kind}-smollm2: CBS ({args.beams} beams) on {args.llm_samples} samples…")
            t0, c0 = time.perf_counter(), time.process_time()
            answer_build(args.out, ft_dir, f"{kind}-smollm2", beams=args.beams, limit=args.llm_samples)
            timings[f"cbs-{kind}"] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        ft_infos[kind] = (read_info(ft_dir) or {}, list(read_jsonl(pred)))
    timings_path.write_text(json.dumps(timings))
    sid_s, llm_s = timings.get("sid", {}).get("wall_s", 0.0), timings.get("llm", {}).get("wall_s", 0.0)
    stage_cpu = sum(t.get("cpu_s", 0.0) for t in timings.values())

    rows = [r for r in _score(args.out) if r.task == "seqrec"]
    have = {r.method for r in rows}
    sasrec_source = "this build's predictions"
    if not have & set(SASRECS):
        rows += _sasrec_from_results_md()
        sasrec_source = f"{SEQREC_MD.name} (the same build settings and seed)"
    by = {r.method: r for r in rows}
    cfg = json.loads((args.out / "models" / "sid-sasrec" / "config.json").read_text())
    log = cfg["log"]

    # every method on the title LLM's samples only
    samples = [s for s in read_jsonl(args.out / "samples.jsonl") if s["task"] == "seqrec"]
    ref_dir = pipeline.reference_dir(args.out)
    llm_file = ref_dir / "title-cbs.jsonl"
    subset_lines = []
    llm_stats = ""
    if llm_file.exists():
        llm_recs = list(read_jsonl(llm_file))
        answered = {r["id"] for r in llm_recs}
        lengths = [len(r["parsed"]["items"]) for r in llm_recs]
        top1 = Counter(r["parsed"]["top_titles"][0] for r in llm_recs if r["parsed"]["top_titles"])
        llm_stats = (f" Its rankings hold {statistics.fmean(lengths):.1f} titles on average (min {min(lengths)}, "
                     f"max {max(lengths)} of {args.beams} beams: a finished beam is not replaced, and deep inside a "
                     f"title there is one continuation); {len(top1)} distinct first answers over {len(llm_recs)} "
                     f"users, most often {', '.join(f'{t} ({c})' for t, c in top1.most_common(3))}.")
        sub = [s for s in samples if s["id"] in answered]
        task = SeqrecTask()
        for f in sorted(ref_dir.glob("*.jsonl")) + sorted((args.out / "predictions").glob("*.jsonl")):
            recs = {r["id"]: r for r in read_jsonl(f)}
            m = task.score(sub, recs)
            subset_lines.append(f"| {f.stem} | {m['NDCG@10']:.4f} | {m['HR@10']:.4f} | {m['MRR']:.4f} |")

    m_cbs, m_free = by["sid-sasrec"].metrics, by["sid-sasrec-free"].metrics
    total_s = time.perf_counter() - started
    lines = [
        "# RecBench Table 5 on ML-1M: SASRec, SID-SASRec with and without CBS, a zero-shot title LLM",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, {args.threads} torch "
         f"thread(s); the cores are shared with other jobs (load average {load0:.1f} at the start, "
         f"{os.getloadavg()[0]:.1f} at the end), so seconds are upper bounds"),
        (f"- `benchmarks/bench_recbench_table5.py --epochs {args.epochs} --beams {args.beams} --llm-samples "
         f"{args.llm_samples}`: SID-SASRec train + predict {sid_s / 60:.1f} min wall, title LLM {llm_s / 60:.1f} min "
         f"wall, {stage_cpu / 60:.1f} min CPU for both; this run {total_s / 60:.1f} min wall, "
         f"{(time.process_time() - cpu0) / 60:.1f} min CPU"
         + (" (re-scoring the predictions of the earlier run: "
            + ", ".join(k for k, skip in (("--skip-sid", args.skip_sid), ("--skip-llm", args.skip_llm)) if skip) + ")"
            if args.skip_sid or args.skip_llm else "")),
        (f"- build `{args.out}` (`recharness build recbench -t seqrec -d ml-1m --seed {args.seed}`): "
         f"{split['test_sequences']:,} test users (each user's last positive, history = the <= 20 before), "
         f"{split['train_sequences']:,} training windows ({split['train_targets']:,} next-item targets)"),
        "- every method ranks the whole catalog with the user's history excluded; NDCG@10 as the paper's Table 5",
        "",
        "## Semantic IDs used",
        "",
        (f"{len(sid.item_ids):,} items, MiniLM (`{sid.encoder}`) title embeddings -> {sid.method} ({sid.epochs} epochs), "
         f"{sid.levels} levels x {sid.codebook_size} codes, then TIGER's disambiguation level; "
         f"{'loaded from the cache' if sid_load_s < 30 else f'computed in {sid.seconds:.0f} s'}."),
        "",
        "| collision rate (before disambiguation) | max items sharing a tuple | codebook usage per level | tokens per item | vocabulary |",
        "|---:|---:|---|---:|---:|",
        (f"| {sid.collision_rate:.2%} | {sid.max_duplicates} | {' / '.join(f'{u:.0%}' for u in sid.usage)} | "
         f"{sid.levels + 1} | {sid.vocab_size:,} |"),
        "",
        "## Table 5 (this run)",
        "",
        table5({"ML-1M": rows}) or "(no rows)",
        "",
        "Notes on the rows:",
        "",
        f"- SASRec: {sasrec_source}; hidden 64, early-stopped on validation NDCG@10 ({_sasrec_epochs(args.out)}).",
        (f"- SID-SASRec 2L: the same backbone over code tokens, {log['epochs'][-1]['epoch']} epoch(s) "
         f"(best {log['best_epoch']}; validation NDCG@10 by CBS on {log['valid_rows']} validation rows: "
         f"{', '.join(str(e['valid_ndcg@10']) for e in log['epochs'])}), {log['samples_per_s']:,.0f} next-item "
         f"predictions/s in training ({log['train_step_s'] / 60:.1f} min). Fewer epochs than SASRec: the CPU "
         "budget; its NDCG@10 is a lower bound of what it reaches trained to convergence."),
        (f"- decoding, {args.beams} beams: -CBS keeps only tokens extending a catalog item's code prefix; without "
         f"CBS {m_free['invalid_share']:.1%} of all beams and {m_free['invalid_top1_share']:.1%} of the top-1 "
         f"answers are code tuples no item has (with CBS: {m_cbs['invalid_share']:.0%}). Invalid beams are dropped, "
         "so the free decoder ranks fewer items."),
        ("- rank/NDCG for items outside the beam list: the ranking is the beams' items in beam order; a target no "
         "beam reaches is not ranked and contributes 0 to NDCG@10, HR@10, Recall@k and MRR (as an item an LLM never "
         f"names). NDCG@10 and HR@10 are exact with {args.beams} >= 10 beams; MRR is truncated at the beam list."),
        (f"- title LLM: SmolLM2-135M Q4_1 (llama.cpp, 1 thread) reads the seqrec prompt (history as titles), its answer "
         f"started as \"1.\", the first entry decoded by beam search over a trie of all {len(sid.item_ids):,} titles; "
         "every answer is a real item. Scored on the samples it answered only (n); its latency is the measured "
         "prompt + search time per answer." + llm_stats),
        "- latency: mean seconds of one single-sample prediction (1,000 timed calls for the trained models, one call "
         "per answer for the LLM), as the paper's \"averaged inference time per sample\".",
        *_finetune_notes(ft_infos, timings),
    ]
    if subset_lines:
        lines += ["", f"## Every method on the title LLM's {len(sub)} samples only", "",
                  "| method | NDCG@10 | HR@10 | MRR |", "|---|---:|---:|---:|", *subset_lines]
    lines += ["", "## SID-SASRec detail", "",
              "| decoding | NDCG@10 | HR@10 | MRR | Recall@20 | invalid top-1 | invalid beams | latency |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, label in (("sid-sasrec", "CBS"), ("sid-sasrec-free", "plain beam search")):
        m = by[name].metrics
        lines.append(f"| {label} | {m['NDCG@10']:.4f} | {m['HR@10']:.4f} | {m['MRR']:.4f} | {m['Recall@20']:.4f} | "
                     f"{m['invalid_top1_share']:.1%} | {m['invalid_share']:.1%} | {latency_label(m.get('latency_s'))} |")
    lines += ["", "Training log (SID-SASRec):", "", "```json", json.dumps(log["epochs"], indent=1), "```"]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

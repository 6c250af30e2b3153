"""PerRecBench SFT on CPU: SmolLM2-135M fine-tuned on pointwise, pairwise and listwise ranking (one LoRA
each), the three merged (linear, the paper's; optionally TIES), scored in the paper's Table 1 layout
beside zero-shot (arXiv 2501.13391 §6, issue 12).

Stages (each one skipped when its output exists, so a killed run resumes where it stopped; a killed
fine-tune resumes from its last checkpoint, a killed `run` from its last answered group):

1. `recharness build perrecbench -d ml-1m -o RUN --option profile=false --option groups=G`
   (G test groups per level; profiles off, so training prompts equal the test prompts);
2. `recharness run perrecbench -m hf:<SmolLM2 GGUF> --name smollm2-zeroshot` (zero-shot through the hf
   backend on the same weights the fine-tunes start from: the rows differ only by the training);
3. per format, `recharness.finetune.api.finetune("perrecbench", FMT, RUN, ...)` in its own process
   (= `recharness finetune perrecbench -t FMT -o RUN --save ...`; own process: its peak RSS is its own),
   on --train-groups held-out groups per level (disjoint from the test groups in users and items);
4. `recharness merge <the three> --method linear` (and `--method ties` with --ties);
5. `recharness run perrecbench -m hf:DIR --name NAME` for every fine-tuned and merged model, then
   `recharness score perrecbench`, whose scores.md holds the Table 1 layout.

Writes benchmarks/results/finetune_perrecbench.md (or --md): training table per format, scoring cost
per task, Table 1 (zero-shot, 3 SFT rows, merged rows, reference rows) and paired tau differences
against zero-shot.

Tiny check (every stage end to end; ~40 min wall at nice 19 beside two other jobs, most of it the 6 runs):
  RECHARNESS_HOME=... OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python benchmarks/bench_finetune_perrecbench.py \
      --run /tmp/pb-tiny --groups 2 --train-groups 2 --max-steps 2 --batch 4 --ties --md /tmp/pb-tiny.md
Default run (4 test groups per level = 36 samples per model; 24 training groups per level; 12 steps of 8
examples per format at lr 1e-3):
  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_finetune_perrecbench.py --ties
Cost, measured on this 2-core machine (1 thread): scoring ~18 CPU s per sample (zero-shot: ~2.8k prompt
tokens per sample over its model calls), i.e. ~11 CPU min per model at 4 groups per level; training
~410 / 605 / 940 tokens per example (pointwise / pairwise / listwise) at ~7 CPU ms per token, 96
examples per format at the defaults (~5 / 7 / 10.5 CPU min). Resumable: re-run the same command.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("RECHARNESS_HOME", str(ROOT / ".pytest-home"))

OUT = Path(__file__).parent / "results" / "finetune_perrecbench.md"
FORMATS = ("pointwise", "pairwise", "listwise")
TASKS = ("point", "pair", "list")
BASE = "smollm2-135m"
ZS = "smollm2-zeroshot"
TIMINGS = "bench_timings.json"  # stage wall times, kept across resumed sessions


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, file=sys.stderr, flush=True)


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "recharness.cli", *map(str, args)]


def shown(cmd: list[str]) -> str:
    """A command as a user would type it (`recharness ...`)."""
    if cmd[:3] == [sys.executable, "-m", "recharness.cli"]:
        cmd = ["recharness", *cmd[3:]]
    return shlex.join(cmd)


class Bench:
    def __init__(self, args):
        self.args = args
        self.run = args.run
        self.commands: list[str] = []
        self.timings_path = self.run / TIMINGS
        self.timings = json.loads(self.timings_path.read_text()) if self.timings_path.exists() else {}

    def timed(self, key: str, cmd: list[str] | None = None, fn=None, *, resumed: bool = False) -> float:
        """Run `cmd` (a subprocess, output to the terminal) or `fn`; record its wall and CPU time under
        `key`: added to the earlier sessions' when `resumed` (a killed `run` or fine-tune going on), else
        replacing them."""
        if cmd is not None:
            log(f"$ {shown(cmd)}")
        t, c = time.perf_counter(), _child_cpu()
        if cmd is not None:
            subprocess.run(cmd, check=True)
        else:
            fn()
        el, cpu = time.perf_counter() - t, _child_cpu() - c
        prev = self.timings.get(key, {}) if resumed else {}
        self.timings[key] = {"wall_s": prev.get("wall_s", 0.0) + el, "cpu_s": prev.get("cpu_s", 0.0) + cpu,
                             "sessions": prev.get("sessions", 0) + 1}
        self.run.mkdir(parents=True, exist_ok=True)
        self.timings_path.write_text(json.dumps(self.timings, indent=2))
        log(f"{key}: {el:.0f} s wall, {cpu:.0f} s CPU")
        return el

    # -------------------------------------------------------------- stages

    def build(self) -> dict:
        a = self.args
        opts = {"profile": False, "groups": a.groups}
        cmd = cli("build", "perrecbench", "-d", "ml-1m", "-o", self.run, "--seed", a.seed,
                  "--option", "profile=false", "--option", f"groups={a.groups}")
        self.commands.append(shown(cmd))
        bj = self.run / "build.json"
        if bj.exists():
            info = json.loads(bj.read_text())
            if info.get("options") != opts or info.get("seed") != a.seed or info.get("dataset") != "ml-1m":
                sys.exit(f"{self.run} holds another build (options {info.get('options')}, seed {info.get('seed')}); "
                         f"use another --run, or delete it")
            log(f"build exists: {info['counts']}")
            return info
        self.timed("build", cmd)
        return json.loads(bj.read_text())

    def finetune(self, fmt: str, fingerprint: str) -> Path:
        a = self.args
        out = self.run / "finetuned" / f"{BASE}-{fmt}"
        flags = ["--lr", f"{a.lr:g}", "--rank", a.rank, "--alpha", a.alpha, "--batch", a.batch,
                 "--micro-batch", a.micro_batch, "--train-groups", a.train_groups, "--max-len", a.max_len,
                 "--checkpoint-every", a.checkpoint_every, "--seed", a.seed]
        flags += ["--max-steps", a.max_steps] if a.max_steps else ["--epochs", a.epochs]
        self.commands.append(shown(["recharness", "finetune", "perrecbench", "-t", fmt, "-o", str(self.run),
                                    "--save", str(out), *map(str, flags)]))
        info_path = out / "finetune.json"
        if info_path.exists():
            info = json.loads(info_path.read_text())
            s = info.get("settings") or {}
            want = {"lr": a.lr, "rank": a.rank, "alpha": a.alpha, "batch": a.batch,
                    "max_steps": a.max_steps or None, "seed": a.seed}
            got = {k: s.get(k) for k in want}
            if not a.max_steps:
                want["epochs"], got["epochs"] = a.epochs, s.get("epochs")
            differ = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            if info.get("train_groups_per_level") != a.train_groups:
                differ["train_groups"] = (info.get("train_groups_per_level"), a.train_groups)
            if info.get("build") != fingerprint:
                differ["build"] = (info.get("build"), fingerprint)
            if differ:
                sys.exit(f"{out} was trained with other settings ({differ}: (it, asked)); delete it (and "
                         f"{out}.checkpoint, the merged models and their predictions) or use another --run")
            log(f"{fmt}: fine-tune exists ({info['steps']} steps, final loss {info['final_loss']})")
            return out
        kw = dict(suite="perrecbench", task=fmt, run_dir=str(self.run), model=BASE, out=str(out), lr=a.lr,
                  rank=a.rank, alpha=a.alpha, batch=a.batch, micro_batch=a.micro_batch,
                  max_steps=a.max_steps or None, epochs=None if a.max_steps else a.epochs,
                  train_groups=a.train_groups, max_len=a.max_len, checkpoint_every=a.checkpoint_every, seed=a.seed)
        log_path = self.run / "logs" / f"finetune-{fmt}.json"
        log_path.parent.mkdir(parents=True, exist_ok=True)

        def go():
            p = mp.get_context("spawn").Process(target=_finetune_worker, args=(kw, str(log_path)))
            p.start()
            p.join()
            if p.exitcode != 0:
                sys.exit(f"fine-tuning {fmt} failed (exit code {p.exitcode}); re-run to resume from its checkpoint")

        log(f"fine-tuning {fmt}…")
        self.timed(f"finetune-{fmt}", fn=go, resumed=out.with_name(out.name + ".checkpoint").exists())
        return out

    def merge(self, sources: list[Path], method: str) -> Path:
        out = self.run / "finetuned" / f"{BASE}-merged-{method}"
        cmd = cli("merge", *sources, "--method", method, "-o", out)
        if method == "ties":
            cmd += ["--density", f"{self.args.density:g}"]
        self.commands.append(shown(cmd))
        if (out / "finetune.json").exists():
            newest = max((s / "finetune.json").stat().st_mtime for s in sources)
            if (out / "finetune.json").stat().st_mtime >= newest:
                log(f"merged ({method}) exists")
                return out
            log(f"merged ({method}) is older than a source: merging again")
        self.timed(f"merge-{method}", cmd)
        return out

    def score_model(self, spec: str, name: str, n_samples: int, task: str | None = None) -> None:
        """Answer every sample (or only `task`'s: `run -t`, the rest shows '–' in Table 1)."""
        cmd = cli("run", "perrecbench", "-o", self.run, "-m", spec, "--name", name, "--no-cache",
                  *(["-t", task] if task else []))
        self.commands.append(shown(cmd))
        pf = self.run / "predictions" / f"{name}.jsonl"
        recs = _records(pf)
        if recs:
            want = _weights(spec)
            have = (recs[0].get("model") or {}).get("finetune", {}) or {}
            if want is not None and have.get("weights") != want:
                stale = pf.with_suffix(".jsonl.stale")
                log(f"{name}: predictions answer other weights: moved to {stale}")
                pf.rename(stale)
                recs = []
        if len({r["id"] for r in recs}) >= n_samples:
            log(f"{name}: all {n_samples} samples answered")
            return
        self.timed(f"run-{name}", cmd, resumed=bool(recs))


def _child_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far: a stage's CPU cost, whatever
    else shares the cores (its wall time is not)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _finetune_worker(kw: dict, log_path: str) -> None:
    """One fine-tune in its own process (spawned): the API call with timestamped step logs; the losses
    of this session go to `log_path` (the rest is in the model's finetune.json)."""
    from recharness.finetune.api import finetune

    steps: list[dict] = []

    def on_step(i: dict) -> None:
        steps.append({k: i[k] for k in ("step", "total", "loss", "tokens_per_s", "tokens")})
        log(f"  [{kw['task']}] step {i['step']}/{i['total']} loss {i['loss']:.4f} {i['tokens_per_s']:.0f} tok/s")
        Path(log_path).write_text(json.dumps({"steps": steps}, indent=1))

    res = finetune(**kw, on_step=on_step, on_status=lambda m: log(f"  [{kw['task']}] {m}"))
    log(f"  [{kw['task']}] {res.summary()}")
    for n in res.notes:
        log(f"  [{kw['task']}] note: {n}")
    Path(log_path).write_text(json.dumps({"steps": steps, "resumed_from": res.train.resumed_from,
                                          "session_peak_rss_mb": res.train.peak_rss_mb,
                                          "wall_s": res.wall_s, "notes": res.notes}, indent=1))


def _records(pf: Path) -> list[dict]:
    if not pf.exists():
        return []
    from recharness.core.io import read_jsonl

    return list(read_jsonl(pf, tolerate_torn_tail=True))


def _weights(spec: str) -> str | None:
    """The weights fingerprint of an hf:DIR fine-tune (None for a base model)."""
    p = Path(spec.removeprefix("hf:")) / "finetune.json"
    return json.loads(p.read_text()).get("weights") if p.is_file() else None


def _num(x, digits: int) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _processed(n: int, batch: int, steps: int) -> int:
    """Examples the training loop went through in `steps` steps (the last batch of an epoch is short)."""
    per_epoch = math.ceil(n / batch)
    return sum(min(batch, n - (s % per_epoch) * batch) for s in range(steps))


def _paper_table(run: Path, order: list[str]) -> str:
    """The Table 1 section of scores.md, its rows in `order` (then the reference rows)."""
    md = (run / "scores.md").read_text()
    marker = "## In the paper's layout"
    if marker not in md:
        from recharness.report.tables import load_scores
        from recharness.tasks.perrecbench.table import table1_markdown

        md = marker + "\n\n" + table1_markdown(load_scores(run))
    text = md.split(marker, 1)[1].strip("\n")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| method"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    head, rows = lines[start:start + 2], lines[start + 2:end]

    def key(line: str):
        name = line.split("|")[1].strip()
        return (order.index(name) if name in order else len(order), name)

    return "\n".join([*lines[:start], *head, *sorted(rows, key=key), *lines[end:]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=Path("/tmp/bench-finetune-perrecbench"))
    ap.add_argument("--groups", type=int, default=4,
                    help="test groups per level (paper: 200): 9 x G samples per model, ~18 CPU s each (zero-shot)")
    ap.add_argument("--train-groups", type=int, default=24,
                    help="training groups per level (disjoint from the test groups); examples per format: "
                         "pointwise 9, pairwise 20, listwise 3 per group triple (sizes 2+3+4)")
    ap.add_argument("--max-steps", type=int, default=12,
                    help="optimizer steps per format, the same for the three (0: --epochs instead); tokens per "
                         "example: pointwise ~410, pairwise ~605, listwise ~940")
    ap.add_argument("--epochs", type=int, default=2, help="with --max-steps 0 (paper: 2)")
    ap.add_argument("--lr", type=float, default=1e-3,
                    help="learning rate (paper: 1e-5, which barely moves a 135M model in a few dozen steps)")
    ap.add_argument("--batch", type=int, default=8, help="examples per optimizer step (paper: 32)")
    ap.add_argument("--micro-batch", type=int, default=1,
                    help="examples per forward pass: memory only (listwise at 4 peaked at 12 GB RSS)")
    ap.add_argument("--rank", type=int, default=16, help="LoRA rank (paper: 16)")
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--ties", action="store_true", help="also merge with TIES (a 6th model to score)")
    ap.add_argument("--sft-own-format", action="store_true",
                    help="score each single-format fine-tune on its own format only (`run -t`; the other cells '–')")
    ap.add_argument("--density", type=float, default=0.5, help="TIES: fraction of each delta kept")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--md", type=Path, default=OUT)
    args = ap.parse_args()

    from recharness.models.builtin import fetch_model
    from recharness.runner import compare, pipeline

    load0 = os.getloadavg()[0]
    t_all = time.perf_counter()
    b = Bench(args)
    info = b.build()
    n_samples = sum(info["counts"].values())
    log(f"build: {info['counts']} (fingerprint {info['fingerprint']})")

    gguf = fetch_model(BASE)
    b.score_model(f"hf:{gguf}", ZS, n_samples)
    sft = {fmt: b.finetune(fmt, info["fingerprint"]) for fmt in FORMATS}
    merged = {m: b.merge(list(sft.values()), m) for m in (["linear", "ties"] if args.ties else ["linear"])}
    names = {ZS: None}
    for fmt, d in sft.items():
        names[f"smollm2-sft-{fmt}"] = d
    for m, d in merged.items():
        names[f"smollm2-merged-{m}"] = d
    own = {f"smollm2-sft-{fmt}": t for fmt, t in zip(FORMATS, TASKS)} if args.sft_own_format else {}
    for name, d in names.items():
        if d is not None:
            t = own.get(name)
            b.score_model(f"hf:{d}", name, info["counts"][t] if t else n_samples, t)
    score_cmd = cli("score", "perrecbench", "-o", args.run, "--seed", args.seed)
    b.commands.append(shown(score_cmd))
    b.timed("score", score_cmd)

    # ---------------------------------------------------------- the results file
    rows = {(r.method, r.task): r for r in pipeline.score(args.run, seed=args.seed, resamples=0)}
    cmp_lines = []
    for name in list(names)[1:]:
        try:
            res = compare.compare(args.run, [name, ZS], seed=args.seed)
        except Exception as e:  # noqa: BLE001 - the results file still gets written
            cmp_lines.append(f"- {name}: {e}")
            continue
        for d in res:
            if d.get("metric") == "tau" and "diff" in d:
                cmp_lines.append(f"- {name} − {ZS}, {d['task']} tau on {d['n']} groups: {d['diff']:+.3f} "
                                 f"[{d['lo']:+.3f}, {d['hi']:+.3f}], paired bootstrap p = {d['p_boot']:.2f}, "
                                 f"permutation p = {d['p_perm']:.2f}")

    g = args.groups
    lines = [
        "# PerRecBench SFT on CPU: SmolLM2-135M, pointwise / pairwise / listwise and merged (ML-1M)",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}; OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, nice {os.nice(0)}; 1-minute load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (the cores were shared with other jobs)",
        f"- build: {g} test groups per level (paper: 200) → {info['counts']} samples (one group per sample; "
        "group sizes 2 / 3 / 4 for easy / medium / hard), profiles off (`profile=false`: training and test "
        "prompts are the same format), 4 retrieved history items per user (`k=4`, the default)",
        f"- starting weights: the built-in {BASE} (SmolLM2-135M-Instruct Q4_1 GGUF) dequantised to float32 by "
        "transformers; zero-shot is that model through the same loader (`-m hf:<the GGUF>`), so the rows "
        "differ only by the training",
        f"- SFT: LoRA r={args.rank} α={args.alpha} on q/k/v/o, dropout 0.05, AdamW (constant lr {args.lr:g}; "
        f"the paper's 1e-5 would barely move this model in so few steps), batch {args.batch} (micro-batch "
        f"{args.micro_batch}), "
        + (f"{args.max_steps} optimizer steps" if args.max_steps else f"{args.epochs} epoch(s)")
        + f", on {args.train_groups} training groups per level (held out: no user and no query item of the test "
        "groups), answer tokens only in the loss",
        "- merging: `linear` is the paper's θ = θ0 + Σ (1/3) Δ_fmt over the three LoRA deltas"
        + (f"; `ties` trims each delta to its top {args.density:g} by magnitude, elects signs, disjoint mean "
           "(weights 1)" if args.ties else ""),
        f"- total wall time of this session: {time.perf_counter() - t_all:.0f} s",
        "",
        "## Commands",
        "",
        "```",
        f"{shown([sys.executable, *sys.argv]).replace(sys.executable, 'python')}",
        "# which ran (fine-tunes through recharness.finetune.api.finetune, the same call as this command):",
        *b.commands,
        "```",
        "",
        "## Training (one LoRA per format)",
        "",
        "| format | train groups (3 levels) | examples | steps | examples seen | epochs | train wall s | tokens "
        "| tokens / example "
        "| tokens/s | peak RSS MB | loss at step 1 | final loss | process wall s | process CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt, d in sft.items():
        fi = json.loads((d / "finetune.json").read_text())
        lp = args.run / "logs" / f"finetune-{fmt}.json"
        lg = json.loads(lp.read_text()) if lp.exists() else {}
        steps = lg.get("steps") or []
        first = steps[0]["loss"] if steps and lg.get("resumed_from", 0) == 0 and steps[0]["step"] == 1 else None
        seen = _processed(fi["examples"], fi["settings"]["batch"], fi["steps"])
        tok = fi.get("train_tokens") or 0
        wall = b.timings.get(f"finetune-{fmt}", {}).get("wall_s")
        cpu = b.timings.get(f"finetune-{fmt}", {}).get("cpu_s")
        final = fi.get("final_loss")
        lines.append(
            f"| {fmt} | {fi.get('train_groups')} | {fi['examples']} | {fi['steps']} | {seen} | {seen / fi['examples']:.2f} "
            f"| {fi['train_s']:.0f} | {tok} | {tok / seen if seen else float('nan'):.0f} | {fi.get('tokens_per_s')} "
            f"| {fi['peak_rss_mb']} | {_num(first, 3)} | {_num(final, 3)} | {_num(wall, 0)} | {_num(cpu, 0)} |")
    for m in merged:
        tm = b.timings.get(f"merge-{m}", {})
        lines.append(f"\nmerge ({m}): {_num(tm.get('wall_s'), 0)} s wall, {_num(tm.get('cpu_s'), 0)} s CPU (one "
                     "process: load the base, add the deltas, save).")

    lines += ["", f"## Scoring cost (`recharness run` over the {n_samples} samples)", "",
              "Per task: seconds per group (sum of the model calls' latencies, wall clock), model calls per group, "
              "prompt tokens per call. Run CPU s: the whole `recharness run` process (model load included).", "",
              "| model | run wall s | run CPU s | CPU s / sample | "
              + " | ".join(f"{t}: s / group, calls, tokens / call" for t in TASKS) + " |",
              "|---|---:|---:|---:|" + "---|" * len(TASKS)]
    for name in names:
        cells = []
        for t in TASKS:
            recs = [r for r in _records(args.run / "predictions" / f"{name}.jsonl") if r.get("task") == t]
            if not recs:
                cells.append("–")
                continue
            lat = sum(r.get("latency_s") or 0 for r in recs) / len(recs)
            calls = sum((r.get("extra") or {}).get("calls", r.get("calls", 0)) or 0 for r in recs)
            ptok = sum(r.get("prompt_tokens") or 0 for r in recs)
            cells.append(f"{lat:.1f} s, {calls / len(recs):.1f}, {ptok / calls if calls else float('nan'):.0f}")
        tm = b.timings.get(f"run-{name}", {})
        cps = tm["cpu_s"] / n_samples if tm.get("cpu_s") is not None else None
        lines.append(f"| {name} | {_num(tm.get('wall_s'), 0)} | {_num(tm.get('cpu_s'), 0)} | {_num(cps, 1)} | "
                     + " | ".join(cells) + " |")

    lines += ["", f"## Table 1 layout ({g} groups per level; Kendall tau)", "",
              _paper_table(args.run, list(names)), "",
              "## Against zero-shot (paired over the same groups)", "", *(cmp_lines or ["- (none)"]), ""]
    inval = []
    for name in names:
        bad = {t: rows[(name, t)].metrics.get("invalid") for t in TASKS if (name, t) in rows}
        if any(bad.values()):
            inval.append(f"{name}: " + ", ".join(f"{t} {v:g}" for t, v in bad.items() if v))
    lines += [
        "## Notes",
        "",
        f"- A small check, not the paper's experiment: SmolLM2-135M, {g} test groups per level ({3 * g} per task), "
        f"{args.train_groups} training groups per level and "
        + (f"{args.max_steps} steps" if args.max_steps else f"{args.epochs} epochs")
        + f" per format. A cell's tau is the mean over that level's {g} groups, and one group moves it by up to "
        f"2/{g} = {2 / g:.2f}: the ± half-widths are wide; read a difference from zero-shot only with its paired "
        "interval above.",
        "- Stage times (`bench_timings.json` in the run directory) are summed over the sessions that finished "
        "a stage; a session killed mid-stage leaves no time, so a resumed stage's time is a lower bound.",
        "- Training examples per group: pointwise one per member, pairwise one per ordered pair (both orders), "
        "listwise one per group; the three fine-tunes see the same training groups (merging assumes it).",
        "- Peak RSS is each fine-tune process's own (ru_maxrss of a spawned process).",
        "- Unparseable answers score tau 0 (`[k]` in the table)" + (f"; here: {'; '.join(inval)}." if inval else
                                                                    "; there were none here."),
    ]
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text("\n".join(lines) + "\n")
    log(f"wrote {args.md}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

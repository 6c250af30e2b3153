"""SASRec side by side with RecBole 1.2.1 on RecBole's ML-1M setting: one run, one machine, one split.

The setting (issue 11, "SASRec (Group G)"): every one of ML-1M's 1,000,209 ratings a positive,
each user's items in time order (timestamp ties broken by the dataset's file order, as
`recbench.seqrec_data.positive_sequences` does), leave-one-out — the last item is the test target,
the one before the validation target, the rest are trained on — histories of at most 50 items,
hidden 64, 2 layers, 2 heads, FFN 256, cross-entropy over all items, batch 2,048 samples, Adam
1e-3, `--threads` torch threads (2).

1. The sequences are written once as a RecBole atomic file `<work>/data/<name>/<name>.inter`
   (user_id, item_id, and as `timestamp` each item's position in its user's sequence, so RecBole's
   time ordering is exactly ours with no ties left). Both frameworks read that file.
2. RecBole (its own venv, `.venv-recbole`, created here if missing) trains SASRec with its
   `Trainer` for `--recbole-epochs` epochs (`recbole_driver.py`), its test split evaluated every
   `--curve-every` training seconds and after each epoch.
3. Our `recharness.baselines.sasrec.SASRec` trains on the same sequences, split by
   `seqrec_data.split` (history_len 50, all users), for `--ours-seconds` training seconds (default:
   RecBole's total training seconds), its test rows evaluated at the same moments: every
   `--curve-every` training seconds, after each epoch, and at the first step at or after each of
   RecBole's curve points (for NDCG@10 at equal time).
   Test evaluation follows RecBole's full-sort protocol for sequential models exactly: every item
   of the catalog (the items in the .inter file) is ranked and NOTHING is excluded — RecBole 1.2.1's
   `FullSortEvalDataLoader` passes no history mask for `ModelType.SEQUENTIAL`, and
   `Trainer._full_sort_batch_eval` only sets the padding item's score to -inf.
   Evaluation seconds are excluded from training seconds for both.

Both run in child processes (their peak RSS is each child's VmHWM). The script checks that both
saw the same split (sha256 of the test and validation rows with their histories, and of the
training (user, target) pairs) and writes `benchmarks/results/recbole_side_by_side.md` (+ `.svg`).

Run by hand (about an hour on 2 shared cores; see the results file for the measured times):

    RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbole.py
    # smoke test (never the real results file):
    RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbole.py --users 300 --threads 1 --out /tmp/recbole-smoke.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from machine import cpu_model  # noqa: E402

try:
    import recharness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))

OUT = HERE / "results" / "recbole_side_by_side.md"
RECBOLE_VENV = ROOT / ".venv-recbole"
RECBOLE_PINS = ["recbole==1.2.1", "torch==2.13.0", "numpy<2", "pandas<3", "setuptools<81"]
RECBOLE_ENV = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # RecBole 1.2.1's torch.load under torch >= 2.6
DATASET = "ml-1m-recharness"
SAMPLES_TARGET = 5.0


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _child_env(threads: int) -> dict:
    env = {**os.environ, **RECBOLE_ENV}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


# ---------------------------------------------------------------- RecBole's venv

def ensure_recbole_venv(venv: Path) -> Path:
    """`venv`/bin/python with RecBole 1.2.1 importable; the venv is created (python3.11) if missing."""
    py = venv / "bin" / "python"
    check = [str(py), "-c", "import recbole, sys; from recbole.quick_start import run_recbole; "
                            "sys.exit(recbole.__version__ != '1.2.1')"]
    env = {**os.environ, **RECBOLE_ENV}
    if py.exists() and subprocess.run(check, env=env, capture_output=True).returncode == 0:
        return py
    _log(f"creating {venv} (RecBole 1.2.1 and its pins; a few minutes)…")
    if not py.exists():
        base = shutil.which("python3.11") or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "--progress-bar", "off", *RECBOLE_PINS], check=True)
    done = subprocess.run(check, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"RecBole 1.2.1 does not import in {venv}:\n{done.stderr[-3000:]}")
    return py


# ---------------------------------------------------------------- the data

def write_inter(work: Path, users: int | None, seed: int) -> dict:
    """Every rating a positive, per-user time order (ties: file order), as a RecBole .inter file;
    `users`: a seeded sample of that many users (smoke tests). Returns counts."""
    import numpy as np
    import polars as pl

    from recharness.data.store import load_dataset
    from recharness.tasks.recbench.seqrec_data import positive_sequences

    seqs, rule = positive_sequences(load_dataset("ml-1m").interactions, "all")
    if users is not None and users < seqs.height:
        keep = np.sort(np.random.default_rng(seed).choice(seqs.height, size=users, replace=False))
        seqs = seqs[keep]
    short = seqs.filter(pl.col("items").list.len() < 3)
    if short.height:
        raise SystemExit(f"{short.height} users have fewer than 3 positives (no training item after leave-one-out)")
    inter = (seqs.with_columns(pl.int_ranges(pl.col("items").list.len()).alias("order"))
             .explode("items", "order")
             .select(pl.col("user_id").alias("user_id:token"), pl.col("items").alias("item_id:token"),
                     pl.col("order").cast(pl.Float64).alias("timestamp:float")))
    path = work / "data" / DATASET / f"{DATASET}.inter"
    path.parent.mkdir(parents=True, exist_ok=True)
    inter.write_csv(path, separator="\t")
    return {"positives": rule, "users": seqs.height, "interactions": inter.height,
            "items": inter["item_id:token"].n_unique(), "path": str(path),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def read_inter(path: Path):
    """(user_id, items) per user, items in the file's order column: the sequences RecBole reads."""
    import polars as pl

    df = pl.read_csv(path, separator="\t", schema_overrides={"user_id:token": pl.Utf8, "item_id:token": pl.Utf8})
    df = df.rename({"user_id:token": "user_id", "item_id:token": "item_id", "timestamp:float": "order"})
    seqs = df.sort("user_id", "order").group_by("user_id", maintain_order=True).agg(pl.col("item_id").alias("items"))
    return seqs, sorted(df["item_id"].unique().to_list())


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def fingerprints(test, valid, train) -> dict:
    """The same sha256s `recbole_driver.fingerprints` computes, from our split."""
    out = {}
    for name, df in (("test", test), ("valid", valid)):
        out[name] = _digest([f"{u}\t{' '.join(h)}\t{t}" for u, h, t in df.select("user_id", "history", "target").iter_rows()])
        out[f"{name}_rows"] = df.height
    pairs = [f"{u}\t{x}" for u, h, t in train.select("user_id", "history", "target").iter_rows() for x in [*h[1:], t]]
    # a window's positions 1..L predict history[1:] and the target; position 0's item is only an input
    # (a user's first item, or the item shared with the window before, already counted there)
    out["train_pairs"], out["train_rows"] = _digest(pairs), len(pairs)
    return out


# ---------------------------------------------------------------- our side (child process)

def vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def ours_worker(spec_path: Path) -> None:
    """Train our SASRec on the .inter file's sequences; write the result JSON (as the driver's)."""
    spec = json.loads(spec_path.read_text())
    t_setup = time.perf_counter()
    import numpy as np
    import polars as pl
    import torch

    from recharness.baselines import TrainData
    from recharness.baselines.base import sequence_positives
    from recharness.baselines.sasrec import SASRec, right_padded
    from recharness.metrics.full_ranking import rank_metrics, target_ranks
    from recharness.tasks.recbench.seqrec_data import split

    torch.set_num_threads(spec["threads"])
    seqs, catalog = read_inter(Path(spec["inter"]))
    sp = split(seqs, test_users=None, train_sequences=None, history_len=spec["max_len"], min_history=1,
               seed=spec["seed"])
    sequences = pl.concat([sp.train.with_columns(part=pl.lit("train")), sp.valid.with_columns(part=pl.lit("valid"))])
    data = TrainData(sequence_positives(sequences), catalog, sequences=sequences)
    model = SASRec(seed=spec["seed"], threads=spec["threads"], progress=False, max_epochs=10**6, patience=10**6,
                   max_len=spec["max_len"], hidden=spec["hidden"], heads=spec["heads"], inner=spec["inner"],
                   dropout=spec["dropout"], batch_size=spec["batch_size"], lr=spec["lr"])
    test_users = sp.test["user_id"].to_list()
    test_hist_items, test_target_items = sp.test["history"].to_list(), sp.test["target"].to_list()
    budget = float(spec["budget_s"])
    marks = sorted({*spec["marks"], budget})
    every = spec["curve_every"] or float("inf")
    curve: list[dict] = []
    state = {"next_every": every, "mark": 0, "setup_s": None, "hist": None}

    @torch.inference_mode()
    def test_metrics(net) -> tuple[float, float]:
        """RecBole's full sort for sequential models: every catalog item ranked, nothing excluded."""
        if state["hist"] is None:  # the codes exist once fit() has built the vocabulary
            state["hist"] = [model._encode(h) for h in test_hist_items]
            state["target"] = np.asarray([model.code[t] - 1 for t in test_target_items], dtype=np.int64)
        net.eval()
        hist, target, ranks = state["hist"], state["target"], []
        vectors = net.item_vectors()
        for a in range(0, len(hist), 1024):
            rows = hist[a:a + 1024]
            lens = torch.tensor([len(h) for h in rows])
            out = net(torch.from_numpy(right_padded(rows, int(lens.max()))))
            scores = (out[torch.arange(len(rows)), lens - 1] @ vectors.T).numpy()
            ranks.append(target_ranks(scores, target[a:a + 1024]))
        m = rank_metrics(np.concatenate(ranks), ks=(10,))
        return m["ndcg@10"], m["hr@10"]

    def callback(net, info) -> bool:
        if state["setup_s"] is None:
            state["setup_s"] = time.perf_counter() - t_setup - info["train_s"]
        t = info["train_s"]
        due = info["end_of_epoch"] or t >= state["next_every"] or t >= budget
        while state["mark"] < len(marks) and marks[state["mark"]] <= t:
            state["mark"], due = state["mark"] + 1, True
        if not due:
            return False
        while state["next_every"] <= t:
            state["next_every"] += every
        t0 = time.perf_counter()
        ndcg, hit = test_metrics(net)
        curve.append({"train_s": round(t, 3), "samples": info["samples"], "epoch": info["epoch"],
                      "end_of_epoch": info["end_of_epoch"], "ndcg@10": float(ndcg), "hit@10": float(hit),
                      "eval_s": round(time.perf_counter() - t0, 3)})
        _log(f"[ours] epoch {info['epoch']} {t:.0f} s trained, {info['samples']:,} samples: "
             f"test NDCG@10 {ndcg:.4f} Hit@10 {hit:.4f}")
        return t >= budget

    model.callback, model.callback_steps = callback, 1
    model.fit(data)
    peak = vm_hwm_bytes()
    log = model.log
    per_epoch = sum(len(h) for h in sp.train["history"].to_list())  # next-item predictions in one epoch
    result = {
        "framework": "recharness SASRec", "torch": torch.__version__, "threads": log["threads"],
        "settings": {"layers": model.layers, **model.params, "seed": model.seed, "rows_per_step": log["rows_per_step"]},
        "setup_s": round(state["setup_s"] or 0.0, 3), "users": len(test_users), "items": len(catalog),
        "train_samples_per_epoch": per_epoch,
        "epochs": [{k: e[k] for k in ("epoch", "train_s", "samples", "samples_per_s", "loss", "valid_ndcg@10")}
                   for e in log["epochs"]],
        "train_s": log["train_step_s"], "samples": log["train_samples"], "samples_per_s": log["samples_per_s"],
        "curve": curve, "peak_rss_bytes": peak,
        "fingerprints": fingerprints(sp.test, sp.valid, sp.train),
    }
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


# ---------------------------------------------------------------- the report

def _gib(b: int) -> str:
    return f"{b / 2**30:.2f} GiB"


def at_time(curve: list[dict], t: float) -> dict | None:
    """The first point at or after `t` training seconds (None if the curve ends before)."""
    return next((p for p in curve if p["train_s"] >= t - 1e-9), None)


def plot(rb: dict, ours: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for res, label, style in ((rb, rb["framework"], "o-"), (ours, ours["framework"], "s-")):
        ax.plot([p["train_s"] for p in res["curve"]], [p["ndcg@10"] for p in res["curve"]], style, label=label, ms=3)
    ax.set_xlabel("training seconds (evaluation excluded)")
    ax.set_ylabel("test NDCG@10 (full sort)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def report(args, data: dict, rb: dict, ours: dict, loads: dict, wall: dict, out: Path) -> str:
    same = rb["fingerprints"] == ours["fingerprints"]
    ratio = ours["samples_per_s"] / rb["samples_per_s"]
    rb_final, ours_final = rb["curve"][-1], ours["curve"][-1]
    rb_epoch_s = sum(e["train_s"] for e in rb["epochs"]) / len(rb["epochs"])
    ours_epoch_s = ours["train_samples_per_epoch"] / ours["samples_per_s"]
    s = rb["settings"]
    eq = [(p, at_time(ours["curve"], p["train_s"])) for p in rb["curve"]]
    eq_ok = [o is not None and o["ndcg@10"] >= p["ndcg@10"] for p, o in eq]
    final_eq = eq[-1][1]
    lines = [
        "# SASRec side by side with RecBole 1.2.1 (ML-1M, RecBole's setting)",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {ours['torch']} (ours) / {rb['torch']} "
         f"(RecBole's venv); {args.threads} torch thread(s) each, one framework at a time."),
        (f"- load average (1 min): {loads['start']:.1f} at the start, {loads['after_recbole']:.1f} after RecBole, "
         f"{loads['end']:.1f} at the end. The cores are shared with other jobs, so both speeds vary between "
         "runs; both frameworks ran in this one run, one after the other."),
        (f"- data: `{args.dataset}` as prepared by recharness, every rating a positive ({data['interactions']:,} "
         f"interactions, {data['users']:,} users{' — a seeded sample of --users ' + str(args.users) if args.users else ''}, "
         f"{data['items']:,} items), each user's items in time order (timestamp ties: file order), written once as "
         "a RecBole atomic .inter file whose `timestamp` is the item's position in its user's sequence; both "
         f"frameworks read that file (sha256 `{data['sha256'][:16]}…`)."),
        ("- split: leave-one-out per user — last item test, the one before validation, the rest trained on; "
         f"histories of at most {args.max_len} items. Same split checked: "
         + ("**yes** — identical sha256 of the test rows and of the validation rows (user, history, target) and of "
            "the training (user, target) pairs." if same else "**NO — the fingerprints differ**: "
            f"RecBole {rb['fingerprints']} vs ours {ours['fingerprints']}.")),
        (f"- model (both): hidden {s['hidden_size']}, {s['n_layers']} layers, {s['n_heads']} heads, FFN {s['inner_size']}, "
         f"GELU, CE over all items, batch {s['train_batch_size']:,} samples, Adam {s['learning_rate']}, seed "
         f"{s['seed']}. Dropout: RecBole hidden {s['hidden_dropout_prob']} / attention {s['attn_dropout_prob']} "
         f"({'RecBole’s default' if s['hidden_dropout_prob'] == 0.5 else 'set by --recbole-dropout'}), "
         f"ours {ours['settings']['dropout']} (ours has no attention dropout). RecBole: post-LayerNorm blocks "
         "(eps 1e-12); ours: pre-LayerNorm."),
        (f"- training samples: one per (prefix → next item) prediction, {rb['train_samples_per_epoch']:,} per epoch "
         f"for both. RecBole builds each sample with its own history (the {args.max_len} items before it); ours "
         f"trains on windows of {args.max_len + 1} items (consecutive windows share one item), each position "
         "predicting its next item from the window's earlier items, so the same predictions are made per epoch "
         "from one forward pass per window."),
        ("- evaluation (both): the test rows, every catalog item ranked (full sort), NOTHING excluded — RecBole "
         "1.2.1's full-sort evaluation of a sequential model masks only the padding item (`FullSortEvalDataLoader` "
         "builds no history mask for `ModelType.SEQUENTIAL`), and ours does exactly that here (recharness's own "
         "seqrec scoring excludes the history instead). Evaluated every "
         f"{args.curve_every:g} training seconds and after each epoch; evaluation time is not training time. "
         "Neither model is selected on validation: the weights at each point are evaluated as they are."),
        (f"- RecBole: `Trainer._train_epoch` (the loop of `Trainer.fit`) for {len(rb['epochs'])} epoch(s), "
         f"setup (dataset, augmentation, dataloaders) {rb['setup_s']:.0f} s, not counted. Ours: "
         f"`recharness.baselines.sasrec.SASRec` for a budget of {args_budget(args, rb):.0f} training seconds "
         f"(≥ RecBole's {rb['train_s']:.0f}), setup {ours['setup_s']:.0f} s, not counted. Wall clock: RecBole "
         f"{wall['recbole']:.0f} s, ours {wall['ours']:.0f} s (child processes, evaluations included)."),
        "- peak memory: each child process's peak RSS (VmHWM), data loading and evaluation included.",
        "",
        "| framework | samples/s | s / epoch | peak memory | epochs | training s | final test NDCG@10 | final test Hit@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        (f"| {rb['framework']} | {rb['samples_per_s']:,.0f} | {rb_epoch_s:,.0f} | {_gib(rb['peak_rss_bytes'])} | "
         f"{rb['samples'] / rb['train_samples_per_epoch']:.2f} | {rb['train_s']:,.0f} | {rb_final['ndcg@10']:.4f} | "
         f"{rb_final['hit@10']:.4f} |"),
        (f"| {ours['framework']} | {ours['samples_per_s']:,.0f} | {ours_epoch_s:,.0f} | {_gib(ours['peak_rss_bytes'])} | "
         f"{ours['samples'] / ours['train_samples_per_epoch']:.2f} | {ours['train_s']:,.0f} | "
         f"{ours_final['ndcg@10']:.4f} | {ours_final['hit@10']:.4f} |"),
        "",
        (f"- **training speed: ours / RecBole = {ratio:.1f}×** (target ≥ {SAMPLES_TARGET:g}×: "
         f"{'met' if ratio >= SAMPLES_TARGET else '**missed**'})."),
    ]
    if final_eq is not None:
        p = rb_final
        lines.append(
            f"- **NDCG@10 at equal training time** ({p['train_s']:.0f} s, RecBole's end): RecBole {p['ndcg@10']:.4f}, "
            f"ours {final_eq['ndcg@10']:.4f} at {final_eq['train_s']:.1f} s (Hit@10 {p['hit@10']:.4f} vs "
            f"{final_eq['hit@10']:.4f}) — target ours ≥ RecBole: "
            f"{'met' if final_eq['ndcg@10'] >= p['ndcg@10'] else '**missed**'}; at every RecBole curve point: "
            f"{sum(eq_ok)} of {len(eq_ok)} met.")
    else:
        lines.append("- NDCG@10 at equal training time: **not measured** — our run ended before RecBole's training time.")
    over = [o["train_s"] - p["train_s"] for p, o in eq if o is not None]
    lines += [
        "",
        "## NDCG@10 at RecBole's curve points",
        "",
        ("Ours is evaluated at the first training step at or after each RecBole point (at most one step later: "
         f"{max(over, default=0):.2f} s here)."),
        "",
        "| training s | RecBole NDCG@10 | RecBole Hit@10 | ours NDCG@10 | ours Hit@10 | ours ≥ RecBole |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for (p, o), ok in zip(eq, eq_ok):
        lines.append(f"| {p['train_s']:,.0f} | {p['ndcg@10']:.4f} | {p['hit@10']:.4f} | "
                     + (f"{o['ndcg@10']:.4f} | {o['hit@10']:.4f} | {'yes' if ok else 'no'} |" if o else "– | – | – |"))
    for res in (rb, ours):
        lines += ["", f"## Curve: {res['framework']}", "",
                  "| training s | samples | epoch | test NDCG@10 | test Hit@10 | eval s |", "|---:|---:|---|---:|---:|---:|"]
        for p in res["curve"]:
            ep = f"{p['epoch']} (end)" if p["end_of_epoch"] else f"{p['epoch']}"
            lines.append(f"| {p['train_s']:,.1f} | {p['samples']:,} | {ep} | {p['ndcg@10']:.4f} | {p['hit@10']:.4f} | "
                         f"{p['eval_s']:.1f} |")
        lines += ["", "| epoch | training s | samples | samples/s |", "|---:|---:|---:|---:|"]
        for e in res["epochs"]:
            lines.append(f"| {e['epoch']} | {e['train_s']:,.1f} | {e['samples']:,} | {e['samples_per_s']:,.0f} |")
    svg = out.with_suffix(".svg")
    if plot(rb, ours, svg):
        lines += ["", f"![test NDCG@10 vs training seconds]({svg.name})"]
    lines += ["", f"Command: `{' '.join(['python', 'benchmarks/bench_recbole.py', *sys.argv[1:]])}`"]
    return "\n".join(lines) + "\n"


def args_budget(args, rb: dict) -> float:
    return args.ours_seconds if args.ours_seconds is not None else rb["train_s"]


# ---------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=None, help="a seeded sample of N users (smoke tests)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for each framework")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recbole-epochs", type=int, default=1)
    ap.add_argument("--ours-seconds", type=float, default=None,
                    help="our training budget in seconds (default: RecBole's training seconds)")
    ap.add_argument("--curve-every", type=float, default=150.0, help="evaluate every this many training seconds")
    ap.add_argument("--recbole-dropout", type=float, default=0.5,
                    help="RecBole's hidden and attention dropout (0.5: RecBole's SASRec default)")
    ap.add_argument("--dropout", type=float, default=0.2, help="our dropout (0.2: our default)")
    ap.add_argument("--max-len", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--venv", type=Path, default=RECBOLE_VENV, help="RecBole's venv (created if missing)")
    ap.add_argument("--work", type=Path, default=None, help="working directory (default: a temporary one, removed)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--ours-worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.dataset = "ml-1m"
    if args.ours_worker is not None:
        ours_worker(args.ours_worker)
        return
    if args.users is not None and args.out.resolve() == OUT.resolve():
        raise SystemExit(f"--users is a smoke test: give it its own --out (never {OUT})")
    if args.ours_seconds is not None and args.ours_seconds <= 0:
        raise SystemExit("--ours-seconds must be positive")

    loads = {"start": os.getloadavg()[0]}
    py = ensure_recbole_venv(args.venv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-recbole-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        _log("writing the sequences…")
        data = write_inter(work, args.users, args.seed)
        _log(f"{data['interactions']:,} interactions, {data['users']:,} users, {data['items']:,} items → {data['path']}")
        common = {"seed": args.seed, "threads": args.threads, "curve_every": args.curve_every, "hidden": 64,
                  "layers": 2, "heads": 2, "inner": 256, "max_len": args.max_len, "batch_size": args.batch_size,
                  "lr": args.lr}
        rb_spec = {**common, "data_path": str(work / "data"), "dataset": DATASET, "work": str(work / "recbole"),
                   "result": str(work / "recbole.json"), "epochs": args.recbole_epochs, "dropout": args.recbole_dropout}
        (work / "recbole").mkdir(exist_ok=True)
        (work / "recbole_spec.json").write_text(json.dumps(rb_spec))
        _log(f"RecBole: {args.recbole_epochs} epoch(s), {args.threads} thread(s)…")
        t0 = time.perf_counter()
        # RecBole's own deprecation warnings (pandas, torch.cuda.amp, pkg_resources) silenced
        env = {**_child_env(args.threads), "PYTHONWARNINGS": "ignore::FutureWarning,ignore::UserWarning"}
        subprocess.run([str(py), str(HERE / "recbole_driver.py"), str(work / "recbole_spec.json")],
                       cwd=work / "recbole", env=env, check=True)
        wall = {"recbole": time.perf_counter() - t0}
        rb = json.loads((work / "recbole.json").read_text())
        loads["after_recbole"] = os.getloadavg()[0]
        budget = args_budget(args, rb)
        if budget < rb["train_s"]:
            _log(f"note: --ours-seconds {budget:.0f} is below RecBole's {rb['train_s']:.0f} training seconds")
        ours_spec = {**common, "inter": data["path"], "result": str(work / "ours.json"), "dropout": args.dropout,
                     "budget_s": budget, "marks": [p["train_s"] for p in rb["curve"]]}
        (work / "ours_spec.json").write_text(json.dumps(ours_spec))
        _log(f"ours: {budget:.0f} training seconds, {args.threads} thread(s)…")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--ours-worker", str(work / "ours_spec.json")],
                       env=_child_env(args.threads), check=True)
        wall["ours"] = time.perf_counter() - t0
        ours = json.loads((work / "ours.json").read_text())
        loads["end"] = os.getloadavg()[0]
        text = report(args, data, rb, ours, loads, wall, args.out)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(text)
        _log(f"wrote {args.out}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

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
   A run named `fp32-stride1` (`--ours-precision`) trains ours on RecBole's own samples and work
   instead: one window per prediction, with that prediction's whole history (≤ 50 items), so its
   predictions per second compare with RecBole's on equal work; `-strideN` one window every N items.

To convergence (RecBole's early stopping: `--recbole-patience P` epochs without a better validation
NDCG@10, under a cap of `--recbole-epochs`), over several sittings: give a kept `--work DIR` and run
the same command again; RecBole resumes from its last checkpoint (`recbole_driver.py` takes one
after each epoch and every 300 training seconds within one, and a resumed run trains exactly what an
uninterrupted one would), our runs are reused while their settings and the curve points they need
are the same.
The report then says whether RecBole converged and, if it did, how long ours took to reach its best
converged test NDCG@10 against RecBole's time (the goal: ≤ 1/5), read two ways: ours' raw curve at or
above it from some point on (no selection at all), and ours' weights chosen by ours' own validation after
each epoch, as RecBole's value is chosen by RecBole's.

A sitting's machine may not outlive it: `--save-state STATE --work DIR` copies what a resumption reads (RecBole's
spec and last checkpoint, our kept runs, a MANIFEST of sha256) to a directory that can be committed
(benchmarks/state/), and `--restore-state STATE --work DIR` puts it back on the next machine; each RecBole
epoch records the CPU it finished on and its sitting. On a new machine this script needs only recharness's own
dependencies and torch, not the llama.cpp build `make` starts with (measured: 41 s to install, against about 10
minutes): `python3 -m venv .venv-bench && .venv-bench/bin/pip install torch==2.13.0 -e .` (ignored by git), then
`.venv-bench/bin/recharness prepare ml-1m` and
`.venv-bench/bin/python benchmarks/bench_recbole.py ...`, RecBole's own venv created meanwhile.

`--status --work DIR` prints RecBole's epochs so far (read only, while it trains).
`--ours-now --work DIR --ours-seconds S` runs ours before RecBole has finished, evaluated at RecBole's curve
points so far (S must lie within the seconds RecBole has trained; its settings and .inter file must be those of
RecBole's run there), RecBole paused meanwhile; the full command, run again later with the same --ours-seconds and
settings, reuses those runs and writes the report.

Pausing: while `<work>/PAUSE` exists the child that is training waits between steps, off its training
clock (RecBole's driver between batches, ours in its training hook): a quiet machine for a timing
benchmark or a test suite without losing the epoch in progress. `touch <work>/PAUSE`, `rm` it to go on.

Both run in child processes (their peak RSS is each child's VmHWM). The script checks that both
saw the same split (sha256 of the test and validation rows with their histories, and of the
training (user, target) pairs) and writes `benchmarks/results/recbole_side_by_side.md` (+ `.svg`).

Intervals: the test user is the independent unit (one target each, the same users and targets on both
sides), so both children also keep per-user target ranks — RecBole's driver at its best-validation epoch
and its last epoch, ours at our last point, at our point for RecBole's last training second, at the epoch
with our best validation NDCG@10, and at the epoch RecBole's own early stopping (its patience) would have
kept of ours — and the report gives NDCG@10 at those points with 95% percentile bootstrap intervals over
users and the paired differences (ours − RecBole) with the paired bootstrap's intervals
(`recharness.metrics.bootstrap`). A result without per-user ranks (an older kept run) is reported without them.

Both sides read alike: besides RecBole's best against our raw test curve, the report stops our run by
RecBole's rule on our own validation NDCG@10 (`patience_best`) and compares the test NDCG@10 of the weights
each side keeps, and the training seconds each took to reach them.

Run by hand (about an hour on 2 shared cores; see the results file for the measured times):

    RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbole.py
    # RecBole at dropout 0.2 to convergence, in sittings (run again to continue):
    RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbole.py --recbole-dropout 0.2 --recbole-epochs 200 \
        --recbole-patience 10 --ours-precision fp32,bf16,fp32-post --ours-seconds 1800 --work .bench-work/recbole-d0.2 \
        --out benchmarks/results/recbole_converged_dropout0.2.md
    # smoke test (never the real results file):
    RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_recbole.py --users 300 --threads 1 --out /tmp/recbole-smoke.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
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
#: issue 25: per position, our training at least 3x RecBole's
POSITIONS_TARGET = 3.0
#: bootstrap resamples of the test users for the report's intervals
RESAMPLES = 2000


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


#: the environment variable naming the file whose existence holds a training child between steps
PAUSE_ENV = "RECHARNESS_BENCH_PAUSE_FILE"


def _child_env(threads: int, pause_file: Path | None = None) -> dict:
    env = {**os.environ, **RECBOLE_ENV}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    if pause_file is not None:
        env[PAUSE_ENV] = str(pause_file)
    return env


def hold_while_paused(pause_file: Path | None) -> float:
    """Wait while `pause_file` exists (polled each second); the seconds waited. Called from inside the
    training hook, whose seconds are not training time."""
    if pause_file is None or not pause_file.exists():
        return 0.0
    t = time.perf_counter()
    _log(f"paused by {pause_file}")
    while pause_file.exists():
        time.sleep(1.0)
    held = time.perf_counter() - t
    _log(f"resumed after {held:.0f} s paused")
    return held


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

def run_label(precision: str, stride: int | None, block: str = "pre") -> str:
    """Our run's name in file names and the report: its precision, "-post" for RecBole's network, and its
    `stride` where one is set."""
    return precision + ("-post" if block == "post" else "") + ("" if stride is None else f"-stride{stride}")


def parse_run(label: str) -> tuple[str, int | None, str]:
    """`run_label`'s inverse: "fp32" -> ("fp32", None, "pre"), "bf16-post-stride1" -> ("bf16", 1, "post");
    SystemExit for anything else."""
    m = re.fullmatch(r"(fp32|bf16)(-post)?(?:-stride([1-9][0-9]*))?", label)
    if m is None:
        raise SystemExit(f"--ours-precision takes fp32 or bf16, each optionally with -post and/or -strideN (e.g. "
                         f"fp32-post-stride1), comma-separated; got {label!r}")
    return m[1], int(m[3]) if m[3] else None, "post" if m[2] else "pre"


def run_name(label: str) -> str:
    """The report's name of our run `label`."""
    precision, stride, block = parse_run(label)
    extra = (["RecBole's network"] if block == "post" else []) + ([f"stride {stride}"] if stride else [])
    return f"recharness SASRec ({', '.join([precision, *extra])})"


def stride_text(n: int, labels: list[str], max_len: int) -> str:
    """What a stride-`n` run of ours trains on, for the report."""
    names = ", ".join(f"`{x}`" for x in labels)
    if n == 1:
        return (f"the {names} run(s) train on RecBole's own samples instead: one window per prediction holding its "
                f"whole history (≤ {max_len} items), the loss at its last position only — the same windows, "
                "positions and softmaxes per epoch as RecBole, so there predictions per second is an equal-work speed")
    return (f"the {names} run(s) train on overlapping windows, one every {n} items of a user's sequence, each "
            f"training its last {n} positions, so each prediction sees at least {max_len - n + 1} items where the "
            "user has them (more positions per epoch, one prediction per training target)")


def label_of(run: dict) -> str:
    return run.get("label") or run["precision"]  # results written before strides had no label


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
                   dropout=spec["dropout"], batch_size=spec["batch_size"], lr=spec["lr"], precision=spec["precision"],
                   stride=spec.get("stride"), block=spec.get("block", "pre"),
                   attn_dropout=spec.get("attn_dropout", 0.0))
    label = run_label(spec["precision"], spec.get("stride"), spec.get("block", "pre"))
    test_users = sp.test["user_id"].to_list()
    test_hist_items, test_target_items = sp.test["history"].to_list(), sp.test["target"].to_list()
    budget = float(spec["budget_s"])
    marks = sorted({*spec["marks"], budget})
    every = spec["curve_every"] or float("inf")
    curve: list[dict] = []
    state = {"next_every": every, "mark": 0, "setup_s": None, "hist": None, "last": None, "at_recbole_end": None}
    by_epoch: dict[int, dict] = {}  # each epoch's last evaluated point with its ranks: the weights validated
    point_ranks: list[np.ndarray] = []  # every evaluated point's per-user ranks, in `curve`'s order
    recbole_end = max(spec["marks"], default=None)  # RecBole's last curve point: the end of its last epoch

    @torch.inference_mode()
    def test_metrics(net) -> tuple[float, float, np.ndarray]:
        """RecBole's full sort for sequential models: every catalog item ranked, nothing excluded.
        (NDCG@10, Hit@10, each test row's target rank)."""
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
        ranks = np.concatenate(ranks)
        m = rank_metrics(ranks, ks=(10,))
        return m["ndcg@10"], m["hr@10"], ranks

    pause_file = Path(os.environ[PAUSE_ENV]) if os.environ.get(PAUSE_ENV) else None

    def callback(net, info) -> bool:
        state["paused_s"] = state.get("paused_s", 0.0) + hold_while_paused(pause_file)
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
        ndcg, hit, ranks = test_metrics(net)
        curve.append({"train_s": round(t, 3), "samples": info["samples"], "positions": info["positions"],
                      "epoch": info["epoch"],
                      "end_of_epoch": info["end_of_epoch"], "ndcg@10": float(ndcg), "hit@10": float(hit),
                      "eval_s": round(time.perf_counter() - t0, 3)})
        # per-user ranks (for intervals over users) of every evaluated point, as arrays until the result is
        # written: our last point, the point `at_time` picks for RecBole's last training second, and the points
        # and weights each reading of the report keeps are among them
        point_ranks.append(ranks.astype(np.int32))
        state["last"] = {"train_s": curve[-1]["train_s"], "epoch": info["epoch"], "ndcg@10": float(ndcg),
                         "ranks": point_ranks[-1]}
        by_epoch[info["epoch"]] = state["last"]
        if state["at_recbole_end"] is None and recbole_end is not None and at_time(curve[-1:], recbole_end):
            state["at_recbole_end"] = state["last"]
        _log(f"[ours {label}] epoch {info['epoch']} {t:.0f} s trained, {info['samples']:,} samples: "
             f"test NDCG@10 {ndcg:.4f} Hit@10 {hit:.4f}")
        return t >= budget

    model.callback, model.callback_steps = callback, 1
    model.fit(data)
    peak = vm_hwm_bytes()
    log = model.log
    per_epoch = sum(len(h) for h in sp.train["history"].to_list())  # next-item predictions in one epoch
    # the weights each rule would keep, chosen by our own validation NDCG@10: the best of the whole run, and
    # the best up to where RecBole's early stopping (its patience, `spec["patience"]`) would have stopped us
    best_all, _ = patience_best(log["epochs"], None)
    best_stop, stop_epoch = patience_best(log["epochs"], spec.get("patience"))
    chosen = {"selected": best_all and by_epoch.get(best_all["epoch"]),
              "converged": (best_stop and by_epoch.get(best_stop["epoch"])) if stop_epoch is not None else None}

    def by_user(rec: dict | None) -> dict | None:
        return rec and {**rec, "ranks": dict(zip(map(str, test_users), rec["ranks"].tolist()))}

    result = {
        "framework": run_name(label), "torch": torch.__version__,
        "threads": log["threads"], "precision": spec["precision"], "label": label,
        "settings": {"layers": model.layers, **model.params, "seed": model.seed, "rows_per_step": log["rows_per_step"]},
        "setup_s": round(state["setup_s"] or 0.0, 3), "users": len(test_users), "items": len(catalog),
        "train_samples_per_epoch": per_epoch,
        "epochs": [{k: e[k] for k in ("epoch", "train_s", "samples", "samples_per_s", "loss", "valid_ndcg@10")}
                   for e in log["epochs"]],
        "train_s": log["train_step_s"], "samples": log["train_samples"], "samples_per_s": log["samples_per_s"],
        "positions": log["train_positions"],
        "curve": curve, "peak_rss_bytes": peak,
        "fingerprints": fingerprints(sp.test, sp.valid, sp.train),
        "ranks": {k: by_user(v) for k, v in {"last": state["last"], "at_recbole_end": state["at_recbole_end"],
                                             **chosen}.items()},
        # every evaluated point's ranks (`curve`'s order), each in `users`' order as one line of comma-separated
        # numbers (a JSON list would take a line per number here): the points and weights the report's readings
        # keep (`_point_ranks`)
        "point_ranks": {"users": [str(u) for u in test_users],
                        "ranks": [",".join(map(str, r.tolist())) for r in point_ranks]},
        "paused_s": round(state.get("paused_s", 0.0), 1),
    }
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


# ---------------------------------------------------------------- the report

def _gib(b: int) -> str:
    return f"{b / 2**30:.2f} GiB"


def patience_best(epochs: list[dict], patience: int | None) -> tuple[dict | None, int | None]:
    """RecBole's early stopping over `epochs`' validation NDCG@10 (`valid_ndcg@10`): a value at or above the
    best so far is the new best (a tie counts as better), and it stops after the epoch that makes more than
    `patience` epochs in a row without one. (The best epoch's record up to there, the epoch it stops after —
    None if it never stops, or `patience` is None: then the best of them all.)"""
    best, since = None, 0
    for e in epochs:
        v = e.get("valid_ndcg@10")
        if v is None:
            continue
        if best is None or v >= best["valid_ndcg@10"]:
            best, since = e, 0
        else:
            since += 1
            if patience is not None and since > patience:
                return best, e["epoch"]
    return best, None


def at_time(curve: list[dict], t: float) -> dict | None:
    """The first point at or after `t` training seconds (None if the curve ends before)."""
    return next((p for p in curve if p["train_s"] >= t - 1e-9), None)


def plot(rb: dict, runs: list[dict], path: Path) -> bool:
    """Test NDCG@10 against training seconds and against epochs, one line per framework."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (by_time, by_epoch) = plt.subplots(1, 2, figsize=(11, 4))
    for res, style in zip([rb, *runs], ("o-", "s-", "^-", "v-")):
        per_epoch = res["train_samples_per_epoch"]
        by_time.plot([p["train_s"] for p in res["curve"]], [p["ndcg@10"] for p in res["curve"]], style,
                     label=res["framework"], ms=3)
        by_epoch.plot([p["samples"] / per_epoch for p in res["curve"]], [p["ndcg@10"] for p in res["curve"]], style,
                      label=res["framework"], ms=3)
    by_time.set_xlabel("training seconds (evaluation excluded)")
    by_epoch.set_xlabel("epochs (next-item predictions trained / predictions per epoch)")
    for ax in (by_time, by_epoch):
        ax.set_ylabel("test NDCG@10 (full sort)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def positions_per_s(res: dict, max_len: int | None = None) -> float:
    """Sequence positions run through the network per training second, padding included: RecBole makes
    one `max_len`-position pass per prediction (give `max_len`), ours logs the positions of its windows."""
    positions = res["samples"] * max_len if max_len is not None else res["positions"]
    return positions / res["train_s"]


def equal_time(rb: dict, run: dict) -> list[tuple[dict, dict | None, bool]]:
    """Per RecBole curve point: (its point, ours at the first step at or after it — or ours' last point
    when our run ended first, flagged True: ours then had LESS training time than RecBole)."""
    out = []
    for p in rb["curve"]:
        o = at_time(run["curve"], p["train_s"])
        out.append((p, o, False) if o is not None else (p, run["curve"][-1] if run["curve"] else None, True))
    return out


def user_ndcg(ranks: dict[str, int], users: list[str]):
    """Each user's NDCG@10 from their target's rank, in the order of `users` (`rank_metrics`: 1/log2(rank + 1)
    within the top 10, else 0)."""
    from recharness.metrics.full_ranking import rank_metrics

    return rank_metrics([ranks[u] for u in users], ks=(10,), per_sample=True)["ndcg@10"]


def user_intervals(points: dict[str, dict[str, int] | None], pairs: dict[str, tuple[str, str]],
                   resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """Over test users (the independent unit: one target each, the same users on both sides): each point's
    NDCG@10 with its 95% percentile bootstrap interval, and for each pair label → (a, b) a's minus b's with
    the paired bootstrap's interval and p; every point resampled with the same counts of users. A point
    without per-user ranks (None), and a pair with such a point, gets None."""
    import numpy as np

    from recharness.metrics.bootstrap import MIN_UNITS, mean_units, paired_bootstrap, percentile_ci

    have = {k: v for k, v in points.items() if v}
    users = sorted(next(iter(have.values()))) if have else []
    other = [k for k, v in have.items() if set(v) != set(users)]
    if other:
        raise ValueError(f"per-user ranks of other users than {next(iter(have))}'s: {', '.join(other)}")
    if len(users) < MIN_UNITS:  # a bootstrap of so few users claims more than they show
        have = {}
    units = {k: mean_units(users, user_ndcg(v, users), how="NDCG@10 per test user") for k, v in have.items()}
    out: dict = {"users": len(users), "resamples": resamples, "seed": seed, "points": {}, "diffs": {}}
    for k in points:
        u = units.get(k)
        ci = None if u is None else percentile_ci(np.concatenate([u.replicates(w) for w in u.counts(resamples, seed)]))
        out["points"][k] = None if ci is None else {"ndcg@10": u.point(), "lo": ci[0], "hi": ci[1]}
    for label, (a, b) in pairs.items():
        both = a in units and b in units
        out["diffs"][label] = paired_bootstrap(units[a], units[b], resamples, seed) if both else None
    return out


def ranks_of(run: dict, point: dict | None) -> dict | None:
    """The per-user ranks `run` kept of its curve point `point`, None if it kept none. Runs since 2026-11-30 keep
    every evaluated point's (`point_ranks`); older runs kept only a few chosen points' (`ranks`: last, at
    RecBole's end, selected, converged), found by their training second. (The worker still writes both, so the
    kept final run's code fingerprint, and with it its reuse, stays as it is.)"""
    if point is None:
        return None
    kept = run.get("point_ranks") or {}
    curve = run.get("curve") or []
    if kept and len(kept.get("ranks") or []) == len(curve):
        i = next((i for i, p in enumerate(curve) if p["train_s"] == point["train_s"]), None)
        if i is None:
            return None
        ranks = [int(x) for x in kept["ranks"][i].split(",")]
        # a damaged record (never written so by the worker) has no ranks rather than failing the whole report
        return dict(zip(kept["users"], ranks)) if len(ranks) == len(kept["users"]) else None
    older = [r for r in (run.get("ranks") or {}).values() if r]
    return next((r["ranks"] for r in older if r["train_s"] == point["train_s"]), None)


def _epoch_point(run: dict, epoch: int) -> dict | None:
    """Epoch `epoch`'s last evaluated point: the weights validated after that epoch."""
    return {p["epoch"]: p for p in run.get("curve") or [] if "epoch" in p}.get(epoch)


def reading_hits(rb: dict, run: dict) -> tuple[float, dict | None, dict | None]:
    """RecBole's best test NDCG@10 unrounded (`recbole_best_exact`) and where ours is at or above it from then on:
    on its raw curve (reading 1) and with its weights chosen by its own validation (reading 2, `selected_curve`);
    None where it is not."""
    target = recbole_best_exact(rb)
    selected = selected_curve(run)
    return target, sustained_at(run["curve"], target), (sustained_at(selected, target) if selected else None)


def interval_lines(rb: dict, runs: list[dict], resamples: int = RESAMPLES, seed: int = 0) -> list[str]:
    """The report's section on NDCG@10 with 95% intervals over test users: RecBole's best-validation epoch and
    its last point, our last point, our point at RecBole's last training second and the weights RecBole's early
    stopping keeps of ours, and the paired differences (ours at RecBole's end − RecBole's last; ours last −
    RecBole's best; ours as stopped by RecBole's rule − RecBole's best; ours' weights of best validation over its
    run, as reading 2 picks them, − RecBole's best (d)); and once RecBole has converged, the points at which readings
    1 (e) and 2 (f) of `convergence_lines` first hold − RecBole's best (a row without ranks shows –: every point's
    ranks are kept by runs since 2026-11-30)."""
    rb_ranks = rb.get("ranks") or {}
    best, last = rb_ranks.get("best"), rb_ranks.get("last")
    best_valid = rb.get("best_valid") or {}
    best_epoch = best_valid.get("epoch")
    if best is not None and best["epoch"] != best_epoch:  # never so when the driver wrote both
        best = None
    if last is not None and last["train_s"] != rb["curve"][-1]["train_s"]:
        last = None
    labels = {"rb best": f"RecBole, best validation NDCG@10 (epoch {best_epoch})",
              "rb last": f"RecBole, last point (epoch {rb['curve'][-1]['epoch']})"}
    points = {"rb best": best and best["ranks"], "rb last": last and last["ranks"]}
    times = {"rb best": best_valid.get("train_s"), "rb last": rb["curve"][-1]["train_s"]}
    pairs: dict[str, tuple[str, str]] = {}
    for r in runs:
        p, o, short = equal_time(rb, r)[-1]
        end, fin = f"{r['framework']} end", f"{r['framework']} last"
        labels[end] = (f"{r['framework']} at RecBole's last training second ({p['train_s']:,.0f} s)"
                       + (" — our run had ended: our last point" if short else ""))
        labels[fin] = f"{r['framework']}, last point"
        points[end], points[fin] = ranks_of(r, o), ranks_of(r, r["curve"][-1] if r["curve"] else None)
        times[end], times[fin] = o and o["train_s"], r["curve"][-1]["train_s"] if r["curve"] else None
        pairs[f"(a) {labels[end]} − {labels['rb last']}"] = (end, "rb last")
        pairs[f"(b) {labels[fin]} − {labels['rb best']}"] = (fin, "rb best")
        conv = converged_ranks(r, rb.get("patience"))
        if conv is not None:  # runs since they keep it: the weights RecBole's early stopping keeps of ours
            key = f"{r['framework']} converged"
            labels[key] = f"{r['framework']}, the weights RecBole's early stopping keeps (epoch {conv['epoch']})"
            points[key], times[key] = conv["ranks"], conv["train_s"]
            pairs[f"(c) {labels[key]} − {labels['rb best']}"] = (key, "rb best")
        chosen = selected_curve(r)
        at = chosen and _epoch_point(r, chosen[-1]["selected_epoch"])
        sel = at and {"epoch": chosen[-1]["selected_epoch"], "train_s": at["train_s"], "ranks": ranks_of(r, at)}
        if sel:  # the weights ours' own validation chooses over its whole run, as reading 2 reads it
            key = f"{r['framework']} selected"
            labels[key] = f"{r['framework']}, its weights of best validation NDCG@10 over its run (epoch {sel['epoch']})"
            points[key], times[key] = sel["ranks"], sel["train_s"]
            pairs[f"(d) {labels[key]} − {labels['rb best']}"] = (key, "rb best")
        if best_valid.get("epoch") and rb.get("stopped") == "patience":
            _, hit1, hit2 = reading_hits(rb, r)
            if hit1 is not None:  # reading 1's first point
                key = f"{r['framework']} hit1"
                labels[key] = (f"{r['framework']}, reading 1's first point at or above RecBole's best "
                               f"({hit1['train_s']:,.1f} s)")
                points[key], times[key] = ranks_of(r, hit1), hit1["train_s"]
                pairs[f"(e) {labels[key]} − {labels['rb best']}"] = (key, "rb best")
            if hit2 is not None:  # the weights reading 2 holds at its first point at or above
                key = f"{r['framework']} hit2"
                labels[key] = (f"{r['framework']}, reading 2's weights at its first point at or above RecBole's best "
                               f"(epoch {hit2['selected_epoch']}'s, chosen at {hit2['train_s']:,.1f} s)")
                at = _epoch_point(r, hit2["selected_epoch"])
                points[key], times[key] = ranks_of(r, at), at and at["train_s"]
                pairs[f"(f) {labels[key]} − {labels['rb best']}"] = (key, "rb best")
    head = ["", "## NDCG@10 with 95% intervals over test users", ""]
    if not any(points.values()):
        return head + ["Not available for this run: its results hold no per-user ranks (recorded by runs since "
                       "per-user ranks were added; a run resumed from an older RecBole checkpoint has them only for "
                       "its later epochs)."]
    try:
        res = user_intervals(points, pairs, resamples, seed)
    except ValueError as ex:  # ranks of other users: a bug upstream, said rather than losing the report
        return head + [f"Not available: {ex}."]
    if not any(res["points"].values()):
        return head + [f"Not available: {res['users']} test user(s), too few for a bootstrap."]
    lines = head + [
        (f"Resampled: the {res['users']:,} test users (one target each, the same users and targets on both sides) "
         f"are drawn with replacement {resamples:,} times (seed {seed}), and every NDCG@10 and both sides of each "
         "difference are computed on the same draw of users (a paired percentile bootstrap). A point marked – kept "
         "no per-user ranks (e.g. an epoch before a resumed run began keeping them)."),
        "", "| point | training s | NDCG@10 | 95% interval |", "|---|---:|---:|---|"]
    for k, label in labels.items():
        v, t = res["points"][k], times[k]
        lines.append(f"| {label} | {'–' if t is None else f'{t:,.1f}'} | "
                     + ("– | – |" if v is None else f"{v['ndcg@10']:.4f} | [{v['lo']:.4f}, {v['hi']:.4f}] |"))
    for rec in (best, last):  # the driver's check: RecBole's own ndcg@10 against the mean of its ranks'
        if rec and abs(rec["ndcg@10_from_ranks"] - rec["ndcg@10"]) > 1e-4:
            lines += ["", f"**Rank check failed** at RecBole's epoch {rec['epoch']}: its per-user ranks give "
                          f"NDCG@10 {rec['ndcg@10_from_ranks']:.5f}, RecBole reported {rec['ndcg@10']:.4f} (ties?)."]
    lines += ["", "| paired difference (ours − RecBole) | difference | 95% interval | p (bootstrap) |",
              "|---|---:|---|---:|"]
    for label, d in res["diffs"].items():
        lines.append(f"| {label} | " + ("– | – | – |" if d is None else
                                        f"{d['diff']:+.4f} | [{d['lo']:+.4f}, {d['hi']:+.4f}] | {d['p']:.3f} |"))
    return lines


def machines_line(rb: dict, runs: list[dict]) -> str:
    """Which CPU each side's training seconds were measured on: RecBole's epochs by the CPU each finished on
    (a run to convergence spans sittings, which may run on different machines), and each run of ours'. Times
    compare on equal terms only on one CPU model; when they differ the line says so."""
    import statistics

    unknown = "not recorded"
    by_cpu: dict[str, list[float]] = {}
    for e in rb["epochs"]:
        if "train_s" in e:  # a record without its time says nothing of its CPU's speed
            by_cpu.setdefault(e.get("cpu") or unknown, []).append(e["train_s"])
    parts = [f"{len(v)} epoch(s) finished on {cpu} (median {statistics.median(v):,.0f} s)" for cpu, v in by_cpu.items()]
    ours = {r.get("cpu") or unknown for r in runs}
    text = f"- CPUs: RecBole {'; '.join(parts)}; ours on {', '.join(sorted(ours))}."
    known = (set(by_cpu) | ours) - {unknown}
    if len(known) > 1:
        text += (" **Not one CPU model**: training seconds from different machines are compared. The medians "
                 "above are only a rough guide to how far the machines differ: a model's name can cover machines "
                 "of different speeds, and a median takes in epochs slowed by other work.")
    elif unknown in set(by_cpu) | ours:
        text += " Some CPUs were not recorded (runs kept from before they were): one model cannot be confirmed."
    return text


def report(args, data: dict, rb: dict, runs: list[dict], loads: dict, wall: dict, out: Path) -> str:
    same = all(rb["fingerprints"] == r["fingerprints"] for r in runs)
    rb_final = rb["curve"][-1]
    rb_epoch_s = sum(e["train_s"] for e in rb["epochs"]) / len(rb["epochs"])
    rb_pos = positions_per_s(rb, args.max_len)
    s = rb["settings"]
    budget = args_budget(args, rb)
    lines = [
        "# SASRec side by side with RecBole 1.2.1 (ML-1M, RecBole's setting)",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {runs[0]['torch']} (ours) / {rb['torch']} "
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
            f"the training (user, target) pairs, in every run (test rows `{rb['fingerprints'].get('test', '')[:16]}…`)."
            if same else "**NO — the fingerprints differ**: "
            f"RecBole {rb['fingerprints']} vs ours {[r['fingerprints'] for r in runs]}.")),
        (f"- model (both): hidden {s['hidden_size']}, {s['n_layers']} layers, {s['n_heads']} heads, FFN {s['inner_size']}, "
         f"GELU, CE over all items, batch {s['train_batch_size']:,} samples, Adam {s['learning_rate']}, seed "
         f"{s['seed']}. Dropout: RecBole hidden {s['hidden_dropout_prob']} / attention {s['attn_dropout_prob']} "
         f"({'RecBole’s default' if s['hidden_dropout_prob'] == 0.5 else 'set by --recbole-dropout'}), "
         f"ours {runs[0]['settings']['dropout']} (ours' own network has no attention dropout). RecBole: post-LayerNorm blocks "
         "(eps 1e-12); ours: pre-LayerNorm"
         + "".join(f"; the `{label_of(r)}` run: RecBole's network (`SASRec(block=\"post\")`: a LayerNorm of the input "
                   "embeddings, post-LayerNorm blocks, eps 1e-12, attention dropout "
                   f"{r['settings'].get('attn_dropout')}, no final LayerNorm)"
                   for r in runs if r["settings"].get("block") == "post")
         + ". Ours in float32 (`fp32`) and, where run, in mixed precision "
         "(`bf16`, `SASRec(precision=\"bf16\")`: since commit 1122a9c the loss's matmuls and softmax and the "
         "blocks' linear layers in bfloat16, float32 weights, attention and LayerNorm; before it, the loss "
         "only); RecBole in float32."),
        (f"- training samples: one per (prefix → next item) prediction, {rb['train_samples_per_epoch']:,} per epoch "
         f"for both. RecBole builds each sample with its own history (the {args.max_len} items before it) and runs "
         f"one {args.max_len}-position pass per sample; ours trains on windows of {args.max_len + 1} items "
         "(consecutive windows share one item), each position predicting its next item from the window's earlier "
         "items, so an epoch makes as many predictions (one per training target) from one forward pass per "
         f"window, but not the same predictions: a position of ours predicts from the window's items before it "
         f"(1–{args.max_len}, {(args.max_len + 1) / 2:.1f} on average in a full window), RecBole's sample from its "
         f"whole history up to {args.max_len} items"
         + "".join(f"; {stride_text(n, [label_of(r) for r in runs if r['settings'].get('stride') == n], args.max_len)}"
                   for n in sorted({r["settings"].get("stride") for r in runs} - {None}))
         + ". Hence two speeds: "
         "predictions per second (what an epoch costs) and **positions per second** (sequence positions run "
         "through the network, padding included: the work of the network itself, the fair unit)."),
        ("- evaluation (both): the test rows, every catalog item ranked (full sort), NOTHING excluded — RecBole "
         "1.2.1's full-sort evaluation of a sequential model masks only the padding item (`FullSortEvalDataLoader` "
         "builds no history mask for `ModelType.SEQUENTIAL`), and ours does exactly that here (recharness's own "
         "seqrec scoring excludes the history instead). Evaluated every "
         f"{args.curve_every:g} training seconds and after each epoch; evaluation time is not training time. "
         "The curves select nothing on validation: the weights at each point are evaluated as they are (only "
         "the convergence line below uses RecBole's validation, to find its best epoch). The "
         "validation NDCG@10 in the epoch tables is each framework's own (RecBole's protocol, nothing excluded; "
         "ours, SASRec's early-stopping validation, history excluded): not comparable between the two."),
        (f"- RecBole: `Trainer._train_epoch` (the loop of `Trainer.fit`) for {len(rb['epochs'])} epoch(s), "
         f"setup (dataset, augmentation, dataloaders) {rb['setup_s']:.0f} s, not counted. Ours: "
         f"`recharness.baselines.sasrec.SASRec` for a budget of {budget:.0f} training seconds "
         f"({'≥' if budget >= rb['train_s'] else '**<**'} RecBole's {rb['train_s']:.0f}), setup "
         f"{max(r['setup_s'] for r in runs):.0f} s, not counted. Wall clock: RecBole {wall['recbole']:.0f} s"
         + (f" (this sitting; the run took {rb['sittings']} sittings, its training seconds and peak memory "
            "are over all of them)" if rb.get("sittings", 1) > 1 else "") + ", ours "
         + ", ".join(f"{wall[label_of(r)]:.0f} s ({label_of(r)})" for r in runs)
         + " (child processes, evaluations included)."),
        "- peak memory: each child process's peak RSS (VmHWM), data loading and evaluation included.",
        machines_line(rb, runs),
        "",
        ("| framework | predictions/s | positions/s | s / epoch | peak memory | epochs | training s | "
         "final test NDCG@10 | final test Hit@10 |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        (f"| {rb['framework']} | {rb['samples_per_s']:,.0f} | {rb_pos:,.0f} | {rb_epoch_s:,.0f} | "
         f"{_gib(rb['peak_rss_bytes'])} | {rb['samples'] / rb['train_samples_per_epoch']:.2f} | {rb['train_s']:,.0f} | "
         f"{rb_final['ndcg@10']:.4f} | {rb_final['hit@10']:.4f} |"),
    ]
    for r in runs:
        final = r["curve"][-1]
        lines.append(
            f"| {r['framework']} | {r['samples_per_s']:,.0f} | {positions_per_s(r):,.0f} | "
            f"{r['train_samples_per_epoch'] / r['samples_per_s']:,.0f} | {_gib(r['peak_rss_bytes'])} | "
            f"{r['samples'] / r['train_samples_per_epoch']:.2f} | {r['train_s']:,.0f} | {final['ndcg@10']:.4f} | "
            f"{final['hit@10']:.4f} |")
    lines.append("")
    for r in runs:
        ratio = r["samples_per_s"] / rb["samples_per_s"]
        pos_ratio = positions_per_s(r) / rb_pos
        lines.append(
            f"- **{r['framework']} / RecBole: {pos_ratio:.2f}× in positions per second** (the network's work; goal "
            f"≥ {POSITIONS_TARGET:g}×: {'met' if pos_ratio >= POSITIONS_TARGET else '**not met**'}), {ratio:.1f}× in "
            "next-item predictions per second (what an epoch costs: RecBole's one padded pass per prediction "
            "against our one pass per window"
            + ("" if r["settings"].get("stride") == 1 else
               "; predictions on different inputs, as the training-samples line says, so not a speed on equal work")
            + ")." + ("" if rb.get("sittings", 1) <= 1 else
                      f" RecBole's speed is its mean over its {rb['sittings']} sittings, on the machines they ran on "
                      "and slowed where other work shared them, ours one run on one machine: "
                      "benchmarks/results/recbole_equal_network.md measures both sides in one run on one machine."))
    rb_epochs = {p["epoch"]: p for p in rb["curve"] if p["end_of_epoch"]}
    for r in runs:
        ours_epochs = {p["epoch"]: p for p in r["curve"] if p["end_of_epoch"]}
        both = sorted(set(rb_epochs) & set(ours_epochs))
        if both:
            lines.append(f"- **Per epoch** ({r['framework']}): " + "; ".join(
                f"after epoch {e} RecBole {rb_epochs[e]['ndcg@10']:.4f}, ours {ours_epochs[e]['ndcg@10']:.4f}"
                for e in both) + ".")
    lines += convergence_lines(rb, runs)
    for r in runs:
        eq = equal_time(rb, r)
        ok = [o is not None and o["ndcg@10"] >= p["ndcg@10"] for p, o, _ in eq]
        p, o, short = eq[-1]
        if o is None:
            lines.append(f"- NDCG@10 at equal training time ({r['framework']}): **not measured** (no curve point).")
            continue
        lines.append(
            f"- **NDCG@10 at equal training time** ({r['framework']}; {p['train_s']:.0f} s, RecBole's end): RecBole "
            f"{p['ndcg@10']:.4f}, ours {o['ndcg@10']:.4f} at {o['train_s']:.1f} s"
            + (" — our run had ended, so ours had less training time" if short else "")
            + f" (Hit@10 {p['hit@10']:.4f} vs {o['hit@10']:.4f}); ours ≥ RecBole at {sum(ok)} of {len(ok)} "
            "RecBole curve points.")
    lines += interval_lines(rb, runs)
    for r in runs:
        eq = equal_time(rb, r)
        over = [o["train_s"] - p["train_s"] for p, o, short in eq if o is not None and not short]
        lines += [
            "",
            f"## NDCG@10 at RecBole's curve points: {r['framework']}",
            "",
            ("Ours is evaluated at the first training step at or after each RecBole point (at most "
             f"{max(over, default=0):.2f} s later here); a point marked ≤ is later than our whole run, and is "
             "compared with our last point, i.e. with less training time than RecBole had."),
            "",
            "| training s | RecBole NDCG@10 | RecBole Hit@10 | ours NDCG@10 | ours Hit@10 | ours ≥ RecBole |",
            "|---:|---:|---:|---:|---:|:---:|",
        ]
        for p, o, short in eq:
            if o is None:
                lines.append(f"| {p['train_s']:,.0f} | {p['ndcg@10']:.4f} | {p['hit@10']:.4f} | – | – | – |")
                continue
            mark = "≤ " if short else ""
            lines.append(f"| {p['train_s']:,.0f} | {p['ndcg@10']:.4f} | {p['hit@10']:.4f} | {mark}{o['ndcg@10']:.4f} | "
                         f"{mark}{o['hit@10']:.4f} | {'yes' if o['ndcg@10'] >= p['ndcg@10'] else 'no'} |")
    for res in (rb, *runs):
        lines += ["", f"## Curve: {res['framework']}", "",
                  "| training s | samples | epoch | test NDCG@10 | test Hit@10 | eval s |", "|---:|---:|---|---:|---:|---:|"]
        for p in res["curve"]:
            ep = f"{p['epoch']} (end)" if p["end_of_epoch"] else f"{p['epoch']}"
            lines.append(f"| {p['train_s']:,.1f} | {p['samples']:,} | {ep} | {p['ndcg@10']:.4f} | {p['hit@10']:.4f} | "
                         f"{p['eval_s']:.1f} |")
        lines += ["", "| epoch | training s | samples | samples/s | valid NDCG@10 | load (1 min) | finished |",
                  "|---:|---:|---:|---:|---:|---:|---|"]
        for e in res["epochs"]:
            valid = e.get("valid_ndcg@10")
            load = e.get("load_1min")
            lines.append(f"| {e['epoch']} | {e['train_s']:,.1f} | {e['samples']:,} | {e['samples_per_s']:,.0f} | "
                         f"{'–' if valid is None else f'{valid:.4f}'} | {'–' if load is None else f'{load:.1f}'} | "
                         f"{e.get('finished_at', '–')} |")
    svg = out.with_suffix(".svg")
    if plot(rb, runs, svg):
        lines += ["", f"![test NDCG@10 vs training seconds and vs epochs]({svg.name})"]
    argv = getattr(args, "argv", None) or sys.argv[1:]
    lines += ["", f"Command: `{' '.join(['python', 'benchmarks/bench_recbole.py', *argv])}`"]
    return "\n".join(lines) + "\n"


#: the code our runs execute, for `code_fingerprint`
WORKER_CODE = (ours_worker, read_inter, run_label, parse_run, at_time, patience_best, fingerprints, _digest,
               hold_while_paused, vm_hwm_bytes, _child_env)


#: the recharness source files that decide our side's numbers (`code_fingerprint`): SASRec, its loss, its training
#: loop and early stopping, its threads, the training data, the split, and the ranking metrics of the test ranks. Not
#: the modules they import for files, paths and errors: an edit there changes no number, and would throw away a
#: kept run of 90 minutes
WORKER_SOURCES = ("baselines/sasrec.py", "baselines/linear_cross_entropy.py", "baselines/training.py",
                  "baselines/torch_threads.py", "baselines/base.py", "metrics/full_ranking.py",
                  "tasks/recbench/seqrec_data.py")


def worker_sources() -> dict[str, str]:
    """sha256 (12 hex) of each of `WORKER_SOURCES`, as the recharness this interpreter imports has them (the run
    records them, so a kept run that cannot be reused names the file that changed)."""
    import recharness

    root = Path(recharness.__file__).resolve().parent
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest()[:12] for rel in WORKER_SOURCES}


def code_fingerprint() -> str:
    """sha256 of what decides our side's numbers: this script's worker and the functions it calls (not its
    report, so rewording a report keeps a kept run), the recharness files that decide our numbers (SASRec, its
    loss and training loop, the split, the ranking metrics: `WORKER_SOURCES`), and torch's version (a kept run of
    other code is not reused)."""
    import ast

    import torch

    h = hashlib.sha256(torch.__version__.encode())
    # from the file on disk (what a worker started now runs), not from this process's code objects: a parent
    # that has run for hours may have a file edited under it
    text = Path(__file__).resolve().read_text()
    defs = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    for fn in WORKER_CODE:
        h.update((ast.get_source_segment(text, defs[fn.__name__]) + "\n").encode())
    for rel, digest in worker_sources().items():
        h.update(f"{rel} {digest}\n".encode())
    return h.hexdigest()


#: spec keys a kept run of ours may differ in and still be reused: the curve points (checked apart, below) and
#: the paths (a run carried to another checkout by --save-state/--restore-state; "data_sha256" pins the data)
REUSE_IGNORES = ("marks", "inter", "result")


def reusable(result_path: Path, spec: dict) -> dict | None:
    """Our earlier run in a kept --work directory if it answers `spec` (None otherwise): finished (the
    result holds the spec it ran with), the same settings, budget, data and code, and every RecBole curve
    point within the budget among the points it was evaluated at."""
    if not result_path.exists():
        return None
    done = json.loads(result_path.read_text())
    old = done.get("spec")
    if old is None or "wall_s" not in done:
        return None
    def compared(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in REUSE_IGNORES}

    if compared(old) != compared(spec):
        return None
    return done if {m for m in spec["marks"] if m <= spec["budget_s"]} <= set(old["marks"]) else None


def not_reusable_why(result_path: Path, spec: dict) -> str:
    """Why `reusable` refuses a kept result, in words: the settings that differ (the code's files by name, when
    the result recorded them), or the curve points it lacks."""
    try:
        done = json.loads(result_path.read_text())
    except (OSError, ValueError) as e:
        return f"unreadable: {e}"
    old = done.get("spec")
    if old is None or "wall_s" not in done:
        return "unfinished"
    keys = sorted(k for k in set(old) | set(spec) if k not in REUSE_IGNORES and old.get(k) != spec.get(k))
    files = None
    if "code_files" in keys and isinstance(old.get("code_files"), dict) and isinstance(spec.get("code_files"), dict):
        files = sorted(f for f in set(old["code_files"]) | set(spec["code_files"])
                       if old["code_files"].get(f) != spec["code_files"].get(f))
    parts = []
    for k in keys:
        if k == "code_files":
            parts.append("recharness files: not recorded by that run" if files is None else
                         f"recharness files: {', '.join(files)}")
        elif k == "code" and files == [] or k == "code" and "code_files" not in keys:
            # the fingerprint moved with none of its recorded files: the worker's code or torch
            parts.append("code: this script's worker functions or torch's version")
        elif k != "code":
            parts.append(k)
    if parts:
        return "differs in " + "; ".join(parts)
    missing = sorted(m for m in spec["marks"] if m <= spec["budget_s"] and m not in set(old["marks"]))
    return f"lacks {len(missing)} RecBole curve point(s) it needs" if missing else "unknown"


def sustained_at(curve: list[dict], target: float) -> dict | None:
    """The first point from which every later point of `curve` has test NDCG@10 >= `target` (a curve
    crossing it once by noise does not count), None if its last point is below."""
    hit = None
    for p in curve:
        if p["ndcg@10"] >= target:
            hit = hit or p
        else:
            hit = None
    return hit


#: RecBole rounds each metric to this many decimals (`metric_decimal_place`) before its early stopping compares them
RECBOLE_DECIMALS = 4


def rule_epochs(run: dict) -> list[dict]:
    """Our epochs as RecBole's early stopping sees its own: whole epochs only (a run cut by its budget validates
    its unfinished last epoch; RecBole validates only finished ones), validation NDCG@10 rounded as RecBole
    rounds its value (so values within rounding tie, and a tie counts as better), a NaN value left out. The
    worker's own choice (`ranks["converged"]`, older runs) used the values unrounded; the report reads only this."""
    curve = [p for p in run.get("curve") or [] if "epoch" in p]
    epochs = run.get("epochs") or []
    unfinished = (epochs[-1].get("epoch") if epochs and curve and curve[-1].get("end_of_epoch") is False
                  and curve[-1]["epoch"] == epochs[-1].get("epoch") else None)
    out = []
    for e in epochs:
        v = e.get("valid_ndcg@10")
        if v is None or v != v or (unfinished is not None and e.get("epoch") == unfinished):
            continue
        out.append({**e, "valid_ndcg@10": round(v, RECBOLE_DECIMALS)})
    return out


def converged_ranks(run: dict, patience: int | None) -> dict | None:
    """The per-user ranks our run kept of the weights RecBole's rule keeps of ours (`patience_best` over
    `rule_epochs`: that epoch's last evaluated point, `ranks_of`), None when the rule does not stop within the run
    or no ranks were kept of that point (no paired row for those weights)."""
    if patience is None:
        return None
    kept, stop = patience_best(rule_epochs(run), patience)
    at = kept and stop is not None and _epoch_point(run, kept["epoch"])
    ranks = ranks_of(run, at) if at else None
    return ranks and {"epoch": kept["epoch"], "train_s": at["train_s"], "ranks": ranks}


def recbole_best_exact(rb: dict) -> float:
    """RecBole's best test NDCG@10 unrounded (the mean of its per-user ranks' NDCG, which the driver checks against
    RecBole's own 4-decimal value) when kept, else that 4-decimal value: a verdict of "at or above" compares it
    with our unrounded value, so a difference below RecBole's rounding does not decide it."""
    best = (rb.get("ranks") or {}).get("best") or {}
    if best.get("epoch") == (rb.get("best_valid") or {}).get("epoch") and best.get("ndcg@10_from_ranks") is not None:
        return float(best["ndcg@10_from_ranks"])
    return float(rb["best_valid"]["test"])


def _last_only(curve: list[dict], hit: dict) -> str:
    """What to add when `sustained_at` found only the curve's last point: one evaluation, not a level held."""
    return " (its last point only: one evaluation, not a level held)" if hit is curve[-1] and len(curve) > 1 else ""


def _corrected(t: float, slow: list, fair: float, bound: float | None = None) -> str:
    """The verdict against RecBole's median-corrected seconds (`slow_epochs`), when any epoch was slow, and
    against the fastest-epoch floor (`fastest_bound`), when given."""
    out = ""
    if slow:
        share = t / fair
        out += f"; against the median-corrected {fair:,.0f} s, {share:.3f}: {'met' if share <= 0.2 else '**not met**'}"
    if bound:
        share = t / bound
        out += f"; against the fastest-epoch floor {bound:,.0f} s, {share:.3f}: {'met' if share <= 0.2 else '**not met**'}"
    return out


def selected_curve(run: dict) -> list[dict]:
    """Our run as RecBole's value is chosen: after each of our epochs, the test NDCG@10 of the epoch
    with the best validation NDCG@10 so far (a tie counting as better, as in RecBole's early stopping),
    at that epoch's last evaluated training second. Each side selects by its own validation (ours
    excludes the history, RecBole's does not); the test rows and protocol are the same."""
    last_point = {p["epoch"]: p for p in run["curve"] if "epoch" in p}  # time order: an epoch's last wins
    out, best = [], None
    for e in rule_epochs(run):
        p, valid = last_point.get(e["epoch"]), e["valid_ndcg@10"]  # `rule_epochs` keeps only epochs with a value
        if p is None:
            continue
        if best is None or valid >= best["valid"]:
            best = {"valid": valid, "test": p["ndcg@10"], "epoch": e["epoch"]}
        out.append({"train_s": p["train_s"], "ndcg@10": best["test"], "selected_epoch": best["epoch"]})
    return out


#: an epoch slower than this times its CPU's median trained on a shared machine (`slow_epochs`)
SLOW_EPOCH = 1.15


def slow_epochs(rb: dict) -> tuple[list[dict], float]:
    """RecBole's epochs up to its best that took more than SLOW_EPOCH x the median epoch of their CPU (other work
    shared the machine), and its training seconds to the best with each of those at that median."""
    import statistics

    best = rb.get("best_valid") or {}
    timed = [e for e in rb["epochs"] if "train_s" in e]  # a record without its time cannot be judged slow
    upto = [e for e in timed if e.get("epoch", 0) <= best.get("epoch", 0)]
    med: dict[str, float] = {}
    for cpu in {e.get("cpu") for e in timed}:
        med[cpu] = statistics.median(x["train_s"] for x in timed if x.get("cpu") == cpu)
    slow = [e for e in upto if e["train_s"] > SLOW_EPOCH * med[e.get("cpu")]]
    return slow, best.get("train_s", 0.0) - sum(e["train_s"] - med[e.get("cpu")] for e in slow)


def fastest_bound(rb: dict) -> tuple[float, dict] | None:
    """A floor on RecBole's training seconds to its best that needs no grouping of epochs by machine: every epoch
    up to its best at the time of its fastest epoch of the whole run, on whichever machine (seconds, that epoch);
    None without epoch times."""
    best = rb.get("best_valid") or {}
    timed = [e for e in rb.get("epochs") or [] if "train_s" in e]
    if not timed or not best.get("epoch"):
        return None
    fastest = min(timed, key=lambda e: e["train_s"])
    return best["epoch"] * fastest["train_s"], fastest


def convergence_lines(rb: dict, runs: list[dict]) -> list[str]:
    """RecBole's convergence, and the goal of issue 25: ours at RecBole's best converged test NDCG@10 (its value
    unrounded, `recbole_best_exact`) in at most 1/5 of the training seconds RecBole took to reach it, read three
    ways, each against RecBole's measured seconds, its median-corrected seconds and the fastest-epoch floor."""
    best = rb.get("best_valid")
    if not best or not best.get("epoch"):
        return ["- Convergence: not recorded for this RecBole run (no validation after its epochs)."]
    n_epochs = len(rb["epochs"])
    head = (f"- **RecBole's convergence**: {n_epochs} epoch(s) trained; its best validation NDCG@10 "
            f"{best['valid']:.4f} came after epoch {best['epoch']} (test NDCG@10 there {best['test']:.4f}, "
            f"{best['train_s']:,.0f} training seconds). ")
    if rb.get("stopped") != "patience":
        cap = f"patience {rb['patience']}" if rb.get("patience") else "no patience set"
        return [head + f"**Not converged** ({cap}; the run stopped at its epoch cap, {n_epochs - best['epoch']} "
                "epoch(s) after its best): the goal of reaching RecBole's best converged NDCG@10 in ≤ 1/5 of its "
                "training time is **not measured**."]
    lines = [head + f"Converged: more than {rb['patience']} epochs without a better validation NDCG@10 "
             "(RecBole's early stopping, a tie counting as better)."]
    slow, fair = slow_epochs(rb)
    bound = fastest_bound(rb)
    if slow:
        lines.append(f"- Epoch(s) {', '.join(str(e['epoch']) for e in slow)} took more than {SLOW_EPOCH:.2f}× the "
                     "median epoch of their CPU model (" + ", ".join(f"{e['train_s']:,.0f} s" for e in slow) + "): "
                     "probably slowed by other work on the machine, which counts against RecBole. With each at that "
                     f"median, RecBole's best came after {fair:,.0f} training seconds. A CPU model's name can cover "
                     "machines of different speeds (sittings of one name ran at different quiet speeds), so this "
                     "correction is approximate.")
    if bound is not None and bound[0] < best["train_s"]:
        lines.append(f"- A floor that needs no grouping by machine (a hypothetical, favourable to RecBole): had each "
                     f"of RecBole's {best['epoch']} epochs up to its best gone at the pace of its fastest epoch of the "
                     f"whole run, on whichever machine (epoch {bound[1]['epoch']}, {bound[1]['train_s']:,.0f} s), its "
                     f"best would have come after {bound[0]:,.0f} training seconds.")
    else:
        bound = None
    target = recbole_best_exact(rb)
    floors = {"slow": slow, "fair": fair, "bound": bound and bound[0]}
    kept_best = (rb.get("ranks") or {}).get("best") or {}
    rb_best_ranks = bool(kept_best.get("ranks")) and kept_best.get("epoch") == best["epoch"]  # a row to point to
    for r in runs:
        _, hit, hit2 = reading_hits(rb, r)
        if hit is not None:
            share = hit["train_s"] / best["train_s"]
            row = rb_best_ranks and ranks_of(r, hit) is not None
            lines.append(f"- {r['framework']}: at or above {target:.4f} from {hit['train_s']:,.1f} training "
                         f"seconds on (every later point too){_last_only(r['curve'], hit)}, {share:.3f} of RecBole's "
                         f"{best['train_s']:,.0f} ({1 / share:.1f}× sooner): the ≤ 1/5 goal is "
                         f"{'met' if share <= 0.2 else '**not met**'}{_met_on(share, row, 'e')}"
                         f"{_corrected(hit['train_s'], **floors)}.")
        elif r["train_s"] < 0.2 * best["train_s"]:
            lines.append(f"- {r['framework']}: below {target:.4f} at the end of its {r['train_s']:,.0f} training "
                         "seconds, a budget under 1/5 of RecBole's: the ≤ 1/5 goal is **not measured** (give "
                         f"--ours-seconds ≥ {0.2 * best['train_s']:,.0f}).")
        else:
            top = max((p["ndcg@10"] for p in r["curve"]), default=float("nan"))
            lines.append(f"- {r['framework']}: not at or above {target:.4f} to the end of its "
                         f"{r['train_s']:,.0f} training seconds (its best {top:.4f}): the ≤ 1/5 goal is **not met**.")
        selected = selected_curve(r)
        if selected:
            what = f"- {r['framework']}, its weights chosen by its own validation NDCG@10 as RecBole's are: "
            if hit2 is not None:
                share = hit2["train_s"] / best["train_s"]
                row = rb_best_ranks and ranks_of(r, _epoch_point(r, hit2["selected_epoch"])) is not None
                lines.append(what + f"at or above {target:.4f} from {hit2['train_s']:,.1f} training seconds on "
                             f"(epoch {hit2['selected_epoch']}'s weights){_last_only(selected, hit2)}, {share:.3f} of "
                             f"RecBole's {best['train_s']:,.0f}: {'met' if share <= 0.2 else '**not met**'} on this "
                             f"reading{_met_on(share, row, 'f')}{_corrected(hit2['train_s'], **floors)}.")
            else:
                top = max(p["ndcg@10"] for p in selected)
                lines.append(what + f"not at or above {target:.4f} to the end (its best {top:.4f}): "
                             "**not met** on this reading.")
        rule = converged_line(r, rb["patience"], best, exact=target, **floors, rb_epochs=rb["epochs"])
        if rule is not None:
            lines.append(rule)
    return lines


def _met_on(share: float, row: bool, label: str) -> str:
    """Where a reading's "met" stands: on the point estimates, with its paired interval's row when kept."""
    if share > 0.2:
        return ""
    return (f", on the point estimates (its paired interval over users: row ({label}) of the table below)" if row
            else ", on the point estimates (no paired interval: per-user ranks were not kept of those weights or of "
                 "RecBole's best)")


def converged_line(run: dict, patience: int, best: dict, *, exact: float | None = None, slow: list | None = None,
                   fair: float = 0.0, bound: float | None = None, rb_epochs: list[dict] | None = None) -> str | None:
    """Both sides read alike: our run stopped by RecBole's own early stopping (`patience_best`) on our
    validation NDCG@10 as RecBole would see it (`rule_epochs`), the test NDCG@10 of the weights it keeps against
    RecBole's (`exact`: its unrounded value, `recbole_best_exact`), and our seconds to those weights against
    RecBole's to its best (and to its median-corrected best, `fair`, when `slow` epochs were, and to the
    fastest-epoch floor `bound`); it points to the paired interval only when the report has one for those weights
    (`converged_ranks`), and says what the patience's epochs are in seconds on each side (`rb_epochs`: RecBole's).
    None for a run without validation values."""
    import statistics

    kept, stop = patience_best(rule_epochs(run), patience)
    if kept is None:
        return None
    what = (f"- {run['framework']}, stopped as RecBole is (patience {patience}, on its own validation NDCG@10): ")
    if stop is None:
        return what + (f"not stopped within its {run['train_s']:,.0f} training seconds (best validation so far after "
                       f"epoch {kept['epoch']}): **not measured** on this reading.")
    last_point = {p["epoch"]: p for p in run["curve"] if "epoch" in p}  # time order: an epoch's last wins
    p, end = last_point.get(kept["epoch"]), last_point.get(stop)
    if p is None:
        return what + f"epoch {kept['epoch']}, its best, has no evaluated point: **not measured** on this reading."
    target = best["test"] if exact is None else exact
    share, diff = p["train_s"] / best["train_s"], p["ndcg@10"] - target
    if diff < 0:
        verdict = "**not met**: its converged value is below RecBole's"
    else:
        verdict = (("met" if share <= 0.2 else "**not met**") + " on the point estimates"
                   + _corrected(p["train_s"], slow or [], fair, bound))
    pair = ("its paired interval over users: row (c) of the table below" if converged_ranks(run, patience) is not None else
            "no paired interval: the run kept no per-user ranks of those weights")
    ours_s = [e["train_s"] for e in run.get("epochs") or [] if e.get("train_s")]
    theirs = [e["train_s"] for e in rb_epochs or [] if e.get("train_s")]
    span = (f" Patience counts epochs: {patience} epoch(s) of ours (median {statistics.median(ours_s):,.0f} s) ≈ "
            f"{patience * statistics.median(ours_s):,.0f} training seconds; of RecBole's (median "
            f"{statistics.median(theirs):,.0f} s) ≈ {patience * statistics.median(theirs):,.0f}."
            if ours_s and theirs else "")
    return what + (f"its best after epoch {kept['epoch']}, {p['train_s']:,.1f} training seconds (stopped after epoch "
                   f"{stop}" + (f", {end['train_s']:,.0f} s" if end else "") + f"); test NDCG@10 there "
                   f"{p['ndcg@10']:.4f} against RecBole's {target:.4f} ({diff:+.4f}; {pair}), kept after {share:.3f} "
                   f"of RecBole's {best['train_s']:,.0f} s: {verdict}.{span}")


def args_budget(args, rb: dict) -> float:
    return args.ours_seconds if args.ours_seconds is not None else rb["train_s"]


def report_again(work: Path, out: Path) -> None:
    """The report of a kept --work directory's run (`run.json`, `recbole.json`, `ours-<precision>.json`)."""
    saved = json.loads((work / "run.json").read_text())
    args = argparse.Namespace(**saved["args"])
    args.argv = saved["argv"]
    rb = json.loads((work / "recbole.json").read_text())
    runs = [json.loads((work / f"ours-{label}.json").read_text()) for label in args.ours_precision]
    text = report(args, saved["data"], rb, runs, saved["loads"], saved["wall"], out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


def status_text(work: Path) -> str:
    """RecBole's run in a kept --work directory so far, from its last checkpoint (read only; the run may
    be training meanwhile): each epoch's training seconds, validation and test NDCG@10, and how many
    epochs early stopping still needs at the least. Partial until early stopping has stopped the run, and it says
    which."""
    ckpt_path, spec_path = work / "recbole" / "checkpoint.json", work / "recbole_spec.json"
    if not ckpt_path.exists():
        raise SystemExit(f"{ckpt_path}: no checkpoint yet (has RecBole finished an epoch in this --work directory?)")
    ckpt = json.loads(ckpt_path.read_text())
    spec = json.loads(spec_path.read_text()) if spec_path.exists() else {}
    test_at = {p["epoch"]: p["ndcg@10"] for p in ckpt.get("curve", []) if p.get("end_of_epoch")}
    total, rows = 0.0, []
    for e in ckpt["epochs"]:
        total += e["train_s"]
        test = test_at.get(e["epoch"])
        rows.append(f"| {e['epoch']} | {e['train_s']:,.0f} | {total:,.0f} | {e['valid_ndcg@10']:.4f} | "
                    f"{'–' if test is None else f'{test:.4f}'} | {e.get('paused_s') or 0:,.0f} | {e['finished_at']} | "
                    f"{e.get('sitting', '?')}: {e.get('cpu', '?')} |")
    best, done = ckpt["best"], len(ckpt["epochs"])
    lines = [f"# RecBole's run in {work}, so far (**partial**: not converged until early stopping says so)", "",
             f"- settings: dropout {spec.get('dropout', '?')}, patience {spec.get('patience', '?')}, epoch cap "
             f"{spec.get('epochs', '?')}, {spec.get('threads', '?')} thread(s), seed {spec.get('seed', '?')}; "
             f"data sha256 `{str(spec.get('data_sha256', '?'))[:16]}…`; {ckpt.get('sittings', '?')} sitting(s)", "",
             "| epoch | training s | cumulative | valid NDCG@10 | test NDCG@10 | paused s | finished at | sitting: CPU |",
             "|---:|---:|---:|---:|---:|---:|---:|---|", *rows, ""]
    within = ckpt.get("within_epoch")
    if within:
        lines.append(f"- epoch {within['epoch']} in progress: {within['batches']} batches, "
                     f"{ckpt['train_s'] - total:,.0f} training s of it banked at the last checkpoint.")
    if best and best.get("epoch"):
        since = done - best["epoch"]
        lines.append(f"- best validation NDCG@10 {best['valid']:.4f} after epoch {best['epoch']} (test NDCG@10 there "
                     f"{best['test']:.4f}, {best['train_s']:,.0f} training s); {since} epoch(s) since.")
        patience = spec.get("patience")
        if patience:
            left = max(patience + 1 - since, 0)  # it stops after more than `patience` epochs in a row without one
            per = sorted(e["train_s"] for e in ckpt["epochs"])[len(ckpt["epochs"]) // 2]
            if left == 0:  # the rule has stopped the run: its result is final, not partial
                lines[0] = f"# RecBole's run in {work}: **converged** (stopped by early stopping after epoch {done})"
                lines.append(f"- early stopping (patience {patience}) stopped the run after epoch {done}: {since} "
                             f"epochs without a better value than epoch {best['epoch']}'s, which it keeps.")
            else:
                lines.append(f"- early stopping (patience {patience}: more than {patience} epochs in a row without "
                             f"a better value) needs at least {left} more epoch(s): ≥ {left * per / 3600:.1f} "
                             f"training hours at the median epoch ({per:,.0f} s); every better value starts the "
                             "count again.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- carrying a run across machines

def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_state(work: Path, state: Path, tries: int = 5) -> str:
    """Copy a kept run's resumable state from `work` to `state` (a directory that can be committed: a run
    to convergence outlives a sitting, and a sitting's machine may not outlive it). Only what a resumption
    reads: the spec, the last checkpoint (JSON + its tensors file), our kept runs, and a MANIFEST of their
    sha256. Safe while the run trains: the checkpoint JSON is read once and written as read, with the tensors
    file it names (the driver removes that file only after committing a newer JSON: then the copy is begun
    again). Written to a sibling directory first and renamed over `state`, so an interrupted save leaves the
    previous one whole."""
    ckpt = work / "recbole" / "checkpoint.json"
    if not ckpt.exists():
        raise SystemExit(f"{ckpt}: no checkpoint to save")
    tmp = state.with_name(state.name + ".tmp")
    for _ in range(tries):
        shutil.rmtree(tmp, ignore_errors=True)
        text = ckpt.read_text()
        record = json.loads(text)
        (tmp / "recbole").mkdir(parents=True)
        (tmp / "recbole" / "checkpoint.json").write_text(text)
        try:
            for f in [work / "recbole_spec.json", work / "recbole" / record["tensors"], *sorted(work.glob("ours-*.json"))]:
                shutil.copy2(f, tmp / f.relative_to(work))
        except FileNotFoundError:  # a newer checkpoint was committed meanwhile and the named tensors removed
            continue
        break
    else:
        raise SystemExit(f"{ckpt}: the checkpoint kept changing while it was copied ({tries} tries)")
    manifest = {str(f.relative_to(tmp)): _sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()}
    (tmp / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    old = state.with_name(state.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if state.exists():
        state.rename(old)
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(state)
    shutil.rmtree(old, ignore_errors=True)
    return (f"saved {len(manifest)} files to {state}: {len(record['epochs'])} epoch(s), "
            f"{record['train_s']:,.0f} training s")


def restore_state(state: Path, work: Path) -> str:
    """Put a saved state (`save_state`) into `work`, checked against its MANIFEST; refused when `work` already
    holds a checkpoint with at least as many training seconds (the newer run is never overwritten)."""
    manifest_path = state / "MANIFEST.json"
    if not manifest_path.exists():
        raise SystemExit(f"{manifest_path}: not a saved state (no MANIFEST.json)")
    manifest = json.loads(manifest_path.read_text())
    for rel, digest in manifest.items():
        if not (state / rel).exists() or _sha256(state / rel) != digest:
            raise SystemExit(f"{state / rel}: missing or not the file MANIFEST.json names (sha256 differs)")
    saved = json.loads((state / "recbole" / "checkpoint.json").read_text())
    here = work / "recbole" / "checkpoint.json"
    try:
        here_s = json.loads(here.read_text())["train_s"]
    except (OSError, ValueError, KeyError, TypeError):  # none, or torn by an interrupted restore: restored over
        here_s = None
    if here_s is not None and here_s >= saved["train_s"]:
        return f"{here} already has at least the saved state's {saved['train_s']:,.0f} training s: left alone"
    commit = "recbole/checkpoint.json"
    for rel in [r for r in manifest if r != commit] + [commit]:  # the JSON naming the tensors last, atomically
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(state / rel, work / f"{rel}.tmp")
        os.replace(work / f"{rel}.tmp", work / rel)
    return (f"restored {len(manifest)} files into {work}: {len(saved['epochs'])} epoch(s), "
            f"{saved['train_s']:,.0f} training s; run the same command to go on")


# ---------------------------------------------------------------- main

def run_ours(args, work: Path, data: dict, common: dict, marks: list[float], budget: float, pause_file: Path,
             wall: dict, patience: int | None = None) -> list[dict]:
    """Our runs (`--ours-precision`), each evaluated at RecBole's curve points `marks` within `budget` training
    seconds; a kept result with the same settings, data and code and every point it needs is reused. Each
    run's wall seconds go into `wall`. `patience`: RecBole's, so each run also keeps the per-user ranks of the
    weights RecBole's early stopping would have kept of ours."""
    runs, code = [], code_fingerprint()
    for label in args.ours_precision:
        precision, stride, block = parse_run(label)
        ours_spec = {**common, "inter": data["path"], "result": str(work / f"ours-{label}.json"),
                     "dropout": args.dropout, "precision": precision, "budget_s": budget,
                     "data_sha256": data["sha256"], "code": code, "code_files": worker_sources(), "marks": marks}
        if stride is not None:  # absent otherwise: runs kept from before strides existed stay reusable
            ours_spec["stride"] = stride
        if patience is not None:
            ours_spec["patience"] = patience
        if block == "post":  # RecBole's network: its attention dropout is its hidden dropout
            ours_spec.update(block="post", attn_dropout=args.dropout)
        spec_path, result_path = work / f"ours_spec-{label}.json", work / f"ours-{label}.json"
        done = reusable(result_path, ours_spec)
        if done is not None:
            _log(f"ours ({label}): reusing {result_path} (same settings, data and code; every curve "
                 "point it needs)")
            wall[label] = done["wall_s"]
            runs.append(done)
            continue
        if result_path.exists():  # kept aside, not deleted (a killed run must not leave it to be reused)
            why = not_reusable_why(result_path, ours_spec)
            # a name `save_state`'s "ours-*.json" leaves out
            aside = result_path.with_name(f"replaced-{result_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}.json")
            result_path.rename(aside)
            _log(f"ours ({label}): the kept run is not reused ({why}): moved to {aside.name}")
        spec_path.write_text(json.dumps(ours_spec))
        _log(f"ours ({label}): {budget:.0f} training seconds, {args.threads} thread(s)…")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--ours-worker", str(spec_path)],
                       env=_child_env(args.threads, pause_file), check=True)
        wall[label] = time.perf_counter() - t0
        done = {**json.loads(result_path.read_text()), "wall_s": wall[label], "spec": ours_spec, "cpu": cpu_model(),
                "finished_at": time.strftime("%Y-%m-%d %H:%M:%S")}
        result_path.write_text(json.dumps(done, indent=1))
        runs.append(done)
    return runs


def common_settings(args) -> dict:
    """The settings both frameworks train with."""
    return {"seed": args.seed, "threads": args.threads, "curve_every": args.curve_every, "hidden": 64,
            "layers": 2, "heads": 2, "inner": 256, "max_len": args.max_len, "batch_size": args.batch_size,
            "lr": args.lr}


def ours_now(args) -> None:
    """`--ours-now`: our runs while RecBole's run in the kept --work directory is unfinished, evaluated at its
    curve points so far (its last checkpoint). RecBole is paused meanwhile (`<work>/PAUSE`, removed at the end;
    our runs pause on `<work>/PAUSE-ours`). Our budget must lie within the seconds RecBole has trained, so every
    curve point a run needs already exists: the full command, run again later, reuses these runs (`reusable`)
    and ends with the report. Prints each run's partial reading against RecBole's best so far."""
    if args.work is None or args.ours_seconds is None:
        raise SystemExit("--ours-now runs ours beside a kept RecBole run: give its --work DIR and --ours-seconds")
    work = args.work.resolve()
    ckpt_path = work / "recbole" / "checkpoint.json"
    if not ckpt_path.exists():
        raise SystemExit(f"{ckpt_path}: no RecBole checkpoint yet: start the full command first")
    ckpt = json.loads(ckpt_path.read_text())
    if args.ours_seconds > ckpt["train_s"]:
        raise SystemExit(f"--ours-seconds {args.ours_seconds:.0f} is beyond the {ckpt['train_s']:.0f} seconds RecBole "
                         "has trained: its curve points up to there do not exist yet")
    rb_spec = json.loads((work / "recbole_spec.json").read_text())
    common = common_settings(args)
    differ = {k: (rb_spec.get(k), v) for k, v in common.items() if rb_spec.get(k) != v}
    if differ:
        raise SystemExit("--ours-now with other settings than RecBole's run in --work: "
                         + ", ".join(f"{k} {a} there, {b} here" for k, (a, b) in differ.items()))
    inter = work / "data" / DATASET / f"{DATASET}.inter"
    sha = hashlib.sha256(inter.read_bytes()).hexdigest() if inter.exists() else None
    if sha != rb_spec.get("data_sha256"):
        raise SystemExit(f"{inter}: not the file RecBole's run read (sha256 {str(sha)[:12]}…, its "
                         f"{str(rb_spec.get('data_sha256'))[:12]}…)")
    data = {"path": str(inter), "sha256": sha}  # the file RecBole reads, left as it is
    pause = work / "PAUSE"
    paused_here = not pause.exists()
    pause.touch()
    try:
        wall: dict = {}
        runs = run_ours(args, work, data, common, [p["train_s"] for p in ckpt["curve"]],
                        args.ours_seconds, work / "PAUSE-ours", wall, rb_spec.get("patience"))
    finally:
        if paused_here:
            pause.unlink(missing_ok=True)
    best = ckpt.get("best") or {}
    for r in runs:
        top = max(r["curve"], key=lambda p: p["ndcg@10"])
        line = (f"ours ({label_of(r)}): last test NDCG@10 {r['curve'][-1]['ndcg@10']:.4f} at {r['curve'][-1]['train_s']:,.0f} "
                f"s, best {top['ndcg@10']:.4f} at {top['train_s']:,.0f} s")
        if best.get("test") is not None:
            hit = sustained_at(r["curve"], best["test"])
            line += (f"; RecBole's best so far (PARTIAL, epoch {best['epoch']}): test {best['test']:.4f} at "
                     f"{best['train_s']:,.0f} s — ours at or above it from "
                     + (f"{hit['train_s']:,.1f} s on ({hit['train_s'] / best['train_s']:.3f} of RecBole's)" if hit
                        else "no point (not reached)"))
        _log(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=None, help="a seeded sample of N users (smoke tests)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for each framework")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recbole-epochs", type=int, default=1, help="RecBole's epoch cap")
    ap.add_argument("--recbole-patience", type=int, default=None,
                    help="stop RecBole once its validation NDCG@10 has not improved for this many epochs "
                         "(RecBole's stopping_step, default there 10); the run counts as converged then")
    ap.add_argument("--ours-seconds", type=float, default=None,
                    help="our training budget in seconds (default: RecBole's training seconds)")
    ap.add_argument("--curve-every", type=float, default=150.0, help="evaluate every this many training seconds")
    ap.add_argument("--recbole-dropout", type=float, default=0.5,
                    help="RecBole's hidden and attention dropout (0.5: RecBole's SASRec default)")
    ap.add_argument("--dropout", type=float, default=0.2, help="our dropout (0.2: our default)")
    ap.add_argument("--ours-precision", type=lambda v: v.split(","), default=["fp32"],
                    help="our SASRec runs, comma-separated, one run each: fp32 (default), bf16; either with "
                         "-post trains RecBole's network (SASRec's block=\"post\", attention dropout = --dropout), "
                         "with -strideN (e.g. fp32-stride1, fp32-post-stride1) on overlapping windows, one every N "
                         "items, each training its last N positions (SASRec's `stride`; 1: one window per "
                         "prediction, RecBole's own samples and work)")
    ap.add_argument("--max-len", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--venv", type=Path, default=RECBOLE_VENV, help="RecBole's venv (created if missing)")
    ap.add_argument("--work", type=Path, default=None,
                    help="working directory, kept: run again with the same one to resume RecBole from its last "
                         "checkpoint (each epoch and every 300 training seconds) and to reuse our runs whose "
                         "settings did not change (default: a temporary one, removed)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--ours-worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--report-from", type=Path, default=None,
                    help="write the report again from a kept --work directory's results (no training)")
    ap.add_argument("--ours-now", action="store_true",
                    help="with --work and --ours-seconds: our runs now, at RecBole's curve points so far, RecBole "
                         "paused meanwhile; the full command later reuses them")
    ap.add_argument("--status", action="store_true",
                    help="with --work: print RecBole's run there so far (epochs, validation and test NDCG@10, "
                         "epochs early stopping still needs) and exit; reads only, safe while it trains")
    ap.add_argument("--save-state", type=Path, default=None, metavar="DIR",
                    help="with --work: copy the run's resumable state (RecBole's last checkpoint, our kept runs) to "
                         "DIR, to commit or carry to another machine, and exit")
    ap.add_argument("--restore-state", type=Path, default=None, metavar="DIR",
                    help="with --work: put a state saved by --save-state into the work directory and exit")
    args = ap.parse_args()
    args.dataset = "ml-1m"
    if args.save_state or args.restore_state:
        if args.work is None:
            raise SystemExit("--save-state/--restore-state need the run's --work DIR")
        work = args.work.resolve()
        print(save_state(work, args.save_state) if args.save_state else restore_state(args.restore_state, work))
        return
    if args.status:
        if args.work is None:
            raise SystemExit("--status reads a kept run: give its --work DIR")
        print(status_text(args.work), end="")
        return
    if args.ours_worker is not None:
        ours_worker(args.ours_worker)
        return
    if args.report_from is not None:
        report_again(args.report_from, args.out)
        return
    if args.ours_now:
        for label in args.ours_precision:
            parse_run(label)
        ours_now(args)
        return
    if args.users is not None and args.out.resolve() == OUT.resolve():
        raise SystemExit(f"--users is a smoke test: give it its own --out (never {OUT})")
    if not args.ours_precision:
        raise SystemExit("--ours-precision takes fp32 and/or bf16, comma-separated (got none)")
    for label in args.ours_precision:
        parse_run(label)
    if args.ours_seconds is not None and args.ours_seconds <= 0:
        raise SystemExit("--ours-seconds must be positive")

    loads = {"start": os.getloadavg()[0]}
    py = ensure_recbole_venv(args.venv)
    # absolute: RecBole's driver runs in <work>/recbole and reads its spec from there
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="bench-recbole-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        _log("writing the sequences…")
        data = write_inter(work, args.users, args.seed)
        _log(f"{data['interactions']:,} interactions, {data['users']:,} users, {data['items']:,} items → {data['path']}")
        common = common_settings(args)
        rb_spec = {**common, "data_path": str(work / "data"), "dataset": DATASET, "work": str(work / "recbole"),
                   "result": str(work / "recbole.json"), "epochs": args.recbole_epochs, "dropout": args.recbole_dropout,
                   "patience": args.recbole_patience, "data_sha256": data["sha256"]}
        (work / "recbole").mkdir(exist_ok=True)
        (work / "recbole_spec.json").write_text(json.dumps(rb_spec))
        _log(f"RecBole: up to {args.recbole_epochs} epoch(s)"
             + (f", patience {args.recbole_patience}" if args.recbole_patience else "") + f", {args.threads} thread(s)…")
        t0 = time.perf_counter()
        # RecBole's own deprecation warnings (pandas, torch.cuda.amp, pkg_resources) silenced
        env = {**_child_env(args.threads, work / "PAUSE"), "PYTHONWARNINGS": "ignore::FutureWarning,ignore::UserWarning"}
        subprocess.run([str(py), str(HERE / "recbole_driver.py"), str(work / "recbole_spec.json")],
                       cwd=work / "recbole", env=env, check=True)
        wall = {"recbole": time.perf_counter() - t0}
        rb = json.loads((work / "recbole.json").read_text())
        loads["after_recbole"] = os.getloadavg()[0]
        budget = args_budget(args, rb)
        if budget < rb["train_s"]:
            _log(f"note: --ours-seconds {budget:.0f} is below RecBole's {rb['train_s']:.0f} training seconds")
        runs = run_ours(args, work, data, common, [p["train_s"] for p in rb["curve"]], budget, work / "PAUSE", wall,
                        args.recbole_patience)
        loads["end"] = os.getloadavg()[0]
        (work / "run.json").write_text(json.dumps({
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "argv": sys.argv[1:], "data": data, "loads": loads, "wall": wall}, indent=1))
        text = report(args, data, rb, runs, loads, wall, args.out)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(text)
        _log(f"wrote {args.out}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

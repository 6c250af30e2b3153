"""How much of RecBole's training clock is its dataloader: the unmeasured term of the ≥ 3× comparison.

bench_recbole.py times RecBole across `Trainer._train_epoch`, which builds each batch (its dataloader's
collate) inside the loop, while ours starts its clock after its window tensor is built. This runs RecBole's
own `_train_epoch` on the first `--batches` batches of an epoch, with the settings of a kept bench_recbole.py
run (its `recbole_spec.json`), and times the loader's `next()` apart from the rest of each step, in the same
run and on the same batches: the loader's share of RecBole's clock. Runs in RecBole's venv:

    .venv-recbole/bin/python benchmarks/bench_recbole_dataloader.py --spec WORK/recbole_spec.json \
        --batches 60 --out benchmarks/results/recbole_dataloader.md

Nothing of the kept run is written to: this runs in a scratch directory (RecBole's checkpoint and tensorboard
directories included), removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from machine import cpu_model  # noqa: E402
from recbole_driver import config_dict, recbole_setup  # noqa: E402


class TimedLoader:
    """The training loader's first `limit` batches, each `next()` timed (the dataloader's whole work for it:
    with `worker: 0` its collate indexes the augmented sequences, nothing is built later), and the rest of
    each step (from handing the batch over until the trainer asks for the next); anything else is the
    loader's."""

    def __init__(self, loader, limit: int) -> None:
        self.loader, self.limit, self.load, self.rest = loader, limit, [], []

    def __iter__(self):
        batches = iter(self.loader)
        for _ in range(self.limit):
            t = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            handed = time.perf_counter()
            self.load.append(handed - t)
            yield batch
            self.rest.append(time.perf_counter() - handed)  # resumed: the trainer asks for the next batch

    def __len__(self) -> int:
        return min(self.limit, len(self.loader))

    def __getattr__(self, name):
        return getattr(self.loader, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, required=True, help="a bench_recbole.py run's recbole_spec.json")
    ap.add_argument("--batches", type=int, default=60, help="training batches timed (an epoch has about 480)")
    ap.add_argument("--loader-epoch", action="store_true", help="also draw a whole epoch from the loader alone")
    ap.add_argument("--out", type=Path, default=None, help="results file (markdown); else printed only")
    args = ap.parse_args()
    spec = json.loads(args.spec.read_text())
    del sys.argv[1:]  # RecBole's Config reads --key=value settings from the command line

    args.spec, args.out = args.spec.resolve(), args.out.resolve() if args.out else None
    import torch

    torch.set_num_threads(spec["threads"])
    scratch = Path(tempfile.mkdtemp(prefix="recbole-loader-"))
    os.chdir(scratch)  # RecBole's Trainer makes ./log_tensorboard/ wherever it runs
    try:
        lines = measure(args, spec, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


def measure(args, spec: dict, scratch: Path) -> list[str]:
    """The timed batches and the results file's lines."""
    import recbole
    import torch

    _, _, (train_data, _, _), _, trainer = recbole_setup(
        {**config_dict({**spec, "work": str(scratch)}), "epochs": 1}, spec)
    loader = TimedLoader(train_data, args.batches)
    t = time.perf_counter()
    trainer._train_epoch(loader, 0, show_progress=False)
    total = time.perf_counter() - t
    n = len(loader.load)
    if n < 2 or len(loader.rest) != n:
        raise SystemExit(f"{n} batch(es) timed: ask for at least 2")

    def row(first: int) -> str:
        load, rest = sum(loader.load[first:]), sum(loader.rest[first:])
        k = n - first
        return (f"| {first + 1}–{n} | {load + rest:.2f} | {load:.2f} | **{load / (load + rest):.4f}** | "
                f"{1000 * load / k:.1f} | {1000 * rest / k:.1f} |")

    load_all = sum(loader.load)
    share = sum(loader.load[1:]) / (sum(loader.load[1:]) + sum(loader.rest[1:]))
    lines = [
        "# RecBole 1.2.1: its dataloader's share of its training clock",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}); "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); RecBole {recbole.__version__}; "
        f"load average (1 min) at the end {os.getloadavg()[0]:.1f}.",
        f"- settings: those of `{os.path.relpath(args.spec, HERE.parent)}` (bench_recbole.py's RecBole run: "
        f"SASRec, batch {spec['batch_size']}, "
        f"dropout {spec['dropout']}, histories of at most {spec['max_len']} items); the first {n} batches of "
        "epoch 1 in its seeded order, trained by RecBole's own `Trainer._train_epoch` — the span "
        "bench_recbole.py's RecBole clock runs across — with each `next()` of its training loader timed apart.",
        "",
        "| batches | step s (loader + rest) | of which the loader's `next()` s | loader share | loader ms / batch |"
        " rest ms / batch |",
        "|---|---:|---:|---:|---:|---:|",
        row(0),
        row(1),
        "",
        "The second row leaves out batch 1: the epoch's shuffle lands in its `next()`, the optimiser's first step "
        "in its rest.",
        "",
        f"`_train_epoch` as a whole took {total:.2f} s (the steps' {load_all + sum(loader.rest):.2f} s plus its "
        "own setup). So RecBole's predictions per second with its dataloader taken off its clock would be "
        f"{1 / (1 - share):.4f}× those measured with it (batches 2–{n}); a ratio ours / RecBole measured on "
        f"RecBole's clock shrinks by the factor {1 - share:.4f} (a share measured here, applied to a ratio "
        "measured in another run: both are fractions of one machine's time, not one run).",
    ]
    if args.loader_epoch:
        t = time.perf_counter()
        k = sum(1 for _ in train_data)
        whole = time.perf_counter() - t
        lines += ["", f"- the loader alone, a whole epoch: {k} batches in {whole:.2f} s "
                      f"({1000 * whole / k:.1f} ms / batch)."]
    return lines


if __name__ == "__main__":
    main()

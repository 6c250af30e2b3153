"""SASRec training step: where the time goes, and what each change to it bought (issue 25).

One training step of `recharness.baselines.sasrec` on ML-1M's shapes in RecBole's setting (3,706
items, windows of 51 items, 47 windows = 2,350 positions ≈ 2,048+ next-item predictions per step,
hidden 64, 2 layers, 2 heads, FFN 256, dropout 0.2, Adam 1e-3), timed under each formulation in
one process, one after another, in rounds (so drift hits every variant alike):

- ``plain``: ``F.cross_entropy(h @ V.T, t)``, torch's ``nn.Dropout``, Adam (the code before this change);
- ``chunked CE``: `linear_cross_entropy` (logits made 512 rows at a time, gradients in the same pass);
- ``+ uniform dropout``: dropout masks from one float32 uniform draw instead of ``bernoulli_``;
- ``+ fused Adam``: torch's fused Adam;
- ``+ 16-bit dropout`` (= `SASRec()` now): SASRec's `Dropout`, four 16-bit uniforms per 64-bit draw;
- ``+ bf16 CE``: the cross-entropy's matmuls and softmax in bfloat16, row counts padded to a multiple
  of 64 (`linear_cross_entropy.ROW_STEP`);
- ``+ bf16 linears`` (= `SASRec(precision="bf16")`): also the network's linear layers in bfloat16 while
  training (`sasrec.Block`: attention, LayerNorm and the residual stream stay float32);
- ``bf16 CE, a shape per step``: ``+ bf16 CE`` without the row padding, i.e. each step's own matmul
  shapes, for each of which oneDNN compiles a kernel (all variants share one process and so one
  oneDNN kernel cache: this variant's kernels may evict or reuse others', a caveat on its row);
- tried and not kept: ``torch.compile`` of the network (default mode, dynamic shapes) and
  ``autocast(bfloat16)`` over the network, each on top of ``+ fused Adam``.

Item ids are drawn at random (a step's cost does not depend on which items); as in a real epoch the
steps' batches differ in how many positions are padding (each window is full with probability 0.85,
else 2-50 items long: a new number of predictions almost every step; drawn afresh each step, the
same sequence for every variant), from the same initial weights. Writes benchmarks/results/sasrec_speed.md. Run by hand:

    .venv/bin/python benchmarks/bench_sasrec_speed.py [--rounds 3 --steps 40 --threads 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from machine import cpu_model  # noqa: E402

try:
    import recharness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent / "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from recharness.baselines import linear_cross_entropy as lce  # noqa: E402
from recharness.baselines.linear_cross_entropy import linear_cross_entropy  # noqa: E402
from recharness.baselines.sasrec import Dropout, SASRecNet  # noqa: E402

OUT = HERE / "results" / "sasrec_speed.md"
ITEMS, MAX_LEN, ROWS = 3706, 50, 47
VARIANTS = ("plain", "chunked CE", "+ uniform dropout", "+ fused Adam", "+ 16-bit dropout", "+ bf16 CE",
            "+ bf16 linears", "bf16 CE, a shape per step", "torch.compile", "autocast net")
#: variants with SASRec's dropout before commit 333e8aa (a float32 uniform draw per element)
UNIFORM_DROPOUT = ("+ uniform dropout", "+ fused Adam", "torch.compile", "autocast net")


class UniformDropout(Dropout):
    """SASRec's dropout before commit 333e8aa: one float32 uniform per element."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return x * ((torch.rand_like(x, dtype=torch.float32) >= self.p).to(x.dtype) * (1.0 / (1.0 - self.p)))


def batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, next items, mask) of `ROWS` windows, as an epoch's steps see them."""
    x = torch.randint(1, ITEMS + 1, (ROWS, MAX_LEN + 1), generator=g)
    short = torch.rand(ROWS, generator=g) >= 0.85
    lengths = torch.where(short, torch.randint(2, MAX_LEN + 1, (ROWS,), generator=g), MAX_LEN + 1)
    x[torch.arange(MAX_LEN + 1)[None, :] >= lengths[:, None]] = 0
    x = x[:, : int(lengths.max())]
    return x[:, :-1], x[:, 1:], x[:, 1:] > 0


def make_step(variant: str, seed: int):
    torch.manual_seed(seed)
    net = SASRecNet(ITEMS, MAX_LEN, dropout=0.2, bf16=variant == "+ bf16 linears")
    for module in list(net.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, Dropout) and variant in ("plain", "chunked CE"):  # torch's own, as before
                setattr(module, name, nn.Dropout(child.p))
            elif isinstance(child, Dropout) and variant in UNIFORM_DROPOUT:
                setattr(module, name, UniformDropout(child.p))
    fused = variant not in ("plain", "chunked CE", "+ uniform dropout")
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=fused)
    forward = torch.compile(net, dynamic=True) if variant == "torch.compile" else net
    g = torch.Generator().manual_seed(seed)  # every variant sees the same batches in the same order
    bf16 = variant in ("+ bf16 CE", "+ bf16 linears", "bf16 CE, a shape per step")

    def step() -> tuple[float, int]:
        inputs, nxt, mask = batch(g)
        if variant == "autocast net":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = forward(inputs)[mask]
        else:
            h = forward(inputs)[mask]
        if variant == "plain":
            loss = F.cross_entropy(h @ net.item_vectors().T, nxt[mask] - 1)
        elif variant == "bf16 CE, a shape per step":
            lce.ROW_STEP, kept = 1, lce.ROW_STEP
            try:
                loss = linear_cross_entropy(h, net.item_vectors(), nxt[mask] - 1, bf16=True)
            finally:
                lce.ROW_STEP = kept
        else:
            loss = linear_cross_entropy(h, net.item_vectors(), nxt[mask] - 1, bf16=bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item(), inputs.numel()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per variant per round (after 5 warm-up steps)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()[0]
    steps = {v: make_step(v, 0) for v in VARIANTS}
    warm = {}
    for v, step in steps.items():
        t = time.perf_counter()
        for _ in range(5):
            step()
        warm[v] = time.perf_counter() - t
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        for v, step in steps.items():
            t, positions = time.perf_counter(), 0
            for _ in range(args.steps):
                positions += step()[1]
            took = time.perf_counter() - t
            times[v].append(took / args.steps)
            rates[v].append(positions / took)
            print(f"round {r + 1} {v}: {times[v][-1] * 1000:.1f} ms/step", file=sys.stderr, flush=True)
    plain = statistics.median(times["plain"])
    lines = [
        "# SASRec training step: what each change bought",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
         f"CPU capability {torch.backends.cpu.get_cpu_capability()}; {args.threads} torch thread(s); load average "
         f"(1 min) {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end."),
        (f"- one step: {ROWS} windows of up to {MAX_LEN} positions (each full with probability 0.85, else 2-50 "
         f"items, a fresh batch each step, the same sequence for every variant) against {ITEMS:,} items "
         "(ML-1M in RecBole's setting: hidden 64, 2 layers, 2 heads, FFN 256, dropout 0.2, Adam 1e-3); "
         f"{args.rounds} rounds × {args.steps} steps per variant after 5 warm-up steps, the variants interleaved "
         "round by round; the median round is shown, min–max beside it."),
        "",
        "| variant | ms / step (median) | min–max | positions / s | vs plain | warm-up s (5 steps) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for v in VARIANTS:
        med = statistics.median(times[v])
        lines.append(f"| {v} | {med * 1000:.1f} | {min(times[v]) * 1000:.1f}–{max(times[v]) * 1000:.1f} | "
                     f"{statistics.median(rates[v]):,.0f} | {plain / med:.2f}× | {warm[v]:.1f} |")
    lines += [
        "",
        "Each row from `chunked CE` to `+ bf16 linears` adds its change to the row above; `bf16 CE, a shape per step` is "
        "`+ bf16 CE` without padding the row count (each step's own matmul shapes); `torch.compile` and "
        "`autocast net` are each `+ fused Adam` plus that one thing. `SASRec()` trains as `+ 16-bit dropout`, "
        "`SASRec(precision=\"bf16\")` as `+ bf16 linears`. Positions (padding included, the unit of RecBole's one padded "
        "pass per prediction) per second are the median round's. RecBole's, measured in one run beside ours, are "
        "in the recbole_*.md files (`bench_recbole.py`).",
        "",
        f"Command: `{' '.join(['python', 'benchmarks/bench_sasrec_speed.py', *sys.argv[1:]])}`",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

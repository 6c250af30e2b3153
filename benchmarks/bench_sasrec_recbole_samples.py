"""SASRec training step on RecBole's own work: what writing out the attention dropout and cutting the step into
parts bought (issue 25's "per-position training at least 3× RecBole's").

One training step of `recharness.baselines.sasrec` as `bench_recbole.py --ours-precision fp32-post-stride1`
trains it: RecBole 1.2.1's network (`block="post"`, attention dropout 0.2, hidden dropout 0.2, hidden 64,
2 layers, 2 heads, FFN 256, Adam 1e-3) on RecBole's samples (`stride=1`: one window per prediction holding its
whole history, the loss at its last position): 2,048 windows a step against 3,706 items (ML-1M). A window's
history is full (50 items) with probability 0.733 (the share of RecBole's 982,089 ML-1M training samples that
have 50 items before them), else 1-49 items; item ids are random (a step's cost does not depend on which).
Timed under each variant in one process, in rounds (so drift hits every variant alike), the variants' order
rotated from round to round (none always runs first or after a given other), the same batches in the same order
for every variant, from the same initial weights:

- ``SDPA dropout (before)``: attention through `scaled_dot_product_attention(dropout_p=0.2)`, whose CPU
  kernel takes dropout only on its unfused path (`bernoulli_` draws), the step in one piece: the code
  before this change;
- ``written-out dropout``: `Block._dropped_attention` (scores, softmax, SASRec's `Dropout`, weights × values),
  the step in one piece;
- ``+ parts of N windows``: also the step cut into parts of N windows (`train_step`'s `micro_positions`), the
  parts' gradients summed; 512 windows (`MICRO_POSITIONS`) is what `SASRec` does now;
- ``SDPA dropout, parts of 512 windows``: the parts without the written-out attention (each change alone);
- the same two ends in bf16 (`precision="bf16"`).

Writes benchmarks/results/sasrec_speed_recbole_samples.md. Run by hand, with nothing else running:

    .venv/bin/python benchmarks/bench_sasrec_recbole_samples.py [--rounds 3 --steps 8 --threads 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import types
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

from recharness.baselines.sasrec import MICRO_POSITIONS, SASRecNet, train_step  # noqa: E402

OUT = HERE / "results" / "sasrec_speed_recbole_samples.md"
ITEMS, MAX_LEN, WINDOWS, FULL = 3706, 50, 2048, 0.733
#: variant → (precision, attention written out, windows per part; None: the step in one piece)
VARIANTS = {
    "SDPA dropout (before)": ("fp32", False, None),
    "written-out dropout": ("fp32", True, None),
    "+ parts of 1,024 windows": ("fp32", True, 1024),
    "+ parts of 512 windows (now)": ("fp32", True, MICRO_POSITIONS // MAX_LEN),
    "+ parts of 256 windows": ("fp32", True, 256),
    "SDPA dropout, parts of 512 windows": ("fp32", False, MICRO_POSITIONS // MAX_LEN),
    "bf16, SDPA dropout (before)": ("bf16", False, None),
    "bf16, now": ("bf16", True, MICRO_POSITIONS // MAX_LEN),
}


def sdpa_attend(self, x: torch.Tensor) -> torch.Tensor:
    """`Block._attend` before this change: SDPA's own dropout on the attention weights."""
    b, t, d = x.shape
    qkv = self._linear(self.qkv, x).float()
    q, k, v = qkv.view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
    p = self.attn_dropout if self.training else 0.0
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p).transpose(1, 2).reshape(b, t, d)
    return self.drop(self._linear(self.out, a).float())


def batch(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, next items, mask) of `WINDOWS` windows of RecBole's samples: the loss at each one's last item."""
    x = torch.randint(1, ITEMS + 1, (WINDOWS, MAX_LEN + 1), generator=g)
    full = torch.rand(WINDOWS, generator=g) < FULL
    lengths = torch.where(full, MAX_LEN + 1, torch.randint(2, MAX_LEN + 1, (WINDOWS,), generator=g))
    x[torch.arange(MAX_LEN + 1)[None, :] >= lengths[:, None]] = 0
    x = x[:, : int(lengths.max())]
    mask = torch.zeros(WINDOWS, x.shape[1] - 1, dtype=torch.bool)
    mask[torch.arange(WINDOWS), lengths - 2] = True
    return x[:, :-1], x[:, 1:], mask


def make_step(variant: str, seed: int):
    precision, written_out, part = VARIANTS[variant]
    torch.manual_seed(seed)
    net = SASRecNet(ITEMS, MAX_LEN, dropout=0.2, bf16=precision == "bf16", block="post", attn_dropout=0.2)
    if not written_out:
        for block in net.blocks:
            block._attend = types.MethodType(sdpa_attend, block)
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    g = torch.Generator().manual_seed(seed)  # every variant sees the same batches in the same order
    micro = (WINDOWS if part is None else part) * MAX_LEN

    def step() -> int:
        inputs, nxt, mask = batch(g)
        train_step(net, opt, inputs, nxt, mask, bf16=precision == "bf16", micro_positions=micro)
        return int(mask.sum())

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per variant per round (after 2 warm-up steps)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()[0]
    steps = {v: make_step(v, 0) for v in VARIANTS}
    for step in steps.values():
        for _ in range(2):
            step()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    names = list(VARIANTS)
    for r in range(args.rounds):
        for v in names[r % len(names):] + names[: r % len(names)]:
            step = steps[v]
            t, predictions = time.perf_counter(), 0
            for _ in range(args.steps):
                predictions += step()
            took = time.perf_counter() - t
            times[v].append(took / args.steps)
            rates[v].append(predictions / took)
            print(f"round {r + 1} {v}: {times[v][-1] * 1000:.0f} ms/step", file=sys.stderr, flush=True)
    before = {p: next(v for v, s in VARIANTS.items() if s[0] == p and not s[1]) for p in ("fp32", "bf16")}
    # per round, the variant against its precision's "before" in that same round
    ratios = {v: [b / t for b, t in zip(times[before[s[0]]], times[v])] for v, s in VARIANTS.items()}
    lines = [
        "# SASRec training step on RecBole's samples with RecBole's network: what each change bought",
        "",
        (f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
         f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
         f"CPU capability {torch.backends.cpu.get_cpu_capability()}; {args.threads} torch thread(s); load average "
         f"(1 min) {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end."),
        (f"- one step: {WINDOWS:,} windows (RecBole's samples: one per prediction, its whole history of up to "
         f"{MAX_LEN} items, full with probability {FULL}, the loss at its last position; the same batches for "
         f"every variant) against {ITEMS:,} items, RecBole's network (`block=\"post\"`, attention dropout 0.2, "
         f"dropout 0.2, hidden 64, 2 layers, 2 heads, FFN 256, Adam 1e-3); {args.rounds} rounds × {args.steps} "
         "steps per variant after 2 warm-up steps, the variants interleaved round by round in an order rotated "
         "each round; the median round is shown, min–max beside it, and the speed-up over the same precision's "
         "\"before\" is taken round by round (median, min–max of the rounds). Positions per second count 50 per "
         "prediction (RecBole's one padded pass per prediction: the unit of `bench_recbole.py`'s positions per "
         "second)."),
        "",
        "| variant | ms / step (median) | min–max | predictions / s | positions / s | vs before, same round (median) | min–max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v, (precision, _, _) in VARIANTS.items():
        med = statistics.median(times[v])
        rate = statistics.median(rates[v])
        lines.append(f"| {v} | {med * 1000:.0f} | {min(times[v]) * 1000:.0f}–{max(times[v]) * 1000:.0f} | "
                     f"{rate:,.0f} | {rate * MAX_LEN:,.0f} | {statistics.median(ratios[v]):.2f}× | "
                     f"{min(ratios[v]):.2f}–{max(ratios[v]):.2f}× |")
    lines += [
        "",
        "`written-out dropout` changes the attention only; each `+ parts` row adds cutting the step to it (the same "
        "loss and update: `tests/test_recbench_seqrec.py::test_a_step_in_parts_trains_as_one_step`), and `SDPA "
        "dropout, parts of 512 windows` is the parts alone. These are steps on synthetic batches; what a whole "
        "training run gains, and RecBole's own speed measured in one run beside ours, is in "
        "recbole_equal_network.md (`bench_recbole.py`).",
        "",
        f"Command: `{' '.join(['python', 'benchmarks/bench_sasrec_recbole_samples.py', *sys.argv[1:]])}`",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

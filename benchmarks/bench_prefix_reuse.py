"""P(Yes) scoring with and without KV-cache prefix reuse (llama.cpp in process), same samples.

The samples are a RecBench CTR build's test samples (`recharness build recbench -t ctr`), in the
builder's order (by user, then time): candidates of one user share the system turn and most of
their 20-title history (the window slides only where a click lies between two candidates). With
reuse, the backend keeps the evaluated prefix in llama.cpp's KV cache and evaluates only the rest.
Measures samples/s both ways and the largest difference in P(Yes). Target: >= 3x, |dP| <= 1e-4.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_prefix_reuse.py [--run DIR] [-n 1000]
(without --run it builds ml-1m ctr, seed 0, 250 users x 4 pairs, into a temporary folder).
Writes benchmarks/results/prefix_reuse.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.models.builtin import BUILTIN_MODELS, fetch_model  # noqa: E402
from recharness.models.llamacpp import LlamaCppBackend  # noqa: E402
from recharness.runner import pipeline  # noqa: E402

OUT = Path(__file__).parent / "results" / "prefix_reuse.md"


def samples(run: Path | None, n: int) -> tuple[list[list[dict]], str]:
    if run is None:
        run = Path(tempfile.mkdtemp(prefix="prefix-reuse-"))
        pipeline.build("recbench", "ml-1m", run, tasks=["ctr"], seed=0, limit=(n + 3) // 4)
    _, built = pipeline.load_build(run)
    return [s["messages"] for s in built[:n]], str(run)


def score_all(backend: LlamaCppBackend, prompts: list[list[dict]]) -> tuple[list[float], float]:
    async def go():
        out = []
        for p in prompts:
            out.append((await backend.ascore_options(p, ["Yes", "No"])).probabilities()["Yes"])
        return out

    t0 = time.perf_counter()
    probs = asyncio.run(go())
    return probs, time.perf_counter() - t0


def token_work(backend: LlamaCppBackend, prompts: list[list[dict]]) -> tuple[int, int]:
    """Tokens evaluated without reuse vs with it (each prompt minus its common prefix with the one before)."""
    llm = backend.load()
    total = evaluated = 0
    prev: list[int] = []
    for p in prompts:
        toks = llm.tokenize(backend.chat_prompt(llm, p).encode("utf-8"), add_bos=False, special=True)
        k = 0
        while k < min(len(prev), len(toks) - 1) and prev[k] == toks[k]:
            k += 1
        total += len(toks)
        evaluated += len(toks) - k
        prev = toks
    return total, evaluated


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--run", type=Path, default=None, help="a recbench ctr build (default: build one)")
    ap.add_argument("-n", type=int, default=1000, help="samples (the build's first n)")
    args = ap.parse_args()
    prompts, run = samples(args.run, args.n)
    path = fetch_model(args.model)
    n_ctx = BUILTIN_MODELS[args.model].n_ctx
    rows = {}
    for reuse in (False, True):
        backend = LlamaCppBackend(path, name=args.model, n_ctx=n_ctx, reuse_prefix=reuse)
        score_all(backend, prompts[:2])  # load weights, warm up
        rows[reuse] = score_all(backend, prompts)
    (p_off, t_off), (p_on, t_on) = rows[False], rows[True]
    total, evaluated = token_work(backend, prompts)
    diff = float(np.max(np.abs(np.array(p_on) - np.array(p_off))))
    n = len(prompts)
    lines = [
        "# P(Yes) scoring with and without KV-cache prefix reuse",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- model: {args.model} in process (llama-cpp-python, portable build), n_ctx {n_ctx}, all cores",
        f"- {n} samples: the first {n} test samples of the RecBench CTR build `{run}` (ML-1M, seed 0; the "
        "authors' prompt: system turn + the user's last 20 clicked titles + the candidate), in the builder's order "
        "(by user, then time)",
        "",
        "| prefix reuse | wall (s) | samples/s |",
        "|---|---:|---:|",
        f"| off (reset, evaluate the whole prompt) | {t_off:.1f} | {n / t_off:.2f} |",
        f"| on (keep the shared prefix, evaluate the rest) | {t_on:.1f} | {n / t_on:.2f} |",
        "",
        f"**speed-up {t_off / t_on:.2f}×** (target ≥ 3×); largest |ΔP(Yes)| = {diff:.2e} (target ≤ 1e-4).",
        "",
        f"Tokens evaluated: {total:,} without reuse, {evaluated:,} with it, so **{total / evaluated:.2f}× is the "
        "ceiling** of exact prefix reuse on these samples (the prefix must match token for token for the scores to "
        "be identical). The builder's samples have ~4 candidates per user, and the 20-title window slides whenever "
        "a click lies between two candidates, which changes the oldest title and so everything after the system "
        "turn; candidates that share a timestamp share the whole history.",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

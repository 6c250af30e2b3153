"""P(Yes) scoring with and without KV-cache prefix reuse (llama.cpp in process), same samples.

CTR samples of one user share the system prompt and the 20-title history; only
the candidate differs. With reuse, the backend keeps the evaluated prefix in
llama.cpp's KV cache and evaluates only the candidate's tokens. Samples are
ordered by user, as the RecBench builder writes them. Measures samples/s both
ways and the largest difference in P(Yes). Target: >= 3x, |dP| <= 1e-4.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_prefix_reuse.py [--users 100] [--per-user 10]
Writes benchmarks/results/prefix_reuse.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.data.store import load_dataset  # noqa: E402
from recharness.models.builtin import BUILTIN_MODELS, fetch_model  # noqa: E402
from recharness.models.llamacpp import LlamaCppBackend  # noqa: E402

OUT = Path(__file__).parent / "results" / "prefix_reuse.md"
SYSTEM = "You are a movie recommender. Given a user's viewing history, answer whether the user will like the candidate movie."


def samples(users: int, per_user: int, seed: int = 0) -> list[list[dict]]:
    ds = load_dataset("ml-1m")
    titles = dict(zip(ds.items["item_id"].to_list(), ds.items["title"].to_list()))
    pos = ds.interactions.filter(pl.col("rating") > 3).sort(["user_id", "timestamp"])
    hist = pos.group_by("user_id", maintain_order=True).agg(pl.col("item_id").tail(20))
    rng = np.random.default_rng(seed)
    items = ds.items["item_id"].to_list()
    out = []
    for row in hist.head(users).iter_rows(named=True):
        history = "\n".join(f"{i + 1}. {titles[x]}" for i, x in enumerate(row["item_id"]))
        for c in rng.choice(items, size=per_user, replace=False):
            out.append([{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"User's history:\n{history}\n\nCandidate: {titles[c]}\n"
                                                    "Will the user like the candidate? Answer Yes or No."}])
    return out


def score_all(backend: LlamaCppBackend, prompts: list[list[dict]]) -> tuple[list[float], float]:
    async def go():
        out = []
        for p in prompts:
            out.append((await backend.ascore_options(p, ["Yes", "No"])).probabilities()["Yes"])
        return out

    t0 = time.perf_counter()
    probs = asyncio.run(go())
    return probs, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--per-user", type=int, default=10)
    args = ap.parse_args()
    prompts = samples(args.users, args.per_user)
    path = fetch_model(args.model)
    n_ctx = BUILTIN_MODELS[args.model].n_ctx
    rows = {}
    for reuse in (False, True):
        backend = LlamaCppBackend(path, name=args.model, n_ctx=n_ctx, reuse_prefix=reuse)
        score_all(backend, prompts[:2])  # load weights, warm up
        rows[reuse] = score_all(backend, prompts)
    (p_off, t_off), (p_on, t_on) = rows[False], rows[True]
    diff = float(np.max(np.abs(np.array(p_on) - np.array(p_off))))
    n = len(prompts)
    lines = [
        "# P(Yes) scoring with and without KV-cache prefix reuse",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- model: {args.model} in process (llama-cpp-python, portable build), n_ctx {n_ctx}, all cores",
        f"- {n} samples: {args.users} ML-1M users × {args.per_user} random candidates, each prompt = system turn + "
        "the user's last 20 liked titles + the candidate; ordered by user",
        "",
        "| prefix reuse | wall (s) | samples/s |",
        "|---|---:|---:|",
        f"| off (reset, evaluate the whole prompt) | {t_off:.1f} | {n / t_off:.2f} |",
        f"| on (keep the shared prefix, evaluate the rest) | {t_on:.1f} | {n / t_on:.2f} |",
        "",
        f"**speed-up {t_off / t_on:.2f}×** (target ≥ 3×); largest |ΔP(Yes)| = {diff:.2e} (target ≤ 1e-4).",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Harness overhead: `recharness run` machinery vs the bare `openai` client, same server.

Both sides send the same prompts to the same local llama.cpp server with the
same concurrency and decoding settings; the harness side goes through the
runner (response cache misses + SQLite writes, parsing, durable JSONL lines).
Rounds alternate which side goes first to cancel drift. Target: the harness
keeps >= 0.95 of the bare client's throughput.

Run by hand:  .venv/bin/python benchmarks/bench_overhead.py [--model smollm2-135m] [--n 24]
Writes benchmarks/results/overhead.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import openai

from recharness.data.store import load_dataset
from recharness.models.base import GenerationParams
from recharness.models.registry import resolve_model
from recharness.models.server import LocalServer
from recharness.runner.cache import ResponseCache
from recharness.runner.run import CachedModel, run_samples
from recharness.tasks.base import BuildConfig
from recharness.tasks.llmrec.sequential import SequentialTask

OUT = Path(__file__).parent / "results" / "overhead.md"


async def bare(base_url: str, model: str, prompts: list[list[dict]], params: GenerationParams, conc: int) -> float:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-local", max_retries=0)
    sem = asyncio.Semaphore(conc)

    async def one(msgs):
        async with sem:
            r = await client.chat.completions.create(model=model, messages=msgs, max_tokens=params.max_tokens,
                                                     temperature=params.temperature, top_p=params.top_p, seed=params.seed,
                                                     extra_body={"repeat_penalty": 1.0})
            return r.choices[0].message.content

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in prompts))
    dt = time.perf_counter() - t0
    await client.close()
    return dt


def harness(base_url: str, model: str, samples: list[dict], task, conc: int, tmp: Path, tag: str) -> float:
    backend = resolve_model(f"openai:{model}@{base_url}", concurrency=conc)
    cache = ResponseCache(tmp / f"cache-{tag}.sqlite")
    t0 = time.perf_counter()
    asyncio.run(run_samples(samples, {task.name: task}, CachedModel(backend, cache), tmp / f"pred-{tag}.jsonl",
                            concurrency=conc, max_retries=0))
    dt = time.perf_counter() - t0
    cache.close()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--server-threads", type=int, default=1)
    args = ap.parse_args()

    ds = load_dataset("ml-1m")
    task = SequentialTask()
    task.params = GenerationParams(max_tokens=args.max_tokens)
    task.setup(ds)
    samples = list(task.build(ds, BuildConfig(seed=0, limit=args.n, options={"history_len": 5})))
    prompts = [s["messages"] for s in samples]
    # The server gets one core and the client the other, as when the model runs on its own
    # hardware: on 2 shared cores llama.cpp's spinning threads turn any client CPU use into
    # large, erratic stalls that would swamp the effect being measured.
    with LocalServer(args.model, n_threads=args.server_threads) as srv, tempfile.TemporaryDirectory() as tmp:
        # warm-up: load weights into page cache, fill the server's prompt cache equally for both sides
        asyncio.run(bare(srv.base_url, args.model, prompts[:2], task.params, 1))
        b_times, h_times = [], []
        for r in range(args.rounds):
            order = ("bare", "harness") if r % 2 == 0 else ("harness", "bare")
            for side in order:
                if side == "bare":
                    b_times.append(asyncio.run(bare(srv.base_url, args.model, prompts, task.params, args.concurrency)))
                else:
                    h_times.append(harness(srv.base_url, args.model, samples, task, args.concurrency, Path(tmp), f"r{r}"))
    b, h = statistics.median(b_times), statistics.median(h_times)
    ratio = b / h
    lines = [
        "# Harness overhead vs the bare openai client",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        f"- server: llama.cpp (`python -m llama_cpp.server`) on 127.0.0.1 with {args.model}, "
        f"{args.server_threads} thread(s); the client side runs on the remaining core",
        f"- workload: {args.n} LLMRec sequential prompts (ML-1M, seed 0), max_tokens={args.max_tokens}, greedy, "
        f"concurrency {args.concurrency}, {args.rounds} rounds alternating order; medians",
        "",
        "| side | wall times (s) | median (s) | samples/s |",
        "|---|---|---:|---:|",
        f"| bare openai client | {', '.join(f'{t:.2f}' for t in b_times)} | {b:.2f} | {args.n / b:.2f} |",
        f"| recharness runner (cache miss + write, parse, durable JSONL) | {', '.join(f'{t:.2f}' for t in h_times)} | {h:.2f} | {args.n / h:.2f} |",
        "",
        f"**throughput ratio (harness / bare) = {ratio:.3f}** (target >= 0.95)",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""What the response cache costs in CPU, with no transport in the way (benchmarks/results/overhead.md's concurrency-1
row with the cache on is where this shows).

1. Writes: `ResponseCache.put` + `flush` of 20,000 realistic answers, 100 per flush (about what a 50 ms group
   commit gathers at 2,000 answers/s), CPU seconds per entry (`time.process_time`), the connection as shipped
   against the same connection with SQLite's default put back (`temp_store=DEFAULT`: temporary b-trees in files).
2. A run: `run_samples` over an instant in-process backend (the fake server's answer, no I/O) on bench_overhead's
   LLMRec sequential prompts, concurrency 1, cache off, on, and on with SQLite's default: CPU seconds per sample of
   the whole process (the event loop and the commit thread).

Repetitions alternate the variants; the file gives each variant's median and range.

Run by hand:  .venv/bin/python benchmarks/bench_cache_cpu.py [--n 4000] [--rounds 5]
Writes benchmarks/results/cache_cpu.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_overhead import make_samples  # noqa: E402
from machine import cpu_model  # noqa: E402

from recharness.core.types import Completion  # noqa: E402
from recharness.execution.cache import ResponseCache  # noqa: E402
from recharness.execution.executor import CachedModel, run_samples  # noqa: E402
from recharness.models.base import ModelBackend  # noqa: E402
from recharness.testing.fake_server import FakeServer  # noqa: E402

OUT = Path(__file__).parent / "results" / "cache_cpu.md"
ANSWER = FakeServer().answer


class InstantBackend(ModelBackend):
    """Answers at once with the fake server's answer: the run's own CPU and nothing else."""

    backend = "instant"
    max_concurrency = 1

    def identity(self) -> dict:
        return {"backend": "openai", "model": "fake", "base_url": "http://127.0.0.1:1/v1",
                "extra_body": {"repeat_penalty": 1.0}}

    async def agenerate(self, messages, params) -> Completion:
        await asyncio.sleep(0)
        return Completion(text=ANSWER, latency_s=0.0004, prompt_tokens=10, completion_tokens=5, finish_reason="stop")

    async def aclose(self) -> None:
        pass


def sqlite_default(cache: ResponseCache) -> None:
    """The cache's connection with SQLite's own temporary store put back (temporary b-trees in files)."""
    with cache._db_lock:
        cache._db.execute("PRAGMA temp_store=DEFAULT")


def write_cpu(tmp: Path, tag: str, defaults: bool, entries: int = 20_000, per_flush: int = 100) -> float:
    """CPU µs per entry put and flushed."""
    cache = ResponseCache(tmp / f"w-{tag}.sqlite", buffered=True)
    if defaults:
        sqlite_default(cache)
    rec = Completion(text=ANSWER, latency_s=0.0004, prompt_tokens=10, completion_tokens=5, finish_reason="stop").to_dict()
    keys = [hashlib.sha256(f"{tag}:{i}".encode()).hexdigest() for i in range(entries)]
    c0 = time.process_time()
    for i in range(0, entries, per_flush):
        for k in keys[i:i + per_flush]:
            cache.put(k, rec)
        cache.flush()
    dt = time.process_time() - c0
    cache.close()
    return 1e6 * dt / entries


def run_cpu(tmp: Path, tag: str, samples: list[dict], task, use_cache: bool, defaults: bool = False) -> float:
    """CPU µs per sample of a whole `run_samples` over the instant backend."""
    cache = ResponseCache(tmp / f"r-{tag}.sqlite", buffered=True) if use_cache else None
    if cache is not None and defaults:
        sqlite_default(cache)
    c0 = time.process_time()
    asyncio.run(run_samples(samples, {task.name: task}, CachedModel(InstantBackend("fake"), cache),
                            tmp / f"p-{tag}.jsonl", concurrency=1, max_retries=0, build="bench"))
    if cache is not None:
        cache.close()
    return 1e6 * (time.process_time() - c0) / len(samples)


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000, help="samples per run")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    task, samples = make_samples(args.n, 48)
    load0 = os.getloadavg()
    writes = {"SQLite's default": [], "as shipped": []}
    runs = {"cache off": [], "cache on": [], "cache on, SQLite's default": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for r in range(args.rounds):
            order = list(writes) if r % 2 == 0 else list(writes)[::-1]
            for k in order:
                writes[k].append(write_cpu(tmp, f"{k[:4]}{r}", k == "SQLite's default"))
            order = list(runs) if r % 2 == 0 else list(runs)[::-1]
            for k in order:
                runs[k].append(run_cpu(tmp, f"{len(k)}-{r}", samples, task, k != "cache off", "default" in k))
    load1 = os.getloadavg()
    w_def, w_new = (statistics.median(writes[k]) for k in writes)
    r_off, r_on, r_def = (statistics.median(runs[k]) for k in runs)
    lines = [
        "# The response cache's CPU",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}; load average (1 min) {load0[0]:.2f} at the "
        f"start, {load1[0]:.2f} at the end",
        f"- {args.rounds} repetitions of each variant, alternating; median (min–max); CPU = `time.process_time` "
        "of the whole process (user + system, every thread)",
        "",
        "## Writes: `put` + `flush`, 20,000 answers, 100 per flush",
        "",
        "| connection | CPU µs per entry |",
        "|---|---:|",
        *(f"| {k} | {spread(v)} |" for k, v in writes.items()),
        "",
        f"As shipped / SQLite's default: **{w_new / w_def:.2f}** of the CPU per entry "
        f"({w_def - w_new:.1f} µs less). SQLite's default: `temp_store=DEFAULT` (temporary b-trees in files); "
        "shipped: `MEMORY`.",
        "",
        f"## A run: `run_samples`, {args.n:,} LLMRec sequential prompts, an instant backend, concurrency 1",
        "",
        "| response cache | CPU µs per sample |",
        "|---|---:|",
        *(f"| {k} | {spread(v)} |" for k, v in runs.items()),
        "",
        f"The cache adds **{r_on - r_off:.1f} µs** of CPU per sample as shipped, {r_def - r_off:.1f} µs with SQLite's "
        "default (medians): the key, the read-ahead, the entry and its share of the transactions; the rest is "
        "parsing, catalog matching and the durable record.",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

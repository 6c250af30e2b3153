"""Throughput over several endpoints without Ray: the runner against 1, 2, 4 fake OpenAI servers.

Every endpoint is the fake OpenAI-compatible server (`recharness.testing.fake_server`, its own
process, 127.0.0.1). The work is a real run's: `run_samples` with the response cache (a fresh file,
all misses, every answer written), LLMRec sequential prompts on ML-1M (answers parsed and
catalog-matched), durable JSONL. Total concurrency is fixed per table, so only the endpoints change.

- zero latency: the client side is all there is to measure, so more endpoints cannot help on one
  machine; this shows what the pool's bookkeeping costs (1 endpoint plain vs 1, 2, 4 in a pool).
- 50 ms per answer, 4 answers at once per server (`--slots 4`, like a GPU server's batch): a server
  then serves at most 80 answers/s, and throughput grows with the endpoints.
- failover: 4 such endpoints, one killed (kill -9) after a quarter of the samples: throughput, and
  every sample exactly once.

Run by hand:  .venv/bin/python benchmarks/bench_endpoints.py   (about a minute)
Writes the "endpoints" section of benchmarks/results/scale.md (other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("RECHARNESS_HOME", str(ROOT / ".pytest-home"))
sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.core.io import read_jsonl  # noqa: E402
from recharness.core.types import (
    BuildConfig,  # noqa: E402
    GenerationParams,  # noqa: E402
)
from recharness.data.store import load_dataset  # noqa: E402
from recharness.execution.cache import ResponseCache  # noqa: E402
from recharness.execution.executor import CachedModel, run_samples  # noqa: E402
from recharness.models.endpoint_pool import EndpointPool, endpoint_totals  # noqa: E402
from recharness.models.openai_compat import OpenAICompatibleBackend  # noqa: E402
from recharness.tasks.llmrec.sequential import SequentialTask  # noqa: E402
from recharness.testing.fake_server import FakeServerProcess  # noqa: E402

OUT = Path(__file__).parent / "results" / "scale.md"
SECTION = "## endpoints"


def make_samples(n: int) -> tuple[SequentialTask, list[dict]]:
    ds = load_dataset("ml-1m")
    task = SequentialTask()
    task.params = GenerationParams(max_tokens=48)
    task.setup(ds)
    base = list(task.build(ds, BuildConfig(seed=0, limit=min(n, 500), options={"history_len": 5})))
    samples = []
    for i in range(n):  # distinct prompts: no cache hits
        s = dict(base[i % len(base)])
        s["id"] = f"{s['id']}#{i}"
        s["messages"] = [*s["messages"][:-1], {**s["messages"][-1], "content": s["messages"][-1]["content"] + f"\n#{i}"}]
        samples.append(s)
    return task, samples


def backend_for(urls: list[str], conc: int, plain: bool):
    if plain:
        return OpenAICompatibleBackend("fake", base_url=urls[0], max_concurrency=conc)
    return EndpointPool("fake", urls, max_concurrency=conc, backoff_s=0.2)


def one_run(urls, task, samples, conc, tmp: Path, tag: str, plain=False, on_progress=None):
    """(seconds, stats, backend, client CPU seconds) of one run through the runner, cache on (all misses)."""
    backend = backend_for(urls, conc, plain)
    cache = ResponseCache(tmp / f"cache-{tag}.sqlite", buffered=True)
    path = tmp / f"pred-{tag}.jsonl"

    async def go():
        try:
            return await run_samples(samples, {task.name: task}, CachedModel(backend, cache), path, concurrency=conc,
                                     max_retries=0, build="bench", on_progress=on_progress)
        finally:
            await backend.aclose()

    t0, c0 = time.perf_counter(), time.process_time()
    stats = asyncio.run(go())
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    cache.close()
    ids = Counter(r["id"] for r in read_jsonl(path))
    assert stats.complete and ids == Counter({s["id"]: 1 for s in samples}), (tag, stats)
    return dt, stats, backend, cpu


def table(title: str, servers_kw: dict, task, samples, conc: int, rounds: int, tmp: Path, plain_row: bool) -> list[str]:
    rows = [f"### {title}", "", "| endpoints | backend | samples/s (median of "
            f"{rounds}) | range | vs first row | client CPU ms/sample | answers per endpoint |", "|---:|---|---:|---|---:|---:|---|"]
    base = None
    with ExitStack() as stack:
        servers = [stack.enter_context(FakeServerProcess(max_seconds=600, max_requests=10_000_000, **servers_kw))
                   for _ in range(4)]
        urls = [s.base_url for s in servers]
        configs = ([(1, True)] if plain_row else []) + [(1, False), (2, False), (4, False)]
        times: dict = {c: [] for c in configs}
        cpus: dict = {c: [] for c in configs}
        for n, plain in configs:  # warm-up: connections, caches, the servers' first requests
            one_run(urls[:n], task, samples[:100], conc, tmp, f"warm-{title[:4]}-{n}-{plain}", plain)
        spread: dict = {}
        for r in range(rounds):  # alternate the order each round
            for n, plain in (configs if r % 2 == 0 else configs[::-1]):
                dt, _, backend, cpu = one_run(urls[:n], task, samples, conc, tmp, f"{title[:4]}-{n}-{plain}-{r}",
                                              plain)
                times[(n, plain)].append(dt)
                cpus[(n, plain)].append(cpu)
                spread[(n, plain)] = [t["answered"] for t in endpoint_totals(backend)] or [len(samples)]
        for n, plain in configs:
            rate = len(samples) / statistics.median(times[(n, plain)])
            lo, hi = len(samples) / max(times[(n, plain)]), len(samples) / min(times[(n, plain)])
            base = base or rate
            row = (f"| {n} | {'one endpoint (plain)' if plain else 'pool'} | {rate:,.0f} | {lo:,.0f}–{hi:,.0f} | "
                   f"{rate / base:.2f} | {1000 * statistics.median(cpus[(n, plain)]) / len(samples):.2f} | "
                   f"{' / '.join(map(str, spread[(n, plain)]))} |")
            print(row, flush=True)
            rows.append(row)
    return rows + [""]


def failover(task, samples, conc: int, tmp: Path, servers_kw: dict) -> list[str]:
    with ExitStack() as stack:
        servers = [stack.enter_context(FakeServerProcess(max_seconds=600, **servers_kw)) for _ in range(4)]
        done = 0

        def progress(k):
            nonlocal done
            done += k
            if done >= len(samples) // 4 and servers[1].proc.poll() is None:
                servers[1].stop()  # kill -9

        dt, stats, backend, _ = one_run([s.base_url for s in servers], task, samples, conc, tmp, "failover",
                                     on_progress=progress)
    tot = endpoint_totals(backend)
    dead = tot[1]
    row = (f"4 endpoints (50 ms, 4 slots each), endpoint 2 killed after {len(samples) // 4} samples: "
           f"**{len(samples) / dt:,.0f} samples/s**, {stats.done}/{len(samples)} samples exactly once, none invalid; "
           f"answers per endpoint {' / '.join(str(t['answered']) for t in tot)}; the killed one: "
           f"{dead['failures']} failed tries ({', '.join(f'{k}: {v}' for k, v in dead['failures_by_kind'].items())}), "
           f"all retried elsewhere (transport retries {sum(stats.transport_retries.values())}), "
           f"{dead['probes']} probes while out.")
    print(row, flush=True)
    return ["### failover", "", row, ""]


def write_section(lines: list[str]) -> None:
    text = OUT.read_text() if OUT.exists() else "# Scale-out\n\n"
    section = "\n".join(lines).rstrip() + "\n"
    if SECTION in text:
        head, _, rest = text.partition(SECTION)
        nxt = rest.find("\n## ")
        text = head + section + (rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-fast", type=int, default=1000, help="samples per zero-latency run")
    ap.add_argument("--n-slow", type=int, default=400, help="samples per 50 ms run")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    t_start = time.perf_counter()
    task, samples = make_samples(max(args.n_fast, args.n_slow))
    lines = [
        SECTION, "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}; load average at the start "
        f"{os.getloadavg()[0]:.1f} (the machine is shared with other jobs); local executor (no Ray)",
        "- `benchmarks/bench_endpoints.py`: `run_samples` (cache on, all misses; parsing and catalog matching; "
        "durable JSONL) over LLMRec sequential prompts (ML-1M), against 1, 2 or 4 fake OpenAI-compatible servers "
        "(`recharness.testing.fake_server`, one process each, 127.0.0.1) behind `EndpointPool` "
        "(`--base-url` repeated); every run checked: each sample exactly once",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        lines += table(f"zero latency, {args.n_fast} samples, concurrency 32 in all", {}, task,
                       samples[:args.n_fast], 32, args.rounds, Path(tmp), plain_row=True)
        lines += table(f"50 ms per answer, 4 slots per server, {args.n_slow} samples, concurrency 16 in all",
                       {"delay_s": 0.05, "slots": 4}, task, samples[:args.n_slow], 16, 1, Path(tmp), plain_row=False)
        lines += failover(task, samples[:args.n_slow], 16, Path(tmp), {"delay_s": 0.05, "slots": 4})
    lines += [
        "At zero latency client and servers share the same 2 cores (and other jobs), so the samples/s there "
        "measure CPU on this machine, not serving capacity, and vary a lot from run to run (the range column). "
        "The pool's own cost is best read in the client CPU per sample of the first two rows (one endpoint "
        "plain vs the same endpoint in a pool: least-loaded choice, health, totals). When each server is "
        "capacity-bound (50 ms per answer, 4 at once: at most 80 answers/s per server) throughput grows with "
        "the endpoints, as with a pool of vLLM servers, until the client's own CPU becomes the limit.",
        "", f"(whole benchmark: {time.perf_counter() - t_start:.0f} s)", ""]
    write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Where the CPU goes with the transport process: the harness's main process, its HTTP child and the server.

bench_overhead.py gives the rates; this gives each process's CPU per request (/proc), so one sees which
one sets the rate. Sides, same fake server (its own process, 127.0.0.1, zero latency), same 2,000
distinct LLMRec sequential prompts, the harness with the response cache on, parsing and durable JSONL,
rotating order, medians:

- bare httpx2, gathered: `bench_overhead.bare_http`; bare httpx2, workers: `bench_overhead.bare_http_workers`;
- harness, inline: the OpenAI-compatible backend posting from the harness's process (RECHARNESS_TRANSPORT=inline);
- harness, transport process: the default, the posts made by `recharness.models.transport_child`;
- harness, transport process, no mmap fix: the same child without `raise_mmap_threshold` (glibc then maps,
  shrinks and unmaps each 256 KiB receive buffer: what the first version of the child cost).

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_overhead_process.py [--n 2000] [--rounds 3]
Writes benchmarks/results/overhead_process.md.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_overhead as bo  # noqa: E402
from bench_overhead_cpu import median_rounds, overhead_args, process_cpu_s, us_text  # noqa: E402
from machine import cpu_model  # noqa: E402

OUT = Path(__file__).parent / "results" / "overhead_process.md"
#: the child without its mmap-threshold warm-up, for the side that measures what that warm-up saves
NO_FIX = ("import runpy, sys; import recharness.models.transport_child as c; c.raise_mmap_threshold = lambda: None; "
          "sys.argv = sys.argv[1:]; c.main()")
SIDES = ("bare httpx2, gathered", "bare httpx2, workers", "harness, inline", "harness, transport process",
         "harness, transport process, no mmap fix")


def measure(side: str, url: str, task, samples, conc: int, tmp: Path, server_pid: int, tag: str) -> dict:
    from recharness.execution.cache import ResponseCache
    from recharness.execution.executor import CachedModel, run_samples
    from recharness.models import transport_process as tp
    from recharness.models.registry import resolve_model

    prompts = [s["messages"] for s in samples]
    out = {}

    async def go():
        backend = child = None
        if side.startswith("harness"):
            os.environ["RECHARNESS_TRANSPORT"] = "inline" if side.endswith("inline") else "process"
            backend = resolve_model(f"openai:m@{url}", concurrency=conc)
            os.environ.pop("RECHARNESS_TRANSPORT")
            if backend._pump is not None:
                popen = tp.subprocess.Popen
                if side.endswith("no mmap fix"):  # the child's script run with the warm-up turned off
                    tp.subprocess.Popen = lambda cmd, **kw: popen([cmd[0], "-c", NO_FIX, *cmd[1:]], **kw)
                try:
                    await backend._pump.start()  # imports paid before the clock, as bare httpx2's
                finally:
                    tp.subprocess.Popen = popen
                child = backend._pump.proc.pid
        h0 = process_cpu_s(child) if child else 0.0
        s0, c0, t0 = process_cpu_s(server_pid), time.process_time(), time.perf_counter()
        if side == "bare httpx2, gathered":
            await bo.bare_http(url, "m", prompts, task.params, conc)
        elif side == "bare httpx2, workers":
            await bo.bare_http_workers(url, "m", prompts, task.params, conc)
        else:
            cache = ResponseCache(tmp / f"cache-{tag}-{len(side)}.sqlite", buffered=True)
            await run_samples(samples, {task.name: task}, CachedModel(backend, cache),
                              tmp / f"pred-{tag}-{len(side)}.jsonl", concurrency=conc, max_retries=0, build="bench")
            cache.close()
        wall = time.perf_counter() - t0
        n = len(samples)
        out.update(req_s=n / wall, client_us=(time.process_time() - c0) * 1e6 / n,
                   child_us=(process_cpu_s(child) - h0) * 1e6 / n if child else float("nan"),
                   server_us=(process_cpu_s(server_pid) - s0) * 1e6 / n)
        if backend is not None:
            await backend.aclose()

    asyncio.run(go())
    return out


def main() -> None:
    args = overhead_args(__doc__, OUT).parse_args()
    med, (load0, load1) = median_rounds(measure, list(SIDES), args, max_seconds=3600, max_requests=10_000_000)

    lines = [
        "# The transport process: CPU per request of the harness, its HTTP child and the server", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- workload: {args.n:,} distinct LLMRec sequential prompts (ML-1M, seed 0); the fake OpenAI-compatible "
        "server in its own process on 127.0.0.1, answering at once; the harness with the response cache on, "
        f"parsing and durable JSONL. {args.rounds} rounds, sides in rotating order, medians.",
        "- CPU: user + system seconds per request of the main process (`time.process_time`), the HTTP child "
        "and the server (/proc/PID/stat, 10 ms ticks)",
        f"- load average (1 min) {load0:.2f} at the start, {load1:.2f} at the end", "",
        "| concurrency | side | req/s | / bare httpx2 (the faster loop) | main CPU µs / req | child CPU µs / req | "
        "server CPU µs / req |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for conc in args.concurrency:
        floor = max(med[(conc, s)]["req_s"] for s in SIDES[:2])
        for side in SIDES:
            m = med[(conc, side)]
            lines.append(f"| {conc} | {side} | {m['req_s']:,.0f} | {m['req_s'] / floor:.3f} | {us_text(m['client_us'])} | "
                         f"{us_text(m['child_us'])} | {us_text(m['server_us'])} |")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

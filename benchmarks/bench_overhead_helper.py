"""Would a second process reach 0.95 of bare httpx2? The transport hosted in a helper process, measured.

overhead_cpu.md found the client process CPU-bound at zero latency and said the harness's own work
(parsing, the record, the cache) could only be hidden in a second process on the idle core. This
measures the best case of that design before building it: recharness's OpenAI-compatible backend runs
in a helper process (its own event loop and httpx2 client); the main process sends it requests and
gets completions back over a socketpair, batched once per event-loop iteration as JSON frames. The
main process then keeps the harness's work (`run_samples`: cache, parsing, durable JSONL) and one
request more in flight than the server's concurrency, so its work on one answer overlaps the next
request. Sides, same fake server (its own process, 127.0.0.1, zero latency), 2,000 distinct LLMRec
sequential prompts, rotating order, medians:

- bare httpx2: `bench_overhead.bare_http` (one JSON POST per prompt, answers kept in memory);
- backend, in process: the backend's `agenerate` in a plain loop (no harness work);
- backend, helper process: the same calls answered by the backend in the helper (no harness work);
- harness, helper process: `run_samples` (cache on, parsing, durable JSONL) over the helper.

CPU per request of the main process, the helper and the server (/proc) shows which one limits the rate.
This is a measurement of a design, not a recharness feature: the helper lives in this file.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_overhead_helper.py [--n 2000] [--rounds 3]
Writes benchmarks/results/overhead_helper.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_overhead as bo  # noqa: E402
from bench_overhead_cpu import median_rounds, overhead_args, process_cpu_s, us_text  # noqa: E402
from machine import cpu_model  # noqa: E402

from recharness.core.types import Completion, GenerationParams  # noqa: E402
from recharness.models.base import ModelBackend  # noqa: E402

OUT = Path(__file__).parent / "results" / "overhead_helper.md"
_LEN = struct.Struct("!I")


async def _read_frame(reader: asyncio.StreamReader) -> list:
    return json.loads(await reader.readexactly(_LEN.unpack(await reader.readexactly(4))[0]))


class _Frames:
    """Items put during one event-loop iteration leave as one length-prefixed JSON frame."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer, self.items = writer, []

    def put(self, item) -> None:
        if not self.items:
            asyncio.get_running_loop().call_soon(self._flush)
        self.items.append(item)

    def _flush(self) -> None:
        data = json.dumps(self.items, separators=(",", ":")).encode()
        self.items = []
        self.writer.write(_LEN.pack(len(data)) + data)


class HelperBackend(ModelBackend):
    """`resolve_model(spec)`'s backend, run in a child process; `agenerate` forwards to it. The spec goes
    over the socket, not the command line. `max_concurrency` = the server's concurrency + 1, so the main
    process has one request more in flight than the helper lets through (its semaphore)."""

    backend = "helper"

    def __init__(self, spec: str, concurrency: int):
        super().__init__(spec)
        self.spec, self.concurrency, self.max_concurrency = spec, concurrency, concurrency + 1
        self._ready: asyncio.Future | None = None
        self._waiting: dict[int, asyncio.Future] = {}
        self._next = 0
        self.proc: subprocess.Popen | None = None

    async def _start(self) -> None:
        mine, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),))
        theirs.close()
        reader, self._writer = await asyncio.open_connection(sock=mine)
        self._out = _Frames(self._writer)
        self._out.put({"spec": self.spec, "concurrency": self.concurrency})
        self._reading = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader) -> None:
        while True:
            for cid, ok, value in await _read_frame(reader):
                fut = self._waiting.pop(cid)
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(RuntimeError(value))

    async def agenerate(self, messages, params: GenerationParams) -> Completion:
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._start())
        await self._ready
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = fut
        self._out.put([self._next, messages, params.model_dump(mode="json")])
        return Completion(**(await fut))

    async def aclose(self) -> None:
        if self.proc is not None:
            self._writer.close()  # the helper exits at EOF
            await self._writer.wait_closed()
            self._reading.cancel()
            await asyncio.to_thread(self.proc.wait, 10)


async def serve(fd: int) -> None:
    """The helper: answers each request with the backend, at most `concurrency` at once; exits at EOF."""
    from recharness.models.registry import resolve_model

    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    out = _Frames(writer)
    setup = (await _read_frame(reader))[0]
    backend = resolve_model(setup["spec"], concurrency=setup["concurrency"])
    gate = asyncio.Semaphore(setup["concurrency"])
    running = set()

    async def one(cid, messages, params):
        async with gate:
            try:
                out.put([cid, True, (await backend.agenerate(messages, GenerationParams(**params))).to_dict()])
            except Exception as e:  # noqa: BLE001 - reported to the caller
                out.put([cid, False, repr(e)])

    while True:
        try:
            frame = await _read_frame(reader)
        except asyncio.IncompleteReadError:
            break
        for cid, messages, params in frame:
            t = asyncio.ensure_future(one(cid, messages, params))
            running.add(t)
            t.add_done_callback(running.discard)
    await backend.aclose()


SIDES = ("bare httpx2", "backend, in process", "backend, helper process", "harness, helper process")


async def backend_loop(backend: ModelBackend, prompts, params, limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(msgs):
        async with gate:
            await backend.agenerate(msgs, params)

    await asyncio.gather(*(one(m) for m in prompts))


def measure(side: str, url: str, task, samples, conc: int, tmp: Path, server_pid: int, tag: str) -> dict:
    from recharness.execution.cache import ResponseCache
    from recharness.execution.executor import CachedModel, run_samples
    from recharness.models.registry import resolve_model

    prompts = [s["messages"] for s in samples]
    helper = HelperBackend(f"openai:m@{url}", conc) if "helper" in side else None
    out = {}

    async def go():
        if helper is not None:  # started (and its imports paid) before the clock
            await helper.agenerate(prompts[0], task.params)
        h0 = process_cpu_s(helper.proc.pid) if helper is not None else 0.0
        s0, c0, t0 = process_cpu_s(server_pid), time.process_time(), time.perf_counter()
        if side == "bare httpx2":
            await bo.bare_http(url, "m", prompts, task.params, conc)
        elif side == "backend, in process":
            backend = resolve_model(f"openai:m@{url}", concurrency=conc)
            await backend_loop(backend, prompts, task.params, conc)
            await backend.aclose()
        elif side == "backend, helper process":
            await backend_loop(helper, prompts, task.params, helper.max_concurrency)
        else:
            cache = ResponseCache(tmp / f"cache-{tag}.sqlite", buffered=True)
            await run_samples(samples, {task.name: task}, CachedModel(helper, cache), tmp / f"pred-{tag}.jsonl",
                              max_retries=0, build="bench")
            cache.close()
        wall = time.perf_counter() - t0
        n = len(samples)
        out.update(req_s=n / wall, client_us=(time.process_time() - c0) * 1e6 / n,
                   helper_us=(process_cpu_s(helper.proc.pid) - h0) * 1e6 / n if helper is not None else float("nan"),
                   server_us=(process_cpu_s(server_pid) - s0) * 1e6 / n)
        if helper is not None:
            await helper.aclose()

    asyncio.run(go())
    return out


def main() -> None:
    ap = overhead_args(__doc__, OUT)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.serve))
        return
    med, (load0, load1) = median_rounds(measure, list(SIDES), args)

    lines = [
        "# A second process for the transport: does it reach 0.95 of bare httpx2?", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- workload: {args.n:,} distinct LLMRec sequential prompts (ML-1M, seed 0); the fake OpenAI-compatible "
        "server in its own process on 127.0.0.1, answering at once. The helper process runs recharness's "
        "OpenAI-compatible backend; requests and completions cross a socketpair as JSON frames, one per "
        "event-loop iteration; the main process keeps one request more in flight than the helper lets through "
        f"(concurrency + 1). {args.rounds} rounds, sides in rotating order, medians.",
        "- CPU: user + system seconds per request of the main process (`time.process_time`), the helper and the "
        "server (/proc/PID/stat, 10 ms ticks)",
        f"- load average (1 min) {load0:.2f} at the start, {load1:.2f} at the end", "",
        "| concurrency | side | req/s | / bare httpx2 | main CPU µs / req | helper CPU µs / req | server CPU µs / req |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for conc in args.concurrency:
        bare = med[(conc, "bare httpx2")]["req_s"]
        for side in SIDES:
            m = med[(conc, side)]
            lines.append(f"| {conc} | {side} | {m['req_s']:,.0f} | {m['req_s'] / bare:.3f} | {us_text(m['client_us'])} | "
                         f"{us_text(m['helper_us'])} | {us_text(m['server_us'])} |")
    lines.append("")
    for conc in args.concurrency:
        b, alone, h, full = (med[(conc, s)] for s in SIDES)
        busier = "the helper" if h["helper_us"] >= h["client_us"] else "the main process"
        lines.append(
            f"- concurrency {conc}: with no harness work at all, the backend in the helper runs at "
            f"{h['req_s'] / b['req_s']:.3f} of bare httpx2 (in process: {alone['req_s'] / b['req_s']:.3f}); the helper "
            f"spends {h['helper_us']:,.0f} µs of CPU per request against {alone['client_us']:,.0f} µs for the same "
            f"backend calls in one process ({h['helper_us'] - alone['client_us']:+,.0f} µs: the frames, event-loop turns "
            f"and futures that carry a request across) and {b['client_us']:,.0f} µs for bare httpx2; the main process "
            f"spends {h['client_us']:,.0f} µs, so {busier} sets the rate. With the harness's work in the main process: "
            f"{full['req_s'] / b['req_s']:.3f} of bare httpx2 (helper {full['helper_us']:,.0f} µs, main "
            f"{full['client_us']:,.0f} µs per request).")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

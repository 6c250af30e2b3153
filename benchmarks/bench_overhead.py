"""Harness overhead: `recharness run` machinery vs a bare `openai.AsyncOpenAI` loop, same server.

Zero-latency mode (default): the fake OpenAI-compatible server (its own process,
127.0.0.1, answers at once) so the client side is all that is measured; at
concurrency 1, 8, 32, with the response cache on (all misses, every answer
written) and off. The harness side does everything a real run does: cache
key + lookup + write, parsing and catalog matching (LLMRec sequential on
ML-1M), durable JSONL (group commit). Rounds alternate which side goes first.
Target: harness >= 0.95 of the bare client's requests/s at each setting, and (issue 25) of the
bare httpx2 transport the harness itself uses (`bare_http`), the column that shows what the
harness costs. The file records the load average at the start and the end of the run; a section
from an earlier `--llama` run is kept when this one does not repeat it.

`--llama` adds the earlier comparison against a real llama.cpp server (SmolLM2).

Run by hand:  .venv/bin/python benchmarks/bench_overhead.py [--n 2000] [--rounds 3] [--llama]
Writes benchmarks/results/overhead.md.
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
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.core.types import (
    BuildConfig,  # noqa: E402
    GenerationParams,  # noqa: E402
)
from recharness.data.store import load_dataset  # noqa: E402
from recharness.execution.cache import ResponseCache  # noqa: E402
from recharness.execution.executor import CachedModel, run_samples  # noqa: E402
from recharness.models.registry import resolve_model  # noqa: E402
from recharness.tasks.llmrec.sequential import SequentialTask  # noqa: E402
from recharness.testing.fake_server import FakeServerProcess  # noqa: E402

OUT = Path(__file__).parent / "results" / "overhead.md"


async def bare(base_url: str, model: str, prompts: list[list[dict]], params: GenerationParams, conc: int) -> float:
    """The floor: the SDK alone, answers kept in memory, nothing parsed or stored."""
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


async def bare_http(base_url: str, model: str, prompts: list[list[dict]], params: GenerationParams, conc: int) -> float:
    """A tighter floor: the same transport the harness uses (httpx2, one JSON POST), nothing else."""
    import json

    import httpx2

    client = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=conc, max_keepalive_connections=conc), trust_env=False)
    sem = asyncio.Semaphore(conc)
    url = base_url + "/chat/completions"
    headers = {"authorization": "Bearer sk-local", "content-type": "application/json"}

    async def one(msgs):
        body = {"model": model, "messages": msgs, "max_tokens": params.max_tokens, "temperature": params.temperature,
                "top_p": params.top_p, "seed": params.seed, "repeat_penalty": 1.0}
        async with sem:
            r = await client.post(url, content=json.dumps(body).encode(), headers=headers)
            return json.loads(r.content)["choices"][0]["message"]["content"]

    t0 = time.perf_counter()
    await asyncio.gather(*(one(m) for m in prompts))
    dt = time.perf_counter() - t0
    await client.aclose()
    return dt


async def bare_http_workers(base_url: str, model: str, prompts: list[list[dict]], params: GenerationParams,
                            conc: int) -> float:
    """The same floor written as `conc` workers taking prompts in turn (no task or semaphore per prompt): at high
    concurrency the gathered loop's 2,000 tasks queueing on one semaphore cost it more than its requests."""
    import json

    import httpx2

    client = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=conc, max_keepalive_connections=conc), trust_env=False)
    url = base_url + "/chat/completions"
    headers = {"authorization": "Bearer sk-local", "content-type": "application/json"}
    todo = iter(prompts)

    async def worker():
        for msgs in todo:
            body = {"model": model, "messages": msgs, "max_tokens": params.max_tokens, "temperature": params.temperature,
                    "top_p": params.top_p, "seed": params.seed, "repeat_penalty": 1.0}
            r = await client.post(url, content=json.dumps(body).encode(), headers=headers)
            json.loads(r.content)["choices"][0]["message"]["content"]

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    dt = time.perf_counter() - t0
    await client.aclose()
    return dt


def harness(base_url: str, model: str, samples: list[dict], task, conc: int, tmp: Path, tag: str, use_cache: bool,
            transport: str = "process") -> float:
    """`run_samples` over the OpenAI-compatible backend, its posts made by `transport` (RECHARNESS_TRANSPORT)."""
    before = os.environ.get("RECHARNESS_TRANSPORT")
    os.environ["RECHARNESS_TRANSPORT"] = transport
    try:
        backend = resolve_model(f"openai:{model}@{base_url}", concurrency=conc)
    finally:
        if before is None:
            os.environ.pop("RECHARNESS_TRANSPORT")
        else:
            os.environ["RECHARNESS_TRANSPORT"] = before
    cache = ResponseCache(tmp / f"cache-{tag}.sqlite", buffered=True) if use_cache else None

    async def go() -> float:
        try:
            if getattr(backend, "_pump", None) is not None:  # its child started (imports paid) before the clock
                await backend._pump.start()
            t0 = time.perf_counter()
            await run_samples(samples, {task.name: task}, CachedModel(backend, cache), tmp / f"pred-{tag}.jsonl",
                              concurrency=conc, max_retries=0, build="bench")
            return time.perf_counter() - t0
        finally:
            await backend.aclose()

    dt = asyncio.run(go())
    if cache is not None:
        cache.close()
    return dt


def compare(base_url, model, samples, task, conc, rounds, tmp, use_cache, http_floor=False):
    """Wall times per side, order rotated each round: "bare" (the openai SDK) and "harness" (its default
    transport: a transport process); with `http_floor` also "http" (bare httpx2, gathered), "http_workers"
    (bare httpx2, workers) and "inline" (the harness posting from its own process)."""
    prompts = [s["messages"] for s in samples]
    sides = ["bare", "harness"] + (["http", "http_workers", "inline"] if http_floor else [])
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(rounds):
        for side in sides[r % len(sides):] + sides[: r % len(sides)]:
            if side == "bare":
                times[side].append(asyncio.run(bare(base_url, model, prompts, task.params, conc)))
            elif side == "http":
                times[side].append(asyncio.run(bare_http(base_url, model, prompts, task.params, conc)))
            elif side == "http_workers":
                times[side].append(asyncio.run(bare_http_workers(base_url, model, prompts, task.params, conc)))
            else:
                tag = f"c{conc}-{'cache' if use_cache else 'nocache'}-r{r}-{side}"
                times[side].append(harness(base_url, model, samples, task, conc, tmp, tag, use_cache,
                                           "inline" if side == "inline" else "process"))
    return times


def make_samples(n: int, max_tokens: int) -> tuple[SequentialTask, list[dict]]:
    ds = load_dataset("ml-1m")
    task = SequentialTask()
    task.params = GenerationParams(max_tokens=max_tokens)
    task.setup(ds)
    base = list(task.build(ds, BuildConfig(seed=0, limit=min(n, 1000), options={"history_len": 5})))
    # distinct prompts (no server-side or cache hits), as many as asked for
    samples = []
    for i in range(n):
        s = dict(base[i % len(base)])
        s["id"] = f"{s['id']}#{i}"
        s["messages"] = [*s["messages"][:-1], {**s["messages"][-1], "content": s["messages"][-1]["content"] + f"\n#{i}"}]
        samples.append(s)
    return task, samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--llama", action="store_true", help="also compare against a real llama.cpp server (slow)")
    args = ap.parse_args()

    task, samples = make_samples(args.n, 48)
    lines = [
        "# Harness overhead vs the bare openai client",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}, openai {openai.__version__}",
        "- server: the fake OpenAI-compatible server (`recharness.testing.fake_server`, its own process, "
        "127.0.0.1, zero latency): only client-side work is measured",
        f"- workload: {args.n} distinct LLMRec sequential prompts (ML-1M, seed 0); each answer is parsed and "
        f"catalog-matched; {args.rounds} rounds alternating order; medians",
        "- bare: `openai.AsyncOpenAI` + a semaphore, answers kept in memory. Harness: `run_samples` with "
        "cache lookup/write (all misses) or no cache, parsing, durable JSONL (group commit, fsync per batch)",
        "",
        "| concurrency | cache | bare openai req/s | bare httpx2 req/s (gathered / workers) | harness req/s | "
        "harness / bare openai | harness / bare httpx2 (the faster) | harness inline req/s | inline / bare httpx2 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios, http_ratios = [], []
    load0 = os.getloadavg()
    with FakeServerProcess(max_seconds=3600, max_requests=10_000_000) as srv, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bare(srv.base_url, "fake", [s["messages"] for s in samples[:50]], task.params, 4))  # warm-up
        for conc in args.concurrency:
            for use_cache in (True, False):
                t = compare(srv.base_url, "fake", samples, task, conc, args.rounds, Path(tmp), use_cache, http_floor=True)
                b, x, w, h, i = (statistics.median(t[k]) for k in ("bare", "http", "http_workers", "harness", "inline"))
                floor = min(x, w)
                ratios.append(b / h)
                http_ratios.append((floor / h, conc, use_cache))
                row = (f"| {conc} | {'on' if use_cache else 'off'} | {args.n / b:,.0f} | {args.n / x:,.0f} / "
                       f"{args.n / w:,.0f} | {args.n / h:,.0f} | {b / h:.3f} | **{floor / h:.3f}** | {args.n / i:,.0f} | "
                       f"{floor / i:.3f} |")
                print(row, flush=True)
                lines.append(row)
    load1 = os.getloadavg()
    worst = min(http_ratios)
    lines += [
        "", f"- load average (1, 5, 15 min) at the start: {load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}; at the end: "
        f"{load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f}",
        "", f"Lowest harness / bare openai ratio: **{min(ratios):.3f}**.",
        f"Lowest harness / bare httpx2 ratio (against the faster of its two loops): **{worst[0]:.3f}** (concurrency "
        f"{worst[1]}, cache {'on' if worst[2] else 'off'}; target >= 0.95).", "",
        "The harness speaks the OpenAI wire protocol with httpx2 directly (no SDK request/response models). Its "
        "default transport is a child process that only posts the bytes it is given and returns the raw reply "
        "(`recharness.models.transport_process`), so the harness's own work (parsing, the response cache, the "
        "durable record) runs on the other core; 'inline' is the harness posting from its own process "
        "(RECHARNESS_TRANSPORT=inline). Bare httpx2 is measured two ways, as gathered tasks on one semaphore and "
        "as workers taking prompts in turn; the ratio is against the faster of the two in the same run. The "
        "harness keeps as many requests again as the concurrency (at least 2) queued for the child, which lets "
        "the concurrency through to the server.", ""]
    old = OUT.read_text() if OUT.exists() else ""
    if args.llama:
        lines += llama_section()
    elif "## Against a real llama.cpp server" in old:  # kept from the last --llama run (up to the earlier readings)
        llama = old[old.index("## Against a real llama.cpp server"):].split("\n## Earlier readings")[0]
        lines += llama.rstrip("\n").split("\n") + [""]
    if "\n## Earlier readings" in old:  # the notes written by hand under earlier tables, kept as they were
        lines += old[old.index("\n## Earlier readings") + 1:].rstrip("\n").split("\n") + [""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


def llama_section(n: int = 24, conc: int = 4, rounds: int = 3, max_tokens: int = 48) -> list[str]:
    from recharness.models.server import LocalServer

    task, samples = make_samples(n, max_tokens)
    # The server gets one core and the client the other, as when the model runs on its own hardware.
    with LocalServer("smollm2-135m", n_threads=1) as srv, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bare(srv.base_url, "smollm2-135m", [s["messages"] for s in samples[:2]], task.params, 1))
        t = compare(srv.base_url, "smollm2-135m", samples, task, conc, rounds, Path(tmp), True)
    b_times, h_times = t["bare"], t["harness"]
    b, h = statistics.median(b_times), statistics.median(h_times)
    return [
        "## Against a real llama.cpp server",
        "",
        f"SmolLM2-135M, `python -m llama_cpp.server`, 1 thread; {n} prompts, max_tokens={max_tokens}, concurrency {conc}, "
        f"{rounds} rounds: bare {statistics.median(b_times):.2f} s, harness {statistics.median(h_times):.2f} s, "
        f"**ratio {b / h:.3f}** (completion tokens per side not recorded: equal work unconfirmed).",
        "",
    ]


if __name__ == "__main__":
    main()

"""`--executor ray` against the local executor, over 1, 2, 4 fake OpenAI servers; and a paper-scale estimate.

Throughput: the same work as bench_endpoints.py (LLMRec sequential prompts on ML-1M, cache on and
all misses, answers parsed and catalog-matched, durable JSONL), run (a) locally through `EndpointPool`
and (b) with `RayExecutor` (a local Ray instance on this machine, 127.0.0.1, one actor per endpoint),
total concurrency fixed per table. Actor start-up is timed apart (it is paid once per run).

Estimate: prompt tokens per sample counted on real builds (Qwen2.5 tokenizer, vocab only, of the
built-in GGUF; chat-template overhead included as 4 tokens a message), scaled to the paper settings.

Run by hand:  .venv/bin/python benchmarks/bench_ray.py   (a few minutes; Ray start ~10 s, ~1.5 GB)
Writes the "ray" section of benchmarks/results/scale.md (other sections are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # "localhost" stays 127.0.0.1
os.environ.setdefault("RAY_worker_niceness", "0")  # Ray's default (15) starves the actors on a shared machine
ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("RECHARNESS_HOME", str(ROOT / ".pytest-home"))
sys.path.insert(0, str(Path(__file__).parent))
from bench_endpoints import make_samples  # noqa: E402
from bench_prepare_stream import write_md_section  # noqa: E402
from machine import cpu_model  # noqa: E402

from recharness.core.io import read_jsonl  # noqa: E402
from recharness.execution.cache import ResponseCache  # noqa: E402
from recharness.execution.executor import CachedModel, run_samples  # noqa: E402
from recharness.models.endpoint_pool import EndpointPool  # noqa: E402
from recharness.models.openai_compat import OpenAICompatibleBackend  # noqa: E402
from recharness.testing.fake_server import FakeServerProcess  # noqa: E402

OUT = Path(__file__).parent / "results" / "scale.md"


def one(backend, task, samples, conc, tmp: Path, tag: str):
    cache = ResponseCache(tmp / f"cache-{tag}.sqlite", buffered=True)
    path = tmp / f"pred-{tag}.jsonl"

    async def go():
        try:
            return await run_samples(samples, {task.name: task}, CachedModel(backend, cache), path, concurrency=conc,
                                     max_retries=0, build="bench")
        finally:
            await backend.aclose()

    t0 = time.perf_counter()
    stats = asyncio.run(go())
    dt = time.perf_counter() - t0
    cache.close()
    ids = Counter(r["id"] for r in read_jsonl(path))
    assert stats.complete and ids == Counter({s["id"]: 1 for s in samples}), (tag, stats)
    return dt, stats


def table(title, servers_kw, task, samples, conc, tmp) -> list[str]:
    from recharness.execution.ray_executor import RayExecutor

    rows = [f"### {title}", "", "| endpoints | executor | samples/s | vs local, same endpoints | actor start-up s | "
            "answers per worker |", "|---:|---|---:|---:|---:|---|"]
    with ExitStack() as stack:
        servers = [stack.enter_context(FakeServerProcess(max_seconds=900, max_requests=10_000_000, **servers_kw))
                   for _ in range(4)]
        urls = [s.base_url for s in servers]
        for n in (1, 2, 4):
            local = (OpenAICompatibleBackend("fake", base_url=urls[0], max_concurrency=conc) if n == 1
                     else EndpointPool("fake", urls[:n], max_concurrency=conc, backoff_s=0.2))
            dt_l, _ = one(local, task, samples, conc, tmp, f"l-{title[:4]}-{n}")
            t0 = time.perf_counter()
            ex = RayExecutor("openai:fake", base_url=urls[:n], concurrency=max(1, conc // n), num_cpus=0)
            start = time.perf_counter() - t0
            dt_r, st = one(ex, task, samples, conc, tmp, f"r-{title[:4]}-{n}")
            rl, rr = len(samples) / dt_l, len(samples) / dt_r
            per = " / ".join(str(w["samples"]) for w in st.workers)
            for row in (f"| {n} | local | {rl:,.0f} | 1.00 | – | {len(samples) if n == 1 else '(pool)'} |",
                        f"| {n} | ray ({n} actor{'s' if n > 1 else ''}) | {rr:,.0f} | {rr / rl:.2f} | {start:.1f} | {per} |"):
                print(row, flush=True)
                rows.append(row)
    return rows + [""]


# ---- the paper-scale estimate ----------------------------------------------------------------------

def count_tokens(limit: int = 40) -> dict[str, dict]:
    """Mean prompt tokens per sample of each suite/task, on tiny real builds (ML-1M, amazon2023 sample)."""
    import llama_cpp

    from recharness.models.builtin import fetch_model
    from recharness.runner import pipeline

    llm = llama_cpp.Llama(model_path=str(fetch_model("qwen2.5-coder-0.5b-instruct")), vocab_only=True, verbose=False)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for suite, ds in (("recbench", "ml-1m"), ("llmrec", "ml-1m"), ("perrecbench", "amazon2023"),
                          ("recbench-plus", "ml-1m")):
            try:
                pipeline.build(suite, ds, Path(tmp) / suite, seed=0, limit=limit)
            except Exception as e:  # noqa: BLE001 - a suite that does not build here is reported, not fatal
                print(f"{suite}: not built ({e})", flush=True)
                continue
            by: dict[str, list[int]] = {}
            for s in read_jsonl(Path(tmp) / suite / "samples.jsonl"):
                n = sum(len(llm.tokenize(str(m.get("content", "")).encode(), add_bos=False, special=False)) + 4
                        for m in s.get("messages") or [])
                by.setdefault(s["task"], []).append(n)
            for t, v in by.items():
                out[f"{suite}:{t}"] = {"samples": len(v), "prompt_tokens": round(statistics.fmean(v), 1),
                                       "dataset": ds}
            print(json.dumps({k: v for k, v in out.items() if k.startswith(suite)}), flush=True)
    return out


#: the paper-scale workload: samples per model and completion tokens per sample (assumptions, stated)
WORKLOAD = [
    # (suite:task whose measured prompt length is used, samples per model, completion tokens, what)
    ("recbench:ctr", 5 * 20_000, 1, "RecBench pair-wise CTR, 5 datasets × 20,000 pairs (P(Yes): 1 scored token)"),
    ("recbench:seqrec", 5 * 5_000, 60, "RecBench full-catalog ranking, 5 datasets × 5,000 (≈60 answer tokens)"),
    ("llmrec:sequential", 6_040, 120, "LLMRec sequential, every ML-1M user (10 titles ≈120 tokens)"),
    ("llmrec:direct", 6_040, 60, "LLMRec direct ranking, every ML-1M user (20 candidates)"),
    ("recbench-plus:explicit", 5 * 2_000, 150, "RecBench+, 5 query types × 2,000 (answer ≈150 tokens)"),
    ("perrecbench:list", 3 * 1_000, 80, "PerRecBench point/pair/list × 1,000 groups (≈80 tokens)"),
]
MODELS = 17
#: cluster shape and serving speed assumed (vLLM, bf16, 8B-class model per GPU; large models counted in GPU-equivalents)
SHAPE = {"nodes": 4, "gpus_per_node": 8, "gpu": "H100 80GB", "prefill_tok_s": 20_000, "decode_tok_s": 2_500,
         "usd_per_gpu_h": 2.5, "gpu_equiv_per_model": 2.0}


def estimate(tokens: dict[str, dict]) -> list[str]:
    rows = ["| workload (per model) | samples | prompt tokens / sample (measured) | completion tokens / sample "
            "(assumed) | prompt Mtok | completion Mtok |", "|---|---:|---:|---:|---:|---:|"]
    tp = tc = 0.0
    for key, n, comp, what in WORKLOAD:
        pt = tokens.get(key, {}).get("prompt_tokens")
        if pt is None:  # fall back to any task of the suite
            alts = [v["prompt_tokens"] for k, v in tokens.items() if k.split(":")[0] == key.split(":")[0]]
            pt = statistics.fmean(alts) if alts else 500.0
        tp += n * pt
        tc += n * comp
        rows.append(f"| {what} | {n:,} | {pt:,.0f} | {comp} | {n * pt / 1e6:,.1f} | {n * comp / 1e6:,.2f} |")
    s = SHAPE
    gpus = s["nodes"] * s["gpus_per_node"]
    per_model_gpu_s = s["gpu_equiv_per_model"] * (tp / s["prefill_tok_s"] + tc / s["decode_tok_s"])
    total_gpu_h = MODELS * per_model_gpu_s / 3600
    wall_h = total_gpu_h / gpus
    rows += ["", f"Per model: {tp / 1e6:,.1f} M prompt + {tc / 1e6:,.2f} M completion tokens; all {MODELS} models: "
             f"{MODELS * tp / 1e9:,.2f} B prompt + {MODELS * tc / 1e6:,.0f} M completion tokens.", "",
             f"Cluster: {s['nodes']} nodes × {s['gpus_per_node']}× {s['gpu']} ({gpus} GPUs), one vLLM server per "
             f"8B-class model replica, all behind `--base-url` (or one Ray actor per endpoint); assumed per GPU "
             f"{s['prefill_tok_s']:,} prompt tok/s (prefill, with prefix caching off) and {s['decode_tok_s']:,} "
             f"completion tok/s at full batch; the 17 models average {s['gpu_equiv_per_model']} GPU-equivalents "
             f"(7–8B: 1, 13–14B: 2, 70B: 8 with tensor parallelism). "
             f"GPU time = GPU-equivalents × (prompt tokens / prefill rate + completion tokens / decode rate).", "",
             f"**≈ {total_gpu_h:,.0f} GPU-hours → ≈ {wall_h:,.1f} h wall time on {gpus} GPUs, ≈ "
             f"${total_gpu_h * s['usd_per_gpu_h']:,.0f} at ${s['usd_per_gpu_h']}/GPU-hour** (on-demand H100 "
             f"order of magnitude). The harness is not the bottleneck: one driver commits ~500–700 samples/s on "
             f"this 2-core machine (section endpoints), i.e. the {MODELS * sum(w[1] for w in WORKLOAD):,} samples "
             f"take ≈ {MODELS * sum(w[1] for w in WORKLOAD) / 500 / 3600:.1f} h of driver time in all, spread over "
             f"the same hours as the GPUs. Prefix caching (shared system prompts and histories) would cut the "
             f"prefill share, which dominates here."]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--delay", type=float, default=0.05, help="seconds per answer of the fake servers")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--md", type=Path, default=OUT)
    a = ap.parse_args()
    import ray

    from recharness.execution.ray_executor import init_ray

    t_all = time.perf_counter()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    init_ray(None)
    ray_start = time.perf_counter() - t0
    task, samples = make_samples(a.samples)
    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        parts += table(f"{int(a.delay * 1000)} ms per answer, {a.slots} slots per server, {a.samples} samples, "
                       "concurrency 16 in all", {"delay_s": a.delay, "slots": a.slots}, task, samples, 16, Path(tmp))
        parts += table(f"zero latency, {a.samples} samples, concurrency 16 in all", {}, task, samples, 16, Path(tmp))
    ray.shutdown()
    tokens = count_tokens()
    body = "\n".join([
        "## ray", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), Ray "
        f"{ray.__version__}, local Ray instance (127.0.0.1, no dashboard) started in {ray_start:.1f} s; "
        f"load average at the start {load0:.1f} (shared with other jobs)",
        "- `benchmarks/bench_ray.py`: the bench_endpoints work (LLMRec sequential prompts, ML-1M, cache on, all "
        "misses, parsing + catalog matching, durable JSONL) through the local executor (`EndpointPool`) and "
        "through `--executor ray` (one actor per endpoint, the driver the only writer); every run checked: each "
        "sample exactly once", "",
        *parts,
        "On one 2-core machine Ray cannot add compute: its actors share the cores with the driver, the fake "
        "servers and other jobs, and each answer crosses two more processes (actor ↔ driver). What it adds is "
        "placement: on a cluster each actor sits on its own node (next to its GPU model, or as the client of its "
        "endpoint), and the driver only commits. When servers are capacity-bound (the first table) the Ray "
        "executor scales with the endpoints like the local pool, at 0.65–0.9 of its rate here; at zero latency it measures per-sample overhead (one more process hop per shard, actor warm-up inside the timed run). A local Ray start sets `RAY_worker_niceness=0`: Ray's default (15) left the actors a fraction of the CPU beside the other jobs (first try: 0.19–0.67 of local).",
        "",
        "### paper-scale estimate", "",
        "Prompt tokens per sample measured on real builds (Qwen2.5 tokenizer, 4 tokens of chat template per "
        "message): " + ", ".join(f"{k} {v['prompt_tokens']:,.0f}" for k, v in sorted(tokens.items())) + ".", "",
        *estimate(tokens), "",
        f"(whole benchmark: {time.perf_counter() - t_all:.0f} s)"])
    write_md_section(a.md, "ray", body)
    print(body)


if __name__ == "__main__":
    main()

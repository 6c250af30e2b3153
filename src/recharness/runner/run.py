"""Run a model over built samples: cached, bounded-concurrent, resumable.

Predictions are appended one durable line per sample as each finishes, so
a killed run restarts where it stopped: samples already written are skipped,
a torn last line is cut and its sample redone, nothing is written twice.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recharness.models.base import Completion, GenerationParams, Messages, ModelBackend
from recharness.runner.cache import ResponseCache, cache_key
from recharness.runner.jsonl import JsonlAppender, read_jsonl, repair_torn_tail
from recharness.tasks.base import Parsed


@dataclass
class RunStats:
    total: int = 0
    skipped: int = 0
    done: int = 0
    cached: int = 0
    invalid: int = 0
    retried: int = 0
    wall_s: float = 0.0


class CachedModel:
    """A backend behind the response cache; the unit every task calls."""

    def __init__(self, backend: ModelBackend, cache: ResponseCache | None):
        self.backend = backend
        self.cache = cache

    def identity(self) -> dict:
        return self.backend.identity()

    async def generate(self, messages: Messages, params: GenerationParams) -> Completion:
        key = None
        if self.cache is not None:
            key = cache_key("generate", self.backend.identity(), params.model_dump(mode="json"), messages)
            hit = self.cache.get(key)
            if hit is not None:
                c = Completion(**hit)
                c.cached = True
                return c
        c = await self.backend.agenerate(messages, params)
        if self.cache is not None:
            rec = c.to_dict()
            rec["cached"] = False
            self.cache.put(key, rec)
        return c

    async def score_options(self, messages: Messages, options: list[str]):
        from recharness.models.base import OptionScores

        key = None
        if self.cache is not None:
            key = cache_key("options", self.backend.identity(), None, messages, {"options": options})
            hit = self.cache.get(key)
            if hit is not None:
                return OptionScores(logprobs=hit["logprobs"], latency_s=hit["latency_s"], cached=True)
        s = await self.backend.ascore_options(messages, options)
        if self.cache is not None:
            self.cache.put(key, {"logprobs": s.logprobs, "latency_s": s.latency_s})
        return s


def completed_ids(path: Path) -> set[str]:
    repair_torn_tail(path)
    if not Path(path).exists():
        return set()
    return {r["id"] for r in read_jsonl(path)}


async def _predict_one(model: CachedModel, task, sample: dict, max_retries: int) -> dict:
    """Generate, parse, and on a parse failure retry with the task's format reminder."""
    if hasattr(task, "predict"):
        # tasks that drive the model themselves (several calls per sample)
        if "max_retries" in inspect.signature(task.predict).parameters:
            return await task.predict(model, sample, max_retries=max_retries)
        return await task.predict(model, sample)
    messages = list(sample["messages"])
    params = task.generation_params(sample)
    attempts = []
    parsed: Parsed | None = None
    latency = 0.0
    ptoks = ctoks = 0
    cached_all = True
    for attempt in range(max_retries + 1):
        c = await model.generate(messages, params)
        latency += c.latency_s
        ptoks += c.prompt_tokens or 0
        ctoks += c.completion_tokens or 0
        cached_all &= c.cached
        parsed = task.parse(sample, c.text)
        attempts.append({"output": c.text, "valid": parsed.valid, "error": parsed.error, "finish_reason": c.finish_reason})
        if parsed.valid or task.format_reminder is None:
            break
        if attempt < max_retries:
            messages = messages + [
                {"role": "assistant", "content": c.text},
                {"role": "user", "content": task.format_reminder},
            ]
    return {
        "output": attempts[-1]["output"],
        "parsed": parsed.value,
        "valid": parsed.valid,
        "error": parsed.error,
        "attempts": len(attempts),
        "retry_outputs": [a["output"] for a in attempts[:-1]],
        "latency_s": round(latency, 6),
        "prompt_tokens": ptoks,
        "completion_tokens": ctoks,
        "cached": cached_all,
        "params": params.model_dump(mode="json"),
    }


async def run_samples(
    samples: list[dict],
    tasks: dict[str, object],
    model: CachedModel,
    out_path: Path,
    *,
    max_retries: int = 1,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> RunStats:
    """Predict every sample not yet in `out_path`; append each result as it completes."""
    stats = RunStats(total=len(samples))
    done = completed_ids(out_path)
    todo = [s for s in samples if s["id"] not in done]
    stats.skipped = len(samples) - len(todo)
    if on_progress and stats.skipped:
        on_progress(stats.skipped)
    limit = max(1, concurrency or model.backend.max_concurrency)
    identity = model.identity()
    t0 = time.perf_counter()
    queue: asyncio.Queue = asyncio.Queue()
    for s in todo:
        queue.put_nowait(s)

    with JsonlAppender(out_path) as out:

        async def worker():
            while True:
                try:
                    s = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                rec = await _predict_one(model, tasks[s["task"]], s, max_retries)
                rec = {"id": s["id"], "task": s["task"], "model": identity, **rec}
                out.write(rec)
                stats.done += 1
                stats.cached += bool(rec.get("cached"))
                stats.invalid += not rec.get("valid", True)
                stats.retried += rec.get("attempts", 1) > 1
                if on_progress:
                    on_progress(1)

        await asyncio.gather(*(worker() for _ in range(min(limit, max(1, len(todo))))))
    stats.wall_s = time.perf_counter() - t0
    return stats

"""Run a model over built samples: cached, bounded-concurrent, resumable, fault-tolerant.

Exactly once: the predictions file is locked while a run writes it; each
finished sample is committed as one line (group commit, off the event loop);
a killed run restarts where it stopped, skipping committed samples and
redoing the rest; records carry the build fingerprint so answers to an
older build are never mixed with a new one.

One bad sample never stops a run: a permanent failure (unreadable response,
prompt too long, HTTP 4xx, a crash in parsing) becomes an invalid record with
its error kind; a transient one that outlives its retries leaves the sample
undone for the next run; only an unreachable server stops the run early.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recharness.errors import BuildMismatch, ServerUnreachable, TransientError, one_line
from recharness.models.base import Completion, GenerationParams, Messages, ModelBackend
from recharness.runner.cache import ResponseCache, cache_key
from recharness.runner.jsonl import GroupCommitLog, read_jsonl
from recharness.tasks.base import Parsed


@dataclass
class RunStats:
    total: int = 0
    skipped: int = 0
    done: int = 0
    cached: int = 0
    invalid: int = 0
    #: samples whose first answer failed the format check and were asked again
    format_retried: int = 0
    #: per-sample failures recorded as invalid, by kind
    errors: Counter = field(default_factory=Counter)
    #: samples left for the next run (retries exhausted on transient failures), by kind
    undone: Counter = field(default_factory=Counter)
    #: request retries after transport failures (429, 5xx, timeouts, resets), by kind
    transport_retries: Counter = field(default_factory=Counter)
    #: why the run stopped early (server unreachable), else None
    stopped: str | None = None
    commits: int = 0
    wall_s: float = 0.0

    @property
    def retried(self) -> int:
        return self.format_retried

    @property
    def complete(self) -> bool:
        return not self.undone and self.stopped is None and self.skipped + self.done == self.total


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


def completed_ids(path: Path, build: str | None = None) -> set[str]:
    """Ids already answered in `path`; refuses a file written for another build."""
    if not Path(path).exists():
        return set()
    ids = set()
    for r in read_jsonl(path, tolerate_torn_tail=True):
        if build is not None and r.get("build") != build:
            raise BuildMismatch(
                f"{path} holds answers to another build of this run directory (build {r.get('build') or 'unknown'}, "
                f"samples now {build}): the samples were rebuilt. Move that file away, or run with --name NEW "
                "to keep both")
        ids.add(r["id"])
    return ids


def failure_record(e: BaseException, params: GenerationParams | None = None) -> dict:
    """The prediction record of a sample that could not be answered: invalid, with the error kind."""
    kind = getattr(e, "kind", None) or type(e).__name__
    return {"output": "", "parsed": None, "valid": False, "error": f"{kind}: {one_line(e)}", "error_kind": kind,
            "attempts": 0, "latency_s": None, "prompt_tokens": None, "completion_tokens": None, "cached": False,
            **({"params": params.model_dump(mode="json")} if params is not None else {})}


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
    build: str | None = None,
    fsync: bool = True,
) -> RunStats:
    """Predict every sample not yet in `out_path`; commit each result as it completes."""
    stats = RunStats(total=len(samples))
    cache = model.cache
    flush = cache.flush if cache is not None and cache.buffered else None
    log = GroupCommitLog(out_path, fsync=fsync, before_commit=flush)
    try:
        done = completed_ids(out_path, build)
        todo = [s for s in samples if s["id"] not in done]
        stats.skipped = len(samples) - len(todo)
        if on_progress and stats.skipped:
            on_progress(stats.skipped)
        limit = max(1, concurrency or model.backend.max_concurrency)
        identity = model.identity()
        stamp = {"build": build} if build is not None else {}
        t0 = time.perf_counter()
        pending = iter(todo)
        stop = asyncio.Event()

        async def worker():
            for s in pending:
                if stop.is_set():
                    return
                task = tasks[s["task"]]
                try:
                    rec = await _predict_one(model, task, s, max_retries)
                except TransientError as e:
                    stats.undone[e.kind] += 1
                    continue
                except ServerUnreachable as e:
                    stats.undone["server_unreachable"] += 1
                    stats.stopped = str(e)
                    stop.set()
                    return
                except Exception as e:  # noqa: BLE001 - one bad sample must not stop the run
                    rec = failure_record(e, _params_or_none(task, s))
                    stats.errors[rec["error_kind"]] += 1
                rec = {"id": s["id"], "task": s["task"], "model": identity, **stamp, **rec}
                log.submit(rec)
                stats.done += 1
                stats.cached += bool(rec.get("cached"))
                stats.invalid += not rec.get("valid", True)
                stats.format_retried += (rec.get("attempts") or 1) > 1
                if on_progress:
                    on_progress(1)

        await asyncio.gather(*(worker() for _ in range(min(limit, max(1, len(todo))))))
        stats.wall_s = time.perf_counter() - t0
    finally:
        log.close()
    stats.commits = log.commits
    stats.transport_retries = Counter(getattr(model.backend, "retries", None) or {})
    return stats


def _params_or_none(task, sample: dict) -> GenerationParams | None:
    try:
        return task.generation_params(sample)
    except Exception:  # noqa: BLE001 - only decorates a failure record
        return None

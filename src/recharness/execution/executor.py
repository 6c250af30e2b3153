"""Run a model over built samples: cached, bounded-concurrent, resumable, fault-tolerant.

Exactly once: the predictions file is locked while a run writes it; each
finished sample is committed as one line (group commit, off the event loop);
a killed run restarts where it stopped, skipping committed samples and
redoing the rest; records carry the build fingerprint so answers to an
older build are never mixed with a new one.

Every outcome is classified once: a refusal of the configuration (HTTP 401,
402, 403, 404, 405, 501: bad key, no credit, wrong model; a 400 or 422 saying the model is
unknown; log-probabilities asked for and not returned) stops the run at once with nothing
committed for it (EndpointRefused, exit 2), as does a response cache that cannot be read or
written (ConfigError); a transient failure (429, 5xx,
timeouts, resets, an unreadable or empty body, no choices) is retried and, if
it outlives its retries, leaves the sample undone for the next run (exit 3);
an unreachable server stops the run early (exit 4); an answer is committed,
valid or not. One bad sample never stops a run: a per-sample failure (a prompt
too long, HTTP 400, a crash in parsing) is an invalid record with its kind.

A backend that answers many samples in one call (a trained reference: `aanswer_samples(task,
samples) -> {id: record}`, each record the line's fields but id, task, model and build) is fed
batches of `backend.batch_size` samples of one task (None: the task whole), each committed as it
returns; the batches are cut from the samples as given, never from what a killed run left, so a
model whose answers depend on the batch gives the same answers after a resume (a batch partly
committed is asked whole again, its new answers alone committed).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TypeVar

from recharness.core.errors import (
    AnswerError,
    BuildMismatch,
    ConfigError,
    EndpointRefused,
    InputError,
    NameTaken,
    RecharnessError,
    SampleError,
    ServerUnreachable,
    TransientError,
    one_line,
)
from recharness.core.io import GroupCommitLog, read_jsonl
from recharness.core.paths import shown_path
from recharness.core.types import Completion, GenerationParams, Messages, Prediction, is_number
from recharness.execution.ask import ask
from recharness.execution.cache import ResponseCache, cache_key, cache_keys, key_text
from recharness.models.base import ModelBackend
from recharness.tasks.base import Task

T = TypeVar("T")
#: samples per cache read-ahead in `run_samples`
PREFETCH = 64


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
    #: samples a batched backend gives no answer by design (beyond its sample cap): nothing committed
    unanswered: int = 0
    #: request retries after transport failures (429, 5xx, timeouts, resets), by kind
    transport_retries: Counter = field(default_factory=Counter)
    #: why the run stopped early (server unreachable), else None
    stopped: str | None = None
    commits: int = 0
    wall_s: float = 0.0
    #: per-worker totals when an executor spread the run (Ray), else empty
    workers: list = field(default_factory=list)
    #: the build's tasks this model does not answer, left out of the run (a reference no task asks for)
    left_out: list = field(default_factory=list)

    @property
    def retried(self) -> int:
        return self.format_retried

    @property
    def complete(self) -> bool:
        return (not self.undone and self.stopped is None
                and self.skipped + self.done + self.unanswered == self.total)


class CachedModel:
    """A backend behind the response cache; the unit every task calls."""

    def __init__(self, backend: ModelBackend, cache: ResponseCache | None, *, read: bool = True):
        self.backend = backend
        self.cache = cache
        #: False: every call goes to the backend and its answer replaces the cached one (`run --redo-invalid`)
        self.read = read
        #: the keys `prefetch` computed, by the identities of the prompt's message dicts: (copies of those dicts,
        #: params, their dump, key). `generate` takes a key from here only when its messages and params still equal
        #: these, so it is the key `cache_key` would compute; it saves encoding and hashing the prompt twice
        self._keys: dict[tuple[int, ...], tuple[list[dict], GenerationParams, dict, str]] = {}

    def asking_again(self) -> "CachedModel":
        """This model past the cache: asks the backend, writes what it answers."""
        return CachedModel(self.backend, self.cache, read=False)

    def identity(self) -> dict:
        return self.backend.identity()

    def prefetch(self, requests: list[tuple[Messages, GenerationParams]]) -> None:
        """Look the `generate` calls about to be made up in the cache at once (`ResponseCache.prefetch`). Only
        a read-ahead: what it misses is read as before."""
        ahead = getattr(self.cache, "prefetch", None)
        if ahead is None or not requests:
            return
        dumps: dict[int, dict] = {}  # each params object dumped once (a run's samples share one)
        for _, params in requests:
            if id(params) not in dumps:
                dumps[id(params)] = params.model_dump(mode="json")
        keys = cache_keys("generate", self.backend.identity(), [(dumps[id(p)], m) for m, p in requests])
        known = {}
        for (messages, params), key in zip(requests, keys):
            if all(type(m) is dict and all(type(v) is str for v in m.values()) for m in messages):
                # str values: whole copies
                known[tuple(map(id, messages))] = ([dict(m) for m in messages], params, dumps[id(params)], key)
        self._keys = known
        ahead(keys)

    def _known_key(self, messages: Messages, params: GenerationParams) -> str | None:
        """The key `prefetch` computed for exactly these messages and params, else None."""
        if not self._keys:
            return None
        hit = self._keys.pop(tuple(map(id, messages)), None)
        if hit is None:
            return None
        copies, had, dumped, key = hit
        # params equal but not the same object: their dumps as the key encodes them decide (0.0 == -0.0, but the
        # key holds "0.0" or "-0.0")
        if (had is params or (had == params and key_text(dumped) == key_text(
                params.model_dump(mode="json")))) \
                and len(copies) == len(messages) \
                and all(a == b for a, b in zip(messages, copies)):
            return key
        return None

    def _failed(self, e: Exception, doing: str) -> ConfigError:
        """A cache that cannot be read or written fails every sample alike (a disk error, a damaged file): the
        run stops with nothing recorded for the sample, never an invalid answer a resume would not ask again."""
        where = shown_path(self.cache.path) if getattr(self.cache, "path", None) else "the response cache"
        return ConfigError(f"{where}: the response cache could not be {doing} ({type(e).__name__}: {one_line(e)}): "
                           "move it away to start a new one (or set RECHARNESS_CACHE elsewhere), or run with "
                           "--no-cache")

    def _get(self, key: str):
        if not self.read:
            return None
        try:
            return self.cache.get(key)
        except Exception as e:  # noqa: BLE001 - any failure of the cache's own is the run's, not the sample's
            raise self._failed(e, "read") from None

    def _put(self, key: str, value: dict) -> None:
        try:
            self.cache.put(key, value)
        except Exception as e:  # noqa: BLE001 - as in `_get`: the answer is not recorded, the next run asks again
            raise self._failed(e, "written") from None

    async def generate(self, messages: Messages, params: GenerationParams) -> Completion:
        key = None
        if self.cache is not None:
            key = self._known_key(messages, params) or cache_key(
                "generate", self.backend.identity(), params.model_dump(mode="json"), messages)
            hit = self._get(key)
            if hit is not None:
                try:
                    c = Completion(**hit)
                except (TypeError, ValueError):  # an entry of another shape: a miss, asked and replaced
                    c = None
                if c is not None:
                    c.cached = True
                    return c
        c = await self.backend.agenerate(messages, params)
        if self.cache is not None:
            rec = c.to_dict()
            rec["cached"] = False
            self._put(key, rec)
        return c

    async def score_options(self, messages: Messages, options: list[str]):
        from recharness.core.types import OptionScores

        key = None
        if self.cache is not None:
            # "rule": how option log-probs are read from a reply (2: every casing, a missing option bounded)
            key = cache_key("options", self.backend.identity(), None, messages, {"options": options, "rule": 2})
            hit = self._get(key)
            if isinstance(hit, dict) and isinstance(hit.get("logprobs"), dict) and "latency_s" in hit:
                return OptionScores(logprobs=hit["logprobs"], latency_s=hit["latency_s"], cached=True,
                                    extra=hit.get("extra") or {})
        s = await self.backend.ascore_options(messages, options)
        if self.cache is not None:
            self._put(key, {"logprobs": s.logprobs, "latency_s": s.latency_s, "extra": s.extra})
        return s


def with_model(backend: ModelBackend, work: Callable[[CachedModel], Awaitable[T]], *, use_cache: bool = True,
               buffered: bool = False) -> T:
    """The one place a backend meets the response cache: run `work(model)` to completion, then close both."""
    cache = ResponseCache(buffered=buffered) if use_cache else None
    model = CachedModel(backend, cache)

    async def go():
        try:
            return await work(model)
        finally:
            await backend.aclose()

    try:
        return asyncio.run(go())
    finally:
        if cache is not None:
            cache.close()


#: identity keys that say where a model is served, not what it is (a server may move between resumed runs)
_WHERE = ("base_url",)


def _what(identity: dict | None) -> dict:
    return {k: v for k, v in (identity or {}).items() if k not in _WHERE}


def check_same_model(path: Path, identity: dict, first: dict | None = None) -> None:
    """A predictions file holds one model's answers: resuming it with another model (another backend,
    model, file, fine-tune or settings in its identity) is refused, both named. `first`: the file's first
    record when the caller has read it."""
    if first is None:
        if not Path(path).exists():
            return
        first = next(iter(read_jsonl(path, tolerate_torn_tail=True)), None)
        if first is None:
            return
    if not isinstance(first.get("model"), dict):  # not a predictions file of ours (or damaged): say so
        raise InputError(path, 'its first record\'s "model" is not an object (the model that answered): not a '
                         "predictions file written by `recharness run`; give this run another --name, or --overwrite")
    had, now = _what(first.get("model")), _what(json.loads(json.dumps(identity, default=str)))
    if had != now:
        def show(ident: dict) -> str:
            return json.dumps(ident, sort_keys=True)[:300]

        raise NameTaken(f"{shown_path(path)} holds the answers of another model ({show(had)}), not of "
                        f"{show(now)}: a method is one model")


def answered(path: Path, build: str | None = None, *, redo: str = "run the model again into a new --name",
             identity: dict | None = None) -> dict[str, dict]:
    """The records of a predictions file by sample id, read once. Refuses a file written for another
    build (`redo`: what makes a new one), by another model than `identity` (when given), and one that
    answers a sample twice (edited or concatenated: which answer counts would be a guess); a torn last
    line (a killed writer) is dropped."""
    if not Path(path).exists():
        return {}
    out: dict[str, dict] = {}
    line_of: dict[str, int] = {}
    for k, r in enumerate(read_jsonl(path, tolerate_torn_tail=True), 1):
        if k == 1 and identity is not None:
            check_same_model(path, identity, r)
        if build is not None and r.get("build") != build:
            raise BuildMismatch(
                f"{path} holds answers to another build of this run directory (build {r.get('build') or 'unknown'}, "
                f"samples now {build}): the samples were rebuilt. Move that file away, or {redo}")
        rid = r.get("id")
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            raise InputError(path, f"a record without a sample id ({'none' if rid is None else type(rid).__name__}): "
                                   f"remove the line, or {redo}", line=k, field="id")
        if r["id"] in line_of:
            raise InputError(path, f"sample {r['id']!r} is answered twice (first on line {line_of[r['id']]}): remove "
                                   f"one, or {redo}", line=k, field="id")
        line_of[r["id"]] = k
        if "valid" in r and not isinstance(r["valid"], bool):  # "false" as text would count as a valid answer
            raise InputError(path, f"valid is {json.dumps(r['valid'])[:40]}, not true or false: remove the line (its "
                                   f"sample is asked again), or {redo}", line=k, field="valid")
        parsed = r.get("parsed")
        for f in _LIST_FIELDS if isinstance(parsed, dict) else ():  # a ranked answer's lists, read as lists
            v = parsed.get(f)
            if v is not None and not isinstance(v, list):
                raise InputError(path, f"parsed.{f} is {json.dumps(v, default=str)[:40]}, not a list: remove the line "
                                       f"(its sample is asked again), or {redo}", line=k, field=f"parsed.{f}")
        for f in _NUMERIC_FIELDS:  # read as numbers by `score` (latency, cost): an edited value is named here
            v = r.get(f)
            if v is not None and not is_number(v):
                raise InputError(path, f"{f} is {json.dumps(v)[:40]}, not a number of seconds or tokens: remove the "
                                       f"line (its sample is asked again), or {redo}", line=k, field=f)
        out[r["id"]] = r
    return out


#: a prediction record's fields `score` averages: a number or null
_NUMERIC_FIELDS = ("latency_s", "completion_tokens", "prompt_tokens")
#: a parsed answer's fields the tasks read as lists (matched items, places, a ranking, titles, an ordering)
_LIST_FIELDS = ("items", "slots", "ranking", "strings", "item_ids", "ordering", "top")


def completed_ids(path: Path, samples: list[dict], build: str | None = None, identity: dict | None = None) -> set[str]:
    """Ids already answered in `path` (`answered`'s checks), for every executor: an answer filed under another
    task than its sample's is refused (it would count as done and never be scored)."""
    done = answered(path, build, identity=identity)
    for s in samples:
        if s["id"] in done and done[s["id"]].get("task") != s["task"]:
            raise InputError(path, f"sample {s['id']!r} is answered as task {done[s['id']].get('task')!r}, but "
                                   f"the build's sample is a {s['task']!r} sample: remove that line (its sample "
                                   "is asked again)", field="task")
    return set(done)


def commit_hook(cache, on_first_commit: Callable[[], None] | None) -> Callable[[], None] | None:
    """What runs in the writer thread before each commit: `on_first_commit` once (under the file's lock, before
    the first answer is written), then a buffered cache's flush (its entries on disk no later than the answers
    they gave); None when there is neither."""
    flush = cache.flush if cache is not None and getattr(cache, "buffered", False) else None
    if on_first_commit is None and flush is None:
        return None
    first = on_first_commit

    def before_commit() -> None:
        nonlocal first
        if first is not None:
            call, first = first, None
            call()
        if flush is not None:
            flush()

    return before_commit


def configuration_error(e: BaseException) -> bool:
    """A failure of the setup, not of one sample: a ConfigError or any other of recharness's own errors but a
    SampleError (a model that cannot load, a backend without the request kind the task needs, a GGUF with no
    chat template). Committed per sample, each would stand as an invalid answer a resume never asks again."""
    return isinstance(e, RecharnessError) and not isinstance(e, (SampleError, AnswerError))


def failure_record(e: BaseException, params: GenerationParams | None = None) -> dict:
    """The prediction record of a sample that could not be answered: invalid, with the error kind."""
    kind = getattr(e, "kind", None) or type(e).__name__
    return Prediction(valid=False, error=f"{kind}: {one_line(e)}", error_kind=kind, attempts=0, latency_s=None,
                      params=params.model_dump(mode="json") if params is not None else None).to_record()


async def predict_sample(model: CachedModel, task: Task, sample: dict, max_retries: int | None) -> Prediction:
    """One sample's prediction: by a backend that answers whole samples itself (an ID/SID fine-tune:
    `aanswer_sample(task, sample)`), else by the task's declared request kind. `max_retries` None: the
    task's own (a custom task's build may set it), else 1."""
    answer = getattr(model.backend, "aanswer_sample", None)
    if answer is not None:
        return await answer(task, sample)
    if task.request == "custom":
        return await task.predict(model, sample, max_retries=max_retries)
    params = task.generation_params(sample)
    if task.request == "options":
        scores = await model.score_options(sample["messages"], task.answer_options(sample))
        p = task.parse_options(sample, scores)
        return Prediction(output=json.dumps(scores.logprobs), parsed=p.value, valid=p.valid, error=p.error,
                          latency_s=scores.latency_s, cached=scores.cached, params=params.model_dump(mode="json"))
    asked = await ask(model, sample["messages"], params, lambda text: task.parse(sample, text),
                      reminder=task.format_reminder, max_retries=1 if max_retries is None else max_retries)
    return asked.prediction(params)


async def run_samples(
    samples: list[dict],
    tasks: dict[str, object],
    model: CachedModel,
    out_path: Path,
    *,
    max_retries: int | None = None,
    concurrency: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    build: str | None = None,
    fsync: bool = True,
    fresh: set[str] | None = None,
    on_first_commit: Callable[[], None] | None = None,
) -> RunStats:
    """Predict every sample not yet in `out_path`; commit each result as it completes (a batched backend's
    batch by batch: one failure of its call is an invalid record for each of the batch's samples, an id
    its answer leaves out is `unanswered`). A backend whose answers read no prompt (`reads_prompts =
    False`: a trained reference) gets no `prompt_version` on its records. The samples in `fresh` are asked
    past the response cache (`CachedModel.asking_again`: `run --redo-invalid`). `on_first_commit` runs once,
    in the writer thread, before the first answer is written (the pipeline records the run there, so a run
    refused before it answers anything, or stopped by another run's lock, changes nothing on disk)."""
    if getattr(model.backend, "executes_samples", False):  # e.g. the Ray executor: its driver loop, same contract
        return await model.backend.run_samples(samples, tasks, model, out_path, max_retries=max_retries,
                                               concurrency=concurrency, on_progress=on_progress, build=build,
                                               fsync=fsync, fresh=fresh, on_first_commit=on_first_commit)
    stats = RunStats(total=len(samples))
    log = GroupCommitLog(out_path, fsync=fsync, before_commit=commit_hook(model.cache, on_first_commit))
    try:
        # read under the lock: what a run that just ended wrote counts; another model's file is refused
        done = completed_ids(out_path, samples, build, identity=model.identity())
        stats.skipped = sum(s["id"] in done for s in samples)
        if on_progress and stats.skipped:
            on_progress(stats.skipped)
        batched = getattr(model.backend, "aanswer_samples", None)
        pending = iter(batches(samples, done, getattr(model.backend, "batch_size", None)) if batched is not None
                       else [[s] for s in samples if s["id"] not in done])
        if batched is None and getattr(model.cache, "prefetch", None) is not None \
                and getattr(model.backend, "aanswer_sample", None) is None:
            pending = read_ahead(pending, model, tasks)
        # a backend with a transport process gets its next request before an answer is back (`queue_ahead`)
        limit = max(1, concurrency or model.backend.max_concurrency) + getattr(model.backend, "queue_ahead", 0)
        identity = model.identity()
        stamp = {"build": build} if build is not None else {}
        # a latency timed while other requests were in flight says how many could be (`_latency_summary` marks it)
        load = ({"concurrency": max(1, concurrency or model.backend.max_concurrency)}
                if getattr(model.backend, "latency_under_load", False) else {})
        prompted = getattr(model.backend, "reads_prompts", True)
        t0 = time.perf_counter()
        stop = asyncio.Event()
        refused: list[EndpointRefused] = []

        async def answer(task, batch: list[dict]) -> dict[str, dict]:
            if batched is not None:
                return await batched(task, batch)
            s = batch[0]
            asked = model.asking_again() if fresh and s["id"] in fresh else model
            return {s["id"]: (await predict_sample(asked, task, s, max_retries)).to_record()}

        async def worker():
            for batch in pending:
                if stop.is_set():
                    return
                task = tasks[batch[0]["task"]]
                left = [s for s in batch if s["id"] not in done]
                try:
                    got = await answer(task, batch)
                except TransientError as e:
                    stats.undone[e.kind] += len(left)
                    continue
                except ServerUnreachable as e:
                    stats.undone["server_unreachable"] += len(left)
                    stats.stopped = str(e)
                    stop.set()
                    return
                except EndpointRefused as e:  # the configuration, not this sample: no answer, stop the run
                    refused.append(e)
                    stop.set()
                    return
                except Exception as e:  # noqa: BLE001 - one bad sample must not stop the run
                    if configuration_error(e):  # every sample would fail alike: no answer, stop the run
                        refused.append(e)
                        stop.set()
                        return
                    got = {s["id"]: failure_record(e, params_or_none(task, s)) for s in left}
                    stats.errors.update(r["error_kind"] for r in got.values())
                for s in left:
                    rec = got.get(s["id"])
                    if rec is None:
                        stats.unanswered += 1
                        if on_progress:
                            on_progress(1)
                        continue
                    commit_record(log, stats, answer_record(s["id"], s["task"], task, rec, identity=identity,
                                                            stamp=stamp, load=load, prompted=prompted), on_progress)

        await asyncio.gather(*(worker() for _ in range(limit)))
        stats.wall_s = time.perf_counter() - t0
        if refused:
            raise refused[0]
    finally:
        log.close()
    stats.commits = log.commits
    stats.transport_retries = Counter(getattr(model.backend, "retries", None) or {})
    return stats


def read_ahead(pending, model: CachedModel, tasks: dict, size: int = PREFETCH):
    """`pending`'s one-sample batches as they are, each `size` of them looked up in the response cache at
    once before they are handed out: the first question of each `generate` sample (its prompt as
    built), the call `predict_sample` makes first."""
    while True:
        chunk = list(islice(pending, size))
        if not chunk:
            return
        ahead = []
        for (s,) in chunk:
            task = tasks.get(s["task"])
            if getattr(task, "request", None) == "generate" and isinstance(s.get("messages"), list):
                try:
                    ahead.append((s["messages"], task.generation_params(s)))
                except Exception:  # noqa: BLE001 - the sample's own call reports it; a read-ahead only skips it
                    continue
        if ahead:
            try:
                model.prefetch(ahead)
            except Exception:  # noqa: BLE001 - a read-ahead that fails leaves each call to read (and report) itself
                pass
        yield from chunk


def batches(samples: list[dict], done: set[str], size: int | None) -> list[list[dict]]:
    """Each task's samples in their order, cut every `size` (None: the task whole); only the batches
    with a sample not in `done`. Cut from `samples`, not from what is left, so a resumed run asks the
    same batches as an uninterrupted one."""
    by_task: dict[str, list[dict]] = {}
    for s in samples:
        by_task.setdefault(s["task"], []).append(s)
    out = []
    for group in by_task.values():
        step = size or len(group)
        cut = (group[k:k + step] for k in range(0, len(group), step))
        out += [b for b in cut if any(s["id"] not in done for s in b)]
    return out


def answer_record(sample_id: str, task_name: str, task, rec: dict, *, identity: dict, stamp: dict, load: dict,
                  prompted: bool = True) -> dict:
    """The line a finished sample is committed as, for the local runner and the Ray executor alike: its id and
    task, the model that answered, the build (`stamp`), the task's prompt version (not for a backend that reads
    no prompt), the concurrency its latency was timed at (`load`; not for an answer the cache gave), then what
    the answer itself holds."""
    return {"id": sample_id, "task": task_name, "model": identity, **stamp,
            **({"prompt_version": prompt_version(task)} if prompted else {}),
            **(load if not rec.get("cached") else {}), **rec}


def commit_record(log, stats: RunStats, rec: dict, on_progress: Callable[[int], None] | None = None) -> None:
    """Hand one finished record to the predictions log and count it: the one place a sample is done,
    for the local runner and the Ray executor alike."""
    log.submit(rec)
    stats.done += 1
    stats.cached += bool(rec.get("cached"))
    stats.invalid += not rec.get("valid", True)
    stats.format_retried += (rec.get("attempts") or 1) > 1
    if on_progress:
        on_progress(1)


def prompt_version(task) -> str:
    """The task's prompt version as each answer records it (`Task.prompt_version`)."""
    return str(getattr(task, "prompt_version", None) or "1")


def params_or_none(task, sample: dict) -> GenerationParams | None:
    try:
        return task.generation_params(sample)
    except Exception:  # noqa: BLE001 - only decorates a failure record
        return None

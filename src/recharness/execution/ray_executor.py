"""Runs and training spread over a Ray cluster (`--executor ray`); Ray is an optional extra.

`recharness run ... --executor ray [--address auto|ray://HOST:PORT]`: the samples are cut into
shards and sent to Ray actors; each actor owns one backend instance, made inside the actor by
`resolve_model` (a GGUF / hf model loaded on the actor's node, or a client for one endpoint: with
several `--base-url`, one actor per endpoint). The driver stays the only writer:

- of the predictions file: every answer comes back to the driver, which commits it with the same
  `GroupCommitLog` as the local runner (locked file, group commit, torn tail cut on reopen), so
  exactly-once and resume hold unchanged; a killed driver takes its actors with it and the next
  run skips what was committed;
- of the response cache: before a sample is sent out, the driver replays it against the cache
  (every model call answered from the cache, or the first miss); a fully cached sample is
  committed at once, a partly cached one travels with the hits it needs. New entries come back
  with the answer and are written by the driver before the answer's line is committed.

A worker actor that dies mid-shard (node lost, process killed) loses nothing: the shard's samples
were not committed, so they go back to the queue and another actor answers them (a dead actor is
restarted by Ray up to `max_restarts` times, then dropped). An actor whose endpoint refuses
connections is retired and its sample redone elsewhere; when no actor is left the run stops as
the local one does (exit code 4). Per-actor totals (node, samples, shards, throughput, failures)
go into `RunStats.workers`; `worker_lines(stats)` formats them for the run summary.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, deque
from pathlib import Path

from recharness.core.errors import ConfigError, EndpointRefused, ServerUnreachable, TransientError
from recharness.core.types import Completion, GenerationParams, Messages, OptionScores
from recharness.models.base import ModelBackend

#: shards in flight per actor (one being answered, one waiting), so an actor never idles between two
DEPTH = 2
#: samples per shard at most (fewer when an actor's concurrency is lower)
MAX_SHARD = 32
#: seconds the workers may take to start (resolve their model) before the run gives up
START_TIMEOUT_S = 600.0
#: times one shard may be sent again after its actor died, before its samples are left undone
MAX_RESENDS = 3
#: an actor Ray is restarting answers ActorUnavailableError: its shard is sent again after this many seconds,
#: up to this many times (about a minute) before the actor counts as dead
UNAVAILABLE_WAIT_S = 0.2
MAX_UNAVAILABLE_WAITS = 300


def ray_module():
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'recharness[ray]' (or 'ray==2.60.*')") from None
    return ray


def init_ray(address: str | None = None) -> bool:
    """Connect to a Ray cluster (`auto`, `ray://HOST:PORT`, a GCS address) or start a local one
    (no address: this machine, 127.0.0.1 only, no dashboard, no usage stats). True when this call
    did it, so the caller shuts Ray down again; False when Ray was already initialised."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address in (None, "", "local"):
        # Ray starts its workers at niceness 15 (background priority); here the run is the job
        os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="WARNING",
                 configure_logging=False)
    else:
        ray.init(address=address, logging_level="WARNING", configure_logging=False)
    return True


class _Secret:
    """An API key on its way to an actor: never shown by repr/str (logs, errors)."""

    def __init__(self, value: str | None):
        self.value = value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class _ShardCache:
    """The response cache as an actor sees it: the hits the driver found for this sample, and a
    record of what the actor adds (sent back to the driver, the cache's only writer)."""

    buffered = False

    def __init__(self, hits: dict[str, dict]):
        self.hits = dict(hits)
        self.new: dict[str, dict] = {}

    def get(self, key: str) -> dict | None:
        return self.new.get(key) or self.hits.get(key)

    def put(self, key: str, value: dict) -> None:
        self.new[key] = value


class _Miss(BaseException):
    """A cache replay met a call the cache cannot answer (BaseException: task code never catches it)."""


class _CacheOnly(ModelBackend):
    """A backend that answers nothing: replaying a sample through `CachedModel(_CacheOnly, cache)`
    either finishes from the cache alone or stops at the first miss."""

    backend = "cache-only"

    def __init__(self, identity: dict):
        super().__init__(identity.get("model", "?"))
        self._identity = identity

    def identity(self) -> dict:
        return self._identity

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        raise _Miss

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        raise _Miss


class _Recording:
    """The driver's cache during a replay: reads through, remembers every hit."""

    buffered = False

    def __init__(self, cache):
        self.cache = cache
        self.hits: dict[str, dict] = {}

    def get(self, key: str) -> dict | None:
        v = self.cache.get(key)
        if v is not None:
            self.hits[key] = v
        return v

    def put(self, key: str, value: dict) -> None:  # never called: the replay backend answers nothing
        raise AssertionError("a cache replay does not write")


def post_inline_unless_chosen(environ) -> None:
    """An actor posts from its own process, not through a transport child (`transport_process`): Ray's
    parallelism is its actors, and an actor's CPU reservation (`num_cpus`) counts one process. A
    RECHARNESS_TRANSPORT set in the actor's environment is kept; an empty one is no choice."""
    if not environ.get("RECHARNESS_TRANSPORT"):
        environ["RECHARNESS_TRANSPORT"] = "inline"


class Worker:
    """One Ray actor: one backend instance, the build's tasks, samples in → records out."""

    def __init__(self, spec: str, resolve: dict, secret: _Secret, *, pool_url: str | None = None,
                 extra_body: dict | None = None):
        import ray

        from recharness.models.registry import resolve_model

        key_env = resolve.get("api_key_env") or "OPENAI_API_KEY"
        if secret.value is not None and not os.environ.get(key_env):
            os.environ[key_env] = secret.value
        if pool_url is not None:  # one endpoint of several: the pool's identity, so answers match the local run
            from recharness.models.endpoint_pool import EndpointPool

            transport = {k: resolve[k] for k in ("timeout_s", "max_attempts") if resolve.get(k) is not None}
            self.backend = EndpointPool(spec.partition(":")[2], [pool_url], api_key_env=key_env,
                                        max_concurrency=resolve.get("concurrency") or 8, extra_body=extra_body,
                                        **transport)
        else:
            post_inline_unless_chosen(os.environ)
            self.backend = resolve_model(spec, **resolve)
        #: the build's tasks, fetched once per object ref (every call names its ref, so a restarted actor,
        #: whose `__init__` ran again, gets them with its first shard)
        self._tasks: tuple[str, dict] | None = None
        self.slots = max(1, resolve.get("concurrency") or getattr(self.backend, "max_concurrency", 1) or 1)
        self._sem = None
        ctx = ray.get_runtime_context()
        self.where = {"node": ctx.get_node_id()[:8], "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    async def info(self) -> dict:
        return {"identity": self.backend.identity(), "slots": self.slots, **self.where,
                "transport_process": getattr(self.backend, "_pump", None) is not None}

    async def generate(self, messages: Messages, params: GenerationParams) -> Completion:
        """One chat call on this actor's backend (a single request, e.g. a judge's, outside a run's shards)."""
        return await self.backend.agenerate(messages, params)

    async def score_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await self.backend.ascore_options(messages, options)

    async def _tasks_of(self, tasks_ref: list) -> dict:
        """The task table behind `[ref]` (wrapped in a list so Ray does not resolve it on every call)."""
        ref = tasks_ref[0]
        key = ref.hex()
        if self._tasks is None or self._tasks[0] != key:
            self._tasks = (key, await ref)
        return self._tasks[1]

    async def predict(self, shard: list[tuple[dict, dict]], tasks_ref: list, max_retries: int | None) -> list[tuple]:
        """[(outcome, sample id, payload, new cache entries)] for a shard of (sample, cache hits); `tasks_ref`
        is `[ray.put(tasks)]`, sent with every shard."""
        import asyncio

        from recharness.execution.executor import (
            CachedModel,
            configuration_error,
            failure_record,
            params_or_none,
            predict_sample,
        )

        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        tasks = await self._tasks_of(tasks_ref)

        async def one(sample: dict, hits: dict):
            cache = _ShardCache(hits)
            task = tasks[sample["task"]]
            async with self._sem:
                try:
                    rec = (await predict_sample(CachedModel(self.backend, cache), task, sample,
                                                max_retries)).to_record()
                    return ("ok", sample["id"], rec, cache.new)
                except TransientError as e:
                    return ("undone", sample["id"], e.kind, cache.new)
                except ServerUnreachable as e:
                    return ("unreachable", sample["id"], str(e), cache.new)
                except EndpointRefused as e:
                    return ("refused", sample["id"], str(e), cache.new)
                except Exception as e:  # noqa: BLE001 - one bad sample must not stop the run
                    if configuration_error(e):  # the setup, not this sample: stops the run, as a refusal does
                        return ("refused", sample["id"], str(e), cache.new)
                    return ("failed", sample["id"], failure_record(e, params_or_none(task, sample)), cache.new)

        return list(await asyncio.gather(*(one(s, h) for s, h in shard)))

    async def totals(self) -> dict:
        from recharness.models.endpoint_pool import endpoint_totals

        return {"transport_retries": dict(getattr(self.backend, "retries", None) or {}),
                "endpoints": endpoint_totals(self.backend)}

    async def close(self) -> bool:
        await self.backend.aclose()
        return True


class RayExecutor(ModelBackend):
    """A model served by Ray actors, as one backend: `pipeline.run` and `run_samples` take it like any
    other, and `run_samples` hands the whole run to `run` here (the driver loop)."""

    backend = "ray"
    #: run_samples delegates to `self.run_samples` instead of calling the backend per sample
    executes_samples = True

    def __init__(self, spec: str, *, address: str | None = None, workers: int | None = None,
                 base_url: str | list[str] | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int | None = None, n_ctx: int | None = None, timeout_s: float | None = None,
                 max_attempts: int | None = None, num_cpus: float | None = None, num_gpus: float = 0, max_restarts: int = 1,
                 shard_size: int | None = None):
        from recharness.models.registry import base_urls, check_model_spec

        if workers is not None and workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {workers}")
        if spec.partition(":")[0] in ("baseline", "ft"):
            raise ConfigError(f"--executor ray runs chat models (a built-in, llamacpp:, hf:, openai:): "
                              f"{spec.partition(':')[0]}:… runs with --executor local")
        check_model_spec(spec)  # a typo is one error line here, not a worker dying after Ray has started
        ray = ray_module()
        self.spec = spec
        self.shard_size = shard_size
        self.max_restarts = max_restarts
        kind, _, rest = spec.partition(":")
        # the endpoints are resolved here, on the driver: a file of URLs is read (and OPENAI_BASE_URL taken) on
        # this machine, and the actors get the URLs themselves, not values to re-read on their own nodes
        urls = base_urls(base_url) if kind == "openai" and "@" not in rest else []
        if kind == "openai" and "@" not in rest and not urls:
            urls = [_default_base_url()]
        self._owns_ray = init_ray(address)
        resolve = {"base_url": urls or None, "api_key_env": api_key_env, "concurrency": concurrency, "n_ctx": n_ctx,
                   "timeout_s": timeout_s, "max_attempts": max_attempts}
        secret = _Secret(os.environ.get(api_key_env) if kind == "openai" else None)
        if num_cpus is None:  # an endpoint's client needs little CPU; a model in the actor needs its cores
            num_cpus = 0.25 if kind == "openai" else 1
        opts = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_restarts": max_restarts, "max_task_retries": 0,
                "scheduling_strategy": "SPREAD"}
        actor = ray.remote(Worker)
        if len(urls) > 1:  # one actor per endpoint, each with the pool's identity
            from recharness.models.endpoint_pool import EndpointPool

            if workers is not None and workers != len(urls):
                raise ConfigError(f"--workers {workers} with {len(urls)} endpoints: with several --base-url "
                                  "there is one Ray worker per endpoint (leave --workers out)")
            extra = EndpointPool(rest, urls).extra_body
            self.actors = [actor.options(**opts).remote(spec, resolve, secret, pool_url=u, extra_body=extra)
                           for u in urls]
            self.labels = [_redact(u) for u in urls]
        else:
            n = workers or max(1, len([x for x in ray.nodes() if x.get("Alive")]))
            self.actors = [actor.options(**opts).remote(spec, resolve, secret) for _ in range(n)]
            self.labels = [f"worker {i}" for i in range(n)]
        try:
            self.infos = ray.get([a.info.remote() for a in self.actors], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self._shutdown()
            raise ConfigError(f"the {len(self.actors)} Ray workers did not start within {START_TIMEOUT_S:.0f} s: "
                              f"does the cluster have {num_cpus} CPU{'s' if num_cpus != 1 else ''} "
                              f"{'and ' + str(num_gpus) + ' GPU ' if num_gpus else ''}free for each?") from None
        except Exception as e:
            self._shutdown()
            cause = _recharness_cause(e)
            if cause is not None:  # a worker could not build its model (a bad spec, a missing file): one error line
                raise ConfigError(f"a Ray worker could not start the model: {cause}") from None
            raise
        idents = {_key(i["identity"]) for i in self.infos}
        if len(idents) > 1:
            from recharness.models.registry import public_spec

            self._shutdown()
            raise ConfigError(f"the Ray workers resolved {public_spec(spec)!r} to different models: "
                              + "; ".join(str(i["identity"]) for i in self.infos))
        super().__init__(self.infos[0]["identity"].get("model", spec))
        self._identity = self.infos[0]["identity"]
        self.max_concurrency = sum(i["slots"] for i in self.infos)
        #: actors posting to HTTP servers time each request with others in flight (as the local executor's
        #: `latency_under_load` backends): at most every actor's slots at one server
        self.latency_under_load = self._identity.get("backend") == "openai"
        #: transport retries over all workers (filled at the end of a run)
        self.retries: Counter = Counter()
        self.worker_totals: list[dict] = []

    def identity(self) -> dict:
        return self._identity

    def _next_actor(self):
        """Single requests go round the actors in turn."""
        self._turn = (getattr(self, "_turn", -1) + 1) % len(self.actors)
        return self.actors[self._turn]

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        """One request answered by an actor (whole runs go through `run_samples`, shard by shard)."""
        return await self._next_actor().generate.remote(messages, params)

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await self._next_actor().score_options.remote(messages, options)

    async def run_samples(self, samples, tasks, model, out_path, **kw):
        return await run_samples_ray(self, samples, tasks, model, out_path, **kw)

    def _shutdown(self) -> None:
        ray = ray_module()
        if not ray.is_initialized():
            return
        for a in getattr(self, "actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
        if self._owns_ray:
            ray.shutdown()

    async def aclose(self) -> None:
        ray = ray_module()
        if ray.is_initialized() and self.actors:
            try:
                ray.get([a.close.remote() for a in self.actors], timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                pass
        self._shutdown()


def _death(e: BaseException) -> str:
    """Why a call to an actor failed, on one line: the exception its task raised (a RayTaskError's cause),
    else Ray's own message (an ActorDiedError says how the worker process exited), bounded."""
    from recharness.core.errors import one_line

    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException) and cause is not e:
        return f"{type(cause).__name__}: {one_line(cause, 240)}"
    return f"{type(e).__name__}: {one_line(e, 240)}"


def _recharness_cause(e: BaseException):
    """The RecharnessError behind a Ray error (an actor's constructor or task raised it), else None."""
    from recharness.core.errors import RecharnessError

    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, RecharnessError):
            return e
        e = getattr(e, "cause", None) or getattr(e, "__cause__", None) or getattr(e, "error", None)
    return None


def _default_base_url() -> str:
    """The endpoint of `openai:MODEL` given no URL, as `OpenAICompatibleBackend` picks it (on the driver)."""
    return os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"


def _key(identity: dict) -> str:
    import json

    return json.dumps(identity, sort_keys=True)


def _redact(url: str) -> str:
    from recharness.models.openai_compat import redact_url

    return redact_url(url)


async def _replay(model, identity: dict, task, sample: dict, max_retries: int | None):
    """(record, None) when the cache answers the whole sample, else (None, the hits found before the miss)."""
    from recharness.execution.executor import CachedModel, predict_sample

    rec_cache = _Recording(model.cache)
    try:
        pred = await predict_sample(CachedModel(_CacheOnly(identity), rec_cache), task, sample, max_retries)
    except _Miss:
        return None, rec_cache.hits
    except Exception:  # noqa: BLE001 - let a worker meet (and record) the failure as the local runner does
        return None, rec_cache.hits
    return pred.to_record(), None


async def run_samples_ray(ex: RayExecutor, samples: list[dict], tasks: dict, model, out_path: Path, *,
                          max_retries: int | None = None, concurrency: int | None = None, on_progress=None,
                          build: str | None = None, fsync: bool = True, fresh: set[str] | None = None,
                          on_first_commit=None):
    """The driver loop: the same contract as `execution.executor.run_samples`, the work done by `ex`'s actors
    (`on_first_commit` too: once, under the file's lock, before the first answer is written)."""
    from recharness.core.io import GroupCommitLog
    from recharness.execution.executor import RunStats, answer_record, commit_hook, commit_record, completed_ids

    ray = ray_module()
    from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

    stats = RunStats(total=len(samples))
    cache = model.cache
    log = GroupCommitLog(out_path, fsync=fsync, before_commit=commit_hook(cache, on_first_commit))
    identity = ex.identity()
    stamp = {"build": build} if build is not None else {}
    under_load = {"concurrency": ex.max_concurrency} if getattr(ex, "latency_under_load", False) else {}
    n = len(ex.actors)
    per = [{"worker": ex.labels[i], "node": ex.infos[i]["node"], "ip": ex.infos[i]["ip"], "samples": 0, "shards": 0,
            "failures": 0, "busy_s": 0.0, "first": None, "last": None, "retired": None} for i in range(n)]
    committed: set[str] = set()

    def commit(sid: str, task_name: str, rec: dict) -> None:
        if sid in committed:  # a shard answered twice (never expected): the first answer stands
            return
        committed.add(sid)
        commit_record(log, stats, answer_record(sid, task_name, tasks[task_name], rec, identity=identity, stamp=stamp,
                                                load=under_load), on_progress)

    try:
        # another model's file, or an answer filed under another task: refused, as the local executor does
        done = completed_ids(out_path, samples, build, identity)
        todo = [s for s in samples if s["id"] not in done]
        stats.skipped = len(samples) - len(todo)
        if on_progress and stats.skipped:
            on_progress(stats.skipped)
        t0 = time.perf_counter()
        by_id = {s["id"]: s for s in todo}
        refused: str | None = None  # an actor's endpoint refused the configuration: the run stops, exit 2
        # 1. the cache first, in the driver: what it answers whole is committed now
        outgoing: list[tuple[dict, dict]] = []
        for s in todo:
            if cache is None or (fresh and s["id"] in fresh):  # asked again (`--redo-invalid`): no cache hits sent
                outgoing.append((s, {}))
                continue
            rec, hits = await _replay(model, identity, tasks[s["task"]], s, max_retries)
            if rec is not None:
                commit(s["id"], s["task"], rec)
            else:
                outgoing.append((s, hits))
        # 2. the rest in shards over the actors
        if outgoing:
            # the task table goes with every shard (as one object ref, put once): an actor Ray restarted after
            # a death has it with its first shard, no setup call to resend; wrapped in a list, Ray passes the
            # ref itself and the actor fetches the table once
            tasks_arg = [ray.put(tasks)]
            slots = min(i["slots"] for i in ex.infos)
            size = ex.shard_size or max(1, min(MAX_SHARD, slots))
            queue: deque = deque((outgoing[i:i + size], 0) for i in range(0, len(outgoing), size))
            inflight: dict = {}
            load = [0] * n
            #: deaths counted per actor: the shards in flight when an actor dies all fail, one death
            deaths = [0] * n
            waits = [0] * n  # times each actor answered "unavailable" (being restarted)
            #: when the first shard answered after the actor's last death was sent (None: none yet): a shard
            #: sent before it that comes back "unavailable" was sent while Ray restarted the actor (that death)
            recovered_at: list[float | None] = [None] * n
            alive = set(range(n))
            stop_msg: str | None = None

            def feed(i: int) -> None:  # nothing more is sent once the run stops or the configuration was refused
                while i in alive and load[i] < DEPTH and queue and stop_msg is None and refused is None:
                    shard, resent = queue.popleft()
                    ref = ex.actors[i].predict.remote(shard, tasks_arg, max_retries)
                    inflight[ref] = (i, shard, resent, time.perf_counter(), deaths[i])
                    load[i] += 1

            for i in range(n):
                feed(i)
            while inflight:
                # the loop blocks in Ray's calls: yield once a round, so a Ctrl-C (asyncio.run cancels the main
                # task) stops the run here, with what is committed kept, instead of after the last shard
                await asyncio.sleep(0)
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    i, shard, resent, sent, epoch = inflight.pop(ref)
                    load[i] -= 1
                    try:
                        results = ray.get(ref)
                    except (RayActorError, RayTaskError) as e:
                        restarting = deaths[i] > 0 and (recovered_at[i] is None or sent < recovered_at[i])
                        if isinstance(e, ActorUnavailableError) and restarting and waits[i] < MAX_UNAVAILABLE_WAITS:
                            # Ray is restarting the actor after a death already counted: not a new death; its
                            # shard waits for it, a moment at a time, instead of retiring the actor under load
                            waits[i] += 1
                            queue.appendleft((shard, resent))
                            time.sleep(UNAVAILABLE_WAIT_S)
                            feed(i)
                            continue
                        if epoch == deaths[i]:  # a new death; a shard sent before the last one was lost with it
                            deaths[i] += 1
                            per[i]["failures"] += 1
                            recovered_at[i] = None
                        if per[i]["failures"] > ex.max_restarts or isinstance(e, RayTaskError):
                            alive.discard(i)
                            per[i]["retired"] = _death(e)
                        if resent < MAX_RESENDS:
                            queue.appendleft((shard, resent + 1))
                        else:
                            stats.undone["worker_died"] += len(shard)
                        if not alive:
                            stop_msg = stop_msg or f"every Ray worker died (last: {_death(e)})"
                        for j in alive:
                            feed(j)
                        continue
                    if deaths[i] and recovered_at[i] is None:
                        recovered_at[i], waits[i] = sent, 0
                    now = time.perf_counter()
                    p = per[i]
                    p["shards"] += 1
                    p["first"] = sent if p["first"] is None else p["first"]
                    p["last"] = now
                    p["busy_s"] += now - sent
                    retry: list[tuple[dict, dict]] = []
                    unreachable: str | None = None
                    hits_of = {s["id"]: h for s, h in shard}  # a resent sample keeps the cache hits it went with
                    for outcome, sid, payload, new in results:
                        if cache is not None:
                            for k, v in new.items():
                                cache.put(k, v)
                        s = by_id[sid]
                        if outcome in ("ok", "failed"):
                            p["samples"] += 1
                            if outcome == "failed" and sid not in committed:
                                stats.errors[payload["error_kind"]] += 1
                            commit(sid, s["task"], payload)
                        elif outcome == "undone":
                            stats.undone[payload] += 1
                        elif outcome == "refused":  # the configuration: no answer, nothing more is sent
                            refused = refused or payload
                            queue.clear()
                        else:  # unreachable: this worker's server is gone; another may still answer
                            alive.discard(i)
                            p["retired"] = "server_unreachable"
                            retry.append((s, hits_of.get(sid, {})))
                            unreachable = payload
                    if retry:
                        if alive:
                            queue.appendleft((retry, resent))
                        else:
                            stats.undone["server_unreachable"] += len(retry)
                            stop_msg = stop_msg or unreachable
                    feed(i)
                    for j in alive:
                        feed(j)
                if not alive and not inflight and queue and stop_msg is None:
                    stop_msg = "every Ray worker is gone"
            stats.stopped = stop_msg
        stats.wall_s = time.perf_counter() - t0
        if refused:
            raise EndpointRefused(refused)
        # 3. per-worker totals
        for i, a in enumerate(ex.actors):
            try:
                tot = ray.get(a.totals.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - a dead worker reports what the driver counted
                tot = {"transport_retries": {}, "endpoints": []}
            stats.transport_retries.update(tot["transport_retries"])
            per[i]["endpoints"] = tot["endpoints"]
    finally:
        log.close()
    stats.commits = log.commits
    for p in per:
        span = (p["last"] - p["first"]) if p["first"] is not None and p["last"] is not None else 0.0
        p["samples_per_s"] = round(p["samples"] / span, 2) if span > 0 else None
        p["busy_s"] = round(p["busy_s"], 3)
        del p["first"], p["last"]
    stats.workers = per
    ex.retries = Counter(stats.transport_retries)
    ex.worker_totals = per
    return stats


def worker_lines(stats) -> list[str]:
    """Lines for the run summary: one per Ray worker (node, samples, throughput); [] for a local run."""
    rows = getattr(stats, "workers", None) or []
    if not rows:
        return []
    out = [f"ray workers: {len(rows)}"]
    for r in rows:
        rate = f"{r['samples_per_s']:.1f} samples/s" if r.get("samples_per_s") else "-"
        extra = f", {r['failures']} failures" if r["failures"] else ""
        extra += f", retired ({r['retired']})" if r.get("retired") else ""
        out.append(f"  {r['worker']} on {r['ip']} (node {r['node']}): {r['samples']} samples in {r['shards']} shards, "
                   f"{rate}{extra}")
    return out

"""Several OpenAI-compatible endpoints as one backend: least-loaded, failover, per-endpoint totals.

Every server is the fake one (`recharness.testing.fake_server`, its own process on 127.0.0.1,
bounded in requests and time); faults are whole-server illnesses (`sick_after`, `die_after`) or
a kill -9 mid-run. Each sample must end exactly once in the predictions file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from recharness.core.errors import ConfigError, TransientError
from recharness.core.io import read_jsonl
from recharness.core.types import GenerationParams, Parsed
from recharness.execution.cache import ResponseCache
from recharness.execution.executor import CachedModel, run_samples
from recharness.models.endpoint_pool import EndpointPool, endpoint_lines, endpoint_totals
from recharness.models.openai_compat import OpenAICompatibleBackend
from recharness.models.registry import base_urls, resolve_model
from recharness.testing.refused import refusing_url
from recharness.tasks.base import Task
from recharness.testing.fake_server import FakeServerProcess

FAST = {"backoff_s": 0.05, "timeout_s": 2.0, "max_attempts": 4}


class EchoTask(Task):
    """Valid when the answer is the fake server's numbered list."""

    name = "echo"
    params = GenerationParams(max_tokens=8)

    def build(self, dataset, config):
        return iter(())

    def parse(self, sample, text):
        ok = text.startswith("1. Fargo")
        return Parsed(text[:20], ok, None if ok else "not the list")

    def score(self, samples, predictions):
        return {}


def samples(n: int) -> list[dict]:
    return [{"id": f"s{i}", "task": "echo", "messages": [{"role": "user", "content": f"question {i}"}]}
            for i in range(n)]


def pool(urls, concurrency=None, **kw) -> EndpointPool:
    return EndpointPool("fake", urls, max_concurrency=concurrency, **{**FAST, **kw})


def run(backend, items, path, *, cache=None, concurrency=None, on_progress=None):
    async def go():
        try:
            return await run_samples(items, {"echo": EchoTask()}, CachedModel(backend, cache), path, max_retries=0,
                                     build="b1", concurrency=concurrency, on_progress=on_progress)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def ids_in(path) -> Counter:
    return Counter(r["id"] for r in read_jsonl(path)) if path.exists() else Counter()


def once(items) -> Counter:
    return Counter({s["id"]: 1 for s in items})


# -- resolution -------------------------------------------------------------------------------------
def test_base_url_list_or_file_resolves_to_a_pool(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("# the pool\nhttp://127.0.0.1:8001/v1\n\n  http://127.0.0.1:8002/v1   # second\n"
                 "http://127.0.0.1:8001/v1\n")
    assert base_urls(str(f)) == ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    assert base_urls(["http://a:1/v1", str(f)]) == ["http://a:1/v1", "http://127.0.0.1:8001/v1",
                                                     "http://127.0.0.1:8002/v1"]
    assert base_urls(None) == [] and base_urls("http://x:1/v1") == ["http://x:1/v1"]

    one = resolve_model("openai:m", base_url=["http://127.0.0.1:8001/v1"])
    assert type(one) is OpenAICompatibleBackend and one.base_url == "http://127.0.0.1:8001/v1"
    both = resolve_model("openai:m", base_url=[str(f)], concurrency=4, max_attempts=2, timeout_s=3)
    assert isinstance(both, EndpointPool) and [e.url for e in both.endpoints] == base_urls(str(f))
    assert both.max_concurrency == 4 and both.max_attempts == 2
    assert resolve_model("openai:m", base_url=["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]).max_concurrency == 16
    spec_url = resolve_model("openai:m@http://127.0.0.1:9/v1")  # the spec's own URL
    assert type(spec_url) is OpenAICompatibleBackend and spec_url.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="names its server, and --base-url"):  # two servers named: which one?
        resolve_model("openai:m@http://127.0.0.1:9/v1", base_url=[str(f)])

    with pytest.raises(ConfigError, match="neither a URL"):
        base_urls(["http://a:1/v1", str(tmp_path / "missing.txt")])
    (tmp_path / "bad.txt").write_text("http://a:1/v1\nlocalhost:8000\n")
    with pytest.raises(ConfigError, match=r"bad.txt, line 2: not a URL"):
        base_urls(str(tmp_path / "bad.txt"))
    (tmp_path / "empty.txt").write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="lists no URLs"):
        base_urls(str(tmp_path / "empty.txt"))


def test_identity_does_not_name_the_endpoints(monkeypatch):
    a = pool(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"])
    b = pool(["http://127.0.0.1:3/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:1/v1"])
    assert a.identity() == b.identity() == {"backend": "openai", "model": "fake", "base_url": "pool",
                                            "extra_body": {"repeat_penalty": 1.0}}
    # one remote endpoint: the loopback-only extra body goes for none, so every endpoint decodes alike
    monkeypatch.setenv("RECHARNESS_TEST_KEY", "sk-x")
    c = pool(["http://127.0.0.1:1/v1", "http://10.0.0.1:1/v1"], api_key_env="RECHARNESS_TEST_KEY")
    assert c.identity() == {"backend": "openai", "model": "fake", "base_url": "pool"}
    assert all(e.client.extra_body == {} for e in c.endpoints)


# -- load -------------------------------------------------------------------------------------------
def test_load_spreads_and_the_cache_is_shared_across_endpoints(tmp_path):
    items = samples(90)
    cache = ResponseCache(tmp_path / "c.sqlite", buffered=True)
    with FakeServerProcess(delay_s=0.005) as a, FakeServerProcess(delay_s=0.005) as b, \
            FakeServerProcess(delay_s=0.005) as c:
        p = pool([a.base_url, b.base_url, c.base_url], concurrency=6)
        stats = run(p, items, tmp_path / "p.jsonl", cache=cache)
        assert stats.complete and stats.done == 90 and not stats.errors and not stats.transport_retries
        per = [t["answered"] for t in endpoint_totals(p)]
        assert sum(per) == 90 and min(per) >= 20, per  # even-ish: least-loaded
        assert all(t["failures"] == 0 and t["tokens"] == 15 * t["answered"] and t["seconds"] > 0
                   for t in endpoint_totals(p))

        # one at a time: ties go round in turn, exactly even
        p1 = pool([a.base_url, b.base_url, c.base_url], concurrency=1)
        run(p1, samples(30), tmp_path / "p1.jsonl")
        assert [t["requests"] for t in endpoint_totals(p1)] == [10, 10, 10]

        # the same model behind other endpoints, in another order: every answer from the cache
        p2 = pool([c.base_url, a.base_url], concurrency=4)
        again = run(p2, items, tmp_path / "p2.jsonl", cache=cache)
    cache.close()
    assert again.cached == 90 and sum(t["requests"] for t in endpoint_totals(p2)) == 0
    assert ids_in(tmp_path / "p.jsonl") == once(items) == ids_in(tmp_path / "p2.jsonl")
    recs = list(read_jsonl(tmp_path / "p.jsonl"))
    assert all(r["valid"] and r["model"] == p.identity() for r in recs)


def test_option_scoring_through_the_pool():
    with FakeServerProcess() as a, FakeServerProcess() as b:
        p = pool([a.base_url, b.base_url])

        async def go():
            try:
                return await asyncio.gather(*(p.ascore_options([{"role": "user", "content": f"like {i}?"}],
                                                               ["Yes", "No"]) for i in range(6)))
            finally:
                await p.aclose()

        scores = asyncio.run(go())
    assert all(s.logprobs == pytest.approx({"Yes": -0.5, "No": -1.0}) for s in scores)
    assert [t["answered"] for t in endpoint_totals(p)] == [3, 3]


# -- failures ---------------------------------------------------------------------------------------
def test_an_endpoint_dying_mid_run_loses_and_duplicates_nothing(tmp_path):
    items = samples(120)
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(delay_s=0.005) as a, FakeServerProcess(delay_s=0.005, die_after=15) as b, \
            FakeServerProcess(delay_s=0.005) as c:
        p = pool([a.base_url, b.base_url, c.base_url], concurrency=6)
        stats = run(p, items, path)
    assert stats.complete and stats.done == 120 and not stats.errors and not stats.undone
    assert ids_in(path) == once(items)
    assert all(r["valid"] for r in read_jsonl(path))
    ta, tb, tc = endpoint_totals(p)
    assert tb["failures"] > 0 and tb["taken_out"] >= 1 and not tb["healthy"]
    assert tb["answered"] <= 15 and ta["failures"] == tc["failures"] == 0
    assert ta["answered"] + tb["answered"] + tc["answered"] == 120
    assert sum(stats.transport_retries.values()) == tb["failures"]  # every failed try was made again elsewhere
    lines = endpoint_lines(p)
    assert lines[0].startswith("endpoints: 3") and "— out" in lines[2] and tb["url"] in lines[2]


def test_a_sick_endpoint_is_taken_out_then_probed_back_in(tmp_path):
    items = samples(400)
    with FakeServerProcess(delay_s=0.004) as a, \
            FakeServerProcess(delay_s=0.004, sick_after=5, sick_mode="503", sick_for_s=0.3) as b:
        p = pool([a.base_url, b.base_url], concurrency=4)
        t0 = time.perf_counter()
        stats = run(p, items, tmp_path / "p.jsonl")
        wall = time.perf_counter() - t0
    assert stats.complete and ids_in(tmp_path / "p.jsonl") == once(items)
    tb = endpoint_totals(p)[1]
    assert tb["failures_by_kind"].get("http_503", 0) >= 1 and tb["taken_out"] >= 1 and tb["probes"] >= 1
    assert wall > 0.4 and tb["answered"] > 5 + 20 and tb["healthy"], (wall, tb)  # back in, and used again


def test_a_hanging_endpoint_times_out_and_the_request_moves_on(tmp_path):
    items = samples(40)
    with FakeServerProcess() as a, FakeServerProcess(sick_after=3, sick_mode="hang", hang_s=20) as b:
        p = pool([a.base_url, b.base_url], concurrency=4, timeout_s=0.4, probe_timeout_s=0.2)
        t0 = time.perf_counter()
        stats = run(p, items, tmp_path / "p.jsonl")
        assert time.perf_counter() - t0 < 8
    assert stats.complete and ids_in(tmp_path / "p.jsonl") == once(items)
    tb = endpoint_totals(p)[1]
    assert tb["failures_by_kind"].get("timeout", 0) >= 1 and not tb["healthy"]


def test_every_endpoint_refusing_stops_the_run_with_a_clear_error(tmp_path):
    with contextlib.ExitStack() as held:
        urls = [held.enter_context(refusing_url()) for _ in range(3)]
        p = pool(urls, concurrency=4)
        t0 = time.perf_counter()
        stats = run(p, samples(20), tmp_path / "p.jsonl")
        assert time.perf_counter() - t0 < 10
        assert stats.stopped and stats.stopped.startswith("connection refused by every endpoint of the pool")
        assert all(u in stats.stopped for u in urls)
        assert stats.done == 0 and not ids_in(tmp_path / "p.jsonl")
        assert all(t["failures_by_kind"].get("connect", 0) >= 1 and t["probes"] >= 2 for t in endpoint_totals(p))


def test_every_endpoint_failing_leaves_samples_undone_then_a_rerun_finishes(tmp_path):
    items = samples(12)
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(sick_after=0, sick_mode="500") as a, FakeServerProcess(sick_after=0, sick_mode="500") as b:
        p = pool([a.base_url, b.base_url], concurrency=3, max_attempts=3)

        async def one():
            try:
                await p.agenerate([{"role": "user", "content": "x"}], GenerationParams(max_tokens=4))
            finally:
                await p.aclose()

        with pytest.raises(TransientError) as e:
            asyncio.run(one())
        msg = str(e.value)
        assert e.value.kind in ("http_500", "endpoints_down")
        assert a.base_url in msg and b.base_url in msg and "http_500" in msg, msg

        p = pool([a.base_url, b.base_url], concurrency=3, max_attempts=3)
        stats = run(p, items, path)
    assert sum(stats.undone.values()) == 12 and not stats.complete and not stats.errors
    assert set(stats.undone) <= {"http_500", "endpoints_down"}
    assert not ids_in(path)  # nothing written for a sample no endpoint could answer
    assert all(t["failures_by_kind"]["http_500"] >= 1 and t["answered"] == 0 for t in endpoint_totals(p))
    with FakeServerProcess() as a, FakeServerProcess() as b:  # the servers came back
        stats = run(pool([a.base_url, b.base_url]), items, path)
    assert stats.complete and ids_in(path) == once(items)


# -- end to end through the pipeline, with a kill -9 and credentials --------------------------------
@pytest.fixture
def built(ml1m, tmp_path):
    from recharness.runner.pipeline import build

    out = tmp_path / "run"
    build("llmrec", "ml-1m", out, tasks=["sequential"], limit=60, seed=0)
    return out


def test_pipeline_run_with_a_killed_endpoint_and_no_secret_anywhere(built, tmp_path, monkeypatch):
    from recharness.runner.pipeline import run as pipeline_run

    secret_key, secret_pw = "sk-TOPSECRET-4242", "pw-HUSH-77"
    monkeypatch.setenv("RECHARNESS_TEST_KEY", secret_key)
    monkeypatch.setenv("RECHARNESS_CACHE", str(tmp_path / "cache.sqlite"))
    with FakeServerProcess(delay_s=0.01) as a, FakeServerProcess(delay_s=0.01) as b, \
            FakeServerProcess(delay_s=0.01) as c:
        urls = [s.base_url.replace("://", f"://user:{secret_pw}@") for s in (a, b, c)]
        backend = resolve_model("openai:fake", base_url=urls, api_key_env="RECHARNESS_TEST_KEY", concurrency=6,
                                timeout_s=2.0, max_attempts=4)
        assert isinstance(backend, EndpointPool)
        done = 0

        def progress(n):
            nonlocal done
            done += n
            if done >= 15 and b.proc.poll() is None:
                b.stop()  # kill -9 one endpoint mid-run

        path, stats = pipeline_run(built, backend, "pool", on_progress=progress)
    n = len(list(read_jsonl(built / "samples.jsonl")))
    assert stats.complete and stats.done == n and done == n
    assert ids_in(path) == Counter({r["id"]: 1 for r in read_jsonl(built / "samples.jsonl")})
    tb = endpoint_totals(backend)[1]
    assert tb["failures"] > 0 and tb["answered"] < n // 2
    lines = "\n".join(endpoint_lines(backend))
    for text in (lines, json.dumps(endpoint_totals(backend)), json.dumps(backend.identity())):
        assert secret_key not in text and secret_pw not in text
    assert "***@127.0.0.1" in lines
    for f in [*built.rglob("*"), *tmp_path.glob("cache.sqlite*")]:
        if f.is_file():
            data = f.read_bytes()
            assert secret_key.encode() not in data and secret_pw.encode() not in data, f


def test_cli_run_with_repeated_base_url(built):
    with FakeServerProcess() as a, FakeServerProcess() as b:
        p = subprocess.run([sys.executable, "-m", "recharness", "run", "llmrec", "-d", "ml-1m", "-o", str(built),
                            "-m", "openai:fake", "--base-url", a.base_url, "--base-url", b.base_url, "--no-cache"],
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "endpoints: 2" in p.stdout and a.base_url in p.stdout and b.base_url in p.stdout
    assert ids_in(built / "predictions" / "openai-fake.jsonl") == Counter(
        {r["id"]: 1 for r in read_jsonl(built / "samples.jsonl")})


def test_an_unreadable_body_is_retried_without_taking_the_endpoint_out(tmp_path):
    """A cut JSON body (the fake server's `truncated-json`, once per prompt) is a glitch of that reply: the pool
    asks again and keeps the endpoint in rotation (it used to count a failure and take it out for a while)."""
    items = [{"id": f"s{i}", "task": "echo", "messages": [{"role": "user", "content": f"q{i}" + (
        " FAULT:truncated-json" if i % 2 else "")}]} for i in range(6)]
    with FakeServerProcess() as a:
        p = pool([a.base_url])
        stats = run(p, items, tmp_path / "p.jsonl", concurrency=1)  # each glitch followed by good replies
    assert stats.done == 6 and ids_in(tmp_path / "p.jsonl") == once(items)
    (t,) = endpoint_totals(p)
    assert t["failures"] == 0 and stats.transport_retries == Counter({"bad_response": 3})


def test_an_endpoint_that_keeps_answering_badly_is_taken_out():
    """One unreadable reply is a glitch (kept in rotation); two in a row take the endpoint out, so a pool with one
    broken and one good server answers every request from the good one (the broken one, answering at once, would
    otherwise win every retry as the least loaded)."""
    from recharness.core.types import Completion

    p = EndpointPool("fake", ["http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"], max_concurrency=8,
                     **{**FAST, "max_attempts": 5})
    bad, good = p.endpoints

    async def broken(messages, params):
        raise TransientError("bad_response", "unreadable")

    async def fine(messages, params):
        await asyncio.sleep(0.02)
        return Completion(text="1. Fargo", latency_s=0.02)

    bad.client.agenerate, good.client.agenerate = broken, fine

    async def go():
        try:
            return await asyncio.gather(*(p.agenerate([{"role": "user", "content": f"q{i}"}],
                                                      GenerationParams(max_tokens=4)) for i in range(32)),
                                        return_exceptions=True)
        finally:
            await p.aclose()

    out = asyncio.run(go())
    assert all(not isinstance(x, Exception) and x.text == "1. Fargo" for x in out)
    assert bad.taken_out >= 1 and bad.requests <= 4


def test_a_url_that_no_request_can_reach_is_a_configuration_error(tmp_path, monkeypatch):
    """A bad port, an unclosed IPv6 bracket, a character httpx refuses, a URL file that is not UTF-8: one
    clear error before any sample. Before, a bad port committed every sample as an invalid answer (exit 0)
    and the others ended in tracebacks."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for url, says in [("http://127.0.0.1:80000/v1", "Port out of range"), ("http://localhost:abc/v1", "'abc'"),
                      ("http://[::1/v1", "not a valid URL")]:
        with pytest.raises(ConfigError, match=says):
            resolve_model(f"openai:m@{url}")
        with pytest.raises(ConfigError, match=says):
            resolve_model("openai:m", base_url=[url])
    b = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:8000/v1\x7f", max_attempts=1)
    with pytest.raises(ConfigError, match="not a URL a request can go to"):
        asyncio.run(b.agenerate([{"role": "user", "content": "x"}], GenerationParams()))
    (tmp_path / "bin.txt").write_bytes(b"\xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        base_urls(str(tmp_path / "bin.txt"))

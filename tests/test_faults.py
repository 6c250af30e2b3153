"""Fault injection against the fake OpenAI-compatible server (127.0.0.1, bounded, stops by itself).

Each sample's prompt names the fault it meets (`FAULT:<name>`), so every test
knows which sample should end how: answered, recorded invalid with its error
kind, or left undone for the next run; and that no sample is ever written twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import Counter

import pytest

from recharness.core.errors import ConfigError, ServerUnreachable, one_line
from recharness.core.io import FileLocked, GroupCommitLog, read_jsonl
from recharness.core.types import GenerationParams, Parsed
from recharness.execution.cache import ResponseCache
from recharness.execution.executor import CachedModel, run_samples
from recharness.models.openai_compat import (
    OpenAICompatibleBackend,
    redact_url,
    retry_after_s,
)
from recharness.tasks.base import Task
from recharness.testing.fake_server import FakeServerProcess


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


def samples_for(faults: list[str], n_ok: int = 3) -> list[dict]:
    out = [{"id": f"{f}-{i}", "task": "echo", "messages": [{"role": "user", "content": f"q{i} FAULT:{f}"}]}
           for i, f in enumerate(faults)]
    out += [{"id": f"ok-{i}", "task": "echo", "messages": [{"role": "user", "content": f"plain {i}"}]} for i in range(n_ok)]
    return out


class YesNoTask(Task):
    """Asks P(Yes) / P(No) by log-probabilities, as RecBench's ctr does."""

    name = "yesno"
    request = "options"

    def build(self, dataset, config):
        return iter(())

    def answer_options(self, sample):
        return ["Yes", "No"]

    def parse(self, sample, text):
        return Parsed(None, False, "asked by log-probabilities")

    def score(self, samples, predictions):
        return {}


def run(samples, base_url, path, *, cache=None, concurrency=4, tasks=None, **backend_kw):
    kw = {"backoff_s": 0.01, "timeout_s": 2.0, "max_attempts": 3, **backend_kw}
    backend = OpenAICompatibleBackend("fake", base_url=base_url, max_concurrency=concurrency, **kw)

    async def go():
        try:
            return await run_samples(samples, tasks or {"echo": EchoTask()}, CachedModel(backend, cache), path,
                                     max_retries=0, build="b1")
        finally:
            await backend.aclose()

    return asyncio.run(go())


def ids_in(path) -> Counter:
    return Counter(r["id"] for r in read_jsonl(path))


def test_transport_faults_are_retried_and_counted(tmp_path):
    faults = ["429", "429-retry-after", "500", "503", "reset"]
    samples = samples_for(faults)
    with FakeServerProcess(transient=1) as srv:
        stats = run(samples, srv.base_url, tmp_path / "p.jsonl")
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert ids_in(tmp_path / "p.jsonl") == Counter({s["id"]: 1 for s in samples})
    assert all(r["valid"] and r["build"] == "b1" for r in recs.values())
    assert stats.transport_retries == Counter({"http_429": 2, "http_500": 1, "http_503": 1, "reset": 1})
    assert stats.format_retried == 0 and not stats.undone and not stats.errors and stats.complete


def test_retry_after_is_honoured():
    with FakeServerProcess(transient=1, faults={}) as srv:
        # the fake server asks for 1 s; our own backoff would wait ~0.01 s
        t0 = time.perf_counter()
        backend = OpenAICompatibleBackend("fake", base_url=srv.base_url, backoff_s=0.01, max_attempts=3)

        async def go():
            try:
                return await backend.agenerate([{"role": "user", "content": "x FAULT:429-retry-after"}],
                                               GenerationParams(max_tokens=4))
            finally:
                await backend.aclose()

        c = asyncio.run(go())
        waited = time.perf_counter() - t0
    assert c.text.startswith("1. Fargo")
    assert 1.0 <= waited < 5.0
    assert backend.retries == Counter({"http_429": 1})


def test_retry_after_header_forms():
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert 0 <= retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past: no wait
    assert retry_after_s({"retry-after": "soon"}) is None and retry_after_s({}) is None


def test_exhausted_retries_leave_samples_undone_then_a_rerun_finishes(tmp_path):
    samples = samples_for(["hang", "503"])
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(transient=5, hang_s=10) as srv:  # fails more often than we try
        stats = run(samples, srv.base_url, path, timeout_s=0.3, max_attempts=2)
    assert stats.undone == Counter({"timeout": 1, "http_503": 1})
    assert not stats.complete
    assert set(ids_in(path)) == {"ok-0", "ok-1", "ok-2"}
    with FakeServerProcess(transient=0) as srv:  # the server recovered
        stats = run(samples, srv.base_url, path)
    assert stats.skipped == 3 and stats.done == 2 and stats.complete
    assert ids_in(path) == Counter({s["id"]: 1 for s in samples})


def test_content_faults_become_invalid_records_not_crashes(tmp_path):
    faults = ["truncated-json", "empty-choices", "non-utf8", "400", "surrogate", "long-answer", "html-answer"]
    samples = samples_for(faults)
    path = tmp_path / "p.jsonl"
    cache = ResponseCache(tmp_path / "c.sqlite", buffered=True)
    with FakeServerProcess() as srv:  # a cut body, bad UTF-8 or no choices once: retried, then answered
        stats = run(samples, srv.base_url, path, cache=cache)
    cache.close()
    recs = {r["id"]: r for r in read_jsonl(path)}
    assert ids_in(path) == Counter({s["id"]: 1 for s in samples})
    kinds = {i: r.get("error_kind") for i, r in recs.items()}
    for i in ("truncated-json-0", "empty-choices-1", "non-utf8-2"):  # the transport failed, not the model
        assert recs[i]["valid"] and kinds[i] is None and recs[i]["output"].startswith("1. Fargo")
    assert stats.transport_retries == Counter({"bad_response": 2, "empty_choices": 1})
    assert kinds["400-3"] == "http_400" and stats.errors == Counter({"http_400": 1})
    assert recs["400-3"]["valid"] is False and recs["400-3"]["error"].startswith("http_400:")
    # a lone surrogate is stored escaped, read back as the same text, and cached
    assert recs["surrogate-4"]["output"].startswith("1. Fargo \ud800") and recs["surrogate-4"]["valid"]
    assert b"\\ud800" in path.read_bytes()
    assert len(recs["long-answer-5"]["output"]) == 100_000 and not recs["long-answer-5"]["valid"]
    assert recs["html-answer-6"]["valid"] is False
    assert len(ResponseCache(tmp_path / "c.sqlite")) == 3 + 6  # ok answers + the 3 retried + surrogate/long/html
    # a second run answers from the cache and writes nothing new
    with FakeServerProcess() as srv:
        stats = run(samples, srv.base_url, path)
    assert stats.done == 0 and stats.skipped == len(samples)


def test_a_body_that_stays_unreadable_is_never_an_answer(tmp_path):
    samples = samples_for(["truncated-json", "empty-choices", "non-utf8"], n_ok=2)
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(transient=9) as srv:  # more bad bodies than the client tries
        stats = run(samples, srv.base_url, path, max_attempts=3)
    assert stats.undone == Counter({"bad_response": 2, "empty_choices": 1}) and not stats.errors
    assert set(ids_in(path)) == {"ok-0", "ok-1"}  # nothing committed for them: the next run asks again
    with FakeServerProcess(transient=0) as srv:
        stats = run(samples, srv.base_url, path)
    assert stats.done == 3 and ids_in(path) == Counter({s["id"]: 1 for s in samples})


@pytest.mark.parametrize("status", [401, 403, 404, 405, 501, 400, 422])
def test_a_refusal_of_the_configuration_stops_the_run_with_nothing_committed(tmp_path, status):
    """400 and 422 are per-sample failures, unless the server says the model is unknown (then no request
    can succeed: a configuration failure like 404)."""
    from recharness.core.errors import EndpointRefused
    from recharness.testing.fake_server import REFUSALS

    path = tmp_path / "p.jsonl"
    with FakeServerProcess(refuse=status) as srv:
        with pytest.raises(EndpointRefused, match=rf"127\.0\.0\.1:\d+/v1 refuses the request for model 'fake': "
                                                  rf"HTTP {status}: ") as e:
            run(samples_for([], n_ok=12), srv.base_url, path)
    assert e.value.status == status and str(e.value).endswith(f"HTTP {status}: {REFUSALS[status]}")
    assert not ids_in(path)
    with FakeServerProcess() as srv:  # the corrected configuration answers every sample
        stats = run(samples_for([], n_ok=12), srv.base_url, path)
    assert stats.done == 12 and stats.complete and ids_in(path) == Counter({f"ok-{i}": 1 for i in range(12)})


def test_an_unknown_model_is_told_apart_from_other_400s():
    import httpx2 as httpx

    from recharness.models.openai_compat import unknown_model

    def reply(status, body):
        return httpx.Response(status, json=body)

    for body in ({"error": {"message": "The model `x` does not exist."}},  # vLLM
                 {"error": {"message": "model 'llama3:8b' not found, try pulling it first"}},  # Ollama
                 {"error": {"message": "Invalid model name passed in model=gpt-5x"}},  # LiteLLM
                 {"error": {"message": "no access", "code": "model_not_found"}},  # OpenAI's code
                 {"error": "Unknown model: qwen"}):
        assert unknown_model(reply(400, body)), body
    for body in ({"error": {"message": "prompt too long for the context window"}},
                 {"error": {"message": "This model's maximum context length is 4096 tokens, you requested 5000"}},
                 {"error": {"message": "'messages' not found in the request body"}}):
        assert not unknown_model(reply(400, body)), body


def test_a_server_without_log_probabilities_stops_the_run_with_nothing_committed(tmp_path):
    """A reply to logprobs=true with no `logprobs` in it: the server cannot score options, for any sample
    (a configuration failure), never an invalid `no_logprobs` answer per sample."""
    from recharness.core.errors import EndpointRefused

    samples = [{"id": f"q{i}", "task": "yesno", "messages": [{"role": "user", "content": f"Click {i}?"}]}
               for i in range(8)]
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(no_logprobs=True) as srv:
        with pytest.raises(EndpointRefused, match=r"127\.0\.0\.1:\d+/v1 answers model 'fake' with no "
                                                  r"log-probabilities: HTTP 200 to logprobs=true") as e:
            run(samples, srv.base_url, path, tasks={"yesno": YesNoTask()})
    assert e.value.status == 200 and not ids_in(path)
    with FakeServerProcess() as srv:  # a server that returns them: every sample answered with its P(Yes)
        stats = run(samples, srv.base_url, path, tasks={"yesno": YesNoTask()})
    recs = list(read_jsonl(path))
    assert stats.complete and ids_in(path) == Counter({s["id"]: 1 for s in samples})
    # the fake server's top log-probs: Yes -0.5, No -1.0 → P(Yes) = 1 / (1 + e^-0.5)
    assert all(r["valid"] and r["parsed"]["Yes"] == pytest.approx(0.6224593312) for r in recs)


def test_server_down_from_the_start_stops_quickly(tmp_path, refused_url):
    url = refused_url
    t0 = time.perf_counter()
    stats = run(samples_for(["x"] * 5, n_ok=20), url, tmp_path / "p.jsonl", backoff_s=0.05)
    assert time.perf_counter() - t0 < 10
    assert stats.stopped and "connection refused by " + url in stats.stopped
    assert stats.done == 0 and not (tmp_path / "p.jsonl").read_bytes()


def test_server_dying_mid_run_stops_and_a_rerun_completes_exactly_once(tmp_path):
    samples = samples_for([], n_ok=60)
    path = tmp_path / "p.jsonl"
    with FakeServerProcess(die_after=25) as srv:
        stats = run(samples, srv.base_url, path, backoff_s=0.05)
    assert stats.stopped and 0 < stats.done < 60
    first = ids_in(path)
    assert max(first.values()) == 1 and len(first) == stats.done
    with FakeServerProcess() as srv:
        stats2 = run(samples, srv.base_url, path)
    assert stats2.skipped == stats.done and stats2.complete
    assert ids_in(path) == Counter({s["id"]: 1 for s in samples})


def test_second_writer_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    with GroupCommitLog(path) as log:
        log.submit({"id": "a"})
        with pytest.raises(FileLocked, match="being written by another `recharness run`"):
            GroupCommitLog(path)
    assert ids_in(path) == Counter({"a": 1})


def test_group_commit_batches_fsyncs(tmp_path):
    path = tmp_path / "p.jsonl"
    with GroupCommitLog(path) as log:
        for i in range(2000):
            log.submit({"id": str(i), "text": "x\ud800"})
    assert len(ids_in(path)) == 2000
    assert log.commits < 2000  # many lines per fsync
    assert json.loads(path.read_bytes().split(b"\n")[0])["text"] == "x\ud800"


def test_credentials_never_leave_the_url(tmp_path):
    url = "http://user:s3cret@127.0.0.1:9/v1?api_key=k3y&x=1"
    assert redact_url(url) == "http://***@127.0.0.1:9/v1?api_key=***&x=hidden-6b86b273"  # sha256("1")[:8]
    assert redact_url(redact_url(url)) == redact_url(url)  # idempotent: a shown URL shown again is the same
    # a password holding "/", "?" or "#" ends a URL parser's authority early: hidden whole all the same
    assert redact_url("http://u:pa/ss#x?y@host.example:8080/v1") == "http://***@host.example:8080/v1"
    assert one_line("to http://u:pa/ss@h:1/v1 and https://a:b@[::1]:8/x") == "to http://***@h:1/v1 and https://***@[::1]:8/x"
    # only a version parameter keeps its value; a secret under any other name never shows
    assert (redact_url("https://x.example/openai?api-version=2024-02-01&code=ZZZ&deployment=d1")
            == "https://x.example/openai?api-version=2024-02-01&code=***&deployment=hidden-"
            + hashlib.sha256(b"d1").hexdigest()[:8])
    # a #fragment is never sent: never shown, and a base URL with one is refused (the request path would land in it)
    assert redact_url("http://127.0.0.1:9/v1#key=sk-frag-55") == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError) as e:
        OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1#key=sk-frag-55")
    assert "sk-frag-55" not in str(e.value) and "#fragment" in str(e.value)
    b = OpenAICompatibleBackend("m", base_url=url, backoff_s=0.01)
    assert b.local and b.extra_body == {"repeat_penalty": 1.0}  # loopback despite the user:password
    assert "s3cret" not in json.dumps(b.identity()) and "k3y" not in json.dumps(b.identity())
    with pytest.raises(ServerUnreachable) as e:
        asyncio.run(b.agenerate([{"role": "user", "content": "x"}], GenerationParams()))
    assert "s3cret" not in str(e.value) and "***@127.0.0.1:9" in str(e.value)

"""The run path under failures a review found: a setup failure stops the run instead of committing one invalid
answer per sample, `--redo-invalid` asks again past the response cache and only the run's own selection, a
predictions file being written is never replaced, and the OpenAI-compatible backend's odd replies and URLs."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from recharness.core.errors import ConfigError, SampleError, TransientError
from recharness.core.io import FileLocked, GroupCommitLog, read_jsonl, rewrite_log
from recharness.core.types import Completion
from recharness.execution.cache import ResponseCache
from recharness.execution.executor import CachedModel, run_samples
from recharness.models.base import ModelBackend
from tests.toy_suite import GuessTask


class Scripted(ModelBackend):
    """Answers each sample from `script` (by the prompt's first line), counting the calls."""

    backend = "scripted"
    max_concurrency = 1

    def __init__(self, script: dict[str, object]):
        super().__init__("scripted")
        self.script, self.calls = script, []

    async def agenerate(self, messages, params) -> Completion:
        key = messages[0]["content"].splitlines()[0]
        self.calls.append(key)
        answer = self.script[key]
        if isinstance(answer, Exception):
            raise answer
        return Completion(text=str(answer), latency_s=0.0)


def samples(n: int) -> list[dict]:
    return [{"id": f"s{k}", "task": "guess", "target": "b", "candidates": ["a", "b", "c", "d"],
             "messages": [{"role": "user", "content": f"sample {k}\n1. A\n2. B\n3. C\n4. D"}]} for k in range(n)]


def run(backend, todo, path, cache=None, **kw):
    return asyncio.run(run_samples(todo, {"guess": GuessTask()}, CachedModel(backend, cache), path, max_retries=0,
                                   **kw))


@pytest.mark.parametrize("error", [ConfigError("hf:typo: cannot load it"), ConfigError("no option scoring")])
def test_a_setup_failure_stops_the_run_and_commits_nothing(tmp_path, error):
    todo = samples(4)
    backend = Scripted({f"sample {k}": error for k in range(4)})
    with pytest.raises(ConfigError, match=str(error)):
        run(backend, todo, tmp_path / "p.jsonl")
    assert not (tmp_path / "p.jsonl").exists() or not (tmp_path / "p.jsonl").read_text()
    # a sample's own failure is still that sample's invalid answer, and the run goes on
    backend = Scripted({"sample 0": SampleError("http_400", "prompt too long"), **{f"sample {k}": "2" for k in (1, 2, 3)}})
    stats = run(backend, todo, tmp_path / "q.jsonl")
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "q.jsonl")}
    assert stats.done == 4 and not recs["s0"]["valid"] and recs["s0"]["error_kind"] == "http_400"


@pytest.mark.parametrize("fails", ["get", "put"])
def test_a_response_cache_that_fails_stops_the_run_and_records_no_answer(tmp_path, fails):
    """A disk error or a damaged cache file fails every sample alike: before, each sample was committed as an
    invalid answer (error_kind OperationalError) that a resume never asks again."""
    import sqlite3

    class Broken(ResponseCache):
        def get(self, key):
            if fails == "get":
                raise sqlite3.OperationalError("disk I/O error")
            return super().get(key)

        def put(self, key, value):
            if fails == "put":
                raise sqlite3.OperationalError("database or disk is full")
            super().put(key, value)

    cache = Broken(tmp_path / "cache.sqlite")
    backend = Scripted({f"sample {k}": "2" for k in range(3)})
    says = "disk I/O error" if fails == "get" else "database or disk is full"
    with pytest.raises(ConfigError, match=rf"cache\.sqlite: the response cache could not be "
                                          rf"{'read' if fails == 'get' else 'written'} \(OperationalError: {says}\)"):
        run(backend, samples(3), tmp_path / "p.jsonl", cache)
    assert not (tmp_path / "p.jsonl").exists() or not list(read_jsonl(tmp_path / "p.jsonl"))
    cache.close()


def test_a_cache_entry_of_another_shape_is_a_miss_asked_again(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = Scripted({"sample 0": "2"})
    run(backend, samples(1), tmp_path / "p.jsonl", cache)
    (key,) = [k for (k,) in cache._db.execute("SELECT key FROM responses")]
    cache.put(key, {"answer": "from another version"})  # no `text`: Completion(**hit) cannot be made
    again = Scripted({"sample 0": "3"})
    run(again, samples(1), tmp_path / "q.jsonl", cache)
    assert again.calls == ["sample 0"] and next(read_jsonl(tmp_path / "q.jsonl"))["parsed"] == "c"
    assert cache.get(key)["text"] == "3"  # replaced
    cache.close()


@pytest.fixture
def toy_build(tmp_path, ml1m, monkeypatch):
    """`build(limit)`: a toy-suite build of `limit` samples in tmp_path/run (its own response cache), its samples."""
    import sys
    from pathlib import Path

    from typer.testing import CliRunner

    from recharness.cli import app

    sys.path.insert(0, str(Path(__file__).parent))
    import toy_suite

    monkeypatch.setenv("RECHARNESS_CACHE", str(tmp_path / "cache.sqlite"))
    toy_suite.register()

    def build(limit: int):
        out = tmp_path / "run"
        res = CliRunner().invoke(app, ["build", "toy", "-d", "ml-1m", "-o", str(out), "--limit", str(limit)])
        assert res.exit_code == 0, res.output
        return out, list(read_jsonl(out / "samples.jsonl"))

    yield build
    toy_suite.unregister()


def _line(s: dict) -> str:
    return s["messages"][0]["content"].splitlines()[0]


def test_redo_invalid_asks_again_past_the_cache_and_keeps_other_answers(toy_build):
    """Through `pipeline.run` on a toy build: two answers were invalid; a `--limit 2` redo asks the first again
    (not from the cache, which holds the same invalid answer) and keeps the other invalid answer, outside the
    selection, as it was (it used to be dropped, leaving its sample unanswered)."""
    from recharness.runner import pipeline

    out, built = toy_build(4)
    first = Scripted({_line(s): ("no idea" if k in (1, 3) else "1") for k, s in enumerate(built)})
    pipeline.run(out, first, "m")
    pred = out / "predictions" / "m.jsonl"
    assert [r["valid"] for r in read_jsonl(pred)] == [True, False, True, False]
    again = Scripted({_line(s): "2" for s in built})
    _, stats = pipeline.run(out, again, "m", limit=2, redo_invalid=True)
    assert again.calls == [_line(built[1])] and stats.done == 1
    assert Counter(r["id"] for r in read_jsonl(pred)) == {s["id"]: 1 for s in built}  # no line twice, none lost
    recs = {r["id"]: r for r in read_jsonl(pred)}
    assert recs[built[1]["id"]]["valid"] and not recs[built[1]["id"]]["cached"]
    assert not recs[built[3]["id"]]["valid"]  # outside --limit 2: kept, not dropped


@pytest.mark.parametrize("answered_first", [0, 1])
def test_an_interrupted_redo_invalid_is_finished_past_the_cache_by_a_plain_resume(toy_build, answered_first):
    """`--redo-invalid` removes the invalid answers before asking again; killed then (before any answer, or after
    the first of the two), a plain `run` must ask the rest past the response cache (which holds their invalid
    answers), not take them back from it, and never ask or write a sample twice."""
    import json

    from recharness.runner import pipeline

    out, built = toy_build(3)
    pipeline.run(out, Scripted({_line(s): ("no idea" if k else "1") for k, s in enumerate(built)}), "m")
    pending = out / "predictions" / "m.redo.json"

    class Dying(Scripted):
        async def agenerate(self, messages, params):
            if len(self.calls) >= answered_first:
                raise KeyboardInterrupt  # Ctrl-C while this request is out
            return await super().agenerate(messages, params)

    dying = Dying({_line(s): "2" for s in built})
    with pytest.raises(KeyboardInterrupt):
        pipeline.run(out, dying, "m", redo_invalid=True)
    assert len(dying.calls) == answered_first
    assert sorted(json.loads(pending.read_text())) == sorted(s["id"] for s in built[1:])
    again = Scripted({_line(s): "2" for s in built})
    _, stats = pipeline.run(out, again, "m")  # no flag: the pending samples are still asked past the cache
    rest = [_line(s) for s in built[1:] if _line(s) not in dying.calls]
    assert sorted(again.calls) == sorted(rest) and stats.done == len(rest) and stats.cached == 0
    pred = out / "predictions" / "m.jsonl"
    assert Counter(r["id"] for r in read_jsonl(pred)) == {s["id"]: 1 for s in built}  # no line twice, none lost
    assert all(r["valid"] for r in read_jsonl(pred)) and not pending.exists()


def test_redo_invalid_at_the_executor(tmp_path):
    todo = samples(4)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = Scripted({"sample 0": "2", "sample 1": "no idea", "sample 2": "2", "sample 3": "no idea"})
    run(first, todo, tmp_path / "p.jsonl", cache)
    assert [r["valid"] for r in read_jsonl(tmp_path / "p.jsonl")] == [True, False, True, False]
    kept = [r for r in read_jsonl(tmp_path / "p.jsonl") if r["id"] != "s1"]
    rewrite_log(tmp_path / "p.jsonl", kept)
    second = Scripted({"sample 1": "2"})
    run(second, todo[:2], tmp_path / "p.jsonl", cache, fresh={"s1"})
    assert second.calls == ["sample 1"]  # asked, although the cache holds its first answer
    assert Counter(r["id"] for r in read_jsonl(tmp_path / "p.jsonl")) == {f"s{k}": 1 for k in range(4)}
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "p.jsonl")}
    assert recs["s1"]["valid"] and not recs["s1"]["cached"] and not recs["s3"]["valid"]
    third = Scripted({})
    run(third, [todo[1]], tmp_path / "r.jsonl", cache)  # the cache now holds the new answer
    assert third.calls == [] and next(read_jsonl(tmp_path / "r.jsonl"))["parsed"] == "b"
    cache.close()


def test_a_predictions_file_being_written_is_not_replaced(tmp_path):
    from recharness.core.io import remove_log

    p = tmp_path / "p.jsonl"
    log = GroupCommitLog(p)
    try:
        log.submit({"id": "a"})
        with pytest.raises(FileLocked):
            rewrite_log(p, [])
        with pytest.raises(FileLocked):
            remove_log(p)
    finally:
        log.close()
    assert rewrite_log(p, [{"id": "b"}]) == 1 and [r["id"] for r in read_jsonl(p)] == ["b"]


def test_a_writer_that_locks_a_file_replaced_since_its_open_writes_to_the_new_file(tmp_path, monkeypatch):
    """The gap between a writer's open and its lock: a `rewrite_log` (`run --redo-invalid`) that took the lock
    first replaces the file by rename, and the writer's lock then lands on the old, deleted file; every answer
    went there, reported done and lost. The writer now checks the file it locked is the one at the path."""
    from recharness.core import io as core_io

    p = tmp_path / "p.jsonl"
    p.write_text('{"id": "old"}\n')
    real, calls = core_io.fcntl.flock, []

    def flock(fd, op):
        if not calls:  # the writer's first lock: the rewrite runs in the gap, on the file the writer opened
            calls.append(fd)
            monkeypatch.setattr(core_io.fcntl, "flock", real)
            rewrite_log(p, [{"id": "kept"}])
        return real(fd, op)

    monkeypatch.setattr(core_io.fcntl, "flock", flock)
    log = GroupCommitLog(p)
    log.submit({"id": "new"})
    log.close()
    assert calls and [r["id"] for r in read_jsonl(p)] == ["kept", "new"]


# ---------------------------------------------------------------- the OpenAI-compatible backend


def test_an_api_key_headers_cannot_carry_is_refused_without_showing_it(monkeypatch):
    from recharness.models.openai_compat import OpenAICompatibleBackend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc\u2019def")
    with pytest.raises(ConfigError) as e:
        OpenAICompatibleBackend("m", base_url="https://api.example.com/v1")
    assert "sk-abc" not in str(e.value) and "non-ASCII" in str(e.value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc\n")
    with pytest.raises(ConfigError):
        OpenAICompatibleBackend("m", base_url="https://api.example.com/v1")


def test_a_base_url_with_a_query_keeps_it_after_the_path(monkeypatch):
    from recharness.models.openai_compat import OpenAICompatibleBackend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    b = OpenAICompatibleBackend("m", base_url="https://h.example.com/openai/v1/?api-version=2024-02-01")
    assert b._url == "https://h.example.com/openai/v1/chat/completions?api-version=2024-02-01"
    assert b._endpoint("models") == "https://h.example.com/openai/v1/models?api-version=2024-02-01"
    plain = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:8000/v1")
    assert plain._url == "http://127.0.0.1:8000/v1/chat/completions"


def _replying(b, replies):
    """`b`'s transport answering 200 with each of `replies` in turn (JSON bodies), counting the posts."""
    import json

    import httpx2

    posts = []

    async def post(url, content=None, headers=None):
        posts.append(url)
        return httpx2.Response(200, content=json.dumps(next(replies)).encode())

    b._client.post = post
    b._pump = None  # the posts from this process, where `post` stands in for httpx2
    return posts


def test_an_error_inside_a_200_is_no_answer_and_content_parts_are_read():
    from recharness.core.types import GenerationParams
    from recharness.models.openai_compat import OpenAICompatibleBackend

    error = {"choices": [{"finish_reason": "error", "error": {"message": "upstream overloaded"}, "message": {"content": ""}}]}
    parts = {"choices": [{"finish_reason": "stop", "message": {"content": [{"type": "text", "text": "1. Heat"},
                                                                           {"type": "text", "text": "\n2. Fargo"}]}}]}
    params = GenerationParams(max_tokens=8)
    b = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1", max_attempts=1)
    _replying(b, iter([error]))
    with pytest.raises(TransientError, match="upstream overloaded"):
        asyncio.run(b.agenerate([{"role": "user", "content": "x"}], params))
    # with tries left it is asked again (an in-band error is transient), and content parts are read in order
    b = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1", max_attempts=2, backoff_s=0.001)
    posts = _replying(b, iter([error, parts]))
    assert asyncio.run(b.agenerate([{"role": "user", "content": "x"}], params)).text == "1. Heat\n2. Fargo"
    assert len(posts) == 2 and b.retries == {"error_choice": 1}


def test_an_error_inside_a_200_stops_option_scoring_as_a_transient_failure():
    """Option scoring (CTR) reads the same in-band error as chat: undone, not 'this server returns no
    log-probabilities' (which stops the run as a configuration refusal)."""
    from recharness.models.openai_compat import OpenAICompatibleBackend

    b = OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1", max_attempts=1)
    _replying(b, iter([{"choices": [{"finish_reason": "error", "error": {"message": "upstream overloaded"}}]}]))
    with pytest.raises(TransientError, match="upstream overloaded"):
        asyncio.run(b.ascore_options([{"role": "user", "content": "x"}], ["Yes", "No"]))

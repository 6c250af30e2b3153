"""The runner's fast paths keep their guarantees: cache keys unchanged, read-ahead never stale,
group commit windows bounded, everything committed on close."""

from __future__ import annotations

import asyncio
import json
import time

from recharness.core.io import GroupCommitLog, dumps_line, dumps_safe, read_jsonl
from recharness.core.types import GenerationParams
from recharness.execution.cache import ResponseCache, cache_key, cache_keys
from recharness.execution.executor import CachedModel
from recharness.models.fake import FakeBackend


def test_cache_keys_are_byte_for_byte_those_of_earlier_releases():
    # computed by the cache_key of commit 786546c (json.dumps per call): a change here invalidates every cache
    ident = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
             "extra_body": {"repeat_penalty": 1.0}}
    msgs = [{"role": "system", "content": "Recommend films."}, {"role": "user", "content": 'Héllo ☃ \ud800 "q"'}]
    params = GenerationParams(max_tokens=48, stop=("\n\n",)).model_dump(mode="json")
    assert cache_key("generate", ident, params, msgs) == \
        "50c14d9c29499286208692d7be2eecaabc71a5800898898a62419fdd895ba283"
    assert cache_key("options", {"backend": "fake", "model": "f"}, None, [{"role": "user", "content": "Yes or No?"}],
                     {"options": ["Yes", "No"]}) == "d782f734621573fa495287c6f6d91251781f93ccb208c09393ff0f9b2b4193ad"


def test_cache_keys_of_many_requests_are_each_cache_key():
    ident = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
             "extra_body": {"repeat_penalty": 1.0, "top_k": 40}}
    shared = GenerationParams(max_tokens=48, stop=("\n\n",)).model_dump(mode="json")
    other = GenerationParams(max_tokens=7, temperature=0.7, top_p=0.9, seed=3).model_dump(mode="json")
    msgs = [[{"role": "system", "content": "Recommend films."}, {"role": "user", "content": 'Héllo ☃ \ud800 "q"'}],
            [{"role": "user", "content": "x" * 3000, "name": "a"}], [], [{"content": "\n\t\\", "role": "user"}]]
    requests = [(shared, m) for m in msgs] + [(other, m) for m in msgs] + [(dict(shared), msgs[0]), (None, msgs[1])]
    assert cache_keys("generate", ident, requests) == [cache_key("generate", ident, p, m) for p, m in requests]
    # the pinned key of an earlier release (the test above), through this path too
    pinned = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
              "extra_body": {"repeat_penalty": 1.0}}
    assert cache_keys("generate", pinned, [(shared, msgs[0])]) == \
        ["50c14d9c29499286208692d7be2eecaabc71a5800898898a62419fdd895ba283"]


def test_json_lines_are_what_json_dumps_wrote():
    for rec in ({"t": "héllo ☃", "n": [1, 2.5, None]}, {"t": "x\ud800"}, {"x": float("nan")}):
        text = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(rec, ensure_ascii=True, separators=(",", ":"))
        assert dumps_safe(rec) == text and dumps_line(rec) == text.encode("utf-8") + b"\n"


def _opened_not_empty(path) -> ResponseCache:
    """A cache whose file held an entry when it opened: its read-ahead queries the file."""
    first = ResponseCache(path)
    first.put("seed", {"text": "seed"})
    first.close()
    return ResponseCache(path, buffered=True)


def test_prefetch_answers_each_get_as_sqlite_would(tmp_path):
    c = _opened_not_empty(tmp_path / "c.sqlite")
    for i in range(1200):  # more than one flush statement and one prefetch query
        c.put(f"k{i}", {"text": str(i)})
    assert c.flush() == 1200 and len(c) == 1201
    assert c.prefetch([f"k{i}" for i in range(0, 1200, 2)] + ["missing", "later"]) == 600
    assert c.get("k0") == {"text": "0"} and c.get("k1") == {"text": "1"}  # read ahead, and not
    assert c.get("missing") is None
    c.put("later", {"text": "new"})  # absent when looked ahead: its put wins, before and after the flush
    assert c.get("later") == {"text": "new"}
    c.flush()
    assert c.get("later") == {"text": "new"}
    c.put("k2", {"text": "changed"})  # read ahead, then replaced: the new value
    assert c.get("k2") == {"text": "changed"}
    c.close()
    c2 = ResponseCache(tmp_path / "c.sqlite")
    assert c2.get("k2") == {"text": "changed"} and c2.get("later") == {"text": "new"} and len(c2) == 1202
    c2.close()


def test_the_cache_builds_temporary_btrees_in_ram_and_another_connection_reads_what_it_flushed(tmp_path):
    import sqlite3

    c = _opened_not_empty(tmp_path / "c.sqlite")
    with c._db_lock:  # per connection: 2 is MEMORY (the CPU per entry written: cache_cpu.md)
        assert c._db.execute("PRAGMA temp_store").fetchone()[0] == 2
        default = sqlite3.connect(":memory:").execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        assert c._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == default  # SQLite's: see the comment there
    for i in range(3000):
        c.put(f"k{i}", {"text": "x" * 200 + str(i)})
    assert c.flush() == 3000
    assert c.prefetch([f"k{i}" for i in range(0, 3000, 3)] + ["absent"]) == 1000  # an IN (...) of 1,001 keys
    plain = sqlite3.connect(tmp_path / "c.sqlite")  # while the cache is open: what a flush committed is there
    assert plain.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 3001
    assert json.loads(plain.execute("SELECT value FROM responses WHERE key = 'k2999'").fetchone()[0]) == \
        {"text": "x" * 200 + "2999"}
    plain.close()
    c.close()


def test_a_cache_opened_empty_knows_its_own_entries_without_a_query(tmp_path):
    """A first run's cache can hold only what it wrote: other keys are absent without a query (the read-ahead's
    query cost ~6 µs a sample), its own are found before and after their flush, as SQLite would answer."""
    c = ResponseCache(tmp_path / "c.sqlite", buffered=True)
    queries = []

    class Spy:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *a):
            queries.append(sql.split()[0])
            return self.db.execute(sql, *a)

        def close(self):
            self.db.close()

    c._db = Spy(c._db)
    assert c.prefetch([f"k{i}" for i in range(100)]) == 0 and c.get("k1") is None
    assert queries == []  # neither the read-ahead nor the get asked SQLite
    c.put("k1", {"text": "1"})
    assert c.get("k1") == {"text": "1"}
    c.flush()
    assert c.get("k1") == {"text": "1"} and c.get("k2") is None  # its own entry read back from the file
    assert queries.count("SELECT") == 1
    c.close()
    again = ResponseCache(tmp_path / "c.sqlite", buffered=True)  # not empty now: the read-ahead queries the file
    assert again._written is None and again.prefetch(["k1", "k2"]) == 1 and again.get("k1") == {"text": "1"}
    again.close()


def test_a_prompt_changed_after_its_read_ahead_gets_its_own_key(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite", buffered=True)
    model = CachedModel(FakeBackend(), cache)
    params = GenerationParams(max_tokens=8)
    same = [{"role": "user", "content": "first"}]
    changed = [{"role": "user", "content": "second"}]
    model.prefetch([(same, params), (changed, params)])
    changed[-1]["content"] = "second, edited"
    asyncio.run(model.generate(list(same), params))
    asyncio.run(model.generate(list(changed), params))
    cache.close()
    ident = FakeBackend().identity()
    want = {cache_key("generate", ident, params.model_dump(mode="json"), m) for m in (same, changed)}
    import sqlite3

    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert {k for (k,) in db.execute("SELECT key FROM responses")} == want


def test_generate_reuses_the_read_aheads_key_only_for_the_same_messages_and_params(tmp_path, monkeypatch):
    """The key `prefetch` computed is reused (one encoding and hash per prompt, not two) while the messages and
    params equal what was read ahead; a changed message, other params or a message with a non-text value are
    keyed again. Every stored key is the one `cache_key` gives."""
    import recharness.execution.executor as ex

    calls = []
    monkeypatch.setattr(ex, "cache_key", lambda *a, **k: calls.append(a) or cache_key(*a, **k))
    monkeypatch.setattr(ex, "cache_keys", lambda kind, ident, reqs: calls.extend(reqs) or cache_keys(kind, ident, reqs))
    cache = ResponseCache(tmp_path / "c.sqlite", buffered=True)
    model = CachedModel(FakeBackend(), cache)
    params = GenerationParams(max_tokens=8)
    kept = [[{"role": "system", "content": "s"}, {"role": "user", "content": f"q{i}"}] for i in range(3)]
    edited = [{"role": "user", "content": "to edit"}]
    other_params = [{"role": "user", "content": "asked with other params"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]
    signed = [{"role": "user", "content": "at temperature -0.0"}]
    model.prefetch([(m, params) for m in kept] + [(edited, params), (other_params, params), (parts, params),
                                                  (signed, params)])
    assert len(calls) == 7
    for m in kept:  # a copy of the list, as `ask` makes (the same dicts), and equal params in another object, as
        # `task.generation_params` gives each call when a sample or the run sets max_tokens
        asyncio.run(model.generate(list(m), params.model_copy()))
    assert len(calls) == 7  # no key computed again
    edited[0]["content"] = "edited"
    longer = GenerationParams(max_tokens=9)
    minus_zero = GenerationParams(max_tokens=8, temperature=-0.0)  # equal to params, but keyed as "-0.0"
    assert minus_zero == params
    asyncio.run(model.generate(edited, params))
    asyncio.run(model.generate(other_params, longer))
    asyncio.run(model.generate(parts, params))
    asyncio.run(model.generate(signed, minus_zero))
    assert len(calls) == 11  # each of these keyed again
    cache.close()
    ident = FakeBackend().identity()
    want = {cache_key("generate", ident, p.model_dump(mode="json"), m)
            for m, p in [(m, params) for m in kept] + [(edited, params), (other_params, longer), (parts, params),
                                                       (signed, minus_zero)]}
    import sqlite3

    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert {k for (k,) in db.execute("SELECT key FROM responses")} == want


def test_group_commit_window_gathers_lines_and_close_commits_at_once(tmp_path):
    path = tmp_path / "p.jsonl"
    log = GroupCommitLog(path, min_interval_s=0.2)
    log.submit({"id": "first"})
    time.sleep(0.05)
    assert [r["id"] for r in read_jsonl(path)] == ["first"]  # after a quiet spell: committed at once
    for i in range(300):
        log.submit({"id": str(i)})
    t0 = time.perf_counter()
    log.close()
    assert time.perf_counter() - t0 < 0.15  # close does not wait out the window
    assert log.commits <= 3 and log.committed == 301
    assert [r["id"] for r in read_jsonl(path)] == ["first"] + [str(i) for i in range(300)]

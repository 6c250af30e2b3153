"""A response cache in SQLite, keyed by backend + model + parameters + prompt.

Re-running a suite, resuming a killed run, or scoring with another metric
never pays for the same model call twice. The key holds no secrets: model
identities exclude API keys by construction.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.io import dumps_safe
from recharness.core.paths import cache_path, shown_path


#: what `json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))` builds on every call, built
#: once: the same bytes, so every key stays what it was
_KEY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
#: keys per `prefetch` query, rows per `flush` statement (SQLite allows 32766 parameters)
_PREFETCH_CHUNK = 500
#: keys a cache that opened empty remembers writing (`ResponseCache._written`); past it, it reads SQLite again
FRESH_KEYS = 1_000_000


def key_text(value) -> str:
    """`value` as a cache key encodes it (sorted keys, compact, text kept as text): two values that encode alike
    give one key."""
    return _KEY_JSON.encode(value)


def cache_key(kind: str, identity: dict, params: dict | None, messages: list, extra: dict | None = None) -> str:
    payload = key_text({"kind": kind, "model": identity, "params": params, "messages": messages, "extra": extra})
    # surrogatepass: untrusted dataset text may hold lone surrogates; the key must still be stable
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def cache_keys(kind: str, identity: dict, requests: list[tuple[dict | None, list]]) -> list[str]:
    """`cache_key(kind, identity, params, messages)` of each (params, messages) in `requests`: the same keys, with
    what they share encoded once (the identity, and each params dict once however many requests hold it: a
    run's samples share one), which halves a key's encoding in a run's read-ahead. The text is what `key_text`
    writes for the whole dict, whose keys sort as extra, kind, messages, model, params."""
    head = '{"extra":null,"kind":' + key_text(kind) + ',"messages":'
    model = ',"model":' + key_text(identity) + ',"params":'
    texts: dict[int, str] = {}  # by id: every params dict stays alive in `requests` meanwhile
    out = []
    for params, messages in requests:
        text = texts.get(id(params))
        if text is None:
            text = texts[id(params)] = key_text(params)
        payload = head + key_text(messages) + model + text + "}"
        out.append(hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest())
    return out


class ResponseCache:
    """JSON values by key in SQLite (WAL).

    `buffered=True` (the runner's mode) keeps new entries in memory, visible to
    `get` at once, until `flush` writes them in one transaction: the runner
    flushes from its commit thread, so the event loop never waits on SQLite writes.

    `prefetch(keys)` looks many keys up in one query ahead of their `get`s (the runner
    does it for the next samples): each answer is kept for one `get` of its key, so
    that `get` costs a dict lookup instead of a SQLite read (~60 µs of client CPU per
    request in a run at zero latency, benchmarks/results/overhead.md). It is only a
    read-ahead: a key it never saw, or whose answer was dropped, is read from SQLite.

    A cache that opens empty (a first run) knows every answer it could hold is one it wrote itself: it keeps
    their keys (`_written`, up to FRESH_KEYS) and answers any other key "absent" without a query (the
    read-ahead's query cost the harness ~6 µs a sample, benchmarks/results/overhead.md). Another process
    writing the same file meanwhile is not seen: its answers are asked again, a miss, never a wrong answer.
    """

    def __init__(self, path: Path | None = None, *, buffered: bool = False):
        self.path = Path(path) if path is not None else cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.buffered = buffered
        #: new entries not yet written, and those being written by a `flush` (visible to `get` until committed)
        self._pending: dict[str, str] = {}
        self._flushing: dict[str, str] = {}
        #: `prefetch`'s answers, each for one `get`: found values, and keys not in the file then
        self._ahead: dict[str, str] = {}
        self._absent: set[str] = set()
        self._lock = threading.Lock()  # the dicts above: held for dict work only, never across SQLite
        self._db_lock = threading.Lock()  # the connection
        self._flush_lock = threading.Lock()  # one flush at a time, so a later entry is written after an earlier
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # per connection, the file unchanged: `flush`'s many-row INSERT and `prefetch`'s IN (...) build temporary
            # b-trees, in RAM rather than in temporary files (measured: the CPU per entry put and flushed 100 at a
            # time, benchmarks/results/cache_cpu.md). The WAL's checkpoint interval stays SQLite's: a longer one
            # saved a little more CPU, but each checkpoint runs in a commit under the lock `get` waits on
            self._db.execute("PRAGMA temp_store=MEMORY")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                "created REAL DEFAULT (unixepoch('subsec')))"
            )
            empty = self._db.execute("SELECT 1 FROM responses LIMIT 1").fetchone() is None
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"{shown_path(self.path)}: the response cache is not a readable SQLite file ({e}): "
                              "move it away to start a new one (or set RECHARNESS_CACHE elsewhere), or run with "
                              "--no-cache") from None
        #: opened empty: the keys written since, the only ones the file can hold (None: not fresh, or too many)
        self._written: set[str] | None = set() if empty else None

    def get(self, key: str) -> dict | None:
        with self._lock:
            data = self._pending.get(key)
            if data is None:
                data = self._flushing.get(key)
            if data is None:
                data = self._ahead.pop(key, None)
            if data is None and key in self._absent:
                self._absent.discard(key)
                return None
            if data is None and self._written is not None and key not in self._written:
                return None  # opened empty, and never written since: not in the file
        if data is None:
            # not buffered here: in the file (a flush removes entries from `_flushing` only once committed)
            with self._db_lock:
                row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            data = row[0] if row else None
        return json.loads(data) if data is not None else None

    def prefetch(self, keys) -> int:
        """Look `keys` up in one query per 500 and keep the answers for their next `get` (those of an
        earlier prefetch are dropped: memory stays bounded by one prefetch); returns how many were found."""
        with self._lock:
            if self._written is not None:  # opened empty: only what this cache wrote can be found (`get` knows)
                self._ahead, self._absent = {}, set()
                return 0
        keys = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        with self._lock:  # buffered before the query (a flush may commit them while it runs): get reads those
            buffered = self._pending.keys() | self._flushing.keys()
        with self._db_lock:
            for i in range(0, len(keys), _PREFETCH_CHUNK):
                part = keys[i:i + _PREFETCH_CHUNK]
                found.update(self._db.execute(
                    f"SELECT key, value FROM responses WHERE key IN ({','.join('?' * len(part))})", part).fetchall())
        with self._lock:
            buffered |= self._pending.keys() | self._flushing.keys()  # and since: newer than the query's answer
            self._ahead = {k: v for k, v in found.items() if k not in buffered}
            self._absent = {k for k in keys if k not in found and k not in buffered}
        return len(found)

    def put(self, key: str, value: dict) -> None:
        data = dumps_safe(value)
        with self._lock:
            self._absent.discard(key)
            self._ahead.pop(key, None)
            if self._written is not None:
                self._written.add(key)
                if len(self._written) > FRESH_KEYS:  # bounded memory: read the file again from here on
                    self._written = None
            if self.buffered:
                self._pending[key] = data
                return
        with self._db_lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, data))

    def flush(self) -> int:
        """Write buffered entries in one transaction; returns how many. `get` and `put` go on meanwhile (the
        runner flushes from its commit thread): the entries stay readable until committed."""
        with self._flush_lock:
            with self._lock:
                if not self._pending:
                    return 0
                items, self._pending = self._pending, {}
                self._flushing = items
            try:
                rows = list(items.items())
                with self._db_lock:
                    self._db.execute("BEGIN")
                    try:
                        # one statement per 500 rows, not executemany's one per row: each statement lets the GIL
                        # go and takes it back from the event loop's thread (this runs in the commit thread), and
                        # that ping-pong cost the run ~70 µs of CPU per answer (benchmarks/results/overhead.md)
                        for i in range(0, len(rows), _PREFETCH_CHUNK):
                            part = rows[i:i + _PREFETCH_CHUNK]
                            self._db.execute("INSERT OR REPLACE INTO responses (key, value) VALUES "
                                             + ",".join(["(?,?)"] * len(part)), [x for row in part for x in row])
                        self._db.execute("COMMIT")
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
            except BaseException:
                with self._lock:  # kept for the next flush; an entry put since is newer and wins
                    for k, v in items.items():
                        self._pending.setdefault(k, v)
                    self._flushing = {}
                raise
            with self._lock:
                self._flushing = {}
            return len(items)

    def __len__(self) -> int:
        self.flush()
        with self._db_lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self.flush()
        with self._db_lock:
            self._db.close()

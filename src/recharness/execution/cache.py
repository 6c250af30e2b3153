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


def cache_key(kind: str, identity: dict, params: dict | None, messages: list, extra: dict | None = None) -> str:
    payload = json.dumps(
        {"kind": kind, "model": identity, "params": params, "messages": messages, "extra": extra},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    # surrogatepass: untrusted dataset text may hold lone surrogates; the key must still be stable
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """JSON values by key in SQLite (WAL).

    `buffered=True` (the runner's mode) keeps new entries in memory, visible to
    `get` at once, until `flush` writes them in one transaction: the runner
    flushes from its commit thread, so the event loop never waits on SQLite writes.
    """

    def __init__(self, path: Path | None = None, *, buffered: bool = False):
        self.path = Path(path) if path is not None else cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.buffered = buffered
        self._pending: dict[str, str] = {}
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                "created REAL DEFAULT (unixepoch('subsec')))"
            )
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"{shown_path(self.path)}: the response cache is not a readable SQLite file ({e}): "
                              "move it away to start a new one (or set RECHARNESS_CACHE elsewhere), or run with "
                              "--no-cache") from None

    def get(self, key: str) -> dict | None:
        with self._lock:
            data = self._pending.get(key)
            if data is None:
                row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
                data = row[0] if row else None
        return json.loads(data) if data is not None else None

    def put(self, key: str, value: dict) -> None:
        data = dumps_safe(value)
        with self._lock:
            if self.buffered:
                self._pending[key] = data
            else:
                self._db.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, data))

    def flush(self) -> int:
        """Write buffered entries in one transaction; returns how many."""
        with self._lock:
            if not self._pending:
                return 0
            items = list(self._pending.items())
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", items)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._pending.clear()
            return len(items)

    def __len__(self) -> int:
        self.flush()
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._db.close()

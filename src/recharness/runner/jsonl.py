"""Line-oriented files that survive a kill -9.

Each record is one line, written whole and flushed (and fsynced) before the
next; a reader that finds a torn last line drops it, so the sample it held
is simply run again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from recharness.errors import InputError


def read_jsonl(path: Path, *, tolerate_torn_tail: bool = False) -> Iterator[dict]:
    """Yield records; a bad line is an InputError naming file and line."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file not found")
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    last = len(lines)
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if tolerate_torn_tail and i >= last - 1 and not raw.endswith(b"}"):
                return
            raise InputError(path, f"not valid JSON ({e})", line=i) from None
        if not isinstance(rec, dict):
            raise InputError(path, "expected a JSON object", line=i)
        yield rec


def repair_torn_tail(path: Path) -> int:
    """Cut an unfinished last line left by a killed writer; returns bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return 0
        f.seek(0)
        data = f.read()
        cut = data.rfind(b"\n") + 1
        f.truncate(cut)
        return size - cut


class JsonlAppender:
    """Append records durably, one whole line per write."""

    def __init__(self, path: Path, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._f = open(self.path, "ab")
        self._fsync = fsync

    def write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        self._f.write(line)
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_jsonl_atomic(path: Path, records: Iterable[dict]) -> int:
    """Write a whole file via a temp file and rename, so readers never see half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
            n += 1
    os.replace(tmp, path)
    return n

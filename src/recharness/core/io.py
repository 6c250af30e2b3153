"""Line-oriented files that survive a kill -9, and whole files replaced atomically.

A record is one line, written whole; a reader that finds a torn last line
drops it, so the sample it held is simply run again. Model output is
untrusted text: a lone surrogate or other unencodable character is escaped
(`\\ud800`), never allowed to crash the writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from recharness.core.errors import InputError, RecharnessError


#: the encoders `json.dumps(record, ensure_ascii=..., separators=(",", ":"))` builds on every call, built once
_JSON_TEXT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_JSON_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def _dumps_utf8(record) -> tuple[str, bytes]:
    s = _JSON_TEXT.encode(record)
    try:
        return s, s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: ASCII-escape them (still valid JSON, same value)
        s = _JSON_ASCII.encode(record)
        return s, s.encode("ascii")


def dumps_safe(record) -> str:
    """Compact JSON that always encodes to UTF-8: readable text, escapes only when it must."""
    return _dumps_utf8(record)[0]


def dumps_line(record: dict) -> bytes:
    """`dumps_safe(record)` as one UTF-8 line, encoded once."""
    return _dumps_utf8(record)[1] + b"\n"


def read_jsonl(path: Path, *, tolerate_torn_tail: bool = False) -> Iterator[dict]:
    """Yield records; a bad line is an InputError naming file and line. `tolerate_torn_tail`: a last line
    that does not decode and has no newline after it (a killed writer's, cut anywhere, even right after an
    inner `}`) ends the file instead; a bad line with its newline is never dropped."""
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
            if tolerate_torn_tail and i == last:  # no newline after it: the write was cut
                return
            raise InputError(path, f"not valid JSON ({e})", line=i) from None
        except ValueError as e:  # valid JSON, but an integer of more than 4300 digits (int's limit) in it
            raise InputError(path, f"not a record: a number of more digits than Python reads ({e})", line=i) from None
        except RecursionError:  # thousands of nested brackets: no record of ours, and no traceback
            raise InputError(path, "not a record: JSON nested too deeply", line=i) from None
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
        # scan back block by block for the last newline (files can be large)
        pos, cut = size, 0
        while pos > 0:
            start = max(0, pos - (1 << 16))
            f.seek(start)
            nl = f.read(pos - start).rfind(b"\n")
            if nl >= 0:
                cut = start + nl + 1
                break
            pos = start
        f.truncate(cut)
        return size - cut


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process (or a nonsense pid: kept)
        return pid > 0
    return True


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temp files (`.NAME.PID.tmp`) that writers of `path` killed mid-way left behind: those
    of processes no longer alive (a live writer's temp file is its own). Returns what was removed."""
    path = Path(path)
    gone = []
    prefix = f".{path.name}."
    try:
        candidates = list(path.parent.glob(f".{path.name}.*.tmp"))
    except OSError:
        return gone
    for old in candidates:
        pid = old.name[len(prefix):-len(".tmp")]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        try:
            old.unlink()
            gone.append(old)
        except FileNotFoundError:
            pass
    return gone


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Temp file + fsync + rename: a reader (or a crash) sees the old file or the new, never half. Temp
    files a killed writer left behind (`.NAME.PID.tmp` of a dead PID) are removed first."""
    path = Path(path)
    if path.is_dir():  # named as given, not as the temp file the rename would have failed on
        import errno

        raise IsADirectoryError(errno.EISDIR, "is a folder, where a file is to be written", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def write_set(files: dict[Path, str]) -> None:
    """Several text files written as one set: each staged (temp file, fsync) before any is renamed, so a
    kill while staging leaves the old set whole; the renames follow one another at once. Temp files a
    killed writer left behind (`.NAME.PID.tmp` of a dead PID) are removed first."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(path)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                f.write(text.encode("utf-8", "backslashreplace"))
                f.flush()
                os.fsync(f.fileno())
            staged.append((tmp, path))
        blocked = [path for _, path in staged if path.is_dir()]
        if blocked:  # found before any rename: the old set stays whole
            raise IsADirectoryError(21, "a folder where a file of the set goes", str(blocked[0]))
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            if tmp.exists():
                tmp.unlink()
    if staged:
        _fsync_dir(staged[0][1].parent)


def atomic_write_parquet(path: Path, df) -> None:
    """A polars frame as one Parquet file, written atomically (a build's side files)."""
    buf = io.BytesIO()
    df.write_parquet(buf)
    atomic_write_bytes(path, buf.getvalue())


def atomic_write_text(path: Path, text: str) -> None:
    # backslashreplace only touches what UTF-8 cannot encode (lone surrogates from untrusted text)
    atomic_write_bytes(path, text.encode("utf-8", "backslashreplace"))


class JsonlAppender:
    """Append records durably, one whole line per write (fsync per line): for small side files."""

    def __init__(self, path: Path, fsync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._f = open(self.path, "ab")
        self._fsync = fsync

    def write(self, record: dict) -> None:
        self._f.write(dumps_line(record))
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FileLocked(RecharnessError):
    """Another process holds the file: two writers would duplicate lines."""

    def __init__(self, path: Path):
        super().__init__(f"{path} is being written by another `recharness run` (or `train`); "
                         "wait for it to finish (or stop it) before starting another on the same run")


def open_locked(path: Path, mode: str):
    """`path` opened and locked (flock, exclusive): FileLocked at once if another process holds it. A file replaced
    or deleted between the open and the lock (by a `rewrite_log` holding the lock meanwhile) is opened again: the
    lock must be on the file now at `path`, or a writer would append to a file no one reads."""
    while True:
        f = open(path, mode)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise FileLocked(Path(path)) from None
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        held = os.fstat(f.fileno())
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return f
        f.close()


@contextlib.contextmanager
def unheld(path: Path) -> Iterator[bool]:
    """Hold `GroupCommitLog`'s lock on a log file while the caller replaces or deletes it (yields whether the file
    exists): FileLocked if a writer holds it, as that writer would go on appending to a file no one reads."""
    try:
        f = open_locked(path, "rb")
    except FileNotFoundError:
        yield False
        return
    with f:
        yield True


def remove_log(path: Path) -> None:
    """Delete a log file that no writer holds (`unheld`)."""
    with unheld(path) as exists:
        if exists:
            Path(path).unlink()


def rewrite_log(path: Path, records: Iterable[dict]) -> int:
    """Replace a log file no writer holds (`unheld`) with `records`, atomically."""
    with unheld(path):
        return write_jsonl_atomic(path, records)


class GroupCommitLog:
    """A predictions file written by one process, durably, off the caller's thread.

    `submit` only queues the line; a writer thread commits whatever has queued
    with one write and one fsync (group commit), so durability costs one fsync
    per batch instead of one per sample and never blocks the event loop.
    A kill loses at most the lines not yet committed (their samples run again);
    a torn last line is cut on the next open. The file is locked (flock) for the
    writer's lifetime, so a second run on the same file stops at once.
    `before_commit` runs in the writer thread ahead of each batch (e.g. flush the
    response cache, so every committed answer is also cached).

    `min_interval_s`: a commit starts at most this long after the previous one
    started, gathering what queues meanwhile (PostgreSQL's commit_delay): under a
    stream of answers (a fast local server) the fsyncs, and the cache transactions
    before them, are ~1/min_interval_s per second instead of nearly one per line,
    which cost a run at zero latency ~0.2 ms of CPU per answer on 2 CPUs (benchmarks/
    results/overhead.md). A line after a quiet spell commits at once; a line is
    never counted durable before its fsync; a kill loses at most the lines of one
    window more (their samples run again); `close` commits at once.
    """

    def __init__(self, path: Path, *, fsync: bool = True, before_commit: Callable[[], None] | None = None,
                 min_interval_s: float = 0.05):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open_locked(self.path, "ab")
        repair_torn_tail(self.path)
        self._fsync = fsync
        self._before = before_commit
        self._interval = max(0.0, float(min_interval_s))
        self._pending: list[bytes] = []
        self._cond = threading.Condition()
        self._closing = False
        self._error: BaseException | None = None
        self.committed = 0
        self.commits = 0
        self._thread = threading.Thread(target=self._loop, name=f"commit:{self.path.name}", daemon=True)
        self._thread.start()

    def submit(self, record: dict) -> None:
        line = dumps_line(record)
        with self._cond:
            if self._error is not None:
                raise RecharnessError(f"writing {self.path} failed: {self._error}")
            self._pending.append(line)
            if len(self._pending) == 1:  # the writer waits only while nothing is queued: wake it once, not per line
                self._cond.notify()

    def _loop(self) -> None:
        last = -float("inf")  # when the previous commit started (monotonic)
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                # the group commit window: gather lines until min_interval_s after the previous commit began
                while not self._closing and (left := last + self._interval - time.monotonic()) > 0:
                    self._cond.wait(left)
                batch, self._pending = self._pending, []
                closing = self._closing
            if batch:
                last = time.monotonic()
                try:
                    if self._before is not None:
                        self._before()
                    self._f.write(b"".join(batch))
                    self._f.flush()
                    if self._fsync:
                        os.fsync(self._f.fileno())
                    self.committed += len(batch)
                    self.commits += 1
                except BaseException as e:  # disk full, I/O error: surface on the next submit/close
                    with self._cond:
                        self._error = e
                    return
            if closing and not batch:
                return

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_UN)
        finally:
            self._f.close()
        if self._error is not None:
            raise RecharnessError(f"writing {self.path} failed: {self._error}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_jsonl_atomic(path: Path, records: Iterable[dict]) -> int:
    """Write a whole file via a temp file and rename, so readers never see half of it."""
    lines = [dumps_line(r) for r in records]
    atomic_write_bytes(Path(path), b"".join(lines))
    return len(lines)

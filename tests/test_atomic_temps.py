"""A killed writer's temp file is removed by the next atomic write; a live writer's is left alone."""

from __future__ import annotations

import subprocess
import sys

from recharness.core.io import atomic_write_bytes, atomic_write_text, write_set


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_atomic_write_removes_a_dead_writers_temp_file_and_keeps_a_live_ones(tmp_path):
    target = tmp_path / "build.json"
    stale = tmp_path / f".build.json.{dead_pid()}.tmp"
    stale.write_bytes(b'{"half": ')  # what a writer killed mid-way leaves
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f".build.json.{live_proc.pid}.tmp"
        live.write_bytes(b"in progress")
        other = tmp_path / f".other.json.{dead_pid()}.tmp"  # another file's temp: not this write's business
        other.write_bytes(b"x")
        atomic_write_bytes(target, b'{"a": 1}')
        assert target.read_bytes() == b'{"a": 1}'
        assert not stale.exists()
        assert live.read_bytes() == b"in progress"
        assert other.exists()
    finally:
        live_proc.kill()
        live_proc.wait()
    atomic_write_text(target, "second")  # the writer is gone now: its temp goes too
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".other.json.{other.name.split('.')[3]}.tmp", "build.json"]
    assert target.read_text() == "second"


def test_write_set_keeps_a_live_writers_temp_file(tmp_path):
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f".scores.json.{live_proc.pid}.tmp"
        live.write_bytes(b"theirs")
        stale = tmp_path / f".scores.json.{dead_pid()}.tmp"
        stale.write_bytes(b"half")
        write_set({tmp_path / "scores.json": "{}", tmp_path / "scores.md": "# x"})
        assert live.read_bytes() == b"theirs" and not stale.exists()
        assert (tmp_path / "scores.json").read_text() == "{}"
    finally:
        live_proc.kill()
        live_proc.wait()

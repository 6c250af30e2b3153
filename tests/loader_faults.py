"""Shared tools of the loader fault tests: copy a fixture dataset, break one line of one of its files, and
check that the loader's error names the file, line and field a user would fix by hand."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from recharness.core.errors import InputError

FIX = Path(__file__).parent / "fixtures" / "data"


def copy_fixture(name: str, tmp_path: Path) -> Path:
    """A writable copy of fixtures/data/NAME under tmp_path."""
    d = tmp_path / name
    shutil.copytree(FIX / name, d)
    return d


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


def edit_text(path: Path, old: str, new: str) -> None:
    """Replace `old` (once, and it must be there) in a text file, gz by name."""
    text = _read(path).decode("utf-8")
    assert old in text, (path, old)
    _write(path, text.replace(old, new, 1).encode("utf-8"))


def set_line(path: Path, line: int, new: bytes | str) -> None:
    """Replace 1-based `line` (bytes as given, so a test can write a non-UTF-8 byte); gz by name."""
    lines = _read(path).split(b"\n")
    lines[line - 1] = new if isinstance(new, bytes) else new.encode()
    _write(path, b"\n".join(lines))


def get_line(path: Path, line: int) -> str:
    return _read(path).decode().split("\n")[line - 1]


def fails(fn, *, file: str, line: int | None, field: str | None, says: str | None = None) -> InputError:
    """fn() raises an InputError at this file, line and field, on one line of text that names them."""
    with pytest.raises(InputError) as info:
        fn()
    err = info.value
    msg = str(err)
    assert (Path(err.path).name, err.line, err.field) == (file, line, field), msg
    assert "\n" not in msg and file in msg, msg
    assert line is None or f"line {line}" in msg, msg
    assert says is None or says in err.message, msg
    return err

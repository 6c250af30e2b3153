"""Replace a directory atomically: fill `<dest>.tmp`, move the old `dest` to `<dest>.old`, rename
`<dest>.tmp` to `dest`, drop `<dest>.old`. A kill leaves either the old or the new directory (or,
between the two renames, only `<dest>.old`, which `recover_dir` puts back)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _sibling(dest: Path, suffix: str) -> Path:
    return dest.with_name(dest.name + suffix)


@contextmanager
def atomic_dir(dest: Path) -> Iterator[Path]:
    """`with atomic_dir(dest) as tmp:` write into `tmp`; on leaving the block it replaces `dest`
    (on an exception `tmp` is removed and `dest` left as it was)."""
    dest = Path(dest)
    tmp, old = _sibling(dest, ".tmp"), _sibling(dest, ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def recover_dir(dest: Path, marker: str) -> bool:
    """Whether `dest/marker` exists, after putting back `<dest>.old` if a kill came between the two
    renames of `atomic_dir`."""
    dest = Path(dest)
    if (dest / marker).exists():
        return True
    old = _sibling(dest, ".old")
    if (old / marker).exists():
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(old, dest)
        return True
    return False

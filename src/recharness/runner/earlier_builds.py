"""A run directory rebuilt with other settings keeps the earlier build's outputs apart, not lost.

`build` and `eval` call `set_aside` before they build into a folder that holds a build: its answers,
trained references, judgments and import reports go to `earlier-builds/<its fingerprint>/` (where no
stage reads them as answers to the new samples), and `put_back` brings them home when a build with that
fingerprint is made again, so nothing is asked twice.
"""

from __future__ import annotations

from pathlib import Path

from recharness.core.rundir import RunDir


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _move_entries(src: Path, dest: Path, *, replace: bool) -> list[Path]:
    """Move what `src` holds into `dest` (a rename when `dest` is new); an entry `dest` already has is
    replaced (`replace`) or left where it is. Returns the entries left in `src`."""
    import os
    import shutil

    if not _entries(src):
        return []
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        return []
    left = []
    for entry in _entries(src):
        target = dest / entry.name
        if target.exists():
            if not replace:
                left.append(entry)
                continue
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        os.replace(entry, target)
    return left


def set_aside(rd: RunDir) -> tuple[dict, Path] | None:
    """Before `build` or `eval` rebuilds a run directory (with other settings: --limit, --seed, --dataset, options): the
    answers, trained references, judgments and import reports of the build in it go to
    `earlier-builds/<its fingerprint>/` instead of being refused as answers to another build (or lost).
    Returns (that build's build.json, where they went), or None when it had none."""
    try:
        info = rd.build_info()
    except Exception:  # noqa: BLE001 - no readable build: nothing can be said to answer it
        return None
    fp = info.get("fingerprint")
    if not fp:  # a build from before fingerprints were recorded: its own, as every stage reads it
        try:
            fp = rd.load_build()[0]["fingerprint"]
        except Exception:  # noqa: BLE001 - its samples changed since: what answers it cannot be told
            return None
    outputs = rd.build_outputs(fp)
    if not any(_entries(src) for src, _ in outputs):
        return None
    for src, keep in outputs:
        _move_entries(src, keep, replace=True)
    return info, rd.earlier_build(fp)


def put_back(rd: RunDir, fp: str) -> Path | None:
    """After a build: what `set_aside` kept of an earlier build with this fingerprint (the same samples and
    settings) returns, so its answers are not asked again. Returns where it was, or None."""
    import shutil

    if not fp:
        raise ValueError("put_back needs a build's fingerprint")
    where = rd.earlier_build(fp)
    if not where.is_dir():
        return None
    left = [x for src, keep in rd.build_outputs(fp) for x in _move_entries(keep, src, replace=False)]
    if not left:  # (an entry the build itself wrote, e.g. imported outputs, stays in the stash)
        shutil.rmtree(where, ignore_errors=True)
    return where

"""Answers published by others, read into PerRecBench records: JSONL lines with a ranking or ratings of a
group's users, and the paper's released <mode>-<level>.json files (a folder or files)."""

from __future__ import annotations

import math
from pathlib import Path

from recharness.core.errors import RecharnessError
from recharness.tasks.validation import as_list, whole_number


def import_answer(s: dict, d: dict) -> tuple[dict | None, str | None]:
    """An imported JSONL line's answer to a group: "ordering" (1-based user indices, best first; pair, list) or
    "ratings" (point, one per user, null for none): ({parsed, valid, error}, None) or (None, why unusable)."""
    n = len(s["truth"]["user_ids"])
    if "ordering" in d:
        o = as_list(d["ordering"])
        o = [whole_number(x) for x in o] if o is not None else None
        if o is None or None in o:
            return None, f"\"ordering\" is not a list of 1-based user indices (whole numbers): {str(d['ordering'])[:80]}"
        valid = sorted(o) == list(range(1, n + 1))
        return {"parsed": {"ordering": o}, "valid": valid,
                "error": None if valid else f"ordering {o} is not a permutation of 1..{n}"}, None
    if "ratings" in d and s["task"] == "point":
        r = as_list(d["ratings"])
        if r is None or len(r) != n:
            return None, f"\"ratings\" must list {n} ratings (null for a user without one)"
        try:
            vals = [None if x is None or (isinstance(x, str) and x.strip() in ("", "null")) else float(x)
                    for x in r]
        except (TypeError, ValueError):
            vals = [math.nan]
        if any(isinstance(x, bool) for x in r) or any(v is not None and not math.isfinite(v) for v in vals):
            return None, f"\"ratings\" holds a value that is not a finite number: {str(d['ratings'])[:80]}"
        valid = all(v is not None for v in vals)
        return {"parsed": {"ratings": vals, "failed": sum(v is None for v in vals)}, "valid": valid,
                "error": None if valid else "a user without a rating"}, None
    return None, "no \"ordering\" (pair, list) or \"ratings\" (point)"


def import_files(out: Path, source: Path, name: str) -> tuple[Path, list[dict]]:
    """PerRecBench's released <mode>-<level>.json files (a folder, or one file) through the suite's own reader."""
    from recharness.core.rundir import RunDir
    from recharness.tasks.perrecbench.original import TASK_OF_MODE, import_predictions, level_of

    info = RunDir(out).build_info()
    files = sorted(source.glob("*.json")) if source.is_dir() else [source]
    picked: dict[tuple[str, str], Path] = {}
    problems = []
    for f in files:
        task, level = TASK_OF_MODE.get(f.stem.split("-", 1)[0]), level_of(f)
        if task is None or level is None:
            problems.append({"where": f.name, "problem": "not a <mode>-<level>.json file (mode point/pair/group, "
                                                         "level easy/medium/hard): not read"})
        elif task not in info["tasks"]:
            problems.append({"where": f.name, "problem": f"task {task} is not in this build: not read"})
        else:
            picked[(task, level)] = f
    if not picked:
        raise RecharnessError(f"--predictions {source}: no <mode>-<level>.json file for this build's tasks")
    return import_predictions(out, name, picked), problems

"""Answers published by others, read into PerRecBench records: JSONL lines with a ranking or ratings of a
group's users, and the paper's released <mode>-<level>.json files (a folder or files)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from recharness.core.errors import RecharnessError
from recharness.tasks.perrecbench.original import TASK_OF_MODE, level_of
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
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
            vals = [math.nan]
        if any(isinstance(x, bool) for x in r) or any(v is not None and not math.isfinite(v) for v in vals):
            return None, f"\"ratings\" holds a value that is not a finite number: {str(d['ratings'])[:80]}"
        valid = all(v is not None for v in vals)
        return {"parsed": {"ratings": vals, "failed": sum(v is None for v in vals)}, "valid": valid,
                "error": None if valid else "a user without a rating"}, None
    return None, "no \"ordering\" (pair, list) or \"ratings\" (point)"


_TREE_MODE_RE = re.compile(r"^processed-(point|pair|group|list)$")
_TREE_LEVEL_RE = re.compile(r"^result-(easy|medium|hard)$")


def released_files(source: Path) -> tuple[dict[tuple[str, str], Path], list[dict]]:
    """{(task, level): file} of released predictions, and the files not read (with why).

    `source`: one <mode>-<level>.json, a folder of them, or the authors' released tree
    `result-<level>/…/processed-<mode>/output/<n>.json` (mode and level from the folder names; the raw answers
    `*_original*.json` are left out, and so are the variants `<n>-sc5.json`, `-cot` beside a plain `<n>.json`;
    a folder with one variant only, as the fine-tuned models' `0-sc1.json`, has it as its run; said once per kind). Several runs (models, experiments) for one task and level:
    an error naming them, since only one can be this row."""
    source = Path(source)
    problems: list[dict] = []
    picked: dict[tuple[str, str], list[Path]] = {}
    flat = sorted(source.glob("*.json")) if source.is_dir() else [source]
    tree = sorted(source.rglob("processed-*/output/*.json")) if source.is_dir() else []
    if not source.is_dir() and source.parent.name == "output" and _TREE_MODE_RE.match(source.parent.parent.name):
        tree, flat = [source], []  # one file of the tree, named by its folders
    for f in flat:
        task, level = TASK_OF_MODE.get(f.stem.split("-", 1)[0]), level_of(f)
        if task is None or level is None:
            problems.append({"where": f.name, "problem": "not a <mode>-<level>.json file (mode point/pair/group, "
                                                         "level easy/medium/hard): not read"})
        else:
            picked.setdefault((task, level), []).append(f)
    skipped: dict[str, int] = {}
    folders: dict[Path, list[Path]] = {}
    for f in tree:
        folders.setdefault(f.parent, []).append(f)
    for folder, fs in folders.items():
        mode = _TREE_MODE_RE.match(folder.parent.name).group(1)
        level = next((m.group(1) for part in reversed(folder.resolve().parts[:-2])
                      if (m := _TREE_LEVEL_RE.match(part))), None)
        if level is None:
            problems.append({"where": _shown(folder, source), "problem": "no result-<level> folder above it: not read"})
            continue
        processed = [f for f in fs if "_original" in f.stem]
        if processed:
            skipped["raw answers (*_original*)"] = skipped.get("raw answers (*_original*)", 0) + len(processed)
        fs = [f for f in fs if "_original" not in f.stem]
        plain = [f for f in fs if f.stem.isdigit()]
        if plain and len(fs) > len(plain):  # "0.json" beside "0-sc5.json": the plain run; alone, a variant is the run
            skipped["variants (self-consistency, CoT)"] = (skipped.get("variants (self-consistency, CoT)", 0)
                                                           + len(fs) - len(plain))
            fs = plain
        for f in fs:
            picked.setdefault((TASK_OF_MODE[mode], level), []).append(f)
    problems += [{"where": str(source), "problem": f"{n} files of {kind}: not read (the processed <n>.json are)"}
                 for kind, n in skipped.items()]
    several = {k: v for k, v in picked.items() if len(v) > 1}
    if several:
        (task, level), fs = next(iter(several.items()))
        raise RecharnessError(f"--predictions {source}: {len(fs)} released files for {task}/{level} "
                              f"({', '.join(_shown(f, source) for f in fs[:4])}{' …' if len(fs) > 4 else ''}): "
                              "one row is one run: point --predictions at one run's folder (one level: "
                              "result-<level>/…/<model>/…/k4) or at a copy of the tree holding one model's run")
    return {k: v[0] for k, v in picked.items()}, problems


def _shown(f: Path, source: Path) -> str:
    try:
        return str(f.relative_to(source)) if source.is_dir() else f.name
    except ValueError:
        return f.name


def score_labels(source: Path, labels: Path, *, compat: bool = False) -> tuple[dict[str, dict], list[dict]]:
    """Released predictions scored against the authors' label files alone (no dataset, no build):
    {"<task>-<level>": metrics} and the problems; `labels`: a folder of
    item2group_avg_diff_sample-<level>.json files, or one of them."""
    from recharness.tasks.perrecbench.original import LABEL_FILE, MODES, score_files

    files, problems = released_files(source)
    labels = Path(labels)
    out = {}
    for (task, level), f in sorted(files.items()):
        lab = labels / LABEL_FILE.format(level=level) if labels.is_dir() else labels
        if not lab.exists() or (not labels.is_dir() and level_of(labels) not in (None, level)):
            problems.append({"where": _shown(f, Path(source)), "problem": f"no label file for level {level} in "
                                                                          f"{labels}: not scored"})
            continue
        metrics, _ = score_files(lab, f, MODES[task], level=level, compat=compat)
        out[f"{task}-{level}"] = metrics
    if not out:
        raise RecharnessError(f"--labels {labels}: no released file of {source} has its level's label file")
    return out, problems


def import_files(out: Path, source: Path, name: str) -> tuple[Path, list[dict]]:
    """PerRecBench's released prediction files (one <mode>-<level>.json, a folder of them, or the released tree
    `result-<level>/…/processed-<mode>/output/`) through the suite's own reader."""
    from recharness.core.rundir import RunDir
    from recharness.tasks.perrecbench.original import import_predictions

    info = RunDir(out).build_info()
    files, problems = released_files(source)
    picked: dict[tuple[str, str], Path] = {}
    for (task, level), f in files.items():
        if task not in info["tasks"]:
            problems.append({"where": _shown(f, Path(source)), "problem": f"task {task} is not in this build: not read"})
        else:
            picked[(task, level)] = f
    if not picked:
        raise RecharnessError(f"--predictions {source}: no <mode>-<level>.json file for this build's tasks")
    return import_predictions(out, name, picked), problems


#: `score perrecbench --predictions DIR --labels DIR`: the suite's label-file scorer, found by the CLI on its hook
import_files.score_labels = score_labels  # type: ignore[attr-defined]

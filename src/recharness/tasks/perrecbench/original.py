"""The original PerRecBench file layouts: label files and released prediction files.

Labels (``item2group_avg_diff_sample-<level>.json``)::

    {item_id: [[{"user_id", "relative_rating", "avg_rating", "history_len", ...}, ...]]}

one group per query item (the evaluation reads only the first group), users
in prompt order (user index i+1 is entry i).  Predictions::

    point:       {item_id: [[rating_user1, rating_user2, ...]]}
    pair, group: {item_id: [[[ordering, best first, 1-based user indices]]]}

with the string "format_not_correct" where the model never produced a
parseable answer: in place of a rating, or as the whole ordering.  The
released evaluation then drops the group (for orderings scipy rejects the
string; for ratings it would crash, ``str - float``; we drop the group too).

This module writes our groups and predictions in that layout and reads them
back, so numbers can be compared with the authors' released outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from recharness.core.errors import InputError
from recharness.core.rundir import RunDir
from recharness.core.types import is_number, is_whole
from recharness.data.parsing import json_line, read_json
from recharness.tasks.perrecbench.groups import LEVELS, Group, Member

LABEL_FILE = "item2group_avg_diff_sample-{level}.json"
HELDOUT_FILE = "held_out-{level}.json"
NOT_CORRECT = "format_not_correct"
#: our task name -> the original's mode name
MODES = {"point": "point", "pair": "pair", "list": "group"}
TASK_OF_MODE = {"point": "point", "pair": "pair", "group": "list", "list": "list"}


def label_record(m: Member) -> dict:
    return {"user_id": m.user_id, "relative_rating": m.relative_rating, "avg_rating": m.avg_rating,
            "history_len": m.history_len, "rating": m.rating, "timestamp": m.timestamp}


def write_labels(groups: list[Group], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {g.item_id: [[label_record(m) for m in g.members]] for g in groups}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return path


class _Checker:
    """Errors about one JSON file that name its line as well as the item/user field."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.data, self.text = read_json(self.path)

    def fail(self, message: str, *where: str | int, field: str | None = None) -> InputError:
        """`where`: the JSON path of the bad value (keys and indices), which also names the field."""
        if field is None:
            field = f"{where[0]}" + "".join(f"[{w}]" if isinstance(w, int) else f".{w}" for w in where[1:])
        return InputError(self.path, message, line=json_line(self.text, where), field=field)

    def num(self, v, *where) -> float:
        if not is_number(v):
            raise self.fail(f"expected a number, got {v!r}", *where)
        return float(v)

    def whole(self, v, *where) -> int:
        """An integer; whole floats and digit strings, which json dumps of other tools produce, are accepted."""
        if isinstance(v, str) and re.fullmatch(r"-?[0-9]{1,19}", v.strip()):
            return int(v)
        if is_number(v) and v == int(v):
            return int(v)
        raise self.fail(f"expected a whole number, got {v!r}", *where)


def level_of(path: Path) -> str | None:
    stem = Path(path).stem
    for lv in LEVELS:
        if stem.endswith(f"-{lv}") or stem == lv:
            return lv
    return None


def read_labels(path: Path, level: str | None = None) -> list[Group]:
    """Groups from an original label file; the level comes from the file name (…-easy.json) or group size."""
    path = Path(path)
    f = _Checker(path)
    if not isinstance(f.data, dict):
        raise InputError(path, "expected a JSON object {item_id: [[users...]]}", line=1)
    level = level or level_of(path)
    size_level = {v: k for k, v in LEVELS.items()}
    groups = []
    for item, value in f.data.items():
        if not (isinstance(value, list) and value and isinstance(value[0], list)):
            raise f.fail("expected [[user, ...]] (a list holding the group)", item)
        members = []
        for i, u in enumerate(value[0]):
            at = (item, 0, i)
            if not isinstance(u, dict):
                raise f.fail("expected a user object", *at)
            for key in ("user_id", "relative_rating", "avg_rating", "history_len"):
                if key not in u:
                    raise f.fail("missing key", *at, field=f"{item}[0][{i}].{key}")
            hl = u["history_len"]
            if isinstance(hl, bool) or not isinstance(hl, int) or hl < 0:
                raise f.fail(f"expected a count >= 0, got {hl!r}", *at, "history_len")
            rel = f.num(u["relative_rating"], *at, "relative_rating")
            avg = f.num(u["avg_rating"], *at, "avg_rating")
            rating = f.num(u["rating"], *at, "rating") if "rating" in u else rel + avg
            ts = f.whole(u["timestamp"], *at, "timestamp") if u.get("timestamp") not in (None, "") else 0
            members.append(Member(user_id=str(u["user_id"]), rating=rating, timestamp=ts,
                                  relative_rating=rel, avg_rating=avg, history_len=hl))
        if len(members) < 2:
            raise f.fail(f"a group needs at least 2 users, got {len(members)}", item)
        lv = level or size_level.get(len(members), f"size{len(members)}")
        groups.append(Group(level=lv, item_id=str(item), members=members))
    return groups


def read_predictions(path: Path, mode: str, groups: list[Group], *, against: str | None = None) -> dict[str, dict]:
    """{item_id: prediction record} from a released prediction file, checked against the groups: those of a
    label file, or (`against`: what they are, for the message) those of a build."""
    path = Path(path)
    if mode not in TASK_OF_MODE:
        raise InputError(path, f"unknown mode {mode!r}; one of point, pair, group")
    task = TASK_OF_MODE[mode]
    f = _Checker(path)
    if not isinstance(f.data, dict):
        raise InputError(path, "expected a JSON object {item_id: [[...]]}", line=1)
    size = {g.item_id: len(g.members) for g in groups}
    out = {}
    for item, value in f.data.items():
        if item not in size:
            raise f.fail(f"item has no group in {against or 'the label file'}", item)
        if not (isinstance(value, list) and value and isinstance(value[0], list) and value[0]):
            raise f.fail("expected [[...]]", item)
        n = size[item]
        if task == "point":
            r = value[0]
            if len(r) != n:
                raise f.fail(f"{len(r)} ratings for a group of {n}", item)
            ratings = [None if x == NOT_CORRECT else f.num(x, item, 0, i) for i, x in enumerate(r)]
            valid = all(x is not None for x in ratings)
            out[item] = {"parsed": {"ratings": ratings, "failed": sum(x is None for x in ratings)}, "valid": valid,
                         "error": None if valid else NOT_CORRECT}
        else:
            o = value[0][0]
            if o == NOT_CORRECT:
                out[item] = {"parsed": {"ordering": None}, "valid": False, "error": NOT_CORRECT}
                continue
            if not isinstance(o, list) or not all(is_whole(v) for v in o):
                raise f.fail(f"expected a list of user indices or {NOT_CORRECT!r}", item, 0, 0)
            valid = sorted(o) == list(range(1, n + 1))
            out[item] = {"parsed": {"ordering": o}, "valid": valid,
                         "error": None if valid else f"ordering {o} is not a permutation of 1..{n}"}
    return out


def truth_of(g: Group) -> dict:
    return {"user_ids": [m.user_id for m in g.members],
            "relative_ratings": [m.relative_rating for m in g.members],
            "ratings": [m.rating for m in g.members],
            "avg_ratings": [m.avg_rating for m in g.members]}


def sample_id(task: str, level: str, item_id: str) -> str:
    return f"{task}-{level}-{item_id}"


def score_files(label_path: Path, pred_path: Path, mode: str, *, level: str | None = None, compat: bool = False,
                invalid: str = "zero") -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score one released prediction file against one label file (no dataset needed).

    Returns (metrics, per-level table) exactly as a run's scores: ``tau`` is
    the rank-vector tau with failures scored 0, or with ``compat=True`` the
    original evaluate_single.py number; both ``tau_rank`` and ``tau_compat``
    are always there.
    """
    from recharness.tasks.perrecbench.scoring import summarize

    groups = read_labels(label_path, level)
    task = TASK_OF_MODE.get(mode, mode)
    recs = read_predictions(pred_path, mode, groups)
    samples = [{"id": sample_id(task, g.level, g.item_id), "task": task, "level": g.level, "item_id": g.item_id,
                "truth": truth_of(g), "source": str(label_path)} for g in groups]
    preds = {sample_id(task, g.level, g.item_id): recs[g.item_id] for g in groups if g.item_id in recs}
    return summarize(samples, preds, compat=compat, invalid=invalid, with_ratings=(task == "point"))


def prediction_value(task: str, parsed, valid: bool):
    """A prediction record's value in the original layout (with "format_not_correct" for failures)."""
    if task == "point":
        r = (parsed or {}).get("ratings") or []
        return [[NOT_CORRECT if x is None else x for x in r]] if r else [[NOT_CORRECT]]
    o = (parsed or {}).get("ordering")
    return [[o]] if (valid and o) else [[NOT_CORRECT]]


def write_predictions(samples: list[dict], predictions: dict[str, dict], out_dir: Path) -> list[Path]:
    """Write <mode>-<level>.json files in the original prediction layout; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[tuple[str, str], dict] = {}
    for s in samples:
        p = predictions.get(s["id"])
        if p is None:
            continue
        files.setdefault((s["task"], s["level"]), {})[s["item_id"]] = prediction_value(s["task"], p.get("parsed"),
                                                                                       p.get("valid", True))
    paths = []
    for (task, level), data in files.items():
        path = out_dir / f"{MODES[task]}-{level}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return sorted(paths)


def import_predictions(run_dir: Path, name: str, files: dict[tuple[str, str], Path]) -> Path:
    """Turn released prediction files {(task, level): path} into predictions/<name>.jsonl of a built run.

    The run must have been built from the matching label files (``--option
    labels=DIR``), so sample ids line up; items the files lack stay missing.
    """
    from recharness.core.io import read_jsonl, write_jsonl_atomic

    rd = RunDir(run_dir)
    samples = list(read_jsonl(rd.samples_jsonl))
    build = rd.build_json  # `score` checks every record answers this build
    stamp = {"build": fp} if build.exists() and (fp := json.loads(build.read_text()).get("fingerprint")) else {}
    by_key = {(s["task"], s["level"], s["item_id"]): s for s in samples}
    records = []
    for (task, level), path in sorted(files.items()):
        task = TASK_OF_MODE.get(task, task)
        groups = [Group(level=s["level"], item_id=s["item_id"],
                        members=[Member(u, 0.0, 0, 0.0, 0.0, 0) for u in s["truth"]["user_ids"]])
                  for s in samples if s["task"] == task and s["level"] == level]
        against = (f"this build's {task}/{level} samples ({len(groups)} groups; a build from the authors' label "
                   "files, --option labels=DIR, has their groups)")
        for item, rec in read_predictions(path, MODES[task], groups, against=against).items():
            s = by_key[(task, level, item)]
            records.append({"id": s["id"], "task": task, "model": {"backend": "imported", "model": name,
                                                                   "file": str(path)},
                            "output": None, **rec, **stamp})
    out = rd.predictions(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out, records)
    return out

"""Which samples a method's row is scored on: all of the task's, or a subset that says so.

A run limited on purpose (`run --limit N`: the first N samples of the tasks it ran) and another tool's
imported answers are scored on exactly the samples they cover, and their rows say `limit: n = 40 of 400` /
`imported: n = 5 of 6` (the row's n, of the task's samples the table header counts). Any other gap (a run
that stopped early, a file cut short) is refused: "N of M answered"; `score --partial` scores the answered
ones and marks the row `partial: n = 12 of 20`. A missing
answer is never counted as a wrong one behind the user's back.
"""

from __future__ import annotations

import json

from recharness.core.errors import ConfigError, InputError
from recharness.core.io import atomic_write_text
from recharness.core.rundir import RunDir
from recharness.core.types import is_whole


def record_run(rd: RunDir, method: str, *, limit: int | None, tasks: list[str] | None, imported: bool = False,
               settings: dict | None = None, prompt_versions: dict[str, str] | None = None) -> None:
    """Remember what the runs (or the import) of `method` set out to answer: the widest ask so far (a
    resumed run with a smaller --limit does not shrink what an earlier one covered), the prompt version of
    each task asked (`Task.prompt_version`, compared on resume) and the recharness version that last ran it
    (for information: a harness upgrade alone does not refuse a resume)."""
    from recharness import __version__

    prev = read_run(rd, method) if rd.predictions(method).exists() and not imported else {}
    # each ask as given: two runs limited to other tasks cover the first `limit` of each, which the widest
    # limit over the union of their tasks does not say (`covered` reads these)
    ask = {"limit": limit, "tasks": sorted(tasks) if tasks else None}
    asks = [a for a in (prev.get("asks") or []) if isinstance(a, dict)] if prev and not prev.get("imported") else []
    if prev and not prev.get("imported") and "asks" not in prev:  # a record from before asks were kept: its own
        asks = [{"limit": prev.get("limit"), "tasks": sorted(prev["tasks"]) if prev.get("tasks") else None}]
    if ask not in asks:
        asks.append(ask)
    if prev and not prev.get("imported"):
        limit = None if limit is None or prev.get("limit") is None else max(int(limit), int(prev["limit"]))
        tasks = None if not tasks or not prev.get("tasks") else sorted(set(tasks) | set(prev["tasks"]))
        if prompt_versions is not None:
            prompt_versions = {**(prev.get("prompt_versions") or {}), **prompt_versions}
    record = {"limit": limit, "tasks": tasks, "imported": imported, "settings": settings,
              **({"asks": asks} if not imported else {})}
    if prompt_versions is not None:
        record.update(prompt_versions=dict(sorted(prompt_versions.items())), harness_version=__version__)
    rd.predictions_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rd.run_record(method), json.dumps(record))


def read_run(rd: RunDir, method: str) -> dict:
    """predictions/NAME.run.json ({} when there is none), its fields checked: an edited one is named by field
    (a `limit` of -1 or an `imported` of "no" made a run cut short look limited on purpose)."""
    path = rd.run_record(method)
    if not path.exists():
        return {}
    redo = "remove the file to score the answers as a partial run (`score --partial`), or run the model again"
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(path, f"not readable as JSON ({e}): {redo}") from None
    if not isinstance(run, dict):
        raise InputError(path, f"expected a JSON object: {redo}")
    for where, rec in [("", run)] + [(f"asks[{k}].", a) for k, a in enumerate(run.get("asks") or [])
                                      if isinstance(run.get("asks"), list)]:
        if not isinstance(rec, dict):
            raise InputError(path, f"expected an object: {redo}", field=where.rstrip("."))
        bad = _wrong_field(rec)
        if bad is not None:
            raise InputError(path, f"{json.dumps(rec[bad], default=str)[:40]} is not {_RUN_WANT[bad]}: {redo}",
                             field=where + bad)
    if "asks" in run and not isinstance(run["asks"], list):
        raise InputError(path, f"not a list: {redo}", field="asks")
    return run


_RUN_WANT = {"limit": "null or a whole number >= 1", "tasks": "null or a list of task names",
             "imported": "true or false", "prompt_versions": "an object of task: version"}


def _wrong_field(rec: dict) -> str | None:
    """The first field of a run record (or one of its asks) not of the type `record_run` writes."""
    checks = {
        "limit": lambda v: v is None or (is_whole(v) and v >= 1),
        "tasks": lambda v: v is None or (isinstance(v, list) and all(isinstance(t, str) for t in v)),
        "imported": lambda v: isinstance(v, bool),
        "prompt_versions": lambda v: isinstance(v, dict),
    }
    return next((k for k, ok in checks.items() if k in rec and not ok(rec[k])), None)


def covered(rd: RunDir, method: str, task: str, task_samples: list[dict], build_samples: list[dict],
            recs: dict[str, dict], *, partial: bool) -> tuple[list[dict], dict | None]:
    """(the samples `method`'s row of `task` is scored on, its coverage mark or None for all)."""
    answered = [s for s in task_samples if s["id"] in recs]
    n, m = len(answered), len(task_samples)
    if n == m:
        return task_samples, None
    run = read_run(rd, method)
    if run.get("imported"):
        return answered, {"answered": n, "of": m, "why": "imported"}
    asks = [a for a in run.get("asks") or [] if isinstance(a, dict)] or \
        ([{"limit": run.get("limit"), "tasks": run.get("tasks")}] if run.get("limit") is not None else [])
    if asks and all(a.get("limit") is not None or a.get("tasks") for a in asks):
        ran = asked_ids(asks, build_samples)
        meant = [s for s in task_samples if s["id"] in ran]
        if [s["id"] for s in meant] == [s["id"] for s in answered]:
            return answered, {"answered": n, "of": m, "why": "limit"}
    if partial:
        return answered, {"answered": n, "of": m, "why": "partial"}
    raise ConfigError(f"{method}: {n} of {m} {task} samples answered; `recharness score --partial` scores the "
                      f"answered ones (rows marked partial {n}/{m}), or finish the run (`recharness run ... "
                      f"--name {method}`)")


def asked_ids(asks: list[dict], build_samples: list[dict]) -> set[str]:
    """The sample ids the runs of `asks` set out to answer: each, the first `limit` samples of its tasks."""
    ran: set[str] = set()
    for a in asks:
        theirs = [s for s in build_samples if not a.get("tasks") or s["task"] in a["tasks"]]
        ran |= {s["id"] for s in (theirs if a.get("limit") is None else theirs[: int(a["limit"])])}
    return ran


def check_task_answered(rd: RunDir, method: str, task: str, task_samples: list[dict], build_samples: list[dict],
                        *, partial: bool) -> None:
    """A method with no answer at all to `task`: fine when its runs never asked the task (`run --task`, a --limit
    that ended before it, an import), refused when they did ("0 of M answered", as `covered` refuses any other
    gap; before, the task's row was silently missing), and with `partial` left out with a warning."""
    run = read_run(rd, method)
    if not run or run.get("imported") or not run.get("prompt_versions") or task not in run["prompt_versions"]:
        # imported; or a record that names no prompt of this task: a reference run through `run -m baseline:X`
        # answers only the tasks that ask it (a record from before 2026-11-28 said tasks: all), and a record from
        # before prompt versions were kept cannot say what it asked
        return
    asks = [a for a in run.get("asks") or [] if isinstance(a, dict)] or \
        [{"limit": run.get("limit"), "tasks": run.get("tasks")}]
    ran = asked_ids(asks, build_samples)
    m = sum(s["id"] in ran for s in task_samples)
    if not m:
        return
    if partial:
        import logging

        logging.getLogger(__name__).warning("%s: 0 of %d %s samples answered: no row for it", method, m, task)
        return
    raise ConfigError(f"{method}: 0 of {m} {task} samples answered (its run asked them); finish the run "
                      f"(`recharness run ... --name {method}`), or `recharness score --partial` scores the tasks it "
                      "answered")


def label(coverage: dict | None) -> str:
    """`limit: n = 40 of 400`, `imported: n = 170 of 200`, `partial: n = 12 of 20` (the row's n, of the task's
    samples that the table's header counts), or "" for a row over every sample."""
    if not coverage:
        return ""
    return f"{coverage['why']}: n = {coverage['answered']} of {coverage['of']}"

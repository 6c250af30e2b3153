"""Predictions made by another tool, turned into a predictions file of a built run.

`recharness score SUITE --predictions FILE --name NAME` reads FILE (JSONL, a JSON array of the same
objects, or CSV with a header), one answer per line or array element, and writes `predictions/NAME.jsonl`
exactly as a run of ours would: each answer goes through the task's own `parse` (the same matching to the catalog, the same validity rules), and
the score stage then scores it beside every other method, with the same intervals. Schema
(docs/predictions.md):

    which sample   "id" (the sample id of samples.jsonl), or "user_id" (+ "item_id" for ctr), and
                   "task" where the build has several tasks that could match
    the answer     ctr:            "probability" (P(click), 0..1)  or "answer" ("Yes" / "No")
                   ranking tasks:  "items" (item ids, best first) or "titles" (best first) or "answer"
                   (sequential, direct, seqrec, RecBench+)
                   any generate task: "answer" (the raw text, parsed as a model's answer)
                   a task's own keys (`Task.import_answer`, e.g. a ranking of users), or a suite's
                   released files (`Suite.import_files`, a folder or files)

In CSV, list columns hold a JSON list or "|"-separated values. Every line that cannot be used
(malformed, unknown id, an answer for a sample already answered, an item id the catalog lacks) is
counted and reported with FILE:LINE in the returned report (and `<run>/imports/NAME.json`),
never dropped silently; samples the file does not answer stay missing and count as the task
counts missing answers.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from recharness.core.errors import ConfigError, InputError
from recharness.data.parsing import no_repeated_columns
from recharness.tasks.validation import as_list, finite_number

ANSWER_KEYS = ("probability", "items", "titles", "answer", "ordering", "ratings", "rating")


def _decode(raw: bytes, first: bool) -> str:
    return raw.decode("utf-8-sig" if first else "utf-8")


def _not_utf8(ex: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte 0x{ex.object[ex.start]:02x} at byte {ex.start + 1} of the line)"


def _read_lines(path: Path):
    """(line number, dict | error text) per data line of a JSONL or CSV file.

    Bytes are decoded line by line, so a line that is not UTF-8 is named by its number: in JSONL it
    is one more unusable line; in CSV (where quoting can span lines) it stops the import."""
    if path.suffix.lower() in (".csv", ".tsv"):
        physical = 0

        def text_lines(f):
            nonlocal physical
            for raw in f:
                physical += 1
                try:
                    yield _decode(raw, physical == 1)
                except UnicodeDecodeError as ex:
                    raise InputError(path, _not_utf8(ex), line=physical) from None

        with open(path, "rb") as f:
            reader = csv.DictReader(text_lines(f), delimiter="\t" if path.suffix.lower() == ".tsv" else ",",
                                    strict=True)  # strict: a quote left open at the end of the file is an error
            try:
                # a repeated column: the row's dict would keep the last of the two, silently
                no_repeated_columns(path, reader.fieldnames or (), strip=True)
                for row in reader:
                    if None in row:
                        yield reader.line_num, f"{len(row[None])} more fields than the header has"
                        continue
                    yield reader.line_num, {k.strip(): v for k, v in row.items()
                                            if k is not None and v not in (None, "")}
            except csv.Error as ex:
                raise InputError(path, f"not readable as CSV ({ex})", line=physical or None) from None
        return
    array = _json_array(path)
    if array is not None:  # a JSON array of objects (as many tools release them), not JSONL
        yield from array
        return
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            try:
                line = _decode(raw, i == 1)
            except UnicodeDecodeError as ex:
                yield i, _not_utf8(ex)
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as ex:
                yield i, f"not valid JSON ({ex.msg} at column {ex.colno})"
                continue
            except (ValueError, RecursionError) as ex:  # an integer of more digits than int reads; deep nesting
                yield i, f"not a readable record ({ex})"
                continue
            yield i, obj if isinstance(obj, dict) else "not a JSON object"


def _json_array(path: Path) -> list | None:
    """[(line of the element's start, dict | error text)] when the file is one JSON array, else None
    (JSONL, or not JSON at all: read line by line, each bad line named)."""
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"["):
        return None
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return None  # the line reader names the line that is not UTF-8
    dec = json.JSONDecoder()
    pos = len(text) - len(text.lstrip()) + 1  # after "["
    out: list = []
    counted, line = 0, 1  # newlines counted up to `counted`: one pass over the file, not one per element
    try:
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos < len(text) and text[pos] == "]" and not out:
                break
            obj, end = dec.raw_decode(text, pos)
            line += text.count("\n", counted, pos)
            counted = pos
            out.append((line, obj if isinstance(obj, dict) else "not a JSON object"))
            pos = end
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if text[pos:pos + 1] == ",":
                pos += 1
                continue
            if text[pos:pos + 1] == "]" and not text[pos + 1:].strip():
                break
            raise json.JSONDecodeError("expected ',' or ']' after an element", text, pos)
    except json.JSONDecodeError as ex:  # said once, where it is: the elements before it are read
        out.append((ex.lineno, f"not valid JSON ({ex.msg} at column {ex.colno}) in a JSON array: the rest of "
                               "the file is not read (JSONL, one object a line, is read line by line)"))
    except (ValueError, RecursionError) as ex:  # an integer of more digits than int reads; deep nesting
        out.append((line + text.count("\n", counted, pos), f"not a readable record ({ex}) in a JSON array: the "
                    "rest of the file is not read (JSONL, one object a line, is read line by line)"))
    return out


def read_users(path: Path) -> list[str]:
    """The user ids of `build --users FILE`, in file order, once each: one id a line (text), or the `user_id`
    of each object of a JSONL file / JSON array / CSV with a header (a published predictions file as it is).
    A line that names no user is refused with its line number."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--users {path}: no such file")
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    out: list[str] = []
    if head.startswith((b"{", b"[")) or path.suffix.lower() in (".csv", ".tsv", ".jsonl", ".json"):
        for ln, d in _read_lines(path):
            if isinstance(d, str):
                raise InputError(path, f"malformed: {d}", line=ln)
            if d.get("user_id") in (None, ""):
                raise InputError(path, "no \"user_id\"", line=ln, field="user_id")
            out.append(str(d["user_id"]).strip())
    else:
        for ln, raw in enumerate(path.read_bytes().splitlines(), 1):
            try:
                line = _decode(raw, ln == 1).strip()
            except UnicodeDecodeError as ex:
                raise InputError(path, _not_utf8(ex), line=ln) from None
            if line and not line.startswith("#"):
                if len(line.split()) > 1:
                    raise InputError(path, f"{line[:60]!r} is not one user id (one a line)", line=ln)
                out.append(line)
    return list(dict.fromkeys(out))


class _Resolver:
    """Sample lookup by id, by (task, user), by (user, item)."""

    def __init__(self, samples: list[dict]):
        self.by_id = {s["id"]: s for s in samples}
        self.by_user: dict[tuple[str | None, str], list[dict]] = {}
        # (task or None, user, item): rating, explanation and summarization samples of one user share the item
        self.by_pair: dict[tuple[str | None, str, str], list[dict]] = {}
        for s in samples:
            if s.get("user_id") is not None:
                self.by_user.setdefault((s["task"], str(s["user_id"])), []).append(s)
                self.by_user.setdefault((None, str(s["user_id"])), []).append(s)
                if s.get("item_id") is not None:
                    for t in (s["task"], None):
                        self.by_pair.setdefault((t, str(s["user_id"]), str(s["item_id"])), []).append(s)

    def find(self, d: dict) -> tuple[dict | None, str | None]:
        if d.get("task") is not None and not isinstance(d["task"], str):
            return None, f"\"task\" must be a string, not {type(d['task']).__name__}"
        if "id" in d:
            s = self.by_id.get(str(d["id"]))
            if s is None:
                return None, f"unknown sample id {str(d['id'])[:80]!r}"
            # the line's own user / item must be the sample's: another one is an answer about something else
            for key in ("user_id", "item_id"):
                if d.get(key) is not None and s.get(key) is not None and str(d[key]) != str(s[key]):
                    return None, f"{key} {str(d[key])[:40]!r} but sample {s['id']} is about {str(s[key])[:40]!r}"
            return s, None
        if "user_id" not in d:
            return None, "no \"id\" and no \"user_id\": cannot tell which sample this answers"
        u = str(d["user_id"])
        if "item_id" in d:
            got = self.by_pair.get((d.get("task"), u, str(d["item_id"])), [])
            if len(got) == 1:
                return got[0], None
            if not got:
                return None, f"unknown user/item pair ({u}, {str(d['item_id'])[:40]})"
            return None, (f"user/item pair ({u}, {str(d['item_id'])[:40]}) has {len(got)} samples "
                          f"({', '.join(s['id'] for s in got[:3])}): give \"id\" or \"task\"")
        got = self.by_user.get((d.get("task"), u), [])
        if len(got) == 1:
            return got[0], None
        if not got:
            return None, f"unknown user_id {u[:40]!r}" + (f" for task {d['task']!r}" if d.get("task") else "")
        return None, f"user_id {u!r} has {len(got)} samples ({', '.join(s['id'] for s in got[:3])}…): give \"id\" or \"task\""


def _titles_of(dataset) -> dict[str, str]:
    items = dataset.items
    return {str(i): (t or str(i)) for i, t in zip(items["item_id"].to_list(), items["title"].to_list())}


def _answer_text(task, sample: dict, d: dict, titles) -> tuple[str | None, list[str], str | None]:
    """(answer text for task.parse, per-line notes on item ids left out, error). `titles()` loads the catalog."""
    notes: list[str] = []
    if "answer" in d and d["answer"] is not None:
        if not isinstance(d["answer"], str):  # a list or an object would be scored as its Python text
            return None, notes, f"\"answer\" is {_kind(d['answer'])}, not text (give a list as \"items\" or \"titles\")"
        return d["answer"], notes, None
    # "items": "text" | "id" | "sid" says how a fine-tune read items (`_kind_of`), not an answer
    if "items" in d and not (isinstance(d["items"], str) and d["items"].strip().lower() in ITEM_KINDS):
        ids = as_list(d["items"])
        if ids is None:
            return None, notes, "\"items\" is not a list of item ids"
        bad = next((x for x in ids if not _is_id(x)), _OK)
        if bad is not _OK:
            return None, notes, f"\"items\" holds {_kind(bad)}: item ids are text or whole numbers"
        ids = [str(x) for x in ids]
        cands = [str(c) for c in sample.get("candidates") or []]
        if cands:  # a candidate ranking: answer with the candidate numbers, as the prompt asks
            pos = {c: n for n, c in enumerate(cands, 1)}
            notes += [f"item {i!r} is not one of the sample's candidates (it holds its place, as a number no "
                      "candidate has)" for i in ids if i not in pos]
            # a number past the candidates: the task reads it as an LLM's out-of-range number, which holds its place
            return ", ".join(str(pos.get(i, len(cands) + 1)) for i in ids), notes, None
        cat = titles()
        notes += [f"item {i!r} is not in the dataset's catalog (it holds its place, as a title no item has)"
                  for i in ids if i not in cat]
        # an id outside the catalog holds its place as an LLM's invented title does: a line naming no item
        return "\n".join(f"{n}. {cat[i] if i in cat else _UNKNOWN_ITEM.format(n=n)}" for n, i in enumerate(ids, 1)), notes, None
    if "titles" in d:
        ts = as_list(d["titles"])
        if ts is None:
            return None, notes, "\"titles\" is not a list"
        bad = next((t for t in ts if not isinstance(t, str)), _OK)
        if bad is not _OK:
            return None, notes, f"\"titles\" holds {_kind(bad)}: titles are text"
        return "\n".join(f"{n}. {t}" for n, t in enumerate(ts, 1)), notes, None
    if "rating" in d:
        if not isinstance(d["rating"], str) and finite_number(d["rating"]) is None:
            return None, notes, f"\"rating\" is {_kind(d['rating'])}, not a number"
        return str(d["rating"]), notes, None
    if "probability" in d:
        return None, notes, f"\"probability\" answers a task scored by P(Yes), not {sample['task']}"
    return None, notes, f"no answer field (one of {', '.join(ANSWER_KEYS)})"


_OK = object()


#: the line an imported id outside the catalog becomes: text that names no catalog title (the id itself is not
#: in it: an id such as "Heat" would be read as that title; the problem line names it)
_UNKNOWN_ITEM = "unknown item no. {n} (not in the catalog)"  # numbered: two such lines are two places


def _is_id(x) -> bool:
    """An item id as a file gives it: text, or a number (an id column read as numbers; not a bool)."""
    return isinstance(x, str) or (finite_number(x) is not None)


def _kind(x) -> str:
    """What a JSON value is, for a problem line: "a list", "an object", "NaN", "null", "true"."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float) and x != x:
        return "NaN"
    if isinstance(x, float | int):
        return repr(x)
    return {list: "a list", dict: "an object"}.get(type(x), type(x).__name__)


def _unrecognised(rec: dict) -> bool:
    """A valid answer that names titles, none of them a catalog item. The matched ids are `items` (llmrec,
    recbench seqrec) or `item_ids` with None for an unmatched title (RecBench+)."""
    p = rec.get("parsed")
    if not (rec.get("valid", True) and isinstance(p, dict) and p.get("strings")):
        return False
    ids = p.get("items") if "items" in p else p.get("item_ids")
    return not any(i is not None for i in ids or [])


def _key(x, titles) -> tuple[str, int | None]:
    """An item given by id or by title, as one comparable key (a catalog id's title, normalised; its year)."""
    from recharness.matching.normalize import title_identity

    x = str(x).strip()
    return title_identity(titles().get(x, x))


def _same_item(given, built, titles) -> bool:
    """`given` (an id, or a title with or without its year) names the build's item `built`."""
    if str(given).strip() == str(built):
        return True
    (gk, gy), (bk, by) = _key(given, titles), _key(built, titles)
    return gk == bk and (gy is None or gy == by)


def _same_target(given, built, titles) -> bool:
    return _same_item(given, built, titles)


def _same_candidates(given, built, titles) -> bool:
    g = as_list(given)
    if g is None or len(g) != len(built):
        return False
    return all(_same_item(x, b, titles) for x, b in zip(g, built))


TARGETS = ("build", "as-given")


class _TitleIds:
    """Catalog ids by normalised title (`key|year`, and `key` alone for a title given without a year)."""

    def __init__(self, titles: dict[str, str]):
        from recharness.matching import normalize_title

        self.titles = titles
        self.by_key: dict[str, list[str]] = {}
        self.by_bare: dict[str, list[str]] = {}
        for i, t in titles.items():
            nt = normalize_title(t)
            self.by_key.setdefault(f"{nt.key}|{nt.year}", []).append(i)
            self.by_bare.setdefault(nt.key, []).append(i)

    def id_of(self, x) -> str | None:
        """The catalog id `x` is (an id, or a title; a title carried by several ids: the first, the scorers
        count a hit on any of them), None when it is neither."""
        from recharness.matching import normalize_title

        x = str(x).strip()
        if x in self.titles:
            return x
        nt = normalize_title(x)
        got = self.by_key.get(f"{nt.key}|{nt.year}") if nt.year is not None else None
        if not got and nt.year is None and len({self.titles[i] for i in self.by_bare.get(nt.key, [])}) == 1:
            got = self.by_bare[nt.key]  # one title (twins: one title, several ids)
        return got[0] if got else None

    def why_not(self, x) -> str:
        """Why `x` names no one catalog item."""
        from recharness.matching import normalize_title

        nt = normalize_title(str(x))
        many = sorted({self.titles[i] for i in self.by_bare.get(nt.key, [])})
        if len(many) > 1:
            return (f"{str(x)[:80]!r} names {len(many)} catalog titles ({'; '.join(many[:3])}): give the title with "
                    "its year, or the item id")
        return f"{str(x)[:80]!r} is neither an item id nor a title of the dataset's catalog"


def _as_given(s: dict, d: dict, ids: _TitleIds, where: str) -> dict | None:
    """The line's own target / candidates as catalog ids ({"target": id, "candidates": [ids]}, the keys the
    line gives), None when it gives neither. A value that is no catalog id or title, a target outside the
    line's own candidates, or a field the task's samples do not have is refused naming line and field."""
    over: dict = {}
    if d.get("target") is not None:
        if "target" not in s:
            raise ConfigError(f"{where}: field \"target\": --targets as-given, but {s['task']} samples have no "
                              "target to replace (leave the field out, or score with --targets build)")
        t = ids.id_of(d["target"])
        if t is None:
            raise ConfigError(f"{where}: field \"target\": {ids.why_not(d['target'])}")
        over["target"] = t
    if d.get("candidates") is not None and "candidates" in s:  # only tasks that rank candidates have them
        given = as_list(d["candidates"])
        if not given:
            raise ConfigError(f"{where}: field \"candidates\": not a non-empty list of item ids or titles")
        cands: list[str] = []
        shown: list[str] = []  # as the line writes them (the titles its model was shown), a catalog title for an id
        for x in given:
            c = ids.id_of(x)
            if c is None:
                raise ConfigError(f"{where}: field \"candidates\": {ids.why_not(x)}")
            if c in cands:
                raise ConfigError(f"{where}: field \"candidates\": {str(x)[:80]!r} is listed twice")
            cands.append(c)
            shown.append(ids.titles[c] if str(x).strip() == c else str(x).strip())
        over["candidates"] = cands
        over["candidate_titles"] = shown
    if not over:
        return None
    cands = over.get("candidates", s.get("candidates"))
    if cands is not None and over.get("target", s.get("target")) not in cands:
        raise ConfigError(f"{where}: field \"target\": {str(d.get('target', s.get('target')))[:80]!r} is not one of "
                          "the line's candidates")
    return over


def apply_as_given(sample: dict, over: dict | None, titles: dict[str, str] | None = None) -> dict:
    """A copy of `sample` whose target / candidates are an import's own (`over`, from `--targets as-given`),
    with the fields derived from them (titles, the target's position); the target is no longer among the
    items the user is said to have had (a hit on it would be dropped as already seen). The build's sample is
    never changed: only the importing method's row is scored against the copy."""
    if not over:
        return sample
    s = dict(sample)
    titles = titles or {}
    if "target" in over:
        s["target"] = over["target"]
        if "target_title" in s:
            s["target_title"] = over.get("target_title") or titles.get(over["target"], over["target"])
        for k in ("seen", "history"):
            if isinstance(s.get(k), list) and over["target"] in s[k]:
                s[k] = [i for i in s[k] if i != over["target"]]
    if "candidates" in over:
        s["candidates"] = list(over["candidates"])
        if "candidate_titles" in s:
            s["candidate_titles"] = list(over.get("candidate_titles") or [titles.get(c, c) for c in over["candidates"]])
    if "target_position" in s and s["target"] in s.get("candidates", ()):
        s["target_position"] = s["candidates"].index(s["target"]) + 1
    return s


def as_given_samples(samples: list[dict], recs: dict[str, dict]) -> list[dict]:
    """`samples` with each one an imported record scores against its own target / candidates (the record's
    `as_given`, written by `score --targets as-given`) replaced by that copy; the others as they are."""
    if not any(isinstance(r, dict) and r.get("as_given") for r in recs.values()):
        return samples
    return [apply_as_given(s, (recs.get(s["id"]) or {}).get("as_given")) for s in samples]


KINDS = ("llm", "reference", "finetuned")


def _record(sample: dict, name: str, source: str, where: str, fp: str, output, parsed, valid: bool, error) -> dict:
    return {"id": sample["id"], "task": sample["task"],
            "model": {"backend": "imported", "model": name, "file": source},
            "build": fp, "output": output, "parsed": parsed, "valid": valid, "error": error, "attempts": 1,
            "latency_s": None, "prompt_tokens": None, "completion_tokens": None, "cached": False, "imported_from": where}


def _imported_from(path: Path) -> dict | None:
    """The model identity of the first record of an existing predictions file (None: none readable)."""
    try:
        with open(path, "rb") as f:
            for raw in f:
                if raw.strip():
                    rec = json.loads(raw)
                    m = rec.get("model") if isinstance(rec, dict) else None
                    return m if isinstance(m, dict) else None
    except (OSError, ValueError):
        return None
    return None


def _same_import(model: dict | None, source: Path, shown: str) -> bool:
    """Whether `model` (a record's identity) is an import of `source`: our reader stores the shown
    path, the suite's own reader (a folder or .json) each file's path."""
    if not model or model.get("backend") != "imported" or not model.get("file"):
        return False
    f = str(model["file"])
    if f == shown:
        return True
    try:
        fp, sp = Path(f).resolve(), source.resolve()
    except (OSError, RuntimeError):
        return False
    return fp == sp or (source.is_dir() and fp.parent == sp)


#: the values of a finetuned line's "items" key (how its model read items), never item ids
ITEM_KINDS = ("text", "id", "sid")


def _kind_of(given: str | None, d: dict) -> dict | None:
    """{"kind": llm|reference|finetuned (+ "items": text|id|sid)}: `--kind`, else the line's own "kind"
    (and "items") where the file says, else None (an LLM's answers)."""
    k = given if given is not None else d.get("kind")
    if k is None:
        return None
    k = str(k).strip().lower()
    if k not in KINDS:
        raise ConfigError(f"kind {k!r}: one of {', '.join(KINDS)}")
    out = {"kind": k}
    if k == "finetuned" and str(d.get("items", "")).lower() in ITEM_KINDS:
        out["items"] = str(d["items"]).lower()
    return out


def import_predictions(out: Path, source: Path, name: str, *, native=None, force: bool = False,
                       kind: str | None = None, targets: str = "build") -> dict:
    """Write predictions/<name>.jsonl of the run `out` from `source`; returns the import report.

    An existing predictions/<name>.jsonl is replaced only when an earlier import of the same
    `source` wrote it, or with `force`: never a model's run (whose resumption would take the
    imported answers for its own) nor another file's import.

    `native(out, source, name) -> (predictions path, problems)`: the suite's own reader for its
    published prediction files (PerRecBench's <mode>-<level>.json), used for a folder or a .json
    file; the runner imports no suite itself.

    `kind` (llm, reference, finetuned; default: the file's own "kind" field where its lines have one, else an
    LLM) is kept in the records' model identity: a paper table files the row by it.

    `targets`: "build" (default) scores every answer against the build's sample and counts the lines whose own
    `target` / `candidates` differ; "as-given" scores each answer against its line's own target and candidates
    (ids or titles, resolved through the catalog; `as_given` on the record, applied by the score stage to this
    method's row only), and parses it against them (candidate numbers name the line's candidates)."""
    from recharness.core.io import atomic_write_text, read_jsonl, write_jsonl_atomic
    from recharness.core.paths import shown_path
    from recharness.core.rundir import RunDir
    from recharness.tasks.references import check_method_name
    from recharness.data.store import load_dataset
    from recharness.runner.coverage import record_run
    from recharness.tasks.registry import suite_context
    from recharness.tasks.registry import get_task

    check_method_name(name)
    if targets not in TARGETS:
        raise ConfigError(f"--targets {targets!r}: one of {', '.join(TARGETS)}")
    source = Path(source)
    if not source.exists():
        raise ConfigError(f"--predictions {source}: no such file or directory")
    info, samples = RunDir(out).load_build()  # options were checked when the build was made
    fp = info["fingerprint"]
    shown = shown_path(source)
    rd = RunDir(out)
    target = rd.predictions(name)
    model = _imported_from(target) if target.exists() and not force else None
    if target.exists() and not force and not _same_import(model, source, shown):
        by = (f"an import of {model.get('file')}" if model and model.get("backend") == "imported"
              else f"a run of {model.get('backend')}:{model.get('model')}" if model else "something else")
        raise ConfigError(f"{shown_path(target)} already exists ({by}): give another --name, or --force to "
                          f"replace it with the answers of {shown}")
    if native is not None and (source.is_dir() or source.suffix == ".json"):
        if targets != "build":
            raise ConfigError(f"--targets {targets}: {shown} is read by the suite's own reader of its released "
                              "files, which keeps the build's samples (--targets build)")
        given_kind = _kind_of(kind, {}) if kind is not None else None  # a bad --kind stops before anything is read
        path, problems = native(out, source, name)
        recs = list(read_jsonl(path))
        if given_kind:  # the released files say nothing of what made them: --kind does, as for any import
            for r in recs:
                r["model"].update(given_kind)
            write_jsonl_atomic(path, recs)
        report = {"name": name, "source": shown, "lines": len(recs), "imported": len(recs),
                  "kind": (given_kind or {}).get("kind", "llm"),
                  "invalid": sum(not r.get("valid", True) for r in recs), "unanswered": len(samples) - len(recs),
                  "problems": problems, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "predictions": rd.relative(rd.predictions(name))}
        atomic_write_text(rd.import_report(name), json.dumps(report, indent=2))
        record_run(rd, name, limit=None, tasks=None, imported=True)  # scored on what it answers
        return report
    if source.is_dir():
        raise ConfigError(f"--predictions {source}: a directory (only a suite's own published files come as a folder)")
    ds = None
    tasks: dict = {}

    def dataset():
        nonlocal ds
        if ds is None:
            ds = load_dataset(info["dataset"])
        return ds

    def task_of(t: str):
        if t not in tasks:
            task = get_task(info["suite"], t)
            if task.request == "generate":
                ctx = suite_context(info["suite"], dataset(), info.get("options"), seed=info.get("seed", 0),
                                    limit=info.get("limit"))
                task.setup(dataset(), ctx)
            tasks[t] = task
        return tasks[t]

    cat: dict[str, str] | None = None

    def titles():
        nonlocal cat
        if cat is None:
            cat = _titles_of(dataset())
        return cat

    ids: _TitleIds | None = None

    def title_ids() -> _TitleIds:
        nonlocal ids
        if ids is None:
            ids = _TitleIds(titles())
        return ids

    resolver = _Resolver(samples)
    given = 0  # with --targets as-given: lines scored against their own target / candidates
    row_kind: dict | None = None  # the row's kind, from --kind or the first line that says
    differ: dict[str, list[str]] = {"target": [], "candidates": []}  # lines whose own target/candidates are not the build's
    problems: list[dict] = []
    records: dict[str, dict] = {}
    lines = 0
    for ln, d in _read_lines(source):
        lines += 1
        where = f"{shown}:{ln}"
        if isinstance(d, str):
            problems.append({"where": where, "problem": f"malformed: {d}"})
            continue
        if kind is None and d.get("kind") is not None:
            # one row is one kind: the first line that says sets it; a line saying another is not part of it
            try:
                mine = _kind_of(None, d)
            except ConfigError as e:
                problems.append({"where": where, "problem": str(e)})
                continue
            if row_kind is None:
                row_kind = mine
            elif mine != row_kind:
                problems.append({"where": where, "problem": f"kind {mine} but the file's rows are {row_kind} (from "
                                                            "its first line that says): one row is one kind"})
                continue
        s, why = resolver.find(d)
        if s is None:
            problems.append({"where": where, "problem": why})
            continue
        if d.get("task") is not None and str(d["task"]) != s["task"]:
            problems.append({"where": where, "problem": f"task {d['task']!r} but sample {s['id']} is {s['task']!r}"})
            continue
        if s["id"] in records:
            problems.append({"where": where, "problem": f"a second answer for {s['id']} (first at "
                                                        f"{records[s['id']]['imported_from']}): ignored"})
            continue
        for key, same in (("target", _same_target), ("candidates", _same_candidates)):
            if d.get(key) is not None and s.get(key) is not None and not same(d[key], s[key], titles):
                differ[key].append(where)
        over = _as_given(s, d, title_ids(), where) if targets == "as-given" else None
        if over is not None:
            given += 1
            s = apply_as_given(s, over, titles())
        task = task_of(s["task"])
        own = task.import_answer(s, d)  # a task whose answers are no item list or text reads its own keys
        if own is not None:
            rec, err = own
            if err:
                problems.append({"where": where, "problem": err})
                continue
            records[s["id"]] = _record(s, name, shown, where, fp, rec.get("output"), rec["parsed"], rec["valid"],
                                       rec["error"])
            if over is not None:
                records[s["id"]]["as_given"] = over
            continue
        text, notes, err = _answer_text(task, s, d, titles)
        if err:
            problems.append({"where": where, "problem": err})
            continue
        problems += [{"where": where, "problem": n} for n in notes]
        parsed = task.parse(s, text)
        records[s["id"]] = _record(s, name, shown, where, fp, text, parsed.value, parsed.valid, parsed.error)
        if over is not None:
            records[s["id"]]["as_given"] = over
    if not records:
        raise ConfigError(f"--predictions {source}: no line answers a sample of this run "
                          f"({len(problems)} problem{'' if len(problems) == 1 else 's'}; first: {problems[0]['where']}: {problems[0]['problem']})"
                          if problems else f"--predictions {source}: empty")
    if kind is not None:
        row_kind = _kind_of(kind, {})
    for r in records.values() if row_kind else ():
        r["model"].update(row_kind)
    if given:  # part of what the row is: scored against the file's own targets, not the build's
        for r in records.values():
            r["model"]["targets"] = "as-given"
    order = {s["id"]: n for n, s in enumerate(samples)}
    path = target
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(path, sorted(records.values(), key=lambda r: order[r["id"]]))
    report = {"name": name, "source": shown, "lines": lines, "imported": len(records),
              "kind": (row_kind or {}).get("kind", "llm"),
              "invalid": sum(not r["valid"] for r in records.values()),
              # answered in shape, but not one named title is a catalog item: apart from invalid answers
              "unrecognised": sum(_unrecognised(r) for r in records.values()),
              "unanswered": len(samples) - len(records), "problems": problems,
              # lines that carry their own target / candidates other than the build's sample (scored against the build's)
              "differs": {k: {"lines": len(v), "first": v[:5]} for k, v in differ.items() if v},
              # --targets: "build", or "as-given" (then `as_given` lines were scored against their own)
              "targets": targets, "as_given": given,
              "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "predictions": rd.relative(rd.predictions(name))}
    atomic_write_text(rd.import_report(name), json.dumps(report, indent=2))
    record_run(rd, name, limit=None, tasks=None, imported=True)  # scored on what it answers
    return report

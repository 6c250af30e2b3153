"""The official RecBench+ JSON layout: file names, reading with checks, writing.

Condition files (ExplicitQuery.json, ImplicitQuery.json, MisinformedQuery.json)
are lists of {source_user, condition_num, movieCount, movieSubset,
movieSubsetId, sharedRelationships, direct_description_query,
situational_description_query, data_idx}. UserBasedQuery.json is a list of
user groups, each with `query & ground true`: [{reason, query, movie subset}].
The interest file's official name and layout were not published with the
paper; ours (InterestBasedQuery.json) follows UserBasedQuery.json's.

Files we write carry extra keys (how the text was made, the implicit
reference, the false claim); the official keys keep their meaning, so our
files and the published ones load through the same code. Book files use the
same key names.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from recharness.core.errors import ConfigError, InputError
from recharness.core.rundir import RunDir
from recharness.data.parsing import json_line, read_json

FILES = {
    "explicit": "ExplicitQuery.json",
    "implicit": "ImplicitQuery.json",
    "misinformed": "MisinformedQuery.json",
    "interest": "InterestBasedQuery.json",
    "demographics": "UserBasedQuery.json",
}
OUT_DIR = "recbench_plus"

CONDITION_KEYS = ("source_user", "movieSubsetId", "sharedRelationships")
GROUP_KEYS = ("query & ground true",)


def official_id(item_id: str):
    """MovieIDs are ints in the official files; other ids stay strings."""
    return int(item_id) if item_id.isdigit() and not item_id.startswith("0") else item_id


def read_records(path: str | Path, kind: str) -> list[dict]:
    """Load and check one official-layout file; errors name the file, entry and field."""
    path = Path(path)
    data, text = read_json(path)

    def wrong(n: int, key: str, need: str, got: str | None = None) -> InputError:
        got = got or type(data[n][key]).__name__
        return InputError(path, f"entry {n}: must be {need}, not {got}", line=json_line(text, (n, key)), field=key)

    if not isinstance(data, list):
        raise InputError(path, f"expected a JSON list of queries, got {type(data).__name__}")
    for n, rec in enumerate(data):
        where = f"entry {n}"
        if not isinstance(rec, dict):
            raise InputError(path, f"{where}: expected an object, got {type(rec).__name__}")
        if kind in ("explicit", "implicit", "misinformed"):
            for k in CONDITION_KEYS:
                if k not in rec:
                    raise InputError(path, f"{where}: missing key", field=k)
            if not isinstance(rec["movieSubsetId"], list) or not rec["movieSubsetId"]:
                raise InputError(path, f"{where}: must be a non-empty list", field="movieSubsetId")
            rels = rec["sharedRelationships"]
            if not isinstance(rels, list) or not all(isinstance(r, (list, tuple)) and len(r) == 2 for r in rels):
                raise InputError(path, f"{where}: must be a list of [relation, value] pairs", field="sharedRelationships")
            if not any(isinstance(rec.get(q), str) and rec[q].strip() for q in ("situational_description_query", "direct_description_query")):
                raise InputError(path, f"{where}: no query text", field="situational_description_query")
            if rec.get("movieSubset") is not None and not isinstance(rec["movieSubset"], list):
                raise wrong(n, "movieSubset", "a list of titles")
            for k in ("implicitCondition", "misinformedCondition"):
                if rec.get(k) is not None and not isinstance(rec[k], dict):
                    raise wrong(n, k, "an object {relation, value, ...}")
        else:
            g = rec.get("group")
            odd = [v for v in g if not isinstance(v, str)] if isinstance(g, list) else []
            if (g is not None and not isinstance(g, (str, list))) or odd:
                raise wrong(n, "group", "a string or a list of strings",
                            f"a list holding {type(odd[0]).__name__}" if odd else None)
            qs = rec.get("query & ground true")
            if not isinstance(qs, list):
                raise InputError(path, f"{where}: missing or not a list", field="query & ground true")
            for j, q in enumerate(qs):
                if not isinstance(q, dict) or not isinstance(q.get("query"), str) or not q["query"].strip():
                    raise InputError(path, f"{where}, query {j}: missing query text", field="query")
                sub = q.get("movie subset")
                if not isinstance(sub, list) or not sub:
                    raise InputError(path, f"{where}, query {j}: must be a non-empty list of titles", field="movie subset")
            top = rec.get("top_10_movies", [])
            if not isinstance(top, list) or not all(
                isinstance(t, list) and len(t) == 2 and isinstance(t[1], (int, float)) and not isinstance(t[1], bool)
                for t in top
            ):
                raise InputError(path, f"{where}: must be a list of [MovieID, tf-idf] pairs, got {top!r:.60}",
                                 field="top_10_movies")
        rec.setdefault("data_idx", n)
    seen: dict[str, int] = {}
    for n, rec in enumerate(data):
        key = str(rec["data_idx"])
        if key in seen:
            raise InputError(path, f"entry {n}: data_idx {key} already used by entry {seen[key]} (sample ids would clash)",
                             field="data_idx")
        seen[key] = n
    return data


def write_records(out: Path, kind: str, records: list[dict]) -> Path:
    d = RunDir(out).side_file(OUT_DIR)
    d.mkdir(parents=True, exist_ok=True)
    path = d / FILES[kind]
    tmp = path.with_suffix(".json.tmp")
    # one query per line: readable, and written by the C encoder (indent= would use the slow Python one)
    body = ",\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    tmp.write_text(f"[\n{body}\n]\n" if records else "[]\n", encoding="utf-8")
    tmp.replace(path)
    return path


def find_file(options: dict, kind: str) -> Path | None:
    """The official file a task should load: `<kind>_file=PATH`, or FILES[kind] in `official_dir=DIR`."""
    f = options.get(f"{kind}_file")
    if f:
        return Path(str(f))
    d = options.get("official_dir")
    if d:
        folder = Path(str(d))
        if not folder.is_dir():  # before: the queries were built from the data, as if no folder had been named
            raise ConfigError(f"official_dir={d}: no such folder (the one holding the official files: "
                              f"{', '.join(FILES.values())})")
        if not any((folder / f).exists() for f in FILES.values()):
            raise ConfigError(f"official_dir={d}: holds none of the official files ({', '.join(FILES.values())})")
        p = folder / FILES[kind]
        if not p.exists():
            logging.getLogger(__name__).warning("official_dir=%s has no %s: the %s queries are built from the data",
                                                d, FILES[kind], kind)
            return None
        return p
    return None

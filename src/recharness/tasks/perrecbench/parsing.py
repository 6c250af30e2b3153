"""Reading the three answer formats; model text is untrusted, so only json.loads and regexes touch it.

Each parser returns recharness `Parsed`: an answer that does not follow the
format is `valid=False` with the reason, so it is retried and then counted.
The generic pieces (scan limit, JSON object extraction, JSON value -> number)
are the package-level ones in recharness.tasks.validation. PerRecBench reads
objects more leniently than `JsonObject` (the *last* flat object that carries
the key, wherever it sits, then a bare `predicted_rating: x` as a fallback),
as the original code's answers need; that choice stays here.
"""

from __future__ import annotations

import json
import re

from recharness.core.types import Parsed
from recharness.tasks.validation import finite_number, flat_json_objects, scan

_RATING_KV = re.compile(r"predicted[_ ]rating\"?\s*[:=]\s*\"?(-?\d+(?:\.\d+)?)", re.I)
_RANKING_KV = re.compile(r"predicted[_ ]ranking\"?\s*[:=]\s*\[([^\]]*)\]", re.I)
_USER = re.compile(r"\buser\s*([ab])\b", re.I)
_INDEX = re.compile(r"^\s*(?:user\s*)?(\d{1,3})\s*$", re.I)


def parse_rating(text: str, lo: float = 1.0, hi: float = 5.0) -> Parsed:
    """{"predicted_rating": x} (the last such object wins, as after a chain of thought); x in [lo, hi]."""
    value = None
    for obj in reversed(flat_json_objects(text)):
        # the format's own key first, then any "rating" key, then any "score" ({"predicted_rating": 4,
        # "user_score": 2} is 4, not the last key that mentions a score)
        low = {k.lower().replace(" ", "_"): k for k in obj}
        keys = ([low["predicted_rating"]] if "predicted_rating" in low else []) \
            + [k for k in obj if "rating" in k.lower()] + [k for k in obj if "score" in k.lower()]
        for k in keys:
            value = finite_number(obj[k])
            if value is not None:
                break
        if value is not None:
            break
    if value is None:
        found = _RATING_KV.findall(scan(text)[0])
        value = float(found[-1]) if found else None
    if value is None:
        return Parsed(None, valid=False, error='no {"predicted_rating": <number>} in the answer')
    if not lo <= value <= hi:
        return Parsed(value, valid=False, error=f"rating {value:g} outside {lo:g}..{hi:g}")
    return Parsed(value)


_BRACKETED_USER = re.compile(r"\[\s*user\s*([ab])\s*\]", re.I)


def parse_pair(text: str, last: bool = False) -> Parsed:
    """'A' or 'B' from "[User A]" / "[User B]" (the format's brackets first: "Comparing User A and User B, [User B]
    is more likely" is B): the first mention, or the last after a chain of thought."""
    t = scan(text)[0]
    found = [m.group(1).upper() for m in _BRACKETED_USER.finditer(t)] or [m.group(1).upper() for m in _USER.finditer(t)]
    if not found and t.strip().strip("[]().").upper() in ("A", "B"):
        found = [t.strip().strip("[]().").upper()]
    if not found:
        return Parsed(None, valid=False, error='neither "[User A]" nor "[User B]" in the answer')
    return Parsed(found[-1] if last else found[0])


def _index(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        m = _INDEX.match(v)
        if m:
            return int(m.group(1))
    return None


def parse_ranking(text: str, n: int) -> Parsed:
    """{"predicted_ranking": [...]} with each user index 1..n exactly once, most preferred first."""
    raw = None
    for obj in reversed(flat_json_objects(text)):
        keys = [k for k in obj if "rank" in k.lower()]
        if keys and isinstance(obj[keys[-1]], list):
            raw = obj[keys[-1]]
            break
    if raw is None:
        found = _RANKING_KV.findall(scan(text)[0])
        if found:
            raw = [x.strip().strip("\"'") for x in found[-1].split(",") if x.strip()]
    if raw is None:
        return Parsed(None, valid=False, error='no {"predicted_ranking": [...]} in the answer')
    idx = [_index(v) for v in raw]
    if any(i is None for i in idx):
        return Parsed(raw, valid=False, error=f"ranking has entries that are not user indices: {raw!r:.80}")
    if sorted(idx) != list(range(1, n + 1)):
        return Parsed(idx, valid=False, error=f"ranking {idx} is not a permutation of 1..{n}")
    return Parsed(idx)


def majority(values: list) -> object:
    """Most frequent value; among equally frequent values the one that appeared first (deterministic)."""
    counts: dict[str, int] = {}
    first: dict[str, object] = {}
    for v in values:
        key = json.dumps(v, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, v)
    if not counts:
        return None
    top = max(counts.values())
    return next(first[k] for k in first if counts[k] == top)

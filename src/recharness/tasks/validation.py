"""Output formats a task declares, and the validators that check model answers against them.

Package-level: any suite's task uses these (recharness.tasks.validation
re-exports them for the LLMRec tasks). Why one module: every task says what it expects (a number in a range, a JSON
object, a ranked list, free text within length bounds) and gets the same
rules for what counts as a valid answer, so invalid rates are comparable
across tasks. Answers are untrusted text: they are only scanned with linear
regular expressions, a single-pass brace matcher and `json.loads` (never
evaluated), after being cut to MAX_SCAN characters, so a 10,000-character
(or 10 MB) answer is checked in bounded time. A failed check returns
`Parsed(valid=False, error=...)`; the runner then retries once with the
task's format reminder and keeps whatever still fails as invalid.

Rules, decided here and tested in tests/test_validation.py:

NumberInRange(lo, hi) — e.g. a 1-5 rating
  * Numbers are decimal literals (``4``, ``4.5``) not glued to letters
    (``B08J6``, ``2nd``), not negative, not percentages (``80%``), not
    denominators (``/5``, ``out of 5``), not ends of a range (``1-5``,
    ``1 to 5``: a range is no single answer) and not list numbers (``1. X``
    or ``2) X`` at the start of a line: small models echo the history as a
    list). Number words are not read.
  * An answer shaped as a list (two or more numbered or bulleted lines, or
    a first line like "1. Some title") is invalid: small models echo the
    rated history as a list, and its "(rated 3/5)" is no prediction.
  * Candidates are numbers within [lo - slack, hi + slack] (slack 1: a 0 or
    a 6 on a 1-5 scale is an answer off the scale, clipped to it and flagged
    ``clipped``); anything further out (years, prices) is ignored.
  * One distinct candidate value → that value. Several → the last one that
    follows an answer word (``rating``, ``rate``, ``score``, ``predict``,
    ``predicted``, ``prediction``, ``answer``, ``estimate``) within 20
    non-digit characters; none such → invalid ("ambiguous").
JsonObject(fields)
  * The first top-level ``{...}`` in the answer (code fences and prose
    around it are ignored) whose parse succeeds; up to 10 objects are tried.
  * Tolerated: trailing commas before ``}`` or ``]`` (outside strings) —
    the one slip models make that has a single unambiguous repair — and
    numbers given as strings (``"4"``) for number fields.
  * Not tolerated: single quotes, unquoted keys, comments, Python literals
    (True/None), NaN/Infinity, an unterminated object.
  * Declared fields must be present with the declared type and range; other
    keys are kept but not checked.
RankedList(min_items, max_items)
  * Items are split by recharness.matching.parse_recommendations (numbered,
    bulleted, one per line, comma-separated); at least `min_items`, cut to
    `max_items`.
FreeText(min_words, max_words, single_line)
  * The answer is cleaned by `clean_text` (HTML line breaks, entities, code
    fences, markdown emphasis, leading lines that end in a colon ("Here is
    the summary:"), a leading "Summary:"-style label, a list bullet or
    number, wrapping quotes or an opening quote never closed; whitespace
    collapsed).
    With `single_line` only the first non-empty line is kept.
  * Words are whitespace-separated tokens; fewer than `min_words` (an empty
    answer) or more than `max_words` is invalid.

Lower-level helpers for suites that read their own answer layouts (PerRecBench):
  * scan(text) → (the first MAX_SCAN characters, whether it was cut).
  * flat_json_objects(text): every brace-free ``{...}`` span that json.loads
    reads as an object, in order — more lenient than JsonObject about where
    an object sits (inside a wrapper object, after prose or a chain of
    thought; spans that do not parse are skipped), stricter about repair (no
    trailing-comma fix); NaN / Infinity parse and are left to the caller.
  * finite_number(v): a JSON value as a finite float — numbers and numeric
    strings (``"4"``, ``" 4.5 "``, ``"1e0"``); never bools, NaN or infinities.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field

from recharness.core.types import Parsed

MAX_SCAN = 20_000  # characters of an answer that are looked at; the rest is ignored

__all__ = [
    "MAX_SCAN",
    "scan",
    "flat_json_objects",
    "finite_number",
    "OutputFormat",
    "NumberInRange",
    "JsonObject",
    "JsonField",
    "RankedList",
    "FreeText",
    "clean_text",
    "normalize_for_metrics",
    "strip_trailing_commas",
]


class OutputFormat:
    """What a task expects back; `check(text)` → Parsed, `describe()` for prompts and docs."""

    kind: str = "base"

    def check(self, text: str | None) -> Parsed:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        return {"kind": self.kind, **d}


def scan(text: str | None) -> tuple[str, bool]:
    """The part of an answer that is looked at (the first MAX_SCAN characters), and whether it was cut."""
    t = "" if text is None else str(text)
    return t[:MAX_SCAN], len(t) > MAX_SCAN


_scan = scan


# ---------------------------------------------------------------- lenient JSON helpers

_FLAT_OBJECT_RE = re.compile(r"\{[^{}]*\}")


def flat_json_objects(text: str | None) -> list[dict]:
    """Every brace-free {...} span of the answer that json.loads reads as an object, in order.

    Finds objects wherever they sit (the innermost ones of a wrapper, several after a chain of
    thought); spans that are not JSON are skipped. The caller picks which one counts.
    """
    out = []
    for m in _FLAT_OBJECT_RE.finditer(scan(text)[0]):
        try:
            obj = json.loads(m.group(0))
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def finite_number(v) -> float | None:
    """A JSON value as a finite float: numbers and numeric strings; None for bools, other types,
    unparseable strings, NaN and infinities."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------- numbers

_NUM_RE = re.compile(r"(?<![\w.,/\-−])(\d{1,6}(?:\.\d{1,4})?)(?![\w%]|\.\d|\s*(?:-|–|—|to)\s*\d)")
_BEFORE_EXCLUDE_RE = re.compile(r"(?:\bout\s+of\s*|\d\s*(?:-|–|—|\bto)\s*)$", re.IGNORECASE)
_LIST_MARK_AFTER_RE = re.compile(r"[.)][ \t]+\S")
_OVER_RE = re.compile(r"\s*/\s*(\d{1,6}(?:\.\d{1,4})?)")  # "4/5", "8 / 10": the scale a number is given on
_LINE_PREFIX_RE = re.compile(r"[ \t#*>-]*")
_ANCHOR_RE = re.compile(r"\b(?:rating|rate|score|predict|predicted|prediction|answer|estimate)\b[^\d\n]{0,20}$", re.IGNORECASE)
#: the words that name the answer itself; "rating" / "score" also name the history's ratings ("rated 4/5")
_STRONG_ANCHOR_RE = re.compile(r"\b(?:predict|predicted|prediction|answer|estimate)\b[^\d\n]{0,20}$", re.IGNORECASE)


_NUMBERED_LINE_RE = re.compile(r"^[ \t]*\d{1,3}[.)][ \t]+\S", re.MULTILINE)
_BULLET_LINE_RE = re.compile(r"^[ \t]*[-*•][ \t]+\S", re.MULTILINE)
_FIRST_NUMBERED_TEXT_RE = re.compile(r"\s*\d{1,3}[.)][ \t]+[^\d\s]")


def _is_list(text: str) -> bool:
    """Two or more list lines, or a first line like "1. Some title": an answer shaped as a list."""
    lines = len(_NUMBERED_LINE_RE.findall(text)) + len(_BULLET_LINE_RE.findall(text))
    return lines >= 2 or _FIRST_NUMBERED_TEXT_RE.match(text) is not None


def _at_line_start(text: str, pos: int) -> bool:
    """Only blanks or markdown list/heading marks between the line start and `pos` (≤ 24 chars back)."""
    nl = text.rfind("\n", max(0, pos - 24), pos)
    if nl < 0 and pos > 24:
        return False
    return _LINE_PREFIX_RE.fullmatch(text, nl + 1, pos) is not None


@dataclass
class NumberInRange(OutputFormat):
    lo: float = 1.0
    hi: float = 5.0
    #: how far off the scale a number may be and still count as an answer (then clipped)
    slack: float = 1.0
    kind: str = field(default="number", init=False)

    def describe(self) -> str:
        return f"a single number from {self.lo:g} to {self.hi:g}"

    def candidates(self, text: str) -> list[tuple[float, bool]]:
        """(value, anchored) for every number that could be the answer, in order; anchored is 2 after a word
        naming the answer ("prediction: 4"), 1 after "rating" / "score", 0 otherwise."""
        out = []
        for m in _NUM_RE.finditer(text):
            before = text[max(0, m.start() - 24) : m.start()]
            if _BEFORE_EXCLUDE_RE.search(before):
                continue
            if _LIST_MARK_AFTER_RE.match(text, m.end()) and _at_line_start(text, m.start()):
                continue  # "1. Title" / "2) Title": a list number, not an answer
            scale = _OVER_RE.match(text, m.end())
            if scale and float(scale.group(1)) != self.hi:
                continue  # "5/10": a rating on another scale (2.5 here), not this scale's 5
            v = float(m.group(1))
            if self.lo - self.slack <= v <= self.hi + self.slack:
                out.append((v, 2 if _STRONG_ANCHOR_RE.search(before) else int(bool(_ANCHOR_RE.search(before)))))
        return out

    def check_number(self, x: float) -> Parsed:
        """A number given as a number (an imported `rating`), read as `check` reads one in text: finite, within
        the slack of the range, clipped into it; every digit kept (text reads at most 4 decimals)."""
        if not math.isfinite(x) or not self.lo - self.slack <= x <= self.hi + self.slack:
            return Parsed({"truncated": False}, valid=False, error=f"{x!r} is not a number in {self.lo:g}..{self.hi:g}")
        value = min(max(float(x), self.lo), self.hi)
        return Parsed({"value": value, "raw": float(x), "clipped": value != x, "how": "number", "truncated": False})

    def check(self, text: str | None) -> Parsed:
        t, truncated = _scan(text)
        if not t.strip():
            return Parsed(None, valid=False, error="empty answer")
        if _is_list(t):
            return Parsed({"truncated": truncated}, valid=False, error="a list, not a single number")
        cands = self.candidates(t)
        if not cands:
            return Parsed({"truncated": truncated}, valid=False, error=f"no number in {self.lo:g}..{self.hi:g} found")
        distinct = sorted({v for v, _ in cands})
        if len(distinct) == 1:
            raw, how = distinct[0], "single"
        else:
            # the last number after a word naming the answer, else the last after "rating" / "score": "Predicted
            # rating: 4. The user gave a rating of 5 to Heat" is 4
            strongest = max(a for _, a in cands)
            anchored = [v for v, a in cands if a and a == strongest]
            if not anchored:
                shown = ", ".join(f"{v:g}" for v in distinct[:6])
                return Parsed({"candidates": distinct, "truncated": truncated}, valid=False,
                              error=f"ambiguous: several numbers ({shown}) and none follows a word like 'rating'")
            raw, how = anchored[-1], "anchored"
        value = min(max(raw, self.lo), self.hi)
        return Parsed({"value": value, "raw": raw, "clipped": value != raw, "how": how, "truncated": truncated})


# ---------------------------------------------------------------- JSON objects

@dataclass
class JsonField:
    """A declared field: `type` is "int", "number" or "str"; numbers may carry a range."""

    type: str = "str"
    lo: float | None = None
    hi: float | None = None
    required: bool = True
    max_chars: int | None = None


def _balanced_objects(text: str, limit: int = 10):
    """Yield (start, end) of top-level {...} spans, string- and escape-aware; one linear pass."""
    depth = 0
    start = -1
    in_str = esc = False
    found = 0
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            if depth > 0:
                in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                yield start, i + 1
                found += 1
                if found >= limit:
                    return
    if depth > 0:
        yield start, -1  # unterminated


def strip_trailing_commas(s: str) -> str:
    """Drop commas directly before } or ] (whitespace between allowed), never inside strings."""
    out = []
    in_str = esc = False
    pending_comma: int | None = None  # index in `out` of a comma that may be trailing
    for ch in s:
        if in_str:
            out.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch in "}]" and pending_comma is not None:
            del out[pending_comma]
            pending_comma = None
        elif not ch.isspace():
            pending_comma = None
        if ch == '"':
            in_str = True
        out.append(ch)
        if ch == ",":
            pending_comma = len(out) - 1
    return "".join(out)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def _coerce(name: str, spec: JsonField, v):
    if spec.type in ("int", "number"):
        if isinstance(v, bool):
            raise ValueError(f"field {name!r} must be a number, got {v!r}")
        if isinstance(v, str):
            s = v.strip()
            if not re.fullmatch(r"-?\d{1,9}(?:\.\d{1,6})?", s):
                raise ValueError(f"field {name!r} must be a number, got {v!r}")
            v = float(s)
        if not isinstance(v, (int, float)):
            raise ValueError(f"field {name!r} must be a number, got {type(v).__name__}")
        if spec.type == "int":
            if float(v) != int(v):
                raise ValueError(f"field {name!r} must be a whole number, got {v!r}")
            v = int(v)
        if (spec.lo is not None and v < spec.lo) or (spec.hi is not None and v > spec.hi):
            raise ValueError(f"field {name!r} = {v!r} is outside {spec.lo:g}..{spec.hi:g}")
        return v
    if not isinstance(v, str):
        raise ValueError(f"field {name!r} must be a string, got {type(v).__name__}")
    return v[: spec.max_chars] if spec.max_chars else v


@dataclass
class JsonObject(OutputFormat):
    fields: dict[str, JsonField] = field(default_factory=dict)
    #: with several valid objects, the last one: an answer that quotes one (a judge echoing the graded text
    #: before its own verdict) is judged by what it concludes
    last: bool = False
    kind: str = field(default="json", init=False)

    def describe(self) -> str:
        keys = ", ".join(f'"{k}"' for k in self.fields)
        return f"a JSON object with the keys {keys}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "fields": {k: dict(vars(v)) for k, v in self.fields.items()}}

    def check(self, text: str | None) -> Parsed:
        t, truncated = _scan(text)
        if not t.strip():
            return Parsed(None, valid=False, error="empty answer")
        first_error = None
        found: dict | None = None
        for start, end in _balanced_objects(t):
            if end < 0:
                first_error = first_error or "unterminated JSON object" + (" (answer cut at MAX_SCAN)" if truncated else "")
                break
            raw = t[start:end]
            try:
                obj = json.loads(strip_trailing_commas(raw), parse_constant=_reject_constant)
            except (ValueError, RecursionError) as e:
                first_error = first_error or f"not valid JSON: {str(e)[:120]}"
                continue
            if not isinstance(obj, dict):
                continue
            try:
                out = dict(obj)
                for name, spec in self.fields.items():
                    if name not in obj:
                        if spec.required:
                            raise ValueError(f"missing field {name!r}")
                        continue
                    out[name] = _coerce(name, spec, obj[name])
            except ValueError as e:
                first_error = first_error or str(e)
                continue
            if not self.last:
                return Parsed(out)
            found = out
        if self.last and found is not None:
            return Parsed(found)
        return Parsed({"truncated": truncated}, valid=False, error=first_error or "no JSON object found")


# ---------------------------------------------------------------- ranked lists

@dataclass
class RankedList(OutputFormat):
    min_items: int = 1
    max_items: int = 100
    kind: str = field(default="ranked_list", init=False)

    def describe(self) -> str:
        return f"a ranked list of {self.min_items} to {self.max_items} items, one per line"

    def check(self, text: str | None) -> Parsed:
        from recharness.matching import parse_recommendations

        t, truncated = _scan(text)
        if not t.strip():
            return Parsed(None, valid=False, error="empty answer")
        items = parse_recommendations(t)[: self.max_items]
        if len(items) < self.min_items:
            return Parsed({"items": items, "truncated": truncated}, valid=False,
                          error=f"{len(items)} list items found, need at least {self.min_items}")
        return Parsed({"items": items, "truncated": truncated})


# ---------------------------------------------------------------- free text

_BR_RE = re.compile(r"<\s*br\s*/?\s*>", re.IGNORECASE)
_TAG_RE = re.compile(r"</?[a-zA-Z][^<>\n]{0,100}>")
_FENCE_RE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
_EMPH_RE = re.compile(r"\*\*|__|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_LABEL_RE = re.compile(
    r"^\s*(?:#+\s*)?(?:one[- ]line\s+)?(?:summary|title|review title|explanation|answer|output|response|headline)\s*[:：\-–]\s*",
    re.IGNORECASE,
)
_PREAMBLE_RE = re.compile(r"^\s*(?:sure|okay|ok|here(?:'s| is| are)|certainly|of course)\b[^\n]{0,120}:\s*$", re.IGNORECASE)
_BULLET_RE = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’", "«": "»"}
_WS_RE = re.compile(r"[ \t\r\f\v]+")


def normalize_for_metrics(text: str | None) -> str:
    """What both hypothesis and reference go through before BLEU/ROUGE: HTML breaks and
    entities undone, tags dropped, all whitespace collapsed to single spaces."""
    t = "" if text is None else str(text)
    t = _BR_RE.sub(" ", t)
    t = _TAG_RE.sub(" ", t)
    t = html.unescape(t)
    return " ".join(t.split())


def clean_text(text: str | None, single_line: bool = False) -> str:
    """A model's free-text answer without the wrapping models add around it."""
    t, _ = _scan(text)
    t = _BR_RE.sub("\n", t)
    t = html.unescape(t)
    t = _FENCE_RE.sub("", t)
    t = _EMPH_RE.sub("", t)
    lines = [_WS_RE.sub(" ", ln).strip() for ln in t.split("\n")]
    lines = [ln for ln in lines if ln]
    while len(lines) > 1 and (_PREAMBLE_RE.match(lines[0]) or lines[0].endswith(":")):
        lines = lines[1:]
    if lines:
        lines[0] = _BULLET_RE.sub("", _LABEL_RE.sub("", lines[0], count=1), count=1).strip()
        if not lines[0]:
            lines = lines[1:]
    if single_line:
        lines = lines[:1]
    t = " ".join(lines).strip()
    if t and t[0] in _QUOTES:
        close = _QUOTES[t[0]]
        if len(t) >= 2 and t.endswith(close) and t.count(t[0]) + (t.count(close) if close != t[0] else 0) <= 2:
            t = t[1:-1].strip()
        elif close not in t[1:]:
            t = t[1:].strip()  # an opening quote never closed (answer cut at max_tokens)
    return t


@dataclass
class FreeText(OutputFormat):
    min_words: int = 1
    max_words: int = 100
    single_line: bool = False
    kind: str = field(default="free_text", init=False)

    def describe(self) -> str:
        what = "one line of text" if self.single_line else "text"
        return f"{what} of {self.min_words} to {self.max_words} words"

    def check(self, text: str | None) -> Parsed:
        t, truncated = _scan(text)
        cleaned = clean_text(t, self.single_line)
        n = len(cleaned.split())
        value = {"text": cleaned, "words": n, "truncated": truncated}
        if n == 0:
            return Parsed(value, valid=False, error="empty answer")
        if n < self.min_words:
            return Parsed(value, valid=False, error=f"too short: {n} words < {self.min_words}")
        if n > self.max_words or (truncated and not self.single_line):
            return Parsed(value, valid=False, error=f"too long: {n} words > {self.max_words}" + (" (cut at MAX_SCAN)" if truncated else ""))
        return Parsed(value)


# ---------------------------------------------------------------- imported answers: list and number fields


def as_list(v) -> list | None:
    """An imported list field: a list, a JSON list in a string, or "|"-separated values (None: not a list)."""
    if isinstance(v, list):
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                got = json.loads(s)
            except json.JSONDecodeError:
                return None
            return got if isinstance(got, list) else None
        return [x.strip() for x in s.split("|") if x.strip()]
    return None


def whole_number(x) -> int | None:
    """x as an int when it is a whole, finite number (1, 1.0, "2"); None otherwise (1.9, NaN, True)."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return int(v) if math.isfinite(v) and v.is_integer() else None

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
    denominators (``/5``, ``/ 5``, ``out of 5``), not ends of a range
    (``1-5``, ``1 to 5``, ``between 3 and 4``: a range is no single answer)
    and not list numbers (``1. X`` or ``2) X`` at the start of a line: small
    models echo the history as a list). Number words are not read.
  * Commas: ``1,200`` is twelve hundred (off the scale); a single digit,
    comma, single digit on the scale with no number list around it
    (``3,5 stars``) is a decimal comma, 3.5; any other comma-glued number
    (``3,5,4``, ``3,75``) is unreadable, and an answer that rests on it is
    invalid.
  * An answer shaped as a list (two or more numbered or bulleted lines, or
    a first line like "1. Some title") is invalid: small models echo the
    rated history as a list, and its "(rated 3/5)" is no prediction.
  * A number that describes context is no candidate: its clause (since the
    last digit, sentence end or line break) names a statistic or the
    history — an aggregate or past qualifier with a rating word ("average
    rating is 3.6", "their usual score of", "other users' ratings
    average"), ``average``/``mean``/``median`` alone, a possessive with
    ``ratings``/``scores``, or a past rating verb ("the user rated Heat 5",
    "gave a rating of 5") — and no answer word (I, my, would, will,
    predict, answer, estimate, guess, so, …) is in or after that phrase or
    is the word just before it. Line labels ("Overall rating: 4") are answers, not context. A context
    number is never chosen but still counts as a distinct value below, so
    "4. Their average rating is 3.6" is ambiguous, not 4.
  * Candidates are numbers within [lo - slack, hi + slack] (slack 1: a 0 or
    a 6 on a 1-5 scale is an answer off the scale, clipped to it and flagged
    ``clipped``); anything further out (years, prices) is ignored.
  * One distinct candidate value → that value. Several → the last one of the
    strongest anchor: 2 for a word naming the answer (``predict``,
    ``predicted``, ``prediction``, ``answer``, ``estimate``), a first-person
    rating ("I'd rate it", "I would give it a", "my rating is") or a line's
    label ("Rating:", "**Final score:**"); 1 for ``rating``, ``rate``,
    ``score`` within 20 non-digit characters; none anchored → invalid
    ("ambiguous").
  * The chosen number must not be hedged: followed by an alternative
    ("3 or 4", "3, maybe 4", "3/5 or 4/5", "3 (possibly 4)") it is invalid.
    Nor followed by a fraction in words ("4 and a half", "4 point five"):
    number words are not read, and the 4 before them is not the answer.
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
from recharness.matching.parse import drop_reasoning

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
    """The part of an answer that is looked at (the first MAX_SCAN characters after any <think>...</think>
    reasoning: a number or text written while thinking is no answer), and whether it was cut."""
    t = drop_reasoning("" if text is None else str(text))
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
        try:
            x = float(v)
        except OverflowError:  # an int too large for a float (JSON allows 10**400): no finite number
            return None
    elif isinstance(v, str):
        try:
            x = float(v.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------- numbers

_NUM_RE = re.compile(r"(?<![\w.,/\-−])(\d{1,6}(?:,\d{1,6})*(?:\.\d{1,4})?)(?![\w%]|[.,]\d|\s*(?:-|–|—|to)\s*\d)")
_BEFORE_EXCLUDE_RE = re.compile(  # "out of 5", "1-5", "4 / 5", "between 3 and 4": no answer
    r"(?:\bout\s+of\s*|\d\s*(?:-|–|—|\bto)\s*|\d\s*/\s*|\bbetween\s+(?:an?\s+)?[\d.,]+\s*(?:and|&)\s*(?:an?\s+)?)$",
    re.IGNORECASE)
_BETWEEN_BEFORE_RE = re.compile(r"\bbetween\s+(?:an?\s+)?$", re.IGNORECASE)
_AND_AFTER_RE = re.compile(r"\s*(?:and|&)\s*(?:an?\s+)?\d", re.IGNORECASE)
_LIST_MARK_AFTER_RE = re.compile(r"[.)][ \t]+\S")
_OVER_RE = re.compile(r"\s*/\s*(\d{1,6}(?:\.\d{1,4})?)")  # "4/5", "8 / 10": the scale a number is given on
_OUT_OF_RE = re.compile(r"\s*out\s+of\s+(\d{1,6}(?:\.\d{1,4})?)", re.IGNORECASE)  # "6 out of 10": likewise
_LINE_PREFIX_RE = re.compile(r"[ \t#*>-]*")
_THOUSANDS_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d{1,4})?")
_DECIMAL_COMMA_RE = re.compile(r"\d,\d")
_LIST_BEFORE_RE = re.compile(r"\d[ \t]*,[ \t]*$")
_LIST_AFTER_RE = re.compile(r"[ \t]*,[ \t]*\d")
_ANCHOR_RE = re.compile(r"\b(?:rating|rate|score|predict|predicted|prediction|answer|estimate)\b[^\d\n]{0,20}$", re.IGNORECASE)
#: "I", "I'd", "I would", "I'll" ... before the verb of the answer
_I_WOULD = r"\bI(?:'d|’d|\s+would|\s+will|'ll|’ll|\s+should)?\s+"
#: the words that name the answer itself; "rating" / "score" also name the history's ratings ("rated 4/5")
_STRONG_ANCHOR_RE = re.compile(
    r"(?:\b(?:predict|predicted|prediction|answer|estimate)\b"
    r"|" + _I_WOULD + r"(?:rate|give|score|say|put|predict|estimate|guess)\b"
    r"|\bmy\s+(?:final\s+|best\s+)?(?:rating|score|guess|answer|prediction|estimate|pick)\b)[^\d\n]{0,20}$", re.IGNORECASE)
#: a line's label ("Rating:", "**Final score:**"): the line holds the answer
_ANSWER_LABEL_RE = re.compile(
    r"[ \t#*>-]*(?:\*\*|__)?(?:(?:my|final|overall|predicted|estimated|expected)\s+)*(?:rating|score)\s*(?:\*\*|__)?"
    r"\s*[:=]\s*(?:\*\*|__)?[ \t(]*", re.IGNORECASE)
#: phrases whose number is a statistic or the history's, not the answer ("their average rating is 3.6")
_CONTEXT_RE = re.compile(
    r"\b(?:average|avg|mean|median|overall|typical(?:ly)?|usual(?:ly)?|normal(?:ly)?|general(?:ly)?|previous(?:ly)?|past"
    r"|prior|earlier|historical(?:ly)?|others'?|(?:other|most|many)\s+(?:users?|people|reviewers?|viewers?|readers?"
    r"|customers?|buyers?|critics?)'?|users'|everyone's|people's|critics'?)\s+(?:[\w'’-]+\s+)?"
    r"(?:ratings?|scores?|rated|rates?|give|gives|gave|stars)\b"
    r"|\b(?:average[sd]?|averaging|avg|mean|median)\b"
    r"|\b(?:their|his|her|its|user's|users')\s+(?:\w+\s+)?(?:ratings|scores)\b"
    r"|\b(?:ratings?|scores?)\s+(?:(?:of|for)\s+[^\d\n]{1,40}?\s+)?(?:was|were|had\s+been)\b"
    r"|(?<!be )(?<!been )\b(?:rated|gave|scored)\b",
    re.IGNORECASE)
#: words of the answer itself: after a context phrase they make what follows the answer again
_ANSWER_WORD_RE = re.compile(
    r"\b(?:predict\w*|answer|estimat\w*|guess|expect\w*|would|will|should|I|I'd|I'll|my|so|therefore|thus|hence)\b",
    re.IGNORECASE)
_CLAUSE_START_RE = re.compile(r".*(?:\d|\n|[.!?;](?=\s))", re.DOTALL)
#: a word naming the answer, then (as the answer's object) a phrase holding a number: "I'd rate these 3 books a 4",
#: "The rating for Season 2 is 4", "Rating for 2 Days: 3", "I'd rate this 2-pack 4"; the number after "a" / "is" /
#: ":" (or after the object's "2-pack") is the answer. The object stays in one sentence ("Vol. 2" is no sentence end)
_OBJECT_CHAR = r"(?:[^\n,;!?.]|\.(?!\s+[A-Z])|(?<=\b(?:Mr|Ms|Dr|St|Jr|Sr|No|Pt))\.|(?<=\b(?:Mrs|Vol))\.)"
_RATED_OBJECT_RE = re.compile(
    r"(?:(?P<would>" + _I_WOULD + r"(?:rate|give|score)\b)"
    # "the rating for X", "my final rating for X", "so my prediction for X", not "the user's rating for X", nor
    # "the highest rating for X" / "since the average score for X" (a statistic)
    r"|(?<!['’]s )(?<!their )(?<!users' )(?<!user )(?<!his )(?<!her )(?<!its )(?<!highest )(?<!lowest )"
    r"(?<!average )(?<!mean )(?<!median )(?<!typical )(?<!previous )(?<!usual )(?<!top )(?<!best )(?<!worst )"
    r"\b(?:(?P<whose>the|my)\s+)?"
    r"(?P<kind>(?:final|expected|overall|predicted|estimated)\s+)?(?P<word>rating|score|prediction)\s+(?:for|of)\b)"
    r"(?P<object>" + _OBJECT_CHAR + r"*?\d" + _OBJECT_CHAR + r"*?)"
    r"(?:\b(?:an?|is|be|as)\s+(?:(?:rating|score)\s+of\s+)?|[:=]\s*(?:\*\*|__)?\s*|(?:\*\*|__)\s*[:=]?\s*"
    r"|(?<=\d)[-–][A-Za-z]{2,12}\s+)$", re.IGNORECASE)
#: what makes the later number something else than the object's answer: an alternative, a comparison, a reason
#: ("a 4, not a 5", "4 because the sequel is a 2", "rate this 4 since the previous one is 5")
_NOT_OBJECT_RE = re.compile(
    r"\b(?:not|or|but|than|and|instead|rather|maybe|perhaps|possibly|because|since|though|although|while|whereas"
    r"|if|when|compared|like|unlike)\b", re.IGNORECASE)
#: units a number can be joined to ("the 2-disc set", "this 2 hour film"): a quantity, not a rating
_UNITS = (r"(?:discs?|packs?|pieces?|hours?|minutes?|years?|days?|weeks?|months?|parts?|volumes?|books?|movies?"
          r"|films?|seasons?|episodes?|sets?|players?|persons?|people|inch(?:es)?|feet|foot|ft|lbs?|oz|cups?|counts?"
          r"|ct|in-1)")
#: a number where an answer stands, inside what looked like the rated object: "I'd give it a 4 on a 5-point
#: scale", "I'd rate it 4 - a 2 is too harsh", "I'd give it 4 stars: a 5 would be too generous" (the object rule
#: read the later 5 / 2 as the answer); "this 2-pack" is an object's number
_ANSWER_IN_OBJECT_RE = re.compile(r"(?:\b(?:an?|is|be|it|this|that)\s+|[:=]\s*)\d(?![\d.]*[-–][A-Za-z])"
                                  r"(?![\d.]*\s*" + _UNITS + r"\b)"
                                  # "I'd give 4 stars as 5 would be too much", "I'd rate 4 as 5 is ...": a rating
                                  r"|\d[\d.]*\s*(?:/\s*(?:5|10)(?:\.0)?|stars?|points?)\s*$|^\s*\d[\d.]*\s*$", re.IGNORECASE)
#: a number joined to a unit ("the 2-disc set", "a 3-hour epic", "a 2-pack"): a quantity, never the rating
_QUANTITY_AFTER_RE = re.compile(r"[-–]" + _UNITS + r"\b", re.IGNORECASE)
#: the answer says it uses another scale than the task's ("on a scale of 1 to 10", "(scale 1-10)", "10-point scale")
_SCALE_RE = re.compile(
    r"\bscale\s+(?:of\s+|from\s+)?(?:0|1)\s*(?:-|–|—|to)\s*(\d{1,3})\b|\b(?:0|1)\s*(?:-|–|—|to)\s*(\d{1,3})[ \t-]*(?:point\s+)?scale\b"
    r"|\b(\d{1,3})[ \t-]*point\s+scale\b", re.IGNORECASE)
#: a sentence: up to a . ! ? before a space or the end (not "3.5"), or a line's end
_SENTENCE_RE = re.compile(r"(?:[^.!?\n]|[.!?](?!\s|$))*(?:[.!?](?=\s|$)|\n|$)")
#: a fraction in words after the number ("4 and a half", "3 and three quarters", "4½"): not 4
_FRACTION_WORDS_RE = re.compile(r"\s*(?:½|¼|¾|and\s+(?:a\s+|one\s+)?(?:half|quarter|third)|and\s+(?:two|three)\s+"
                                r"(?:thirds|quarters)|point\s+(?:five|\w+))\b", re.IGNORECASE)
#: an alternative after the chosen number ("3 or 4", "3, maybe 4", "3/5 or 4/5", "3 (possibly 4)")
_HEDGE_AFTER_RE = re.compile(
    r"(?:\s*/\s*\d{1,6}(?:\.\d{1,4})?|\s+out\s+of\s+\d{1,6})?(?:\s*(?:stars?|points?))?[\s,;:.()\-–—]*"
    r"(?:or|and|but|maybe|perhaps|possibly|probably|potentially|if\s+not|could\s+be|might\s+be)\b"
    r"(?:[\s,]+(?:maybe|perhaps|possibly|probably|even|also|a|an|or|be|could|might))*[\s,(]*(?=\d)", re.IGNORECASE)


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


#: a reason or remark opening before "the rating for X" in its sentence: the phrase then states it, not the answer
_REASON_BEFORE_RE = re.compile(r"\b(?:because|since|as|while|whereas|considering|given|note|noting|recall|remember"
                               r"|compared|for\s+reference)\b|\(", re.IGNORECASE)


#: a reason clause opening the sentence (perhaps after "..., but"), closed by a comma before what follows
_FRONTED_REASON_RE = re.compile(r"(?:[^(]*?\b(?:but|though|although|yet|so)\s+)?(?:because|since|as|while|whereas"
                                r"|considering|given|compared)\b[^,;:()]*,\s*", re.IGNORECASE)


def _rated_object(text: str, pos: int) -> int:
    """The number at `pos` answers for an object that itself holds a number: "I'd rate these 3 books a 4", "I'd
    rate Kill Bill Vol. 2 a 4", "The rating for Season 2 is 4", "Rating for 2 Days: 3". The object's number (3,
    2) is then no answer; before, it took the anchor and was read as the rating. Returns the anchor it gives: 2
    when the words are the answer's own ("I'd rate", "my / the predicted rating for") or a bare "the rating for X"
    states it, 1 for a bare one inside a reason ("I predict 4, because the rating for Toy Story 2 is 5": 4), 0 for
    none."""
    m = _RATED_OBJECT_RE.search(text, max(0, pos - 120), pos)
    if m is None or _NOT_OBJECT_RE.search(m.group("object")) or _ANSWER_IN_OBJECT_RE.search(m.group("object")):
        return 0
    own = m.group("would") or m.group("kind") or (m.group("whose") or "").lower() == "my" \
        or (m.group("word") or "").lower() == "prediction"
    start = max(0, max(text.rfind(x, 0, m.start()) for x in (". ", "\n", "! ", "? ")))
    before = text[start:m.start()].lstrip(".!? \n")
    # strong when no reason is open before it, or one opened the sentence and its clause closed ("Given the
    # user's taste, the rating for Toy Story 2 is 4")
    return 2 if own or _FRONTED_REASON_RE.fullmatch(before) or not _REASON_BEFORE_RE.search(before) else 1


def _labelled(text: str, pos: int) -> bool:
    """The line up to `pos` is a label like "Rating:" or "**Overall score:**": what follows is the answer."""
    ls = text.rfind("\n", max(0, pos - 60), pos) + 1
    return (ls > 0 or pos <= 60) and _ANSWER_LABEL_RE.fullmatch(text, ls, pos) is not None


def _describes_context(text: str, pos: int) -> bool:
    """The clause before `pos` names a statistic or the history ("their average rating is", "the user rated
    Heat") and no answer word is in or after that phrase, or is the word just before it: the number is context,
    not the answer."""
    before = text[max(0, pos - 80) : pos]
    m = _CLAUSE_START_RE.match(before)
    clause = before[m.end() :] if m else before
    for c in _CONTEXT_RE.finditer(clause):
        prev = clause[: c.start()].split()[-1:]  # "my average", "would be rated": the answer's own words
        if not _ANSWER_WORD_RE.search(clause, c.start()) and not (prev and _ANSWER_WORD_RE.fullmatch(prev[0])):
            return True
    return False


@dataclass
class _Num:
    value: float | None  # None: unreadable ("3,5,4")
    anchor: int
    start: int
    end: int
    token: str
    context: bool


@dataclass
class NumberInRange(OutputFormat):
    lo: float = 1.0
    hi: float = 5.0
    #: how far off the scale a number may be and still count as an answer (then clipped)
    slack: float = 1.0
    kind: str = field(default="number", init=False)

    def describe(self) -> str:
        return f"a single number from {self.lo:g} to {self.hi:g}"

    def _value(self, text: str, m: re.Match) -> float | None:
        """A token's value; commas are read only when unambiguous ("1,200"; "3,5" alone on the scale), else None."""
        tok = m.group(1)
        if "," not in tok:
            return float(tok)
        if _THOUSANDS_RE.fullmatch(tok):
            return float(tok.replace(",", ""))
        if _DECIMAL_COMMA_RE.fullmatch(tok) and not _LIST_BEFORE_RE.search(text, max(0, m.start() - 16), m.start()) \
                and not _LIST_AFTER_RE.match(text, m.end()):
            v = float(tok.replace(",", "."))
            if self.lo <= v <= self.hi:
                return v
        return None

    def _numbers(self, text: str) -> list[_Num]:
        """Every number that could be the answer, in order, with its anchor and whether it describes context."""
        out = []
        for m in _NUM_RE.finditer(text):
            before = text[max(0, m.start() - 40) : m.start()]
            if _BEFORE_EXCLUDE_RE.search(before):
                continue
            if _BETWEEN_BEFORE_RE.search(before) and _AND_AFTER_RE.match(text, m.end()):
                continue  # "between 3 and 4": a range
            if _LIST_MARK_AFTER_RE.match(text, m.end()) and _at_line_start(text, m.start()):
                continue  # "1. Title" / "2) Title": a list number, not an answer
            if _QUANTITY_AFTER_RE.match(text, m.end()):
                continue  # "the 2-disc set", "a 3-hour epic": a quantity, not an answer
            scale = _OVER_RE.match(text, m.end()) or _OUT_OF_RE.match(text, m.end())
            if scale and float(scale.group(1)) != self.hi:
                continue  # "5/10", "6 out of 10": a rating on another scale (2.5, 3 here), not this scale's 5
            v = self._value(text, m)
            lead = float(m.group(1).split(",")[0]) if v is None else v
            if not self.lo - self.slack <= lead <= self.hi + self.slack:
                continue
            near = text[max(0, m.start() - 24) : m.start()]
            label = _labelled(text, m.start())
            rated = _rated_object(text, m.start())
            anchor = 2 if label or _STRONG_ANCHOR_RE.search(near) or rated == 2 \
                else max(rated, int(bool(_ANCHOR_RE.search(near))))
            # a labelled line holds the answer ("Overall rating: 4"); elsewhere the clause decides
            context = not label and _describes_context(text, m.start())
            out.append(_Num(v, anchor, m.start(), m.end(), m.group(1), context))
        return out

    def candidates(self, text: str) -> list[tuple[float | None, int]]:
        """(value, anchored) for every number that could be the answer, in order; anchored is 2 after a word
        naming the answer ("prediction: 4", "I'd rate it 4", a "Rating:" label), 1 after "rating" / "score", 0
        otherwise; value None for an unreadable comma number ("3,5,4"). Context numbers (never the answer) are
        left out."""
        return [(n.value, n.anchor) for n in self._numbers(text) if not n.context]

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
        nums = self._numbers(t)
        if _is_list(t):
            # a list (the history echoed, one rating per item) is no answer, unless one value stands on an answer
            # label of its own line ("Predicted rating: 4", then a list of reasons)
            labelled = {n.value for n in nums if not n.context and n.value is not None and _labelled(t, n.start)}
            if len(labelled) != 1:
                return Parsed({"truncated": truncated}, valid=False, error="a list, not a single number")
            nums = [n for n in nums if not n.context and n.value in labelled and _labelled(t, n.start)][-1:]
        cands = [n for n in nums if not n.context]
        if not cands:
            ctx = ", ".join(list(dict.fromkeys(n.token for n in nums))[:6])
            return Parsed({"truncated": truncated}, valid=False, error=f"no number in {self.lo:g}..{self.hi:g} found"
                          + (f" ({ctx}: context, e.g. an average rating)" if ctx else ""))
        # context numbers are never chosen but still count: "The user rated Heat 5 and Casino 3" names no answer
        distinct = sorted({n.value for n in nums if n.value is not None}) + sorted({n.token for n in nums if n.value is None})
        if len(distinct) == 1:
            chosen, how = cands[-1], "single"
        else:
            # the last number of the strongest anchor: "Predicted rating: 4. The user gave Heat a 5" is 4
            strongest = max(n.anchor for n in cands)
            anchored = [n for n in cands if n.anchor and n.anchor == strongest]
            if not anchored:
                shown = ", ".join(f"{d:g}" if isinstance(d, float) else d for d in distinct[:6])
                return Parsed({"candidates": [d for d in distinct if isinstance(d, float)], "truncated": truncated},
                              valid=False, error=f"ambiguous: several numbers ({shown}) and none follows a word like 'rating'")
            chosen, how = anchored[-1], "anchored"
        if chosen.value is None:
            return Parsed({"truncated": truncated}, valid=False,
                          error=f"unreadable number {chosen.token!r}: a decimal comma or a list")
        if _FRACTION_WORDS_RE.match(t, chosen.end):  # "4 and a half": number words are not read, nor is 4 the answer
            return Parsed({"truncated": truncated}, valid=False,
                          error=f"number words: {t[chosen.start:chosen.end + 16]!r} is no number read here")
        hedge = _HEDGE_AFTER_RE.match(t, chosen.end)
        alt = next((n for n in cands if hedge and n.start == hedge.end() and n.value != chosen.value), None)
        if alt is not None:
            return Parsed({"truncated": truncated}, valid=False,
                          error=f"hedged: {t[chosen.start:alt.end]!r} gives more than one answer")
        raw = chosen.value
        other = self._other_scale(t, chosen, raw)
        if other is not None:  # "on a scale of 1 to 10: 6" is 3 on this one, not a 6 to clip to 5
            return Parsed({"truncated": truncated}, valid=False,
                          error=f"the answer gives its rating on a scale to {other}, not {self.lo:g}..{self.hi:g}")
        value = min(max(raw, self.lo), self.hi)
        return Parsed({"value": value, "raw": raw, "clipped": value != raw, "how": how, "truncated": truncated})

    def _other_scale(self, text: str, chosen: _Num, raw: float) -> int | None:
        """The top of another scale the chosen number is given on, else None. The answer names another scale and
        either the number is off this one (it would be clipped: "Rating: 6 (scale 1-10)") or its own sentence names
        that scale, no other number and not this scale ("On a scale of 1-10, I'd give it 4": 2 here). A 1-5 rating
        beside a remark on another scale ("4 (8 on a 10-point scale)") stands."""
        tops = [(sm.start(), int(g)) for sm in _SCALE_RE.finditer(text) for g in sm.groups() if g]
        other = [(at, top) for at, top in tops if top != self.hi]
        if not other:
            return None
        if not self.lo <= raw <= self.hi:
            return other[0][1]
        sent = next((m for m in _SENTENCE_RE.finditer(text) if m.start() <= chosen.start < max(m.end(), m.start() + 1)),
                    None)
        if sent is None:
            return None
        mine = [top for at, top in tops if sent.start() <= at < sent.end()]
        spans = [sm.span() for sm in _SCALE_RE.finditer(text, sent.start(), sent.end())]  # "1 to 10", "10-point"
        numbers = [n for n in _NUM_RE.finditer(text, sent.start(), sent.end())
                   if n.start() != chosen.start and not any(a <= n.start() < b for a, b in spans)]
        if mine and self.hi not in mine and not numbers:
            return mine[0]
        return None


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
        if not normalize_for_metrics(cleaned):  # only markup ("<br>", "<b></b>"): BLEU/ROUGE would see nothing
            return Parsed(value, valid=False, error="no text: only markup")
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
            except (ValueError, RecursionError):  # not JSON; an integer of more digits than int reads; deep nesting
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

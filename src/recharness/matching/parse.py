"""Split a free-text LLM answer into candidate item titles.

Models answer in every shape: numbered or bulleted lists, one title per line,
comma-separated one-liners, JSON, prose with *emphasised* titles, each title
often followed by an explanation. This module recovers the titles, in order (each
entry in its place, a repeat too; `parse_recommendations` drops repeats), and nothing else; matching them to a catalog is
`catalog.py`'s job. The text is untrusted: it is only ever scanned with linear
regular expressions and `json.loads` (never evaluated), and is cut to
MAX_CHARS first so the work per answer is bounded.
"""

from __future__ import annotations

import functools
import html
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from recharness.matching.cues import REFUSAL_RE, TASTE_BEFORE, TASTE_OPENING, is_nothing
from recharness.matching.normalize import normalize_title, title_identity

MAX_CHARS = 20_000  # longer answers are truncated (a 10k-character answer parses in ~ms)
MAX_ITEMS = 100
MAX_PIECES = 500  # entries cleaned per answer (before the MAX_ITEMS cap)
MAX_TITLE_CHARS = 300  # Amazon product titles run long
MAX_TITLE_WORDS = 60
MAX_PROSE_WORDS = 25  # a sentence, not a title, unless it is title-cased

_YEAR = r"(?:189\d|19\d\d|20[0-4]\d)"  # not 1886 in "The Order: 1886"
_YEAR_MARK_RE = re.compile(r"[\(\[]\s*(" + _YEAR + r")\s*[\)\]]")
# "(1995 film)", "(dir. Ridley Scott, 1979)", "(1979, Ridley Scott)" -> "(1979)"
_YEAR_META_RE = re.compile(r"[\(\[][^()\[\]\n]{0,60}?\b(" + _YEAR + r")\b[^()\[\]\n]{0,60}?[\)\]]")
_BARE_YEAR_RE = re.compile(r"\s*(?:,|\s[-–—]|:)\s*(" + _YEAR + r")\b(?=\s*(?:$|[-–—:,;.|]))")

_LIST_RE = re.compile(
    r"^(?P<indent>\s*)(?:#{1,6}\s+)?(?P<em>\*\*|__)?"
    r"(?:(?P<bullet>[-*•·▪‣◦+►→✓✔])(?=\s)|(?!\(\d{3}\))(?P<num>\(?#?\s?(?:\d{1,3}[.)\]](?!\d)|\d{1,2}:(?!\d)|\d{1,3}(?=\s+[-–—]\s))|#\s?\d{1,3}\b))"
    r"\s*(?(em)(?P<closeem>\*\*|__)?)\s*"
)
_HEADING_RE = re.compile(r"^\s*#{1,6}\s*")
_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
_FENCE_RE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
_LINK_RE = re.compile(r"\[([^\[\]\n]{1,200})\]\([^()\n]{0,500}\)")
_TAG_RE = re.compile(r"</?[a-zA-Z][^<>\n]{0,100}>")

_LEAD_SPAN_RE = re.compile(
    r"^(?:\*\*(?P<b>[^*\n]{1,200}?)\*\*|__(?P<u>[^_\n]{1,200}?)__|\*(?P<i>[^*\n]{1,200}?)\*(?!\*)|_(?P<i2>[^_\n]{1,200}?)_(?!\w)"
    r"|`(?P<c>[^`\n]{1,200}?)`|\"(?P<q>[^\"\n]{1,200}?)\"|“(?P<q2>[^”\n]{1,200}?)”|«(?P<q3>[^»\n]{1,200}?)»"
    r"|‘(?P<q4>[^’\n]{1,200}?)’|'(?P<q5>[^'\n]{1,200}?)'(?=[\s,.;:!?)\]\-–—]|$))"
)
_SPAN_RE = re.compile(
    r"\*\*(?P<b>[^*\n]{1,200}?)\*\*|__(?P<u>[^_\n]{1,200}?)__|(?<![\w*])\*(?P<i>[^*\n]{1,200}?)\*(?![\w*])"
    r"|(?<!\w)_(?P<i2>[^_\n]{1,200}?)_(?!\w)|\"(?P<q>[^\"\n]{1,200}?)\"|“(?P<q2>[^”\n]{1,200}?)”|«(?P<q3>[^»\n]{1,200}?)»"
)
_SEPARATORS_RE = re.compile(r"\s+[-–—|]\s+|\s*[–—]\s*|:\s+|\s+-\s*(?=[A-Za-z])|\.{3}|…")
_COMMA_EXPLAIN_RE = re.compile(
    r",\s+(?=(?:a|an|the|which|who|that|where|starring|directed|featuring|about|because|since|as|for|it|its|this|my|one|another)\s+[a-z])"
)
_BY_RE = re.compile(
    r"\s+(?:\(?(?:directed\s+)?by|\(dir\.?)\s+(?:[A-Z][\w.'’-]*)(?:\s+(?:[A-Z][\w.'’-]*|de|van|von|der|del|da|di|le|la)){1,3}\)?\s*$"
)
_META_BRACKET_RE = re.compile(r"\s*[\(\[]\s*(?:dir\b|dir\.|directed|starring|with\s|by\s|genre|rated)[^()\[\]]{0,100}[\)\]]", re.IGNORECASE)

_SMALL = frozenset(
    "a an the of and or in on at to for with from by vs de la le les du des et el del di da von van der die das is as into".split()
)
# Sentences around a list. Each needs its sentence context ("Happy Gilmore",
# "Hope Floats", "They Live" and "Great Expectations" are films).
_BOILERPLATE_RE = re.compile(
    r"^\W*(?:here(?:'s| is| are)\b|(?:sure|certainly|of course|absolutely|great|okay|ok)\s*[,!.:]|based on\b|given (?:your|that|the)\b|"
    r"i(?:'d| would| also)? (?:recommend|suggest|think|hope|believe)\b|i'd\b|hope (?:you|this|these|that)\b|enjoy\s*[!.]|enjoy (?:your|the|these)\b|"
    r"let me know\b|(?:these|those|they|all|both) (?:are|were|all|movies|films|books|games|titles|picks|choices|offer|feature|include|should|will|might|share|have)\b|"
    r"this (?:list|selection)\b|notes?\s*:|(?-i:[Ii]f you)\b|you (?:might|may|could|should|will|would)\b|happy (?:watching|reading|gaming|viewing|listening)\b|"
    r"feel free\b|each of (?:these|them)\b|(?:below|following) (?:are|is)\b|the following\b|(?:my )?(?:recommendations?|suggestions?|top picks)\s*:|"
    r"would you like\b|do you want\b|in summary\b|overall,|it'?s (?:a|an|the)\b|this is (?:a|an|the)\b|such as\b|thanks\b|thank you\b(?! for smoking)|please\b)",
    re.IGNORECASE,
)
_GENERIC_RE = re.compile(
    r"^(?:(?:my|top|some|more|other|recommended|suggested|similar|\d+)\s+)*"
    r"(?:movies?|films?|books?|titles?|items?|products?|games?|recommendations?|suggestions?|picks?|list|answer|output|results?)"
    r"(?:\s+(?:recommendations?|suggestions?|picks?|list))?$|^(?:etc|and more|and others|and so on|n/?a|none|tbd|\.+)$",
    re.IGNORECASE,
)
# How a sentence leads into a title ("and Alien (1979)", "I'd recommend The
# Matrix (1999)"). Case-sensitive where a capital could start a title ("And
# God Created Woman").
_LEAD_IN_RE = re.compile(
    r"^(?:(?:and|or|also|plus|as well as|then)\b"
    r"|[Ii](?:'d|'ll| would| also| might| can)?\s+(?:also\s+)?(?:recommend|suggest)\b"
    r"|(?:[Yy]ou|[Ff]ans)\s+(?:might|may|could|should|would|will)\b"
    r"|(?:will|would|might|may|should|could)\s+(?:also\s+|probably\s+|surely\s+)?(?:enjoy|love|like|appreciate)\b"
    r"|[Yy]ou(?:'ll|\u2019ll|'d|\u2019d)\s+(?:also\s+|probably\s+|surely\s+|definitely\s+)?(?:enjoy|love|like|appreciate)\b"
    r"|(?:[Tt]ry|[Cc]onsider|[Cc]heck out|[Hh]ow about|[Ww]hat about)\s)"
)
_LEAD_WORDS = frozenset({"Try", "Consider"})
# A sentence adverb opening a lone line, not a title of a comma list: "Actually, Aliens (1986) stars Sigourney Weaver."
_DISCOURSE_RE = re.compile(
    r"^(?:actually|in fact|in reality|in truth|indeed|however|of course|unfortunately|honestly),\s+", re.IGNORECASE)
_LABEL_RE = re.compile(r"^\s*((?:\*\*|__)?[^:\n]{1,80}?:(?:\*\*|__)?)\s+(?=\S)")
_LABEL_WORDS_RE = re.compile(
    r"(?:movie|film|book|game|product|item|title|name|pick|recommendation|suggestion)s?(?:\s+(?:title|name)s?)?(?:\s*#?\d{1,2})?",
    re.IGNORECASE,
)
_METADATA_RE = re.compile(
    r"^\W*(?:why|reason|director|directed by|genre|genres|year|released?|plot|synopsis|description|summary|starring|stars|cast|"
    r"rating|runtime|note|notes|imdb|about|theme|themes|mood|pros|cons|platform|price|author|by|features?|similar to|because)\b",
    re.IGNORECASE,
)
_ABBREV_RE = re.compile(r"^(?:[A-Z]\.)+$|^(?:Dr|Mr|Mrs|Ms|St|Jr|Sr|Mt|Vol|No|Pt)\.$")


_SPACE_RUN_RE = re.compile(r"[^\S\n]{2,}")  # any whitespace but a line break: tabs, no-break spaces too


def collapse_spaces(text: str) -> str:
    """Runs of whitespace within a line as one space: the answer scans are quadratic in a run's length (20,000
    spaces took 0.5-1.7 s; 32,000 tabs and no-break spaces in an explanation 56 s)."""
    return _SPACE_RUN_RE.sub(" ", text)


def drop_reasoning(text: str) -> str:
    """The answer after <think>...</think> reasoning (DeepSeek-R1 and kin), found in the whole text: what a
    model says while thinking is no answer, and reasoning longer than the part of an answer that is read
    (MAX_CHARS) does not hide the answer after it. An unclosed <think> (reasoning cut off) ends the answer."""
    if "<" not in text:
        return text
    last = None
    for last in _THINK_CLOSE.finditer(text):
        pass
    if last is not None:
        text = text[last.end() :]
    m = _THINK_OPEN.search(text)
    return text[: m.start()] if m else text


def strip_reasoning(text: str) -> str:
    """`drop_reasoning`, then the first MAX_CHARS characters: titles a model mentions while thinking are not
    recommendations."""
    text = drop_reasoning(text)
    return text[:MAX_CHARS] if len(text) > MAX_CHARS else text


@dataclass(frozen=True)
class Candidate:
    """One recommended item. `title` is cleaned for matching; `raw` is the
    entry with only list markers and markup removed, explanation and all.
    The matcher tries `raw` first: models often copy catalog titles verbatim,
    and some real titles look like explanations ("Exist Archive: The other
    side of the sky - PlayStation Vita")."""

    title: str
    raw: str


def list_entry_body(line: str) -> str | None:
    """The text after `line`'s list marker ("1.", "(2)", "#3", "- ", "**4.**") if the parser reads `line` as a list
    entry, else None. The one definition of a list entry: the FTR check and the misinformed-claim check ask here so
    that a line all three read the same way is never a recommendation for one and prose for another."""
    line = line.expandtabs(4)
    m = _LIST_RE.match(line)
    if m is None:
        return None
    body = line[m.end():]
    return body if body.strip() else None


def parse_recommendations(text: str | None) -> list[str]:
    """Candidate item titles from an LLM answer, in order, without repeats (how many different titles it names).

    Titles keep a year when the answer gives one ("Heat (1995)"), normalised
    to "(YYYY)" so the matcher can use it to break ties between remakes.
    """
    return [c.title for c in _dedupe(parse_candidates(text))]


def parse_candidates(text: str | None) -> list[Candidate]:
    """Each entry of an LLM answer, in order, repeats kept where they stand (a ranked list's places: "1. Fargo
    2. Fargo 3. Heat" puts Heat third, as a repeat by another spelling always did), its raw text beside its
    title; at most MAX_ITEMS."""
    if not text:
        return []
    # one answer is parsed by the matcher and again by the refusal check: remember recent ones
    return list(_parse_cached(text) if len(text) <= 20_000 else _parse_candidates(text))


@functools.lru_cache(maxsize=512)
def _parse_cached(text: str) -> tuple[Candidate, ...]:
    return _parse_candidates(text)


def _parse_candidates(text: str) -> tuple[Candidate, ...]:
    text = strip_reasoning(text)
    if "&" in text:
        text = html.unescape(text)  # "&ndash;" is no list separator, "&amp;" no ";"
    if is_nothing(text):
        return ()
    text = _FENCE_RE.sub("\n", text)
    if "|" in text:
        text = _untable(text)
    if "[" in text:
        text = _unbracket(text)
    if _INLINE_HINT_RE.search(text):
        text = _unroll_inline(text)
    items = _from_json(text)
    if items is None:
        items = _from_lines(text)
    return _capped(items)


_INLINE_HINT_RE = re.compile(r"\S[ \t]+\(?2[.)][ \t]+\S")  # a "2." inside a line: perhaps a list on one line


def _item(raw: str) -> Candidate | None:
    title = clean_title(raw)
    if title is None:
        return None
    plain = _unquote(" ".join(_strip_md(raw).split()).strip(" \t-–—•*·:;,")).rstrip(" .,;:")
    return Candidate(title, plain or title)


# ---------------------------------------------------------------- bracketed entries

#: a line that is only bracketed entries: "[1. Titanic (1997)], [2. Jackie Brown (1997)]", perhaps after a label
#: ("Recommendations: [...], [...]") and with a closing "." / "," / ";"
_BRACKETED_LINE_RE = re.compile(
    # one way only to match the space between two brackets (`\s*[,;]?\s*` had two: 2^n ways to fail on a long line)
    r"^\s*(?P<label>[^\[\]\n]{1,80}?:\s*)?(?P<body>(?:\[[^\[\]\n]+\](?:\s*[,;])?\s*)+?)[.,;]?\s*$")
_BRACKET_RE = re.compile(r"\[\s*([^\[\]\n]+?)\s*\]")
_BRACKET_INNER_YEAR_RE = re.compile(r"^\s*" + _YEAR + r"\s*$")
_NUMBERED_RE = re.compile(r"\d{1,3}[.)]\s")


def _unbracket(text: str) -> str:
    """A line made only of bracketed entries becomes one list entry per bracket (a year in brackets,
    "[1995]", stays with its title): brackets around whole titles are no part of them. A line of one
    bracketed entry counts when it is numbered ("[1. Titanic (1997)],") or beside another such line."""
    lines = text.splitlines()
    found = [_BRACKETED_LINE_RE.match(line) for line in lines]
    inners = [_BRACKET_RE.findall(m.group("body")) if m else [] for m in found]
    out = []
    for n, line in enumerate(lines):
        inner = inners[n]
        if not inner or all(_BRACKET_INNER_YEAR_RE.match(x) for x in inner):
            out.append(line)
            continue
        if len(inner) == 1 and not _NUMBERED_RE.match(inner[0]) and not (
                n > 0 and len(inners[n - 1]) == 1 or n + 1 < len(lines) and len(inners[n + 1]) == 1):
            out.append(line)  # "[Heat]" alone: maybe a placeholder or a note, left as it is
            continue
        label = found[n].group("label")
        if label:
            out.append(label.strip())
        out += [x if _NUMBERED_RE.match(x) else f"- {x}" for x in inner]  # "1. Titanic" is numbered
    return "\n".join(out)


#: a list marker inside a line: "1. Toy Story (1995) 2. Fargo (1996)", "1) A, 2) B, 3) C"
_INLINE_NUM_RE = re.compile(r"(?:^|(?<=[\s,;:]))\(?(\d{1,2})[.)](?=\s+\S)")


def _unroll_inline(text: str) -> str:
    """A line holding a numbered list 1, 2, 3… (the first marker opening the line, or after a label
    ending in ":") becomes one line per entry; numbers out of sequence stay in their title."""
    out = []
    for line in text.splitlines():
        chain, want = [], 1
        for m in _INLINE_NUM_RE.finditer(line):
            if int(m.group(1)) == want:
                chain.append(m)
                want += 1
        head = line[: chain[0].start()].strip() if chain else ""
        if len(chain) < 2 or (head and not head.endswith(":")):
            out.append(line)
            continue
        if head:
            out.append(head)
        ends = [m.start() for m in chain[1:]] + [len(line)]
        out += [line[m.start(): e].strip().rstrip(",;").strip() for m, e in zip(chain, ends)]
    return "\n".join(out)


# ---------------------------------------------------------------- markdown tables

_TABLE_ROW_RE = re.compile(r"^\s*\|(.*)\|\s*$")
_TITLE_HEADER_RE = re.compile(r"(?:movie|film|book|game|product|item|title|name|recommendation)s?(?:\s+(?:title|name))?", re.IGNORECASE)


def _untable(text: str) -> str:
    """Markdown table rows -> list entries "- Title (YYYY)": the header row and
    the rule under it go, and of each row only the title cell (the column
    headed "Title"/"Movie"/..., else the first cell with a letter in it) and a
    year cell are kept, so "| 1 | Heat | 1995 |" is no title."""
    lines = text.splitlines()
    out: list[str] = []
    title_col = year_col = None
    for n, line in enumerate(lines):
        m = _TABLE_ROW_RE.match(line)
        if not m:
            out.append(line)
            title_col = year_col = None
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        if _is_rule(m.group(1)):
            continue
        if n + 1 < len(lines) and _is_rule(lines[n + 1]):
            heads = [_strip_md(c).strip() for c in cells]
            title_col = next((i for i, h in enumerate(heads) if _TITLE_HEADER_RE.fullmatch(h)), None)
            year_col = next((i for i, h in enumerate(heads) if h.lower() in ("year", "release year", "released")), None)
            continue
        title = cells[title_col] if title_col is not None and title_col < len(cells) else next(
            (c for c in cells if re.search(r"[^\W\d_]", c)), "")
        year = cells[year_col] if year_col is not None and year_col < len(cells) else next(
            (c for c in cells if re.fullmatch(_YEAR, c)), "")
        if title:
            out.append(f"- {title} ({year})" if re.fullmatch(_YEAR, year) and not _YEAR_MARK_RE.search(title) else f"- {title}")
    return "\n".join(out)


def _is_rule(s: str) -> bool:
    """The "|---|:--|" line under a table header."""
    return "-" in s and not s.strip(" \t|:-")


# ---------------------------------------------------------------- JSON answers

_TITLE_KEYS = ("title", "name", "movie", "film", "book", "item", "product", "game", "movie_title", "book_title")
_YEAR_KEYS = ("year", "release_year", "released")


def _from_json(text: str) -> list[Candidate] | None:
    """Items from a JSON array / object answer, or None if it is not JSON."""
    s = text.strip()
    candidates = [s]
    for open_, close in (("[", "]"), ("{", "}")):
        i, j = s.find(open_), s.rfind(close)
        if 0 <= i < j and (i, j) != (0, len(s) - 1):
            candidates.append(s[i : j + 1])
    for c in candidates:
        if not c or c[0] not in "[{":
            continue
        try:
            value = json.loads(c)
        except (ValueError, RecursionError):
            continue
        found: list[str] = []
        _collect_json(value, found, depth=0)
        if found or value in ([], {}):
            return [t for t in (_item(x) for x in found) if t]
    if re.match(r"(?:\[\s*[\"{\[]|\{\s*\")", s):  # JSON cut short (max_tokens): its complete values, never its syntax
        value = _repair_truncated(s)
        found = []
        if value is not None:
            _collect_json(value, found, depth=0)
        return [t for t in (_item(x) for x in found) if t]
    return None


def _repair_truncated(s: str):
    """A JSON answer cut off mid-value, read up to its last comma between values and closed there
    ('{"recommendations": ["Heat (1995)", "Fargo (1996)", "Casab' → Heat and Fargo); None if no cut parses."""
    cuts = [i for i, ch in enumerate(s[:MAX_CHARS]) if ch == ","][-50:]
    for pos in reversed(cuts):
        head = s[:pos]
        closing = _closers(head)
        if closing is None:
            continue
        try:
            return json.loads(head + closing)
        except (ValueError, RecursionError):
            continue
    return None


def _closers(head: str) -> str | None:
    """The brackets that close `head` (outside its strings, which json's own scanner skips), or None if it ends
    inside a string or is unbalanced."""
    stack: list[str] = []
    i, n = 0, len(head)
    while i < n:
        ch = head[i]
        if ch == '"':
            try:
                _, i = json.decoder.scanstring(head, i + 1, False)
            except ValueError:  # the string does not end: cut inside it
                return None
            continue
        if ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}" and (not stack or stack.pop() != ch):
            return None
        i += 1
    return "".join(reversed(stack))


def _collect_json(value, out: list[str], depth: int) -> None:
    if depth > 4 or len(out) >= MAX_ITEMS:
        return
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _collect_json(v, out, depth + 1)
    elif isinstance(value, dict):
        low = {str(k).lower(): v for k, v in value.items()}
        title = next((low[k] for k in _TITLE_KEYS if isinstance(low.get(k), str)), None)
        if title is not None:
            years = (low.get(k) for k in _YEAR_KEYS)
            year = next((y for y in years if isinstance(y, (int, str)) and re.fullmatch(_YEAR, str(y))), None)
            out.append(f"{title} ({year})" if year is not None and not _YEAR_MARK_RE.search(title) else title)
            return
        recs = any(w in str(k).lower() for k in value for w in ("recommend", "suggest"))
        for k, v in value.items():  # {"recommendations": [...]}, not {"already_watched": [...]}
            if isinstance(v, list) and not _not_recommended_key(str(k), recs):
                _collect_json(v, out, depth + 1)


# ---------------------------------------------------------------- text answers


#: a heading that starts what is not recommended ("Avoid:", "Already watched:", "Not recommended:", "Skip these:")
_NOT_RECOMMENDED_RE = re.compile(
    r"^#*\s*(?:avoid|skip|not recommended|don'?t (?:watch|read|play|buy)|(?:movies|films|books|items|titles)? ?(?:you'?ve|you have|already) "
    r"(?:seen|watched|read|played)|already (?:seen|watched|read|played)|your (?:watch |viewing |reading )?history|excluded?)"
    r"\b[^:\n]{0,40}:\s*$",
    re.IGNORECASE)
#: words of a JSON key whose list is not recommendations ("not_recommended", "avoid", "already_watched"); a genre key
#: such as "history" or "most_watched" stays
_NOT_KEY_WORDS = {"not", "avoid", "skip", "dont", "exclude", "excluded", "dislike", "disliked"}
_ALREADY_WORDS = {"already", "previously", "seen_before", "watch_history", "user_history"}


def _not_recommended_key(key: str, beside_recommendations: bool = False) -> bool:
    """A key whose list is not recommendations; a bare "history" / "watched" / "seen" only beside a key that
    holds recommendations (alone, "history" may be a genre)."""
    words = set(re.findall(r"[a-z]+", key.lower().replace("don't", "dont")))
    low = key.lower().strip()
    return bool(words & _NOT_KEY_WORDS) or any(w in low for w in _ALREADY_WORDS) \
        or (beside_recommendations and low in ("watched", "seen", "history"))


def _from_lines(text: str) -> list[Candidate]:
    """A list if the answer has list markers; else title-like lines; else prose."""
    lines = [ln.expandtabs(4) for ln in text.splitlines()][: MAX_PIECES * 4]
    for n, ln in enumerate(lines):  # "Avoid:" / "Already watched:" after a list: what follows is no recommendation
        if n and _NOT_RECOMMENDED_RE.match(_strip_md(ln).strip()):
            lines = lines[:n]
            break
    listed = []  # (indent, numbered?, content)
    for ln in lines:
        m = _LIST_RE.match(ln)
        if m and ln[m.end() :].strip():
            content = ln[m.end() :]
            if m.group("em") and not m.group("closeem"):
                content = m.group("em") + content  # "**1. Title**" keeps its bold
            listed.append((len(m.group("indent")), m.group("num") is not None, content))
    if listed:
        return _from_list(listed[:MAX_PIECES])
    # No list markers: one title per line, or a one-liner, or prose.
    titled: list[str] = []
    prose: list[str] = []
    for ln in lines:
        s = _strip_label(_HEADING_RE.sub("", ln).strip())
        if not s:
            continue
        if _is_prose(s) or s.rstrip("*_ ").endswith(":"):
            prose.append(s)
        else:
            titled.append(s)
    if titled:
        out = []
        for s in titled[:MAX_PIECES]:
            out.extend(_split_line(s, single=len(titled) == 1))
        if out:
            return out
    out = _from_prose(" ".join(prose))
    if not out and len(prose) == 1 and _bare_name(prose[0]):
        out = [c for c in [_item(prose[0])] if c]  # "Nintendo GameCube dedicated controller emerald blue"
    return out


def _bare_name(line: str) -> bool:
    """A lone short line that is no sentence: a lowercase product name."""
    plain = _strip_md(line).strip()
    return (
        len(plain.split()) <= 15
        and not re.search(r"[.!?]$|[.!?]\s+\S", plain)
        and not _BOILERPLATE_RE.match(plain)
        and not REFUSAL_RE.search(plain)
    )


def _from_list(listed: list[tuple[int, bool, str]]) -> list[Candidate]:
    """Titles from list entries (indent, numbered?, text): the outermost level,
    numbered entries first; but when the outer entries are only headers
    ("1. **Sci-fi:**") with titles nested under them, the nested ones."""
    top = min(i for i, _, _ in listed)
    level = [x for x in listed if x[0] == top]
    inner = [x for x in listed if x[0] > top]
    if inner and all(_is_header(c) for _, _, c in level):
        if sum(1 for _, _, c in inner if _METADATA_RE.match(_strip_md(c))) * 2 < len(inner):
            sub = min(i for i, _, _ in inner)
            level = [x for x in inner if x[0] == sub]
    if any(num for _, num, _ in level):
        level = [x for x in level if x[1]]
    out = []
    for _, _, content in level:
        if not _is_prose(content, listed=True):
            out.extend(_split_line(_strip_label(content.strip()), single=False, listed=True))
    return out


def _is_header(content: str) -> bool:
    """"**Sci-fi:**", "Drama", "### Classics": a short label, not a title with a year."""
    plain = _strip_md(content).strip()
    if plain.endswith(":"):
        return True
    wholly_em = re.fullmatch(r"\s*(\*\*|__)[^*_]{1,60}\1\s*:?\s*", content) is not None
    return wholly_em and not _YEAR_MARK_RE.search(plain) and len(plain.split()) <= 4


def _strip_label(line: str) -> str:
    """"Recommended movies: A, B" -> "A, B"; "Title: Heat (1995)" -> "Heat (1995)"."""
    m = _LABEL_RE.match(line)
    if m:
        head = _strip_md(m.group(1)).strip().rstrip(":").strip()
        if _LABEL_WORDS_RE.fullmatch(head) or _GENERIC_RE.match(head) or _BOILERPLATE_RE.match(head):
            rest = line[m.end() :].strip()
            return rest.lstrip("*_ ").strip() if rest.startswith(("**", "__")) and rest.count(rest[:2]) % 2 else rest
    return line


#: a lower-case verb of a statement and the lower-case word after it ("was never in", "isn't in", "does not star"),
#: outside brackets: titles write theirs capitalised ("Vie est belle, La (Life is Rosey)" is one)
_STATEMENT_RE = re.compile(r"\b(?:is|was|were|are|isn't|wasn't|aren't|weren't|does|doesn't|did|didn't|has|hasn't|"
                           r"had|never|not)\s+[a-z]")
#: a line that opens by addressing the user ("If you liked", "Since you enjoyed", "Based on your"); lower-case "you"
#: only: "If You Could See What I Hear" and "Since You Went Away" are films
_ABOUT_YOU_RE = re.compile(r"^(?:[Ii]f|[Ss]ince|[Bb]ecause|[Aa]s|[Gg]iven(?:\s+that)?|[Bb]ased\s+on)\s+(?:you|your)\b")


def _is_prose(line: str, listed: bool = False) -> bool:
    """A sentence rather than a title: boilerplate, refusal, or mostly
    lowercase. A short list entry is taken for a title even in lowercase."""
    plain = _strip_md(line).strip()
    if not plain:
        return True
    if _LEAD_SPAN_RE.match(line.strip()):
        return False  # "**Title** - explanation": a title first
    if not listed and _ABOUT_YOU_RE.match(plain) and (_SPAN_RE.search(line) or not _YEAR_MARK_RE.search(plain)):
        return True  # a sentence whose films are marked or undated: prose reads them ("Since you enjoyed *Heat*,
        # try *Ronin* and *Thief*"); dated plain titles are read by their years ("Since you enjoyed Heat (1995),
        # Ronin (1998) is a must"), and "Since You Went Away" is a title
    year = _YEAR_MARK_RE.search(plain)
    head = plain[: year.start()] if year else _cut_explanation(plain)
    words = head.split()
    # a list entry's refusal wording counts in its head only: "1. Heat (1995) - I can't recommend it enough!"
    if REFUSAL_RE.search(head if listed else plain):
        return True
    if year and not listed and not _SPAN_RE.search(line) \
            and _STATEMENT_RE.search(unbracketed := re.sub(r"\([^()]*\)", " ", head)) \
            and sum(w[0].islower() and w.lower() not in TITLE_SMALL_WORDS for w in unbracketed.split()) >= 2:
        return True  # "Richard O'Brien was never in Aliens (1986); ...": a statement about the film before the year
    if year and 0 < len(words) <= MAX_PROSE_WORDS and not _LEAD_IN_RE.match(head) \
            and (listed or not _BOILERPLATE_RE.match(plain)):
        return False  # "Title (1995) ...": a title, whatever follows ("It's a Wonderful Life (1946)" too, listed)
    if _BOILERPLATE_RE.match(plain):
        return True
    if len(words) <= 3 or listed and len(words) <= 12:
        return False
    # mostly lowercase words in a run longer than a list of short titles:
    # "this is a great film" is prose, "sex, lies, and videotape" is not.
    longest_run = max(len(part.split()) for part in re.split(r"[,;]", head))
    if len(words) > MAX_PROSE_WORDS:
        return _lower_ratio(head) >= 0.3
    return _lower_ratio(head) >= 0.5 and longest_run > 3


#: what stands between two titles of a list on one line: a comma or semicolon (perhaps then "and"), or "and" / "&"
#: ("or" offers a choice: "**Heat** or **Collateral**" is one place)
_SPAN_SEP_RE = re.compile(r"\s*(?:[,;]\s*(?:and\s+)?|(?:and|&)\s+)", re.IGNORECASE)
_SPAN_YEAR_RE = re.compile(r"\s*\(\s*\d{4}\s*\)")
#: the marks of one kind: a list is written in one of them ("**Heat** (1995), *Michael Mann*" is a title and its
#: director)
_SPAN_KIND = {"b": "bold", "u": "bold", "i": "italic", "i2": "italic", "c": "code", "q": "quote", "q2": "quote",
              "q3": "quote", "q4": "quote", "q5": "quote"}
#: the lower-case words a title holds ("Lock, Stock and Two Smoking Barrels", "Gone with the Wind", "As Good as It
#: Gets")
TITLE_SMALL_WORDS = frozenset("a an the and or of in on at to for with by from vs as de la le du des el".split())
#: those that begin a phrase, not a title, when written lower-case first: "**Alien**, **Aliens**, with Sigourney
#: Weaver" is two titles and a detail ("the Godfather" may still be a title; "for Honor", a game, is lost)
_PHRASE_LEAD_WORDS = TITLE_SMALL_WORDS - {"a", "an", "the", "de", "la", "le", "du", "des", "el"}
#: a tail that is no title: "and more", "and so on", "etc."
_FILLER_TAIL_RE = re.compile(r"(?:and\s+)?(?:(?:many\s+)?more|others|so\s+on|the\s+like|etc)\b\W*$", re.IGNORECASE)


def _span_list(s: str) -> list[str] | None:
    """The titles of a lone line that lists emphasised or quoted titles ('"Fargo", "Heat", "Alien"', "**Fargo**,
    **Alien**, Heat", '"Lock, Stock and Two Smoking Barrels" and "Heat"'), each span's text with a year written
    after it, then a short bare title after the last separator; None unless the whole line is such a list: two
    or more spans of one kind of mark, none a label ("**Genre:**"), all with a year or none, nothing after the
    last but a bare title or filler ("and more"). Before, such a line gave its first title alone,
    read as one title explained ("**Heat**, a crime epic", still so), and a quoted title's comma split it."""
    spans: list[str] = []
    kinds: set[str] = set()
    years = 0
    pos = 0
    while len(spans) < MAX_PIECES and (m := _LEAD_SPAN_RE.match(s[pos:pos + 1000])) is not None:  # bounded work
        group, title = next((k, g) for k, g in m.groupdict().items() if g is not None)
        title = title.strip()
        if title.endswith(":"):  # a label: "**Genre:** Crime"
            return None
        kinds.add(_SPAN_KIND[group])
        pos += m.end()
        year = _SPAN_YEAR_RE.match(s, pos)
        if year:
            title, pos = f"{title} {year.group(0).strip()}", year.end()
            years += 1
        spans.append(title)
        sep = _SPAN_SEP_RE.match(s, pos)
        if sep is None:
            break
        pos = sep.end()
    if len(spans) < 2 or len(kinds) > 1 or years not in (0, len(spans)):
        return None
    rest = s[pos:].strip(" .;,!")
    if not rest:
        return spans
    if sep is None:  # words right after the last span: maybe a label's ("**Heat**, **Genre**: Crime") or a
        return None  # correction's ('"Richard O'Brien", "Aliens" - incorrect premise'): one title, as before
    if _FILLER_TAIL_RE.match(rest):  # "and more", "and others": no title
        return spans
    # a bare title after the last separator ("**Fargo**, **Alien**, Heat"), written as a title is: not "Michael
    # Mann films" (a description; the line is then read as before, its first title)
    words = rest.split()
    if words[0] in _PHRASE_LEAD_WORDS:  # "with Sigourney Weaver": the list's detail, not a title
        return spans
    if len(words) <= 6 and all(w[0].isupper() or not w[0].isalpha() or w.lower() in TITLE_SMALL_WORDS for w in words) \
            and not _is_prose(rest):
        return [*spans, rest]
    return None


def _split_line(line: str, single: bool, after_taste: bool = False, listed: bool = False) -> list[Candidate]:
    """One list entry or line -> titles. A lone line of quoted or emphasised titles is a list (`_span_list`);
    several "(YYYY)" marks or semicolons mean several titles; commas too, but only on a lone line ("A, B, C").
    A first dated title named as the user's taste (`_names_taste`) is left out, and the rest read as the line
    (`after_taste`: once, so the work stays linear); with no dated title after it, a list entry (`listed`) keeps
    its place as one unmatched entry, a line gives nothing."""
    s = line.strip()
    spans = _span_list(s) if single else None  # a list entry's second span is its detail ("*Michael Mann*")
    lead = _LEAD_IN_RE.match(s) if single and spans is None else None
    if lead is not None:  # "Try *Some Like It Hot* and *Fargo*.": the spans after the lead-in
        spans = _span_list(s[lead.end():].lstrip())
    if spans:
        return [t for t in map(_item, spans) if t]
    years = list(_YEAR_MARK_RE.finditer(s))
    if len(years) >= 2 and not _LEAD_SPAN_RE.match(s):
        parts, start, taste, explained = [], 0, False, False
        for m in years[:MAX_PIECES]:
            if parts and listed and _explains(s[start : m.start()]):  # "1. Ronin (1998) - as tense as Heat (1995)":
                explained = True  # the entry's explanation, whatever films it names
                break
            taste = _names_taste(s[start : m.start()], taste, s[m.end():])  # "Ronin (1998), similar to Heat (1995)"
            if not taste:
                parts.append(s[start : m.end()])
            start = m.end()
        tail = "" if explained else s[start:].strip(" ,;.")
        # a title after the last year, not words about the ones before ("… and Heat (1995) are classics")
        bare_tail = re.sub(r"^(?:and|or|&)\s+", "", tail)
        if tail and not re.match(r"[a-z]+\b", bare_tail) and not _is_prose(tail) and len(tail.split()) <= 6:
            parts.append(tail)
        return [t for t in (_item(_trim_lead_in(p)) for p in parts) if t]
    if not after_taste and years and _names_taste(s[: years[0].start()], False):  # "Fans of Heat (1995): ..."
        rest = s[years[0].end():].strip(" ,;.:*_")
        if _YEAR_MARK_RE.search(rest):  # "- **Fans of Heat (1995)**: Ronin (1998), Thief (1981)": the rest, once
            return _split_line(rest, single, after_taste=True, listed=listed)
        if not listed:  # "If you liked Heat (1995), you'll love Ronin.": no dated pick; an undated one is left to
            return []  # the catalog lookup of the answer's prose (`titles_in_prose`), which knows a title from a name
        # a list entry naming no other film keeps its place, an unmatched entry, as before
    if ";" in s and not _LEAD_SPAN_RE.match(s):
        pieces = [p for p in s.split(";", MAX_PIECES) if p.strip()][:MAX_PIECES]
        if len(pieces) > 1:
            return [t for t in (_item(_trim_lead_in(p)) for p in pieces) if t]
    if single and "," in s and not _LEAD_SPAN_RE.match(s):
        s = _DISCOURSE_RE.sub("", s, count=1)
        # a lone "(YYYY)" marks the end of one title, not of the line: "Heat (1995), Fargo, Casablanca"
        pieces = _comma_split(s)[:MAX_PIECES]
        if len(pieces) > 1 and all(len(p.split()) <= 10 for p in pieces):
            return [t for t in (_item(_trim_lead_in(p) if _YEAR_MARK_RE.search(p) else p) for p in pieces) if t]
    t = _item(_trim_lead_in(s) if years else s)
    return [t] if t else []


def _comma_split(s: str) -> list[str]:
    """"A, B, and C" -> [A, B, C]; a lone article, a bare year, a lowercase
    continuation or a mostly lowercase phrase rejoins its neighbour ("Matrix,
    The (1999)"; "Ronin, 1998"; "Sex, lies, and videotape"; "Heat (1995),
    Michael Mann's crime epic")."""
    out: list[str] = []
    for raw in s.split(",", MAX_PIECES * 2):
        p = raw.strip()
        if not p:
            continue
        low = _YEAR_MARK_RE.sub("", p).strip().lower()
        if out and (
            low in _ARTICLE_WORDS
            or re.fullmatch(_YEAR, low)
            or p[0].islower() and not re.match(r"(?:and|or)\s", p)
            or len(p.split()) >= 3 and _lower_ratio(p) >= 0.5
        ):
            out[-1] = f"{out[-1]}, {p}"
            continue
        m = re.match(r"(?:and|or|&)\s+(.*)", p, re.IGNORECASE)
        if m:
            rest = m.group(1)
            if out and rest[:1].islower():
                out[-1] = f"{out[-1]}, {p}"
                continue
            p = rest
        out.append(p)
    return out


_ARTICLE_WORDS = frozenset("the a an la le les l' il el das der die".split())


def _from_prose(text: str) -> list[Candidate]:
    """Titles from running text: *emphasised* or "quoted" spans first, else
    the capitalised words before each "(YYYY)"; either left out where named as the user's taste ("If you liked
    *Heat*, try *Ronin*": Ronin)."""
    if not text.strip():
        return []
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*_\"“])", text) if not REFUSAL_RE.search(s)]
    body = " ".join(sentences)
    spans = []
    taste, end = False, 0
    for m in _SPAN_RE.finditer(body):
        span = next(g for g in m.groups() if g is not None)
        after = body[m.end() : m.end() + 12]
        y = re.match(r"\s*[\(\[]\s*(" + _YEAR + r")\s*[\)\]]", after)
        lead, end = body[end : m.start()], m.end() + (y.end() if y else 0)
        taste = _taste_of(lead, taste, body[end:])
        if not taste:  # "If you liked *Heat*, try *Ronin*": Ronin
            spans.append(f"{span} ({y.group(1)})" if y and not _YEAR_MARK_RE.search(span) else span)
    if spans:
        return [t for t in (_item(x) for x in spans) if t]
    out: list[Candidate] = []
    start, taste = 0, False
    for m in _YEAR_MARK_RE.finditer(body):
        seg = body[start : m.start()]
        start = m.end()
        taste = _names_taste(seg, taste, body[start:])
        if taste:  # "Since you enjoyed Heat (1995), try Ronin (1998)": Ronin alone
            continue
        seg = re.split(r"[.!?:;]\s+|,\s+(?=(?:and|or|as well as|plus)\b)", seg)[-1]
        title = _capitalised_tail(seg)
        if title:
            t = _item(f"{title} ({m.group(1)})")
            if t:
                out.append(t)
    return out


# ---------------------------------------------------------------- titles named in prose

T = TypeVar("T")
MAX_PROSE_LOOKUPS = 300  # distinct catalog look-ups per answer (~1 ms each on ML-1M): bounded work
_SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
# where a sentence turns from an apology to a suggestion: "I can't list them all, but you might enjoy Alien"
#: what follows a film to deny a credit of it ("Heat (1995) does not feature Tom Hanks", "... was not directed by"):
#: the film is the correction's subject, not a suggestion ("Fargo (1996) is not to be missed" is one)
_DENIES = re.compile(r"\W*(?:(?:does|did)\s*(?:not|n't)\s+(?:feature|star|include|have|contain)"
                     r"|(?:is|was|were|are)\s*(?:not|n't)\s+(?:directed|written|produced|in\b|starring|featuring|by\b)"
                     r"|never\s+(?:featured|starred|included|had)|(?:doesn't|didn't)\s+(?:feature|star|include|have))",
                     re.IGNORECASE)
_CLAUSE_BREAK_RE = re.compile(r"\s*(?:;|\s[—–]\s|,?\s+but\s+|,?\s+however,?\s+|^however,?\s+|,?\s+instead,?\s+)\s*",
                              re.IGNORECASE)
_WORD_RE = re.compile(r"\S+")
_WRAP = "\"'“”‘’«»*_`()[]{}"
_RUN_SMALL = _SMALL - {"is", "as", "into"}  # lowercase words a title may carry ("Pride and Prejudice")
_JOINERS = frozenset({"and", "or", "&"})
# Capitalised by grammar, not because they name a title ("Friday", "May" and "Earth" are films).
_GRAMMAR_CAPS = frozenset(
    "I I'm I'd I've I'll I’m I’d I’ve I’ll Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February "
    "March April May June July August September October November December Earth God".split()
)
# A clause about what the user already liked, not a recommendation: "If you enjoyed Heat, ...".
_ASIDE_RE = re.compile(
    r"\b(?:if|since|because|although|though|unlike)\b|\b(?:liked|loved|enjoyed|watched|seen|read|played|mentioned|rated)\b",
    re.IGNORECASE,
)
_YEAR_TOKEN_RE = re.compile(r"[\(\[]" + _YEAR + r"[\)\]][.,;:!?]*")


def titles_in_prose(text: str | None, lookup: Callable[[str], T | None]) -> list[T]:
    """Titles in prose count only as exact catalog matches (`lookup`) of a quoted span or a Capitalised run not opening its sentence, so common words never do.

    "You should watch Fargo." names Fargo; "keep up the speed" names nothing.
    A run is tried whole, then as whole comma/"and"-separated parts ("Heat,
    Casablanca and Fargo"; "Lock, Stock and Two Smoking Barrels" stays one);
    refusal clauses (an apology up to its "but" / "however" / ";") and "if you liked X" clauses are skipped.
    """
    body = collapse_spaces(strip_reasoning(text or ""))
    if "&" in body:
        body = html.unescape(body)
    found: list[T] = []
    seen: dict[str, T | None] = {}

    def look(span: str):
        if span not in seen:
            seen[span] = lookup(span) if len(seen) < MAX_PROSE_LOOKUPS else None
        return seen[span]

    clauses: list[tuple[str, bool]] = []  # (text, whether it follows an apology's "but" / ";" in its sentence)
    for sentence in _SENTENCE_BREAK_RE.split(body):
        if sentence and REFUSAL_RE.search(sentence):
            # only the apology is skipped: a suggestion in the same sentence after "but" / ";" still counts
            parts = _CLAUSE_BREAK_RE.split(sentence)
            clauses += [(c, k > 0) for k, c in enumerate(parts) if c and not REFUSAL_RE.search(c)]
        elif sentence:
            clauses.append((sentence, False))
    for sentence, after_apology in clauses:
        hits: list[tuple[int, T]] = []
        for m in _SPAN_RE.finditer(sentence):  # "Fargo", *Fargo*
            span = next(g for g in m.groups() if g is not None)
            y = _YEAR_TOKEN_RE.match(sentence[m.end() :].lstrip())
            r = look(f"{span} {y.group(0).rstrip('.,;:!?')}" if y else span)
            if r is not None and not _is_aside(sentence, m.start()):
                hits.append((m.start(), r))
        plain = _SPAN_RE.sub(lambda m: " " * (m.end() - m.start()), sentence)
        runs = _capitalised_runs(plain)
        if after_apology:
            # "..., but Fargo (1996) comes close": the clause's first word may open a title given with its year
            # (a sentence start is no title otherwise: "Speed matters"); the runs after it read as that opening
            # leaves them ("Heat (1995) and Fargo (1996)"); places already read are not read twice
            first = _WORD_RE.search(plain)
            if first is not None:
                # the opening run counts unless what follows it denies it ("but Heat (1995) does not feature him")
                runs += [(pieces, year) for pieces, year in _capitalised_runs(plain, open_first=True)
                         if pieces[0][0] != first.start()
                         or (year and not _DENIES.match(plain[plain.find(year, pieces[-1][1]) + len(year):]))]
        taken: set[int] = {pos for pos, _ in hits}
        for pieces, year in runs:
            i, run_hits, whole, credited = 0, [], True, False
            while i < len(pieces):
                last = i + 1  # the longest join that could still be a title
                while last < len(pieces) and pieces[last][1] - pieces[i][0] <= MAX_TITLE_CHARS:
                    last += 1
                for j in range(last, i, -1):
                    span = plain[pieces[i][0] : pieces[j - 1][1]].strip(_WRAP + ",;:.!?")
                    if len(span) > MAX_TITLE_CHARS:
                        continue
                    r = look(f"{span} {year}" if year and j == len(pieces) else span)
                    if r is not None:
                        if not _is_aside(plain, pieces[i][0]):
                            run_hits.append((pieces[i][0], r))
                        i, credited = j, False
                        break
                else:
                    # a person's credit after the title: "Heat by Michael Mann", "Gone with the Wind by Victor
                    # Fleming" (not "Life with Father", "Murder by Death": one word is no person's name), and the
                    # names listed on after it ("Heat with Al Pacino and Robert De Niro"); a possessive before a
                    # title is not cut ("Pan's Labyrinth" is no Labyrinth, "Denis Villeneuve's Dune" no Dune (1984))
                    piece = plain[pieces[i][0] : pieces[i][1]]
                    if credited and _PERSON_RE.fullmatch(piece.strip(_WRAP + ",;:.!?")):
                        i += 1
                        continue
                    core = next((piece[: c.start()] for c in reversed(list(_CREDIT_AFTER_RE.finditer(piece)))
                                 if _PERSON_RE.fullmatch(piece[c.end() :].strip(_WRAP + ",;:.!?"))), "")
                    core = core.strip(_WRAP + ",;:.!?")
                    r = look(f"{core} {year}" if year and i + 1 == len(pieces) else core) if core else None
                    if r is not None and not _is_aside(plain, pieces[i][0]):
                        run_hits.append((pieces[i][0], r))
                        credited = True
                    else:
                        whole, credited = False, False
                    i += 1
            # a run split into parts counts only when every part is a title ("Heat, Casablanca and Fargo"); one that
            # is not ("Cowboys and Aliens", "Heat and Dust") is one unknown title, not its known part
            if whole or len(pieces) == 1:
                hits.extend(h for h in run_hits if h[0] not in taken)
                taken.update(pos for pos, _ in run_hits)
        found.extend(r for _, r in sorted(hits, key=lambda h: h[0]))
        if len(seen) >= MAX_PROSE_LOOKUPS or len(found) >= MAX_ITEMS:
            break
    return found[:MAX_ITEMS]


#: where a person's credit follows a title in prose ("Heat by Michael Mann"; "starring" ends a capitalised run
#: already); `_PERSON_RE` is the credit: two to four capitalised words
_CREDIT_AFTER_RE = re.compile(r"\s+(?:with|by|from)\s+")
_PERSON_RE = re.compile(r"[A-Z][\w.'\u2019-]*(?:\s+(?:(?:de|van|von|del|da|di|le|la)\s+)?[A-Z][\w.'\u2019-]*){1,3}")


def _is_aside(sentence: str, pos: int) -> bool:
    """The clause before `pos` (back to the last , ; : or dash) is about the user's past, or a condition, or the
    words right before `pos` name the user's taste ("Fans of Heat", "similar to Heat": `TASTE_BEFORE`)."""
    before = sentence[max(0, pos - 200) : pos]
    clause = re.split(r"[,;:–—]|\s-\s", before)[-1]
    return _ASIDE_RE.search(clause) is not None or TASTE_BEFORE.search(_strip_md(before)) is not None


def _capitalised_runs(sentence: str, open_first: bool = False) -> list[tuple[list[tuple[int, int]], str]]:
    """(pieces as (start, end) offsets, "(YYYY)" after the run or "") for each
    run of Capitalised words, small words allowed inside; the sentence's first
    word never starts one (`open_first`: it may), and pieces break at commas and "and"/"or"."""
    runs = []
    pieces: list[tuple[int, int]] = []
    cur: list[tuple[int, int]] = []  # words of the current piece
    pending_small: list[tuple[int, int]] = []

    def close(year: str = "") -> None:
        nonlocal pieces, cur, pending_small
        if cur:
            pieces.append((cur[0][0], cur[-1][1]))
        if pieces:
            runs.append((pieces, year))
        pieces, cur, pending_small = [], [], []

    first = not open_first
    for m in _WORD_RE.finditer(sentence):
        tok = m.group(0)
        core = tok.strip(_WRAP).rstrip(",;:.!?").strip(_WRAP)
        if not core:
            continue
        if (pieces or cur) and _YEAR_TOKEN_RE.fullmatch(tok):
            close(tok.rstrip(".,;:!?"))
            first = False
            continue
        low = core.lower()
        is_cap = (core[0].isupper() or core[0].isdigit()) and not first and core not in _GRAMMAR_CAPS
        first = False
        if is_cap:
            cur.extend(pending_small)
            pending_small = []
            cur.append((m.start(), m.end()))
        elif (cur or pieces) and low in _JOINERS:
            if cur:
                pieces.append((cur[0][0], cur[-1][1]))
            cur, pending_small = [], []
        elif cur and low in _RUN_SMALL:
            pending_small.append((m.start(), m.end()))
        else:
            close()
            continue
        if tok.rstrip(_WRAP)[-1:] in ",":
            if cur:
                pieces.append((cur[0][0], cur[-1][1]))
            cur, pending_small = [], []
        elif tok.rstrip(_WRAP)[-1:] in ";:.!?":
            close()
    close()
    return runs


def _capitalised_tail(seg: str) -> str:
    """The run of Capitalised words (and small words) that ends `seg`:
    "you might like The Big Lebowski" -> "The Big Lebowski"."""
    tokens = seg.strip(" ,;").split()
    run: list[str] = []
    for tok in reversed(tokens):
        bare = tok.strip("\"'“”*_()")
        if not bare:
            break
        if bare[0].isupper() or bare[0].isdigit() or bare.lower() in _SMALL:
            if run and tok[-1:] in ",.:;!?" and not _ABBREV_RE.match(bare):
                break
            run.append(tok)
        else:
            break
    while run and run[-1].lower() in _SMALL and not run[-1][0].isupper():
        run.pop()
    while len(run) > 1 and run[-1] in _LEAD_WORDS:
        run.pop()
    return " ".join(reversed(run))


#: what joins a title to the one before it in one phrase: "Heat (1995) and Ronin (1998)". Not a comma, nor ", and":
#: "You might enjoy Ronin (1998), which feels similar to Heat (1995), and Thief (1981)" suggests Thief
_JOINED_RE = re.compile(r"\s+(?:and|or|&)\s+", re.IGNORECASE)
_LISTED_ON_RE = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?", re.IGNORECASE)
#: a taste phrase about the user's past, which may list several films ("Since you liked A, B, and C, ...")
_OPENER_RE = re.compile(r"(?:if|since|because|as|given|now|seeing|considering|based|judging|you|your|fans?)\b",
                        re.IGNORECASE)
#: the titles a list goes on with after a title ("…, Thief (1981), and Collateral (2004)"): skipped to see what
#: the list does ("Since you enjoyed Ronin (1998), Heat (1995) and Thief (1981) are must-sees": Heat and Thief)
_LISTED_TITLE = r"(?:[^,.;:!?()\n]|\([^()\n]{1,40}\)){1,80}?\s*\((?:1[89]|20)\d\d\)"  # "Seven (Se7en) (1995)"
_LIST_GOES_ON_RE = re.compile(rf"^(?:\s*,(?!\s*(?:and|or|&)\s)\s*{_LISTED_TITLE})*"  # ", B (1990)" ... then the last
                              rf"(?:\s*,?\s*(?:and|or|&)\s+{_LISTED_TITLE})?",  # ", and C (1995)": the list ends there
                              re.IGNORECASE)
#: a joined title that opens a clause of its own: a verb of a statement about it follows ("... similar to Heat
#: (1995) and Thief (1981) is another pick" suggests Thief; "Fans of Heat (1995) and Thief (1981) will love ..."
#: names both as taste)
_OWN_CLAUSE_RE = re.compile(r"[\s*_\"'\u201d\u2019]*(?:is|are|was|were|has|have|makes?|offers?|remains?|deserves?)\b")


def _names_taste(head: str, after_taste: str | bool, after: str = "") -> str | bool:
    """Whether (and how: `_taste_of`) the title that ends `head` is named as the user's taste, not suggested: the
    words right before it are `TASTE_BEFORE`'s ("If you liked Heat", "Based on your love of Heat"), it opens with
    `TASTE_OPENING`'s ("Fans of Heat (1995) …"), or it goes on a taste list (`after_taste`; `after`, the text after
    its year, tells where that list ends). Before, such titles were read as recommendations: "Since you enjoyed
    Heat (1995)" an unmatched one, "If you liked Aliens (1986)" Aliens."""
    title = _capitalised_tail(head)
    if not title:
        return False
    if TASTE_OPENING.match(_strip_md(title)):  # "Fans of Heat (1995) will also enjoy ...": the sentence's capitals
        return "opening"
    lead = head.rstrip(" ,;")
    lead = lead[: -len(title)] if lead.endswith(title) else head
    return _taste_of(lead, after_taste, after)


def _taste_of(lead: str, after_taste: str | bool, after: str) -> str | bool:
    """How the title after `lead` is named as taste: "opening" when a phrase about the user's past leads to it
    ("Since you liked", "Based on your love of", "you enjoyed"), "inline" for a comparison ("similar to"), or the
    kind of the taste title before it when joined to it ("and", or for an opening phrase a comma too: "Since you
    liked Ronin (1998), GoodFellas (1990), and Casino (1995), ..."), unless a clause of its own starts after it
    (`after`: "..., Ronin (1998) is a great next pick"); False when it is no taste."""
    m = TASTE_BEFORE.search(_strip_md(lead))
    if m is not None:
        return "opening" if _OPENER_RE.match(m.group(0)) else "inline"
    if after_taste and _JOINED_RE.fullmatch(lead) and _OWN_CLAUSE_RE.match(after) is None:
        return after_taste  # "Since you enjoyed Heat (1995) and Thief (1981), ..."
    last = re.search(r"\b(?:and|or)\s*$", lead, re.IGNORECASE) is not None  # ", and C (1995)": the list's last
    if after_taste == "opening" and _LISTED_ON_RE.fullmatch(lead) \
            and _OWN_CLAUSE_RE.match(after if last else _LIST_GOES_ON_RE.sub("", after[:400], count=1)) is None:
        return after_taste  # "Since you liked A (1998), B (1990), and C (1995), ...", not "..., B and C are great"
    return False


_CLAUSE_CUT_RE = re.compile(r"[,;:.!?]\s+")
_SEPARATOR_RE = re.compile(r"\s*[-\u2013\u2014|:,]\s*")


def _explains(gap: str) -> bool:
    """Whether `gap`, the text between a list entry's dated title and the next one, opens the entry's explanation:
    a dash, colon, bar or comma, then lower-case words before the next capitalised word ("- a tense thriller like
    Heat", ", a successor to Heat"); not a second title ("- Ronin", "- Kramer vs. Kramer", NIR's "watched -
    candidate") nor words that bring in another pick (", and of course Aliens", ", then Ronin", "; also try
    Ronin", ", its sequel Aliens"). An explanation opening with a capital ("- A masterpiece like Heat") is not
    seen: the entry reads on, as before."""
    sep = _SEPARATOR_RE.match(gap)
    if sep is None:
        return False
    lead = re.match(r"[^A-Z0-9\"'\u201c\u2018*_]*", gap[sep.end():]).group(0)  # up to the next capitalised word
    if _BRINGS_PICK_RE.search(lead) or _JOINING_WORD_RE.match(lead.lstrip()):  # ", and of course Aliens"
        return False
    # whole words only: "eXistenZ" stops the lead at its "X", its "e" is no word of an explanation
    return any(w[0].islower() and w.lower() not in TITLE_SMALL_WORDS for w in re.findall(r"(\S+)\s", lead))


#: words that bring in another pick inside a list entry: a joiner, "then", "also", a suggestion, a sequel
_BRINGS_PICK_RE = re.compile(r"(?:^|\W)(?:and|or|plus|&|then|also|as\s+well\s+as|followed\s+by|vs\.?|versus|sequel|"
                             r"prequel|try|watch|see|check\s+out|pair\s+it\s+with|consider|recommend|suggest|enjoy|"
                             r"love|(?:one|pick|choice)\s+is|as\s+is|double\s+feature\s+with|along\s+with)"
                             r"(?:\s+(?:maybe|perhaps|even|possibly|also|its|their|the))*\W*$",
                             re.IGNORECASE)
_JOINING_WORD_RE = re.compile(r"(?:and|or|also|plus|as well as|then)\b", re.IGNORECASE)  # "Sex, Lies, and Videotape"
_ALSO_RE = re.compile(r"(?:(?:also|then|and|so)\s+)?", re.IGNORECASE)  # ". Also try Ronin (1998)": "try" leads in


def _trim_lead_in(seg: str) -> str:
    """"and Alien (1979)" -> "Alien (1979)"; "I recommend The Matrix (1999)" ->
    "The Matrix (1999)"; "five stars, try Ronin (1998)" -> "Ronin (1998)". Only text that starts with such a
    lead-in, or holds one (not "and"/"or") after a clause break, is trimmed ("iLLumiShield - ..." and "sex,
    lies, and videotape" are titles)."""
    s = seg.strip(" ,;.")
    if not s:
        return s
    m = _YEAR_MARK_RE.search(s)
    head, tail = (s[: m.start()], s[m.start() :]) if m else (s, "")
    also = _ALSO_RE.match(head)
    if also.end() and _LEAD_IN_RE.match(head[also.end():]):  # "so try Ronin (1998)"
        head = head[also.end():]
    if not _LEAD_IN_RE.match(head):  # "five stars, try Ronin (1998)": from the last clause that leads in
        clauses = [c.end() + len(also.group(0)) for c in _CLAUSE_CUT_RE.finditer(head)  # a suggestion's, not a
                   if (also := _ALSO_RE.match(head, c.end())) is not None  # list's "and"/"or" ("Sex, Lies, and ...")
                   and _LEAD_IN_RE.match(head[c.end() + len(also.group(0)):])
                   and not _JOINING_WORD_RE.match(head, c.end() + len(also.group(0)))]
        head = head[clauses[-1]:] if clauses else head
    if _LEAD_IN_RE.match(head):
        cut = _capitalised_tail(head)
        if cut:
            return f"{cut} {tail}".strip()
    return s


def _strip_md(s: str) -> str:
    s = _LINK_RE.sub(r"\1", s)
    s = _TAG_RE.sub(" ", s)
    s = s.replace("**", "").replace("__", "").replace("`", "")
    s = re.sub(r"(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])", "", s)
    s = re.sub(r"(?<!\w)_(?=\S)|(?<=\S)_(?!\w)", "", s)
    return s


def _lower_ratio(s: str) -> float:
    words = [w for w in re.findall(r"\b[^\W\d_][\w'’-]*", s) if w.lower() not in _SMALL]
    if not words:
        return 0.0
    return sum(1 for w in words if w[0].islower()) / len(words)


#: separators `_cut_explanation` tries per entry (a title has a few; an entry of thousands is no title)
_MAX_SEPARATORS = 20


def _cut_explanation(s: str) -> str:
    """"Title - a story about..." -> "Title"; keeps "Star Wars: Episode IV - A New Hope"."""
    s = collapse_spaces(s)  # `_SEPARATORS_RE` reads a run of whitespace again from each of its places
    m = _COMMA_EXPLAIN_RE.search(s)
    if m and m.start() > 0:
        s = s[: m.start()]
    for n, m in enumerate(_SEPARATORS_RE.finditer(s)):
        if n >= _MAX_SEPARATORS:  # each try reads the rest again: bounded, so a long line costs linear time
            break
        head, rest = s[: m.start()], s[m.end() :]
        if not head.strip():
            continue
        words = rest.split()
        if not words:
            return head
        if _lower_ratio(rest) >= 0.5 or len(words) > MAX_PROSE_WORDS:
            return head
    return s


def clean_title(raw: str) -> str | None:
    """One candidate string -> a bare title (with "(YYYY)" if given), or None
    if what is left does not look like a title."""
    s = _LINK_RE.sub(r"\1", raw)
    s = _TAG_RE.sub(" ", s)
    s = " ".join(s.split()).strip(" \t-–—•·:;,")
    # an emphasised lead span before any "*" is stripped: "**Alien: Resurrection** - ..." is the span, not "Alien"
    lead = _LEAD_SPAN_RE.match(s)
    if not lead:
        s = s.strip(" \t-–—•*·:;,")
        lead = _LEAD_SPAN_RE.match(s)
    if not s:
        return None
    if lead:  # "**The Matrix** (1999) - a hacker..." -> the emphasised part (+ year)
        span = next(g for g in lead.groups() if g is not None).strip()
        rest = s[lead.end() :]
        y = re.match(r"\s*[*_\"”]*\s*[\(\[,]?\s*(?:[^()\[\]\n]{0,40}?,\s*)?(" + _YEAR + r")\b\s*[\)\]]?", rest)
        if span and not re.fullmatch(r"\d{1,2}[.)]?", span):
            s = f"{span} ({y.group(1)})" if y and not _YEAR_MARK_RE.search(span) else span
    s = _strip_md(s)
    s = _YEAR_META_RE.sub(lambda m: f"({m.group(1)})", s)
    s = _META_BRACKET_RE.sub("", s)
    m = _YEAR_MARK_RE.search(s)
    if m and m.start() > 0:
        s = s[: m.end()]  # everything after the year is commentary
    else:
        b = _BARE_YEAR_RE.search(s)
        if b and b.start() > 0:
            s = f"{s[: b.start()]} ({b.group(1)})"
        else:
            s = _cut_explanation(s)
    m = _YEAR_MARK_RE.search(s)
    head, year = (s[: m.start()], f" ({m.group(1)})") if m and m.start() > 0 else (s, "")
    head = _BY_RE.sub("", head)
    head = _unquote(head.strip()).strip(" \t-–—:;,.").strip()
    if not head or len(head) > MAX_TITLE_CHARS or len(head.split()) > MAX_TITLE_WORDS:
        return None
    if _GENERIC_RE.match(head) or is_nothing(head) or REFUSAL_RE.search(head):
        return None
    return head + year


_QUOTE_PAIRS = {'"': '"', "“": "”", "‘": "’", "'": "'", "«": "»", "„": "“"}


def _unquote(s: str) -> str:
    """Drop quotes around a title, but not the apostrophe of "'Til There Was You"."""
    while len(s) >= 2 and s[0] in _QUOTE_PAIRS and s[-1] == _QUOTE_PAIRS[s[0]]:
        s = s[1:-1].strip()
    # `"" in "abc"` is True, so an empty string must be ruled out before indexing it
    if s and s[0] in "\"“«„" and s.count(s[0]) == 1:
        s = s[1:].strip()
    if s and s[-1] in "\"”»" and s.count(s[-1]) == 1:
        s = s[:-1].strip()
    return s


def _capped(items: list[Candidate]) -> tuple[Candidate, ...]:
    """The entries with a title, repeats kept, the first MAX_ITEMS of them (places: more than any metric reads)."""
    return tuple(itertools.islice((t for t in items if normalize_title(t.title).key), MAX_ITEMS))


def _dedupe(items: list[Candidate]) -> list[Candidate]:
    """The first of each title (`title_identity`)."""
    out, seen = [], set()
    for t in items:
        key = title_identity(t.title)
        if key[0] and key not in seen:
            seen.add(key)
            out.append(t)
            if len(out) >= MAX_ITEMS:
                break
    return out

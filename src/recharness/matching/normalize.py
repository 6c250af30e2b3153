"""Title normalisation: fold away the surface differences between how an LLM
writes a title and how a catalog stores it.

MovieLens stores "Matrix, The (1999)", keeps alternative titles in brackets
("Boot, Das (1981)", "Seven (Se7en) (1995)") and lost some accented letters to
U+FFFD; LLMs write "The Matrix", "Das Boot", "Se7en", "Pokémon". Both sides go
through the same folding so that a plain dictionary look-up succeeds before
any fuzzy matching is needed.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

# Articles that catalogs move behind a comma ("Boot, Das"). Only an article
# found in that trailing position is moved; a leading "Die" in "Die Hard" is
# never touched.
ARTICLES = frozenset(
    "the a an il l' la le les das der die den det el lo los las o os i gli un une una ein eine".split()
)
# Leading articles that may be dropped from a *query* when the full form is not
# found ("The Seven" -> "Seven"): English only, so "Die Hard" stays "Die Hard".
ENGLISH_ARTICLES = ("the", "a", "an")

REPLACEMENT = "\ufffd"  # a character the catalog lost; kept as a placeholder in keys

_YEAR_RE = re.compile(r"\s*[\(\[]\s*((?:18|19|20)\d\d)(?:\s*film)?\s*[\)\]]\s*$", re.IGNORECASE)
_TRAILING_ARTICLE_RE = re.compile(r"^(.*?\S)\s*,\s*(" + "|".join(re.escape(a) for a in sorted(ARTICLES, key=len, reverse=True)) + r")$", re.IGNORECASE)
_AKA_RE = re.compile(r"^(?:a\.?k\.?a\.?|also known as)\s*[:.]?\s*", re.IGNORECASE)
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "vi": "6", "vii": "7", "viii": "8", "ix": "9", "xi": "11", "xii": "12", "xiii": "13"}
# "i", "v", "x" are words too: only read as numerals after "part"/"episode"/...
# or as a title's last word ("Rocky V"; "Henry V" folds to "henry 5" on both sides).
_ROMAN_AFTER = {"i": "1", "v": "5", "x": "10"}
# Spelled-out numbers fold to digits: "Twelve Monkeys" == "12 Monkeys".
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_SEQUEL_WORDS = frozenset({"part", "pt", "episode", "ep", "chapter", "volume", "vol"})
_FRACTIONS = {"½": " 1/2", "⅓": " 1/3", "⅔": " 2/3", "¼": " 1/4", "¾": " 3/4"}
_THOUSANDS = re.compile(r"(?<=\d)[,.](?=\d{3}(?!\d))")
_TRANSLIT = str.maketrans({**_FRACTIONS, "æ": "ae", "Æ": "ae", "œ": "oe", "Œ": "oe", "ø": "o", "Ø": "o", "ł": "l", "Ł": "l",
                           "đ": "d", "Đ": "d", "þ": "th", "Þ": "th", "ð": "d", "ß": "ss", "&": " and ",
                           "+": " and "})
_APOSTROPHES = re.compile(r"['’‘`´]")
_NON_WORD = re.compile(r"[^a-z0-9\ufffd]+")


def fold(text: str) -> str:
    """Case, accents and punctuation folded to a space-separated lowercase key.

    Apostrophes, dots and asterisks vanish ("L.A." == "LA", "M*A*S*H" == "MASH");
    "&" becomes "and"; Roman sequel numerals and number words become digits
    ("Part II" == "2", "Twelve Monkeys" == "12 Monkeys");
    a U+FFFD the catalog lost survives as a placeholder for wildcard matching.
    """
    text = html.unescape(text).replace("ï¿½", REPLACEMENT)  # latin-1 read of UTF-8 U+FFFD
    text = text.translate(_TRANSLIT)
    if text.isascii():
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = text.replace("...", " ").replace("…", " ")
    text = _THOUSANDS.sub("", text)  # "20,000 Leagues" == "20000 Leagues"
    text = _APOSTROPHES.sub("", text).replace(".", "").replace("*", "")
    words = _NON_WORD.sub(" ", text).split()
    out = []
    last = len(words) - 1
    for i, w in enumerate(words):
        if w in _ROMAN:
            w = _ROMAN[w]
        elif w in _ROMAN_AFTER and i and (i == last or words[i - 1] in _SEQUEL_WORDS):
            w = _ROMAN_AFTER[w]
        elif w in _NUMBER_WORDS:
            w = _NUMBER_WORDS[w]
        out.append(w)
    # "Part II" / "Vol. 2" / "Episode IV" -> the bare number: "The Godfather II" == "The Godfather: Part II"
    out = [w for i, w in enumerate(out) if not (w in _SEQUEL_WORDS and i + 1 < len(out) and out[i + 1].isdigit())]
    return " ".join(out)


def split_year(title: str) -> tuple[str, int | None]:
    """"Heat (1995)" -> ("Heat", 1995); the year breaks ties between remakes."""
    m = _YEAR_RE.search(title)
    if m and m.start() > 0:
        return title[: m.start()].rstrip(), int(m.group(1))
    return title.strip(), None


def move_article(title: str) -> str:
    """"Matrix, The" -> "The Matrix"; "Uomo delle stelle, L'" -> "L'Uomo delle stelle"."""
    m = _TRAILING_ARTICLE_RE.match(title.strip())
    if not m:
        return title.strip()
    body, art = m.group(1), m.group(2)
    return f"{art}{body}" if art.endswith("'") else f"{art} {body}"


def _peel_brackets(title: str) -> tuple[str, list[str]]:
    """Split trailing bracket groups off: "Hate (Haine, La)" -> ("Hate", ["Haine, La"])."""
    alts: list[str] = []
    t = title.rstrip()
    while t.endswith(")") or t.endswith("]"):
        close, open_ = t[-1], "(" if t[-1] == ")" else "["
        depth, i = 0, len(t) - 1
        while i >= 0:
            if t[i] == close:
                depth += 1
            elif t[i] == open_:
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i <= 0:  # unbalanced, or the whole title is bracketed: leave it
            break
        inner = t[i + 1 : -1].strip()
        t = t[:i].rstrip()
        if inner:
            alts.insert(0, _AKA_RE.sub("", inner))
    return t, alts


@dataclass(frozen=True)
class NormalizedTitle:
    """A title's look-up keys, best first.

    `key` is the main title folded (article in front, no year, no bracketed
    alternatives). `aliases` pairs every key with its rank: 0 = the title as
    written, 1 = a bracketed alternative title, 2 = the title without its
    article, 3 = an alternative without its article, 4 = one side of a
    subtitle split ("Terminator 2: Judgment Day" -> "terminator 2",
    "judgment day"). Rank-4 keys are weak evidence: the matcher only trusts
    them when the year agrees too.
    """

    key: str
    year: int | None
    aliases: tuple[tuple[str, int], ...]
    display: str

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.aliases)


def normalize_title(title: str) -> NormalizedTitle:
    """Fold a catalog or LLM title into its keys.

    "City of Lost Children, The (Cité des enfants perdus, La) (1995)" gives key
    "the city of lost children", year 1995, and the aliases
    "la cite des enfants perdus", "city of lost children", "cite des enfants perdus".
    """
    raw = " ".join(html.unescape(title).split())
    body, year = split_year(raw)
    main, alts = _peel_brackets(body)
    keyed: list[tuple[str, int]] = []
    seen: set[str] = set()
    # A trailing ", Das" is known to be an article, so any article may be
    # dropped from that form; a title that merely starts with "Die" ("Die Hard")
    # only ever loses an English article.
    droppable: list[tuple[str, int]] = []

    def add(text: str, rank: int, drop_rank: int | None) -> None:
        text = text.strip()
        k = fold(move_article(text))
        if not k or k in seen:
            return
        seen.add(k)
        keyed.append((k, rank))
        if drop_rank is None:
            return
        m = _TRAILING_ARTICLE_RE.match(text)
        if m:  # "Boot, Das" -> also "boot"; "Uomo delle stelle, L'" -> "uomo delle stelle"
            droppable.append((fold(m.group(1)), drop_rank))
        else:
            rest = strip_article(k)
            if rest:
                droppable.append((rest, drop_rank))

    add(main, 0, 2)
    if alts:  # brackets that are part of the name ("Halo 3 (Legendary Edition)")
        add(f"{move_article(main)} ({') ('.join(alts)})", 0, None)
    for alt in alts:
        add(alt, 1, 3)
    for rest, rank in droppable:
        if rest and rest not in seen:
            seen.add(rest)
            keyed.append((rest, rank))
    for text in (move_article(main), *(move_article(a) for a in alts)):
        for part in subtitle_parts(text):
            k = fold(part)
            if k not in seen and _PART_OK.search(k):
                seen.add(k)
                keyed.append((k, 4))
    key = keyed[0][0] if keyed else fold(raw)
    return NormalizedTitle(key=key, year=year, aliases=tuple(keyed), display=raw)


_SUBTITLE_SPLIT = re.compile(r":\s+|\s+[-–—]\s+")
_PART_OK = re.compile(r"[a-z]{3}")  # a part must hold a real word, not just "4"


def subtitle_parts(title: str) -> list[str]:
    """"Star Wars: Episode IV - A New Hope" -> ["Star Wars", "Episode IV", "A New Hope"];
    [] when the title has no subtitle. A trailing "or" goes ("Dr. Strangelove or:")."""
    parts = [p.strip() for p in _SUBTITLE_SPLIT.split(title) if p.strip()]
    if len(parts) < 2:
        return []
    return [re.sub(r"\s+or$", "", p, flags=re.IGNORECASE) for p in parts]


def strip_article(key: str) -> str | None:
    """A folded key without a leading English article ("the seven" -> "seven"), or None."""
    head, _, rest = key.partition(" ")
    return rest if rest and head in ENGLISH_ARTICLES else None

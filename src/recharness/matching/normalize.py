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
from functools import lru_cache

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

# "(1998)", and a year a chat model tags: "(1998 film)", "(1998 remake)", "(1962 version)", "(remake, 1998)"
_YEAR_TAG = r"(?:film|movie|remake|version|original)"
_YEAR_RE = re.compile(r"\s*[\(\[]\s*(?:" + _YEAR_TAG + r"\s*,?\s*)?((?:18|19|20)\d\d)(?:\s*,?\s*" + _YEAR_TAG
                      + r")?\s*[\)\]]\s*$", re.IGNORECASE)
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
_DROP = re.compile(r"['`.*]")  # "L.A." == "LA", "Schindler's" == "Schindlers", "M*A*S*H" == "MASH"
_TRANSLIT = str.maketrans({**_FRACTIONS, "’": "'", "‘": "'", "´": "'", "æ": "ae", "Æ": "ae", "œ": "oe", "Œ": "oe", "ø": "o", "Ø": "o", "ł": "l", "Ł": "l",
                           "đ": "d", "Đ": "d", "þ": "th", "Þ": "th", "ð": "d", "ß": "ss"})
_NON_WORD = re.compile(r"[^a-z0-9\ufffd]+")
_SPECIAL_WORDS = frozenset(_ROMAN) | frozenset(_ROMAN_AFTER) | frozenset(_NUMBER_WORDS) | _SEQUEL_WORDS


@lru_cache(maxsize=1 << 16)
def fold(text: str) -> str:
    """Case, accents and punctuation folded to a space-separated lowercase key.

    Apostrophes, dots and asterisks vanish ("L.A." == "LA", "M*A*S*H" == "MASH");
    "&" becomes "and"; Roman sequel numerals and number words become digits
    ("Part II" == "2", "Twelve Monkeys" == "12 Monkeys");
    a U+FFFD the catalog lost survives as a placeholder for wildcard matching.
    """
    if "&" in text:
        text = html.unescape(text)
    if "ï¿½" in text:  # a latin-1 read of UTF-8 U+FFFD
        text = text.replace("ï¿½", REPLACEMENT)
    if "." in text or "…" in text:
        text = text.replace("...", " ").replace("…", " ")
    if "," in text or "." in text:
        text = _THOUSANDS.sub("", text)  # "20,000 Leagues" == "20000 Leagues"
    if text.isascii():
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKD", text.translate(_TRANSLIT))
        text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = _DROP.sub("", text)
    if "&" in text or "+" in text:
        text = text.replace("&", " and ").replace("+", " and ")
    words = _NON_WORD.sub(" ", text).split()
    if _SPECIAL_WORDS.isdisjoint(words):
        return " ".join(words)
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
    if not title.rstrip().endswith((")", "]")):
        return title.strip(), None
    m = _YEAR_RE.search(title)
    if m and m.start() > 0:
        return title[: m.start()].rstrip(), int(m.group(1))
    return title.strip(), None


def move_article(title: str) -> str:
    """"Matrix, The" -> "The Matrix"; "Uomo delle stelle, L'" -> "L'Uomo delle stelle"."""
    title = title.strip()
    m = _TRAILING_ARTICLE_RE.match(title) if "," in title else None
    if not m:
        return title
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


def title_identity(title: str) -> tuple[str, int | None]:
    """What makes two written titles one title: the folded key and the year ("Heat" and "heat" are one; "Heat
    (1995)" and "Heat (1986)" two)."""
    nt = normalize_title(title)
    return nt.key, nt.year


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


@lru_cache(maxsize=1 << 15)
def normalize_title(title: str) -> NormalizedTitle:
    """Fold a catalog or LLM title into its keys.

    "City of Lost Children, The (Cité des enfants perdus, La) (1995)" gives key
    "the city of lost children", year 1995, and the aliases
    "la cite des enfants perdus", "city of lost children", "cite des enfants perdus".
    """
    raw = " ".join((html.unescape(title) if "&" in title else title).split())
    body, year = split_year(raw)
    main, alts = _peel_brackets(body) if body.endswith((")", "]")) else (body, [])
    keyed: list[tuple[str, int]] = []
    seen: set[str] = set()
    # A trailing ", Das" is known to be an article, so any article may be
    # dropped from that form; a title that merely starts with "Die" ("Die Hard")
    # only ever loses an English article.
    dropped: list[tuple[str, int]] = []
    fronted: list[str] = []  # main and alternatives, article in front
    forms = [(main, 0, 2)]
    if alts:
        forms.append((None, 0, None))  # the full title, brackets and all ("Halo 3 (Legendary Edition)")
        forms.extend((alt, 1, 3) for alt in alts)
    for text, rank, drop_rank in forms:
        if text is None:
            text, m = f"{fronted[0]} ({') ('.join(alts)})", None
        else:
            text = text.strip()
            m = _TRAILING_ARTICLE_RE.match(text) if "," in text else None
            if m:
                art = m.group(2)
                text_moved = f"{art}{m.group(1)}" if art.endswith("'") else f"{art} {m.group(1)}"
            else:
                text_moved = text
            fronted.append(text_moved)
            text = text_moved
        k = fold(text)
        if not k or k in seen:
            continue
        seen.add(k)
        keyed.append((k, rank))
        if drop_rank is not None:
            rest = fold(m.group(1)) if m else strip_article(k)  # "Boot, Das" -> also "boot"
            if rest:
                dropped.append((rest, drop_rank))
    for rest, rank in dropped:
        if rest not in seen:
            seen.add(rest)
            keyed.append((rest, rank))
    for text in fronted:
        for part in subtitle_parts(text):
            k = fold(part)
            if k not in seen and _PART_OK.search(k):
                seen.add(k)
                keyed.append((k, 4))
    key = keyed[0][0] if keyed else fold(raw)
    return NormalizedTitle(key=key, year=year, aliases=tuple(keyed), display=raw)


_SUBTITLE_SPLIT = re.compile(r":\s+|\s+[-–—]\s+")
_TRAILING_OR = re.compile(r"\s+or$", re.IGNORECASE)
_PART_OK = re.compile(r"[a-z]{3}")  # a part must hold a real word, not just "4"


def subtitle_parts(title: str) -> list[str]:
    """"Star Wars: Episode IV - A New Hope" -> ["Star Wars", "Episode IV", "A New Hope"];
    [] when the title has no subtitle. A trailing "or" goes ("Dr. Strangelove or:")."""
    if ":" not in title and "-" not in title and "–" not in title and "—" not in title:
        return []
    parts = [p.strip() for p in _SUBTITLE_SPLIT.split(title) if p.strip()]
    if len(parts) < 2:
        return []
    return [_TRAILING_OR.sub("", p) for p in parts]


def strip_article(key: str) -> str | None:
    """A folded key without a leading English article ("the seven" -> "seven"), or None."""
    head, _, rest = key.partition(" ")
    return rest if rest and head in ENGLISH_ARTICLES else None

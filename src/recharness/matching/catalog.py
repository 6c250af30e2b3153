"""Map free-text titles onto catalog item ids.

Exact look-ups on normalised aliases come first because they are unambiguous
and cheap; rapidfuzz only runs for what is left, against the same aliases, and
only a score at or above the threshold counts. Strings that match nothing are
kept: an LLM naming items outside the catalog is part of what is measured.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from rapidfuzz import fuzz, process

from recharness.matching.normalize import (
    REPLACEMENT,
    NormalizedTitle,
    normalize_title,
    strip_article,
    title_identity,
)
from recharness.matching.parse import TITLE_SMALL_WORDS, parse_candidates, strip_reasoning, titles_in_prose

MatchKind = Literal["exact", "fuzzy", "none"]

# Chosen by measurement on ML-1M (benchmarks/results/matching.md). With the
# year, number and subtitle rules below, fuzz.ratio >= 90 keeps every LLM
# misspelling a fuzzy stage recovers ("Forest Gump", "Jurrasic Park",
# "Monty Python's The Holy Grail" at 91.5), while real titles that are *not*
# in the catalog clear it rarely: 0 of 88 films outside ML-1M, 8 (0.2%) / 26
# (0.7%) of 3,741 ML-1M titles held out of the catalog and asked with / without
# their year. WRatio at 90 matched 37% of those held-out titles (any title
# contained in another scores 90); token_sort_ratio was no better.
DEFAULT_THRESHOLD = 90.0
DEFAULT_SCORER = fuzz.ratio
_FUZZY_LIMIT = 8
_BLOCK = 64  # query keys per cdist call (at most 64 x 20k float64 = 10 MB)
_BATCH_FROM = 8  # fewer fuzzy queries than this: one extract call each
SUBTITLE_RANK = 4  # see NormalizedTitle: one side of a "Title: Subtitle" split
_DIGITS = re.compile(r"\d+")
_LOST_CHAR = r"(?:[aeiouycn]|ae|oe|ue|ss| ?[0-9]{1,2})"


@dataclass(frozen=True)
class Match:
    """One query's outcome. `item_id` is None when kind == "none"; `score` is
    100 for exact matches, the fuzzy score otherwise (for "none": 0, or the
    score of a candidate that the year or number checks rejected). `title` is
    the catalog title matched."""

    item_id: str | None
    kind: MatchKind
    score: float
    query: str
    title: str | None = None


_DASH_RE = re.compile(r"\s+[-–—]\s+|\s*[–—]\s*")  # between two titles on one line

def _places(flat: str, raws: Sequence[str]) -> list[int]:
    """Where each raw text stands in `flat` (the answer folded), found in order from the previous one's end; -1
    where it is not found as written."""
    out, cursor = [], 0
    for raw in raws:
        needle = " ".join(raw.split()).casefold()
        k = flat.find(needle, cursor)
        out.append(k)
        if k >= 0:  # past the whole of it: the next one is never found inside it
            cursor = k + max(len(needle), 1)
    return out


def _one_piece_of(whole: Match, pieces: Sequence[Match]) -> bool:
    """Whether the pieces of a comma-split line are each another catalog item, `whole` (the line matched as
    one title) being one piece's exact item: the whole matched through that piece alone (a shared subtitle side
    and year), so the line is a list. "Lock, Stock and Two Smoking Barrels" is no such line ("Lock" is no item)."""
    ids = [p.item_id for p in pieces]
    return (len(pieces) >= 2 and None not in ids and len(set(ids)) == len(ids)
            and any(p.kind == "exact" and p.item_id == whole.item_id for p in pieces))


def catalog_pairs(items: Any) -> list[tuple[str, str]]:
    """Accept {id: title}, [(id, title), ...] or a table with item_id/title columns."""
    if isinstance(items, Mapping):
        return [(str(k), str(v)) for k, v in items.items() if v is not None]
    columns = getattr(items, "columns", None)
    if columns is not None and "item_id" in columns and "title" in columns:
        return [(str(i), str(t)) for i, t in zip(items["item_id"], items["title"]) if t is not None]
    return [(str(i), str(t)) for i, t in items if t is not None]


#: lowercase words a title holds ("Lord of the Rings"), which do not make it a sentence: the parser's, and "di"
_TITLE_SMALL_WORDS = TITLE_SMALL_WORDS | {"di"}


def _reads_as_sentence(text: str) -> bool:
    """Two or more lowercase words that titles do not hold ("I think you would enjoy ..."), or one lower-case negated
    verb ("Richard O'Brien isn't in Aliens (1986)"), where a title, even an invented one, has capitalised words and
    small ones ("Return of the Jedi", "Don't Look Now")."""
    words = re.findall(r"[A-Za-z][A-Za-z'’]*", text)
    lower = [w for w in words if w[0].islower() and w.lower() not in _TITLE_SMALL_WORDS]
    return len(lower) >= 2 or any(re.search(r"n['’]t$", w) for w in lower)


def same_title_twins(pairs) -> dict[str, tuple[str, ...]]:
    """{id: every id carrying its title} for the (id, title) pairs whose title (spacing and case aside) several
    items carry; ids of a unique title are left out."""
    same: dict[str, list[str]] = {}
    for i, title in pairs:
        same.setdefault(" ".join(str(title).split()).casefold(), []).append(i)
    return {i: tuple(ids) for ids in same.values() if len(ids) > 1 for i in ids}


class CatalogMatcher:
    """Index of a catalog's titles for matching LLM output.

    items: {item_id: title}, [(item_id, title), ...] or a frame with item_id and
    title columns. threshold: minimum fuzzy score (0-100) to accept.

    Rules, each there because a measured case needed it:
    - a year in the query must agree with the catalog's within `year_tolerance`
      (ML-1M's years and another source's differ by 1-2 for 9% of films, by
      more for 0.5%); further apart, the title names another film (a remake,
      "The Lion King (2019)") -> none;
    - a subtitle-only match ("Terminator 2" for "Terminator 2: Judgment Day",
      "Star Wars: A New Hope" for "Star Wars: Episode IV - A New Hope") needs
      the exact year, since sequels share sides too ("Air Bud: Golden
      Receiver" is not "Air Bud");
    - a fuzzy match must carry the same numbers as the query ("Toy Story 3" is
      not "Toy Story 2");
    - `priority` (e.g. popularity) breaks ties between identical titles that
      no year separates ("Hamlet"); otherwise catalog order does.
    """

    def __init__(
        self,
        items: Mapping[str, str] | Iterable[tuple[Any, str]] | Any,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        scorer=DEFAULT_SCORER,
        year_tolerance: int = 2,
        priority: Mapping[str, float] | None = None,
    ):
        self.threshold = float(threshold)
        self.scorer = scorer
        self.year_tolerance = year_tolerance
        pairs = catalog_pairs(items)
        self.item_ids: list[str] = [i for i, _ in pairs]
        self.titles: list[str] = [t for _, t in pairs]
        self.years: list[int | None] = []
        prio = priority or {}
        self._priority = [-float(prio.get(i, 0.0)) for i in self.item_ids]
        self._n_aliases: list[int] = []
        # items that share one exact title (ML-100k: "Chasing Amy (1997)" is 246 and 268): a title names them all
        self._twins = same_title_twins(pairs)
        index: dict[str, list[tuple[int, int]]] = {}
        mains: list[str] = []
        alt_keys: set[str] = set()
        for idx, title in enumerate(self.titles):
            nt = normalize_title(title)
            self.years.append(nt.year)
            mains.append(nt.key)
            n = 0
            for key, rank in nt.aliases:
                entries = index.get(key)
                if entries is None:
                    index[key] = [(idx, rank)]
                else:
                    entries.append((idx, rank))
                if rank != SUBTITLE_RANK:
                    n += 1
                    if rank in (1, 3):
                        alt_keys.add(key)
            self._n_aliases.append(n)
        # A bracketed "alternative" shared by different titles is a qualifier
        # ("(Nintendo DS)", "(Renewed)"), not a name: drop it.
        for key in alt_keys:
            entries = index[key]
            alt = [e for e in entries if e[1] in (1, 3)]
            if len(alt) > 1 and len({mains[i] for i, _ in alt}) > 1:
                index[key] = [e for e in entries if e[1] not in (1, 3)]
        self._index = {k: v for k, v in index.items() if v}
        # "Spider-Man" == "Spiderman", "Casa Blanca" == "Casablanca": keys without spaces.
        self._squashed: dict[str, list[tuple[int, int]]] = {}
        # Fuzzy choices: full-title keys only (a subtitle side is too short to
        # fuzz safely), without a leading "the"/"a"/"an", which would lift short
        # look-alikes over the threshold ("The Women" ~ "The Omen": 94 -> 89).
        self._fuzzy_index: dict[str, list[tuple[int, int]]] = {}
        for key, entries in self._index.items():
            full = [e for e in entries if e[1] != SUBTITLE_RANK]
            if full:
                self._squashed.setdefault(key.replace(" ", ""), []).extend(full)
                self._fuzzy_index.setdefault(strip_article(key) or key, []).extend(full)
        # Sorted by length: fuzz.ratio >= t is impossible outside a length band
        # around the query's, so only that slice is scored (5-10x fewer).
        self._choices = sorted(self._fuzzy_index, key=len)
        self._lengths = [len(k) for k in self._choices]
        self._length_bound = scorer in (fuzz.ratio, fuzz.QRatio, fuzz.token_sort_ratio)
        # Catalog keys with characters lost to U+FFFD: each stands for what an
        # accented letter folds to ("é" -> e, "æ" -> ae, "³" -> 3), not for any
        # letter, so "Aliens" does not become "Alien³".
        self._wild = [
            (
                key.split(REPLACEMENT, 1)[0],
                re.compile(_LOST_CHAR.join(re.escape(p) for p in key.split(REPLACEMENT))),
                key,
            )
            for key in self._index
            if REPLACEMENT in key
        ]

    def entries(self, key: str) -> tuple[tuple[int, int], ...]:
        """The (item index, rank) entries a normalised title key finds (empty: none)."""
        return tuple(self._index.get(key, ()))

    def __len__(self) -> int:
        return len(self.item_ids)

    def twins(self, item_id: str) -> tuple[str, ...]:
        """Every item id carrying the same title as `item_id` (itself included); () when it is unique:
        a title that names several items is a hit on any of them, once."""
        return self._twins.get(item_id, ())

    # -------------------------------------------------------------- helpers

    def _year_ok(self, idx: int, year: int | None) -> bool:
        y = self.years[idx]
        return year is None or y is None or abs(y - year) <= self.year_tolerance

    def _year_confirms(self, idx: int, year: int | None) -> bool:
        y = self.years[idx]
        return year is not None and y is not None and abs(y - year) <= self.year_tolerance

    def _year_gap(self, idx: int, year: int | None) -> int:
        y = self.years[idx]
        return abs(y - year) if year is not None and y is not None else 0

    def _result(self, idx: int, kind: MatchKind, score: float, query: str) -> Match:
        return Match(self.item_ids[idx], kind, float(score), query, self.titles[idx])

    # -------------------------------------------------------------- matching

    def match(self, query: str) -> Match:
        """Exact alias match (year-checked), then fuzzy, else kind "none"."""
        nt = normalize_title(query or "")
        if not nt.key:
            return Match(None, "none", 0.0, query)
        return self._exact(nt, query) or self._fuzzy(nt, query)

    def match_many(self, queries: Sequence[str]) -> list[Match]:
        """match() for each query; the fuzzy stage runs batched, so 1,000
        look-ups in a 20k catalog take well under a second."""
        out: list[Match | None] = [None] * len(queries)
        pending: list[tuple[int, NormalizedTitle]] = []
        for i, q in enumerate(queries):
            nt = normalize_title(q or "")
            if not nt.key:
                out[i] = Match(None, "none", 0.0, q)
                continue
            out[i] = self._exact(nt, q)
            if out[i] is None:
                pending.append((i, nt))
        if len(pending) < _BATCH_FROM:
            for i, nt in pending:
                out[i] = self._fuzzy(nt, queries[i])
            return out  # type: ignore[return-value]
        keys = [(j, k) for j, (_, nt) in enumerate(pending) for k in self._fuzzy_keys(nt)]
        found: list[list] = [[] for _ in pending]
        for (j, k), hits in zip(keys, self._candidates_batch([k for _, k in keys])):
            found[j].append((k, hits))
        for (i, nt), f in zip(pending, found):
            out[i] = self._fuzzy(nt, queries[i], f)
        return out  # type: ignore[return-value]

    def _exact(self, nt: NormalizedTitle, query: str) -> Match | None:
        """The best item sharing a key with the query, or None. Whole-title
        keys decide first; subtitle sides only with the exact year."""
        full: dict[int, list[int]] = {}  # idx -> [keys hit, best query rank, best catalog rank]
        short: set[int] = set()  # the query is one side of the catalog title's subtitle split
        parts: dict[int, int] = {}  # idx -> subtitle sides both titles share

        # A shared subtitle side counts once; a shared *later* side of 3+ words
        # ("the wrath of khan") counts twice, a shared franchise ("three colors",
        # "star trek") or a generic "the movie" once.
        first_part = next((k for k, r in nt.aliases if r == SUBTITLE_RANK), None)

        def note(entries: Iterable[tuple[int, int]], key: str, qrank: int) -> None:
            for idx, crank in entries:
                if not self._year_ok(idx, nt.year):
                    continue
                if qrank == SUBTITLE_RANK and crank == SUBTITLE_RANK:
                    strong = key != first_part and key.count(" ") >= 2
                    parts[idx] = parts.get(idx, 0) + (2 if strong else 1)
                elif crank == SUBTITLE_RANK:
                    short.add(idx)
                elif qrank != SUBTITLE_RANK:
                    h = full.get(idx)
                    if h is None:
                        full[idx] = [1, qrank, crank]
                    else:
                        h[0] += 1
                        h[1] = min(h[1], qrank)
                        h[2] = min(h[2], crank)
                # A query side equal to a whole catalog title ("Air Bud: Golden
                # Receiver" vs "Air Bud") is a sequel more often than not: ignored.

        for key, qrank in nt.aliases:
            note(self._index.get(key, ()), key, qrank)
        for prefix, pattern, wkey in self._wild:  # the catalog lost a letter: "Pok?mon"
            for key, qrank in nt.aliases:
                if key.startswith(prefix) and abs(len(key) - len(wkey)) <= 6 and pattern.fullmatch(key):
                    note(self._index[wkey], key, qrank)
        if not full:
            for key, qrank in nt.aliases:
                if qrank != SUBTITLE_RANK:
                    note(self._squashed.get(key.replace(" ", ""), ()), key, qrank)
        if full:
            literal = " ".join(query.split())
            best = min(
                full,
                key=lambda i: (
                    # the very string of a catalog title: "Marvel: Ultimate Alliance"
                    # and "Marvel Ultimate Alliance" are two Amazon items
                    " ".join(self.titles[i].split()) != literal,
                    self._year_gap(i, nt.year),
                    -full[i][0],  # shares more of the query's aliases: "Godzilla (Gojira)" is the 1954 one
                    self._n_aliases[i] - full[i][0],  # "Best Man, The" is not "Best Man, The (Il Testimone...)"
                    full[i][1],
                    full[i][2],
                    self._priority[i],
                    i,
                ),
            )
            return self._result(best, "exact", 100.0, query)
        # Subtitle evidence only ("Terminator 2 (1991)", "Star Wars: A New Hope
        # (1977)"): weak, so the year must be exactly the catalog's.
        weak = [
            i
            for i in short | {i for i, n in parts.items() if n >= 2}
            if self._year_confirms(i, nt.year) and self._year_gap(i, nt.year) == 0
        ]
        if weak:
            best = min(weak, key=lambda i: (-parts.get(i, 0), self._priority[i], i))
            return self._result(best, "exact", 100.0, query)
        return None

    @staticmethod
    def _fuzzy_keys(nt: NormalizedTitle) -> list[str]:
        """The main title and its bracketed alternatives, without a leading
        English article; subtitle sides are too weak to fuzz."""
        keys = [nt.key] + [k for k, rank in nt.aliases if rank == 1]
        return list(dict.fromkeys(strip_article(k) or k for k in keys))[:3]

    def _band(self, shortest: int, longest: int) -> tuple[int, int]:
        """The slice of length-sorted choices that a key of this many characters
        can reach: fuzz.ratio = 2*min(a, b)/(a + b) >= p bounds b to
        [a*p/(2-p), a*(2-p)/p]. The whole list for other scorers."""
        if not (self._length_bound and self.threshold > 0):
            return 0, len(self._choices)
        p = min(self.threshold / 100.0, 1.0)
        lo = bisect_left(self._lengths, math.floor(shortest * p / (2 - p)))
        hi = bisect_right(self._lengths, math.ceil(longest * (2 - p) / p))
        return lo, hi

    def _candidates(self, qkey: str) -> list[tuple[str, float]]:
        """Top fuzzy choices (>= threshold) for one key."""
        lo, hi = self._band(len(qkey), len(qkey))
        choices = self._choices[lo:hi]
        hits = process.extract(
            qkey, choices, scorer=self.scorer, processor=None, limit=_FUZZY_LIMIT, score_cutoff=self.threshold
        )
        return [(choices[pos], float(score)) for _, score, pos in hits]

    def _candidates_batch(self, qkeys: list[str]) -> list[list[tuple[str, float]]]:
        """_candidates for many keys: one cdist call per block of similar-length
        keys is far cheaper than one extract call per key."""
        out: list[list[tuple[str, float]]] = [[] for _ in qkeys]
        order = sorted(range(len(qkeys)), key=lambda i: len(qkeys[i]))
        for start in range(0, len(order), _BLOCK):
            ids = order[start : start + _BLOCK]
            lo, hi = self._band(len(qkeys[ids[0]]), len(qkeys[ids[-1]]))
            choices = self._choices[lo:hi]
            if not choices:
                continue
            block = process.cdist(
                [qkeys[i] for i in ids], choices, scorer=self.scorer, processor=None,
                score_cutoff=self.threshold, dtype=np.float64, workers=1,
            )
            floor = max(self.threshold, 1e-9)  # cdist writes 0 below the cutoff
            for i, row in zip(ids, block):
                nz = np.flatnonzero(row >= floor)
                if len(nz) > _FUZZY_LIMIT:
                    nz = nz[np.lexsort((nz, -row[nz]))[:_FUZZY_LIMIT]]
                out[i] = [(choices[p], float(row[p])) for p in nz]
        return out

    def _fuzzy(
        self, nt: NormalizedTitle, query: str, found: list[tuple[str, list[tuple[str, float]]]] | None = None
    ) -> Match:
        """Best fuzzy candidate at or above the threshold that passes the year
        and number checks."""
        if found is None:
            found = [(qkey, self._candidates(qkey)) for qkey in self._fuzzy_keys(nt)]
        best: tuple[tuple, float, int] | None = None
        top_seen = 0.0
        for qkey, hits in found:
            qnums = _DIGITS.findall(qkey)
            for ckey, score in hits:
                top_seen = max(top_seen, score)
                if qnums != _DIGITS.findall(ckey):  # "Toy Story 3" is not "Toy Story 2"
                    continue
                for idx, crank in self._fuzzy_index[ckey]:
                    if crank == SUBTITLE_RANK or not self._year_ok(idx, nt.year):
                        continue
                    order = (-score, self._year_gap(idx, nt.year), crank, self._priority[idx], idx, ckey)
                    if best is None or order < best[0]:
                        best = (order, score, idx)
        if best is None:
            return Match(None, "none", float(top_seen), query)
        return self._result(best[2], "fuzzy", best[1], query)

    # -------------------------------------------------------------- answers

    def match_answer(self, text: str) -> list[Match]:
        """Parse an LLM answer and match every candidate, in answer order.

        A one-line answer, then each entry's raw text, is tried first, exactly:
        a title copied verbatim from the catalog must not lose a real subtitle
        to the explanation cutter ("Exist Archive: The other side of the sky -
        PlayStation Vita") nor be split at its commas.
        Commas split one-line answers, which breaks titles such as "Lock,
        Stock and Two Smoking Barrels": two neighbours whose comma-join is an
        exact catalog title, while one of them alone is not, are joined back, and so
        is one title repeated where the answer writes the join ("Niagara, Niagara").
        An answer with no list in it is searched for catalog titles named in
        its prose (`titles_in_prose`): "You should watch Fargo." recommends.
        """
        body = strip_reasoning(text or "")
        whole = body.strip().strip("`*_\"'“”").strip()
        whole_match = None
        if whole and "\n" not in whole and len(whole) <= 1000:
            whole_match = self._exact(normalize_title(whole), whole)  # one title with commas in it
        cands = parse_candidates(text)
        if whole_match is not None:
            literal = " ".join(whole.split()) == " ".join((whole_match.title or "").split())
            # one title whose pieces repeat ("Niagara, Niagara" is that film, not Niagara twice), when the whole is
            # that title's own: a title named twice ("Maybe, Maybe Not (Bewegte Mann, Der), Maybe, ...") is no alias
            if literal or len(cands) < 2 or (
                    len({title_identity(c.title) for c in cands}) < 2
                    and normalize_title(whole).key == normalize_title(whole_match.title or "").key):
                return [whole_match]
            split = self._match_candidates(cands, body)
            # two or more titles each found exactly ("Star Trek: Generations (1994), Star Trek: First Contact
            # (1996)") are a list, not one title matched by a shared subtitle side; so are pieces that each name
            # another item, one of them misspelled, when the whole matched only one piece's item
            # ("Star Trek: Genrations (1994), Star Trek: First Contact (1996)")
            if sum(m.kind == "exact" for m in split) < 2 and not _one_piece_of(whole_match, split):
                return [whole_match]
            return split
        if not cands:
            return titles_in_prose(text, lambda span: self._exact(normalize_title(span), span))
        matches = self._match_candidates(cands, body)
        if len(cands) == 1 and matches and matches[0].item_id is None and len(cands[0].title.split()) > 3:
            # one unmatched sentence ("Consider Sense and Sensibility for a twist."): the titles its prose names
            named = titles_in_prose(text, lambda span: self._exact(normalize_title(span), span))
            if named:
                return named
        return self._named_in_sentences(cands, matches)

    def _named_in_sentences(self, cands, matches: list[Match]) -> list[Match]:
        """A list entry the catalog does not know that is a sentence ("2. I think you would also enjoy Fargo
        (1996)") stands for the catalog titles its prose names (`titles_in_prose`), in its place, rather than
        spending a slot on the sentence and losing the film. An unknown title-like entry (a misspelling, an
        invented film: "The Lord of the Rings: Heat Returns (2005)") is no sentence (`_reads_as_sentence`) and
        stays as it is, unmatched."""
        if all(m.item_id is not None for m in matches):
            return matches
        out: list[Match] = []
        for c, m in zip(cands, matches):
            if m.item_id is None and len(c.title.split()) > 3 and _reads_as_sentence(c.raw):
                named = titles_in_prose(c.raw, lambda span: self._exact(normalize_title(span), span))
                if named:
                    out.extend(named)
                    continue
            out.append(m)
        return out

    def _match_candidates(self, cands, body: str) -> list[Match]:
        """Each parsed candidate matched (its raw text exactly first), neighbours whose comma-join is a
        catalog title joined back (a title repeated, "Niagara, Niagara", only where `body`, the answer without its
        reasoning, writes the join at the candidate's own place: `_places` finds each candidate's raw text in
        order, once, and only for an answer that repeats a title)."""
        flat: str = ""
        at: list[int] = []

        def written_joined(i: int) -> bool:
            nonlocal flat, at
            if not at:
                flat = " ".join(body.split()).casefold()
                at = _places(flat, [c.raw for c in cands])
            return at[i] >= 0 and flat.startswith(f"{cands[i].raw}, {cands[i + 1].raw}".casefold(), at[i])

        matches: list[Match | None] = [None] * len(cands)
        for i, c in enumerate(cands):
            if c.raw != c.title:
                matches[i] = self._exact(normalize_title(c.raw), c.raw)
        rest = [i for i, m in enumerate(matches) if m is None]
        for i, m in zip(rest, self.match_many([cands[i].title for i in rest])):
            matches[i] = m
        out: list[Match] = []
        i = 0
        while i < len(cands):
            m = matches[i]
            if m.kind != "exact" and _DASH_RE.search(cands[i].raw):
                # "Heat - Ronin": two titles on one line, each a catalog title while the whole is none
                parts = [p.strip() for p in _DASH_RE.split(cands[i].raw) if p.strip()]
                found = [self._exact(normalize_title(p), p) for p in parts] if len(parts) <= 10 else [None]
                if len(found) > 1 and all(found):
                    out.extend(found)  # type: ignore[arg-type]
                    i += 1
                    continue
            # two neighbours each a title are two titles, unless they are one repeated and their join is a title
            # ("Niagara, Niagara" (1997), not Niagara (1953) twice)
            if i + 1 < len(cands) and (not (m.kind == "exact" and matches[i + 1].kind == "exact")
                                       or (normalize_title(cands[i].title).key == normalize_title(cands[i + 1].title).key
                                           and written_joined(i))):
                joined = f"{cands[i].title}, {cands[i + 1].title}"
                j = self._exact(normalize_title(joined), joined)
                # not a join that matched one piece's own exact item by a side of its title: "Made Up Thing"
                # before a title with commas would vanish, and the titles after it move up a place; a join that
                # is the item's whole title ("Blood In, Blood Out (a.k.a. Bound by Honor)") is that title
                own = j is not None and normalize_title(joined).key == normalize_title(j.title or "").key
                if j is not None and not _one_piece_of(j, [m, matches[i + 1]]) \
                        and (own or not (m.kind == "exact" and matches[i + 1].kind == "exact")) \
                        and (own or not any(p.kind == "exact" and p.item_id == j.item_id for p in (m, matches[i + 1]))):
                    out.append(j)
                    i += 2
                    continue
            out.append(m)
            i += 1
        return out

    def resolve(self, text: str) -> tuple[list[str], list[str]]:
        """Parse an LLM answer and match it: (item ids in answer order, no
        repeats; the strings that matched nothing)."""
        ids: list[str] = []
        seen: set[str] = set()
        unmatched: list[str] = []
        for m in self.match_answer(text):
            if m.item_id is None:
                unmatched.append(m.query)
            elif m.item_id not in seen:
                seen.add(m.item_id)
                ids.append(m.item_id)
        return ids, unmatched

"""Detect answers that recommend nothing, for the Fail-to-Recommend (FTR) metric.

RecBench+ defines FTR as the share of queries where the model "fails to
generate recommended items" (a refusal, "None", an empty answer). An answer
that apologises and then lists items anyway did recommend, so it is not a
failure: refusal wording alone never decides, the absence of items does.
"""

from __future__ import annotations

import re

from recharness.matching.cues import COMMENDS, DISPRAISE, REFUSAL_RE, correcting_part, has_refusal_cue, is_nothing
from recharness.matching.parse import list_entry_body, parse_recommendations, strip_reasoning

__all__ = ["REFUSAL_RE", "has_refusal_cue", "is_nothing", "is_refusal"]


def is_refusal(text: str | None, matched: int | None = None) -> bool:
    """True if the answer fails to recommend anything.

    Empty, whitespace-only and "None"-style answers are failures. Otherwise the
    answer is parsed (refusal sentences are never taken for items): no items
    means failure. With `matched` (how many items the catalog recognised), an
    answer that contains refusal wording and names nothing in the catalog is a
    failure too (unless it lists two or more titles, or suggests one with its
    year: a list of unknown titles, or "You might enjoy Zorblax Returns (1999)",
    is still a recommendation, of a film the catalog lacks), while one that
    apologises and still names catalog items is not.
    """
    if text is None:
        return True
    body = strip_reasoning(text)
    if is_nothing(body):
        return True
    found = parse_recommendations(body)
    if not found:
        return True
    # refusal wording and nothing the catalog knows: a failure, unless the answer still lists several titles
    # ("I don't know your exact tastes, but here are some picks: 1. … 2. …" recommends, if titles it invented)
    # a title with its year is meant as one (a film past the catalog's years, or an invented one), not words of
    # the apology read as a title: a recommendation, scored as an unmatched entry
    if matched is not None and matched == 0 and has_refusal_cue(body) and len(found) < 2 \
            and not any(_WITH_YEAR.search(f) and _suggested(body, f) for f in found):
        return True
    return False


_WITH_YEAR = re.compile(r"\((?:1[89]|20)\d\d\)\s*$")


def _suggested(body: str, title: str) -> bool:
    """Whether `title` is put forward: after a suggesting phrase of its sentence with no refusal wording from that
    phrase on ("Sorry, nothing matched; you might enjoy Zorblax Returns (1999)"), as a list entry ("1. Zorblax
    Returns (1999)"), or commended ("Zorblax Returns (1999) is a great pick"); not one named in passing ("before
    Dune: Part Two (2024) came out"). Markup (bold, quotes) around the title does not count against it."""
    low = _bare(title).casefold()
    for line in body.splitlines():
        listed = list_entry_body(line) is not None
        for sentence in re.split(r"(?<=[.!?])\s+", _bare(line)):
            at = sentence.casefold().find(low)
            if at < 0:
                continue
            turn = len(correcting_part(sentence))
            praise = COMMENDS.search(sentence, at)
            if listed or (turn <= at and not has_refusal_cue(sentence[turn:])) \
                    or (praise is not None and not DISPRAISE.search(praise.group(0))):
                return True
    return False


def _bare(text: str) -> str:
    """`text` without markup a title may carry in an answer: bold, italics, quotes."""
    return re.sub(r"[*_\"\u201c\u201d\u2018\u2019`]", "", text)


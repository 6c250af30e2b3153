"""Measure a matcher on a catalog: how to pick a scorer and threshold.

Two kinds of evidence: labelled queries (LLM spellings with the item they
mean, or None for items outside the catalog) and leave-one-out, where each
catalog title is looked up in the catalog without it, so any match is a
false one. Leave-one-out needs no labels, so it works on any catalog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recharness.matching.catalog import SUBTITLE_RANK, CatalogMatcher, Match, catalog_pairs
from recharness.matching.normalize import normalize_title, split_year


@dataclass
class Evaluation:
    """Outcomes per threshold. For labelled queries: right (the expected item,
    or none when none was expected), wrong (another item), missed (none where
    an item was expected). For leave-one-out: false matches, asked with the
    year and without it."""

    thresholds: list[float]
    right: dict[float, int] = field(default_factory=dict)
    wrong: dict[float, int] = field(default_factory=dict)
    missed: dict[float, int] = field(default_factory=dict)
    loo_queries: int = 0
    loo_false_with_year: dict[float, int] = field(default_factory=dict)
    loo_false_without_year: dict[float, int] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "threshold": t,
                "right": self.right.get(t),
                "wrong": self.wrong.get(t),
                "missed": self.missed.get(t),
                "loo_false_with_year": self.loo_false_with_year.get(t),
                "loo_false_without_year": self.loo_false_without_year.get(t),
            }
            for t in self.thresholds
        ]


def _accepted(m: Match, threshold: float) -> str | None:
    if m.kind == "exact" or (m.kind == "fuzzy" and m.score >= threshold):
        return m.item_id
    return None


class _HoldOut(CatalogMatcher):
    """A matcher that behaves as if one item were not in the catalog."""

    held: int = -1

    def _year_ok(self, idx: int, year: int | None) -> bool:
        return idx != self.held and super()._year_ok(idx, year)


def evaluate(
    items: Mapping[str, str] | Iterable[tuple[Any, str]],
    labelled: Sequence[tuple[str, str | None]] = (),
    thresholds: Sequence[float] = (80, 85, 88, 90, 92, 94, 96, 100),
    *,
    scorer=None,
    leave_one_out: bool = True,
) -> Evaluation:
    """Run the matcher once with no threshold and count outcomes per threshold."""
    kwargs = {} if scorer is None else {"scorer": scorer}
    matcher = _HoldOut(catalog_pairs(items), threshold=0, **kwargs)
    ev = Evaluation(thresholds=list(thresholds))
    results = [(want, matcher.match(q)) for q, want in labelled]
    for t in ev.thresholds:
        got = [(want, _accepted(m, t)) for want, m in results]
        ev.right[t] = sum(g == w for w, g in got)
        ev.wrong[t] = sum(g is not None and g != w for w, g in got)
        ev.missed[t] = sum(g is None and w is not None for w, g in got)
    if leave_one_out:
        pairs = []
        for idx, title in enumerate(matcher.titles):
            nt = normalize_title(title)
            twins = {j for k, r in nt.aliases if r != SUBTITLE_RANK for j, _ in matcher.entries(k) if j != idx}
            if twins:  # the same title twice (remakes): only the year can tell, not a fuzzy question
                continue
            matcher.held = idx
            pairs.append((matcher.match(title), matcher.match(split_year(title)[0])))
        matcher.held = -1
        ev.loo_queries = len(pairs)
        for t in ev.thresholds:
            ev.loo_false_with_year[t] = sum(_accepted(a, t) is not None for a, _ in pairs)
            ev.loo_false_without_year[t] = sum(_accepted(b, t) is not None for _, b in pairs)
    return ev

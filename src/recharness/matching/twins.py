"""Titles carried by several item ids (ML-100k: "Chasing Amy (1997)" is 246 and 268).

A title names every id that carries it, so a recommended title hits a wanted item (a target, a ground
truth) carried by any of its ids, once: the matcher returns one id per title and `twins` lists the
others; scoring replaces the id by the wanted twin before it compares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def twins_of(matcher, ids: Iterable[str | None]) -> dict[str, list[str]]:
    """{id: every id sharing its title} for the given matched ids that have twins (empty: none)."""
    out = {}
    for i in ids:
        if i is not None and i not in out and matcher.twins(i):
            out[i] = list(matcher.twins(i))
    return out


def with_twins(items: Sequence[str | None], twins: Mapping[str, Sequence[str]] | None,
               wanted: Iterable[str]) -> list[str | None]:
    """`items` with each id that is not wanted but whose title also names a wanted id replaced by that
    id (the first one the list does not already hold): a hit on any twin, counted once."""
    if not twins:
        return list(items)
    wanted = set(wanted)
    used = set(items)
    out = []
    for i in items:
        if i is not None and i not in wanted:
            alt = next((j for j in twins.get(i, ()) if j in wanted and j not in used), None)
            if alt is not None:
                used.add(alt)
                i = alt
        out.append(i)
    return out


def naming_target(slots: Sequence[str | None], twins: Mapping[str, Sequence[str]] | None,
                  target: str) -> list[str | None]:
    """A ranked answer's places with every entry whose title also names `target` read as the target: a title
    carried by several ids names each of them, wherever the target's own id stands (a history twin listed first
    is a hit at place 1, as the target's id listed first is). Repeats stay: the first place counts."""
    if not twins:
        return list(slots)
    return [target if i is not None and target in (twins.get(i) or ()) else i for i in slots]


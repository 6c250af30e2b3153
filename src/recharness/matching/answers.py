"""A dataset's catalog as one matcher of whole answers, shared by every suite that reads ranked titles."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CatalogContext:
    """The dataset's catalog as a matcher, built once per run."""

    matcher: object

    @classmethod
    def of(cls, dataset) -> "CatalogContext":
        from recharness.matching import CatalogMatcher

        items = list(zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list()))
        return cls(matcher=CatalogMatcher(items))

    def resolve(self, text: str) -> dict:
        from recharness.matching import is_refusal

        matches = self.matcher.match_answer(text)
        items, unmatched, kinds = [], [], []
        for m in matches:
            if m.item_id is None:
                unmatched.append(m.query)
            elif m.item_id not in items:
                items.append(m.item_id)
                kinds.append(m.kind)
        out = {
            "strings": [m.query for m in matches],
            # each listed title's item (None: unmatched), in answer order: a task that asked for N titles
            # reads the first N listed, not the first N that happen to match (`listed_items`)
            "slots": [m.item_id for m in matches],
            "items": items,
            "match_kinds": kinds,
            "unmatched": unmatched,
            "refusal": bool(is_refusal(text, matched=len(items))) and not items,
        }
        twins = {i: list(self.matcher.twins(i)) for i in items if self.matcher.twins(i)}
        if twins:  # a title carried by several ids names each of them: a hit on any counts once
            out["twins"] = twins
        return out


def matched_named(parsed: dict) -> tuple[int, int]:
    """(titles that name a catalog item, titles named) of one answer, for `matched_share`: each place counted, so
    a real title named twice is two matched places (it was two named against one matched item: a model looping
    on real titles looked like one inventing them). A record without `slots` gives its matched `items` and
    its `strings`."""
    slots, strings = parsed.get("slots"), parsed.get("strings") or []
    if isinstance(slots, list) and len(slots) == len(strings):
        return sum(s is not None for s in slots), len(slots)
    return len(parsed.get("items") or []), len(strings)


def listed_slots(parsed: dict, n: int | None) -> list[str | None]:
    """The first `n` titles an answer lists (all with None) as places: each the catalog item it names, None for
    a title that names none, a repeat kept where it stands. A target's rank is its place here: an invented,
    repeated or history title spends its place and moves no later title up (`metrics.ranking`'s rule; a
    reference's list holds none of these). A record without `slots` gives its first `n` matched `items`."""
    slots = parsed.get("slots")
    if not isinstance(slots, list):
        slots = parsed.get("items") or []
    return list(slots if n is None else slots[:n])


def listed_items(parsed: dict, n: int | None) -> list[str]:
    """The catalog items among the first `n` titles an answer lists (all with None), in order, repeats
    once. An unmatched or repeated title keeps its place: a longer answer gets no extra guesses by
    naming invented titles first. A record without `slots` (written before them, or imported) gives
    its matched `items`."""
    slots = parsed.get("slots")
    if not isinstance(slots, list):
        return list(parsed.get("items") or [])
    return list(dict.fromkeys(i for i in (slots if n is None else slots[:n]) if i is not None))

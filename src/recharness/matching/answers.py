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
            "items": items,
            "match_kinds": kinds,
            "unmatched": unmatched,
            "refusal": bool(is_refusal(text, matched=len(items))) and not items,
        }
        twins = {i: list(self.matcher.twins(i)) for i in items if self.matcher.twins(i)}
        if twins:  # a title carried by several ids names each of them: a hit on any counts once
            out["twins"] = twins
        return out

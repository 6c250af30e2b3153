"""Pieces the LLMRec ranking tasks share: catalog matching and ranking scores."""

from __future__ import annotations

from dataclasses import dataclass

from recharness.tasks.llmrec.prompts import PromptParts


def parts_from_options(opts: dict) -> PromptParts:
    return PromptParts(
        task_description=bool(opts.get("task_description", True)),
        behaviour=bool(opts.get("behaviour", True)),
        format_indicator=bool(opts.get("format_indicator", True)),
    )


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


def ranking_scores(ranked: list[list[str]], targets: list[str], hr_ks=(1, 5, 10), ndcg_ks=(5, 10)) -> dict[str, float]:
    """HR@k, NDCG@k and MRR for one held-out target per sample."""
    from recharness.metrics.ranking import target_metrics

    if not targets:
        return {}
    per = target_metrics(ranked, targets, ks=tuple(sorted(set(hr_ks) | set(ndcg_ks))))
    out = {f"HR@{k}": float(per[f"hr@{k}"]) for k in hr_ks}
    out.update({f"NDCG@{k}": float(per[f"ndcg@{k}"]) for k in ndcg_ks})
    out["MRR"] = float(per["mrr"])
    return out


def reference_predictions(task, dataset, samples: list[dict], seed: int) -> dict[str, dict[str, dict]]:
    """Popularity and random reference rows as prediction records, so one scorer scores all:
    the task's baselines (`Task.baselines`), fitted on the leave-last-out training part."""
    from recharness.tasks.references import reference_records

    return reference_records(task, dataset, samples, seed)


def why_empty(task_name: str, dataset, min_history: int) -> str | None:
    """Which filter left a leave-last-out task without users: the history length, named with its numbers."""
    lengths = dataset.interactions.group_by("user_id").len()["len"]
    if lengths.is_empty():
        return f"{task_name}: {dataset.name} has no interactions"
    kept = int((lengths > min_history).sum())
    if kept == 0:
        return (f"{task_name}: min_history={min_history} keeps 0 of {lengths.len()} users (a user needs more than "
                f"min_history interactions; the longest history here has {int(lengths.max())}): "
                f"lower it with --option min_history=N")
    return None


def popularity(dataset):
    """The training part's item popularity (each user's last interaction held out), for beyond-accuracy metrics."""
    from recharness.baselines.base import training_rows
    from recharness.metrics.beyond_accuracy import Popularity

    return Popularity.of(training_rows(dataset.interactions), dataset.items["item_id"].to_list())


def beyond_accuracy(pop, ids: list[str], ranked: list[list[str]], targets: list[str], k: int = 10,
                    clusters=None) -> dict:
    """coverage / Gini / ARP / novelty of the top-k lists and HR@k on head vs tail targets, as units."""
    from recharness.metrics.beyond_accuracy import beyond_accuracy_units

    if pop is None or not ids:
        return {}
    hits = [float(t in r[:k]) for r, t in zip(ranked, targets)]
    return beyond_accuracy_units(ids, ranked, targets, hits, pop, k=k, accuracy=f"HR@{k}", clusters=clusters)


def ranking_units(ids: list[str], ranked: list[list[str]], targets: list[str], hr_ks=(1, 5, 10),
                  ndcg_ks=(5, 10), clusters=None) -> dict:
    """`ranking_scores`' metrics as per-sample units (means over samples), for confidence intervals."""
    from recharness.metrics.bootstrap import mean_units
    from recharness.metrics.ranking import target_metrics

    if not targets:
        return {}
    per = target_metrics(ranked, targets, ks=tuple(sorted(set(hr_ks) | set(ndcg_ks))), per_sample=True)
    kw = {"how": "mean over samples", "clusters": clusters}
    out = {f"HR@{k}": mean_units(ids, per[f"hr@{k}"], **kw) for k in hr_ks}
    out.update({f"NDCG@{k}": mean_units(ids, per[f"ndcg@{k}"], **kw) for k in ndcg_ks})
    out["MRR"] = mean_units(ids, per["mrr"], **kw)
    return out

"""LLMRec sequential recommendation: name the next items after a user's history.

The model answers in free text over the whole catalog; answers are matched to catalog items, each listed
title holding its place (an invented title, one naming an item already listed and an item the user already
had are no hit; the references never list the user's items), and HR@k / NDCG@k are taken against the
held-out next item: each user's last one (`--option split=leave_last_out`, the paper's)
or their first after one cut time for all users (`split=global_time`, `data.temporal_split`).
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, GenerationParams, Parsed
from recharness.matching.answers import listed_slots, matched_named
from recharness.matching.twins import naming_target
from recharness.tasks.base import Task
from recharness.tasks.llmrec.common import (
    CatalogContext,
    SplitPopularity,
    beyond_accuracy,
    keep_training_part,
    parts_from_options,
    ranking_scores,
    ranking_units,
    reference_predictions,
    split_users,
    target_seen,
    why_empty,
)
from recharness.tasks.llmrec.prompts import domain_of, sequential_prompt


class RecommendedItems(TypedDict):
    """A recommendation list: the catalog items named, in order (`items`), and the strings they came from."""

    items: list[str]
    strings: list[str]


class SequentialTask(Task):
    answer_type = RecommendedItems
    headline = "NDCG@10"
    name = "sequential"
    selects_users = True  # honours BuildConfig.users (build --users FILE)
    baselines = ("popularity", "random", "itemknn", "ease", "als", "markov")
    format_reminder = "Please answer only with a numbered list of titles, one per line."
    params = GenerationParams(max_tokens=200)
    ks = (1, 5, 10)

    def __init__(self):
        self.ctx: CatalogContext | None = None
        self.popularity = None

    scoring_needs_dataset = True

    def setup(self, dataset, context=None) -> None:
        self.ctx = CatalogContext.of(dataset)

    def prepare_scoring(self, dataset) -> None:
        self.popularity = SplitPopularity(dataset)

    def build(self, dataset, config: BuildConfig):
        opts = config.options
        hist_len = int(opts.get("history_len", 10))
        n_recs = int(opts.get("n_recs", 10))
        catalog = dataset.items.height
        if n_recs >= catalog:
            raise ConfigError(f"--option n_recs={n_recs}: the {dataset.name} catalog has {catalog} items; ask for "
                              "fewer than that (a list of every item recommends nothing)")
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        titles = dict(zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list()))
        splits, split = split_users(dataset, opts, config, min_history=int(opts.get("min_history", 5)))
        keep_training_part(config.out, dataset, split)
        for sp in splits:
            shown = [
                {"title": titles.get(i, i), "rating": r}
                for i, r in zip(sp.history[-hist_len:], sp.ratings[-hist_len:])
            ]
            sample = {
                "id": f"sequential-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "messages": sequential_prompt(domain, shown, n_recs, parts),
                "target": sp.target,
                "target_title": titles.get(sp.target, sp.target),
                "seen": sp.history,
                "n_recs": n_recs,
                "max_tokens": opts.get("max_tokens"),
                "prompt_parts": parts.to_dict(),
            }
            if split["split"] != "leave_last_out":
                sample["split"] = split
            yield sample

    def parse(self, sample: dict, text: str) -> Parsed:
        assert self.ctx is not None, "call setup(dataset) first"
        res = self.ctx.resolve(text)
        if res["refusal"] or not res["strings"]:
            return Parsed(res, valid=False, error="no recommendation list found in the answer")
        return Parsed(res)

    def why_empty(self, dataset, config) -> str | None:
        return why_empty(self.name, dataset, int(config.options.get("min_history", 5)), config.options)

    def ranked(self, sample: dict, pred: dict | None) -> list[str | None]:
        """The first n_recs listed titles as places (`listed_slots`): each the item it names (the target when
        its title also names the target), None for an invented or history title; a repeat keeps its place.
        The accuracy metrics read a place as the rank, so a junk title ahead of the target costs it a place."""
        if not pred or not pred.get("parsed"):
            return []
        seen = set(sample.get("seen") or ())
        places = naming_target(listed_slots(pred["parsed"], sample.get("n_recs")), pred["parsed"].get("twins"),
                               sample.get("target"))
        return [None if i in seen else i for i in places]

    def target_rank(self, sample: dict, record: dict | None) -> int | None:
        """As `score` reads it: the target's place among the first n_recs listed titles (`ranked`)."""
        places = self.ranked(sample, record)
        return places.index(sample["target"]) + 1 if sample.get("target") in places else None

    def score(self, samples, predictions):
        ranked = [self.ranked(s, predictions.get(s["id"])) for s in samples]
        m = ranking_scores(ranked, [s["target"] for s in samples], self.ks, ndcg_ks=(5, 10))
        preds = [predictions.get(s["id"]) for s in samples]
        m["valid_rate"] = float(np.mean([bool(p and p.get("valid", True)) for p in preds])) if preds else 0.0
        m["missing"] = float(sum(p is None for p in preds))
        counts = [matched_named(p["parsed"]) for p in preds if p and p.get("parsed")]
        matched, named = [m for m, _ in counts], [n for _, n in counts]
        if sum(named):  # no title named at all: the share is undefined (left out), not 0
            m["matched_share"] = float(sum(matched) / sum(named))
        # answered in the right shape, but not one named title is a catalog item: counted apart from format
        # failures (invalid) and from answers that found their items
        got = [p for p in preds if p is not None]
        if got:
            m["unrecognised_rate"] = float(np.mean([_unrecognised(p) for p in got]))
        m.update(target_seen(samples))  # unreachable here: every method's list leaves history out
        ids = [s["id"] for s in samples]
        m.update({k: u.point() for k, u in beyond_accuracy(self._pop(samples), ids, ranked,
                                                           [s["target"] for s in samples]).items()})
        return m

    def units(self, samples, predictions):
        """Per-sample HR/NDCG/MRR and validity; matched_share pools named titles (a ratio of sums)."""
        from recharness.metrics.bootstrap import RatioUnits, mean_units

        ids = [s["id"] for s in samples]
        ranked = [self.ranked(s, predictions.get(s["id"])) for s in samples]
        out = ranking_units(ids, ranked, [s["target"] for s in samples], self.ks, ndcg_ks=(5, 10))
        preds = [predictions.get(i) for i in ids]
        if preds:
            out["valid_rate"] = mean_units(ids, [bool(p and p.get("valid", True)) for p in preds], how="mean over samples")
        answered = [p is not None for p in preds]
        out["unrecognised_rate"] = mean_units(ids, [bool(p is not None and _unrecognised(p)) for p in preds], answered,
                                              how="mean over answered samples")
        counts = [matched_named(p["parsed"]) if p and p.get("parsed") else (0, 0) for p in preds]
        matched, named = [m for m, _ in counts], [n for _, n in counts]
        if sum(named):
            out["matched_share"] = RatioUnits(ids, matched, named, how="matched / named titles, pooled over samples")
        out.update(beyond_accuracy(self._pop(samples), ids, ranked, [s["target"] for s in samples]))
        return out

    def _pop(self, samples):
        return self.popularity.of(samples) if self.popularity is not None else None

    def reference_answer(self, ranker, sample: dict) -> dict:
        items = ranker.top_k(sample["n_recs"], exclude=set(sample["seen"]), user=sample.get("user_id"),
                             history=sample["seen"])
        return {"items": items, "strings": items}

    def references(self, dataset, samples, seed: int = 0):
        return reference_predictions(self, dataset, samples, seed)


def _unrecognised(pred: dict) -> bool:
    """A valid answer (a list of titles) none of which the catalog knows."""
    parsed = pred.get("parsed") if isinstance(pred.get("parsed"), dict) else {}
    return bool(pred.get("valid", True) and parsed.get("strings") and not parsed.get("items"))

"""The suite's three tasks: pointwise, pairwise and listwise ranking of one group per sample.

Every task drives the model itself (`predict`), because a group needs
several calls (one per user, heapsort comparisons, profiles).  All three
are scored by the same function (scoring.summarize); reference rows are
scored by it too: a random order for every method, and for pointwise the
user-mean and item-mean predictors, which show that good MAE / RMSE need
no personalization at all (the paper's Figure 1).
"""

from __future__ import annotations

import zlib
from typing import TypedDict

import numpy as np
import polars as pl

from recharness.core.types import BuildConfig, GenerationParams, Parsed, Prediction, reference_record
from recharness.tasks.base import Task
from recharness.tasks.orders import aggregated, borda_method, order_metrics, spread_units
from recharness.tasks.perrecbench.build import build_samples
from recharness.tasks.perrecbench.methods import PREDICT
from recharness.tasks.perrecbench.parsing import parse_pair, parse_ranking, parse_rating
from recharness.tasks.perrecbench.scoring import resampling, summarize, tau_units


class GroupOrdering(TypedDict):
    """A group's ranking: 1-based user indices, most preferred first (pairwise, listwise, the random order)."""

    ordering: list[int]


class GroupRatings(TypedDict):
    """A pointwise answer: one predicted rating per user (None where none was parsed), ranked by rating
    minus the user's mean."""

    ratings: list[float | None]


def _scoring(samples: list[dict]) -> dict:
    sc = samples[0].get("scoring", {}) if samples else {}
    return {"compat": sc.get("compat") == "perrecbench", "invalid": sc.get("invalid", "zero")}


class _GroupTask(Task):
    headline = "tau"
    name = ""
    answer_type = GroupOrdering
    request = "custom"  # several model calls per group: one per user, heapsort comparisons, profiles
    format_reminder = None  # retries happen inside predict, per model call
    params = GenerationParams(max_tokens=64)
    #: 2: without a profile, a user's block shows the retrieved history alone, as the authors' code (the rating
    #: lines came without a profile too in 1)
    prompt_version = "2"

    def build(self, dataset, config: BuildConfig):
        yield from build_samples(self.name, dataset, config)

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        """Which group filter left no group (the three tasks share the groups: one reason for all)."""
        from recharness.tasks.perrecbench.build import parse_options
        from recharness.tasks.perrecbench.groups import why_no_groups

        opts = parse_options(config.options, config.seed, config.limit)
        if opts.labels:
            return f"perrecbench: labels={opts.labels} holds no group of the levels {', '.join(opts.groups.levels)}"
        return why_no_groups(dataset.interactions, opts.groups, getattr(config.context, "tables", None))

    async def predict(self, model, sample: dict, *, max_retries: int | None) -> Prediction:
        """`max_retries` None: the build's (`-o max_retries=N`, default 1); given (`run --max-retries`): it wins."""
        if max_retries is not None:
            sample = {**sample, "method": {**sample["method"], "max_retries": int(max_retries)}}
        return await PREDICT[self.name](model, sample)

    def import_answer(self, sample: dict, line: dict):
        from recharness.tasks.perrecbench.imports import import_answer

        return import_answer(sample, line)

    def _summary(self, samples, predictions):
        return summarize(samples, predictions, with_ratings=self.name == "point", **_scoring(samples))

    def score(self, samples, predictions):
        metrics, _ = self._summary(samples, predictions)
        recs = [p for p in predictions.values() if "calls" in p]
        if recs:
            metrics["calls_per_group"] = float(np.mean([p["calls"] for p in recs]))
            metrics["retries"] = float(sum(p.get("retries", 0) for p in recs))
        return metrics

    def breakdown(self, samples, predictions):
        _, levels = self._summary(samples, predictions)
        return levels

    def units(self, samples, predictions):
        """Groups are the units, resampled within their level, or query items asked at several levels with their
        groups (see scoring.resampling)."""
        return tau_units(samples, predictions, with_ratings=self.name == "point", **_scoring(samples))

    def references(self, dataset, samples, seed: int = 0):
        rand = {}
        for s in samples:
            rng = np.random.default_rng([seed, zlib.crc32(s["id"].encode())])
            n = len(s["truth"]["relative_ratings"])
            rand[s["id"]] = reference_record(s["id"], {"ordering": [int(i) + 1 for i in rng.permutation(n)]})
        return {"random": rand}


class PointTask(_GroupTask):
    """Predict each user's rating; rank by predicted rating minus the user's mean rating."""

    name = "point"

    answer_type = GroupRatings | GroupOrdering  # its references: user/item means (ratings), random (order)

    def parse(self, sample, text) -> Parsed:
        return parse_rating(text)

    def score(self, samples, predictions):
        m = super().score(samples, predictions)
        fails = [p["parsed"].get("failed", 0) for p in predictions.values() if isinstance(p.get("parsed"), dict)]
        # a group the runner could not answer at all (failure record: parsed None) rated none of its users
        fails += [len(s["users"]) for s in samples
                  if s["id"] in predictions and not isinstance(predictions[s["id"]].get("parsed"), dict)]
        m["unparsed_users"] = float(sum(fails))
        return m

    def references(self, dataset, samples, seed: int = 0):
        refs = super().references(dataset, samples, seed)
        before = item_mean_before(dataset, samples)
        user_mean, item_mean = {}, {}
        for s in samples:
            t = s["truth"]
            user_mean[s["id"]] = reference_record(s["id"], {"ratings": list(t["avg_ratings"])})
            # item quality: the item's mean rating before the group's first rating of it (neither the labels nor
            # anything rated later); none earlier: the members' own means
            rest = before.get(s["id"])
            rest = rest if rest is not None else float(np.mean(t["avg_ratings"]))
            item_mean[s["id"]] = reference_record(s["id"], {"ratings": [rest] * len(t["ratings"])})
        return {"user-mean": user_mean, "item-mean": item_mean, **refs}


def item_mean_before(dataset, samples: list[dict]) -> dict[str, float | None]:
    """Per sample, its item's mean rating over the ratings made strictly before the group's earliest member
    rated it (found by (user, item) in the dataset); None when there is none, or a member's rating is not in
    the dataset (groups of imported label files)."""
    items = list({s["item_id"] for s in samples})
    rows = (dataset.interactions.filter(pl.col("rating").is_not_null() & pl.col("item_id").is_in(items))
            .select("user_id", "item_id", "rating", "timestamp").sort("item_id", "timestamp"))
    when: dict[tuple[str, str], int] = {}
    by_item: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for (item,), part in rows.group_by("item_id", maintain_order=True):
        ts = part["timestamp"].to_numpy()
        by_item[item] = (ts, np.concatenate([[0.0], np.cumsum(part["rating"].to_numpy(), dtype=np.float64)]))
        for u, t in zip(part["user_id"].to_list(), ts.tolist()):
            when.setdefault((u, item), t)  # sorted by time: a user's first rating of the item
    out: dict[str, float | None] = {}
    for s in samples:
        stamps = [when.get((str(u), s["item_id"])) for u in s["truth"]["user_ids"]]
        if s["item_id"] not in by_item or any(t is None for t in stamps):
            out[s["id"]] = None
            continue
        ts, cum = by_item[s["item_id"]]
        k = int(np.searchsorted(ts, min(stamps), side="left"))
        out[s["id"]] = float(cum[k] / k) if k else None
    return out


class PairTask(_GroupTask):
    """Heapsort over "which of two users prefers the item more", asked in both orders."""

    name = "pair"

    def parse(self, sample, text) -> Parsed:
        return parse_pair(text, last=bool(sample.get("method", {}).get("cot")))

    def score(self, samples, predictions):
        m = super().score(samples, predictions)
        # the scored samples' answers only (a subset scored with every record, e.g. a report's per-group table)
        answers = (predictions.get(s["id"]) for s in samples)
        parsed = [p["parsed"] for p in answers if p and isinstance(p.get("parsed"), dict) and "comparisons" in p["parsed"]]
        if parsed:
            comps = sum(p["comparisons"] for p in parsed)
            m["comparisons_per_group"] = comps / len(parsed)
            m["disagree_rate"] = sum(p["disagree"] for p in parsed) / comps if comps else 0.0
            m["failed_comparisons"] = float(sum(p["failed"] for p in parsed))
        return m

    def units(self, samples, predictions):
        from recharness.metrics.bootstrap import RatioUnits

        out = super().units(samples, predictions)
        parsed = [(predictions.get(s["id"]) or {}).get("parsed") for s in samples]
        has = [isinstance(p, dict) and "comparisons" in p for p in parsed]
        comps = [p["comparisons"] if h else 0 for p, h in zip(parsed, has)]
        if sum(comps):
            st, cl, unit = resampling(samples)
            out["disagree_rate"] = RatioUnits([s["id"] for s in samples], [p["disagree"] if h else 0 for p, h in zip(parsed, has)],
                                              comps, strata=st, clusters=cl,
                                              how=f"disagreeing / all comparisons, pooled over groups ({unit})")
        return out


class ListTask(_GroupTask):
    """All users in one prompt; the answer is a permutation of their indices. With `--option orders=K` each group
    is asked under K orders of its users (`build.user_orders`): the row gets tau's order spread (the mean over
    groups of the std across a group's K orders) and the most-liked user's top-1 rate by the position they were
    shown at (position bias), and a Borda row aggregates each group's K rankings."""

    name = "list"

    def parse(self, sample, text) -> Parsed:
        return parse_ranking(text, len(sample["users"]))

    def score(self, samples, predictions):
        metrics = super().score(samples, predictions)
        if samples and "order_of" in samples[0]:
            metrics["groups"] = float(len({s["order_of"] for s in samples}))  # groups, not group × order samples
            metrics.update(self._order_metrics(samples, predictions))
        return metrics

    def units(self, samples, predictions):
        """The groups' units (`tau_units`); with orders, tau's order spread as a mean over groups resampled as
        tau's are (`spread_units`)."""
        out = super().units(samples, predictions)
        got = self._order_values(samples, predictions)
        if got:
            st, cl, unit = resampling(samples)
            spread = spread_units(samples, got[0], got[2], strata=st, clusters=cl, unit="groups")
            if spread is not None:
                out["tau order spread"] = spread
        return out

    def _order_values(self, samples, predictions):
        """(per-sample tau, top-1 hit of the most-liked user, counted) as the headline tau takes them: tau over
        rank vectors, or with compat=perrecbench the original's tau over orderings; an answer the headline drops
        (invalid=drop, compat's dropped or NaN groups) and a missing one are not counted, so its group is left
        out of the order metrics. None without orders or for an aggregated (Borda) row (one answer per group)."""
        if not samples or "order_of" not in samples[0] or aggregated(samples, predictions):
            return None
        from recharness.tasks.perrecbench.scoring import score_groups

        sc = _scoring(samples)
        groups = score_groups(samples, predictions)
        if sc["compat"]:
            values = [g.tau_compat if g.tau_compat is not None else 0.0 for g in groups]
            counted = [g.tau_compat is not None and bool(np.isfinite(g.tau_compat)) for g in groups]
        else:
            values = [g.tau_rank for g in groups]
            counted = [g.status != "missing" and (sc["invalid"] == "zero" or g.status in ("ok", "tied"))
                       for g in groups]
        hits = []
        for s in samples:
            order = _ordering(predictions.get(s["id"]))
            hits.append(bool(order) and order[0] == s["target_position"])
        return values, hits, counted

    def _order_metrics(self, samples, predictions) -> dict[str, float]:
        """tau's order spread and HR@1 of the most-liked user by the position they were shown at, over the groups
        whose K orders all count (`_order_values`, `order_metrics`)."""
        got = self._order_values(samples, predictions)
        return order_metrics(samples, got[0], got[1], "tau", usable=got[2]) if got else {}

    def derived_methods(self, samples: list[dict], recs: dict[str, dict]) -> dict[str, dict[str, dict]]:
        """With `--option orders=K`: a method's K rankings of one group (each in its own shown order) mapped to the
        group's users, aggregated by Borda (`tasks.orders.borda_method`) and put back in each sample's shown order:
        one answer per group, scored as its own row on the same samples. Only groups whose K samples were all
        answered get it; none valid → an invalid answer."""

        def ranking(s: dict, r: dict) -> list[int] | None:
            order = _ordering(r)
            return [s["shown_order"][i - 1] for i in order] if order else None  # shown positions → the group's users

        return borda_method(
            samples, recs, ranking=ranking, candidates=lambda ss: sorted(ss[0]["shown_order"]),
            answer=lambda s, users: {"ordering": [s["shown_order"].index(u) + 1 for u in users]},
            error="no valid answer under any order of the group's users")


def _ordering(rec: dict | None) -> list[int] | None:
    """A listwise answer's ordering (1-based shown positions); None when it is missing or invalid."""
    rec = rec or {}
    return (rec.get("parsed") or {}).get("ordering") if rec.get("valid", True) else None


TASKS = {"point": PointTask, "pair": PairTask, "list": ListTask}

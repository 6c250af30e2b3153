"""A suite defined outside src/: the proof that a suite is a plug-in (tests/test_toy_suite.py).

`guess`: pick the user's held-out last item among four candidates (the target and three items the
user never rated), answering with the candidate's number. Scored by accuracy (a missing or
unparseable answer counts as wrong); the reference is popularity's first pick.
"""

from __future__ import annotations

import re

import numpy as np

from recharness.core.types import BuildConfig, Parsed
from recharness.metrics.bootstrap import mean_units
from recharness.metrics.registry import METRICS, metric
from recharness.tasks.base import Task
from recharness.tasks.registry import SUITES, DemoRun, register_suite

NAME = "toy"


class GuessTask(Task):
    name = "guess"
    headline = "accuracy"
    format_reminder = "Answer with the candidate's number only."
    baselines = ("popularity", "random")

    def build(self, dataset, config: BuildConfig):
        inter = dataset.interactions.sort(["user_id", "timestamp"])
        items = dataset.items["item_id"].to_list()
        titles = dict(zip(items, dataset.items["title"].to_list()))
        rng = np.random.default_rng(config.seed)
        users = sorted(set(inter["user_id"].to_list()))[: config.limit or 5]
        for u in users:
            seen = inter.filter(inter["user_id"] == u)["item_id"].to_list()
            target, unseen = seen[-1], [i for i in items if i not in set(seen)]
            cands = sorted([target, *rng.choice(unseen, size=3, replace=False).tolist()])
            listing = "\n".join(f"{k}. {titles.get(c) or c}" for k, c in enumerate(cands, 1))
            yield {"id": f"guess-{u}", "task": self.name, "target": target, "candidates": cands, "seen": seen[:-1],
                   "messages": [{"role": "user", "content": f"Which will user {u} watch next?\n{listing}\n"
                                                            "Answer with the number."}]}

    def parse(self, sample: dict, text: str) -> Parsed:
        m = re.search(r"\b([1-4])\b", text or "")
        if not m:
            return Parsed(None, valid=False, error="no candidate number")
        return Parsed(sample["candidates"][int(m.group(1)) - 1])

    def reference_answer(self, ranker, sample: dict):
        return ranker.rank(sample["candidates"])[0]

    def references(self, dataset, samples, seed: int = 0):
        from recharness.tasks.references import reference_records

        return reference_records(self, dataset, samples, seed)

    def _hits(self, samples, predictions) -> np.ndarray:
        return np.array([float((p := predictions.get(s["id"])) is not None and p.get("valid", True)
                               and p.get("parsed") == s["target"]) for s in samples])

    def score(self, samples, predictions) -> dict[str, float]:
        hits = self._hits(samples, predictions)
        invalid = [not (predictions.get(s["id"]) or {}).get("valid", False) for s in samples]
        return {"accuracy": float(hits.mean()) if len(hits) else float("nan"),
                "invalid_rate": float(np.mean(invalid)) if invalid else float("nan")}

    def units(self, samples, predictions):
        ids = [s["id"] for s in samples]
        return {"accuracy": mean_units(ids, self._hits(samples, predictions), how="mean over samples")}


def register() -> None:
    """Add the toy suite (and its metric) to the registries; `unregister` takes them out again."""
    if "accuracy" not in METRICS:
        metric("accuracy", True, "share of samples whose answer is the target (toy suite)", lead=True)
    if NAME not in SUITES:
        register_suite(NAME, {"guess": GuessTask}, "toy: pick the held-out item among four candidates (accuracy)",
                       demo=[DemoRun("toy", ("guess",), 3, order=99)])


def unregister() -> None:
    SUITES.remove(NAME)
    METRICS.remove("accuracy")

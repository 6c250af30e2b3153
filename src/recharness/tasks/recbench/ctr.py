"""RecBench pair-wise recommendation (CTR): will this user click this item? P(Yes) from the model.

The model sees the user's last positives as titles and one candidate, and is asked for "Yes" or
"No"; its score is P(Yes) normalised over the two options (Eq. 6), from the option-scoring call.
The samples, the training pairs beside them and the split are described in `recbench.data`.

Scored over every test sample by AUC, GAUC (impression-weighted: per-user AUC weighted by the
user's test pairs, as DIN computes it), GAUC_pos (weighted by the user's clicks, as RecBole computes
it), GAUC_unweighted (the plain mean of per-user AUC, as RecBench's own code computes it:
`MetricPool.calculate` in Jyonn/RecBench-MD `utils/metrics.py` averages the groups' `roc_auc_score`),
and log loss. Confidence intervals
resample users for all of them (a user's pairs move together). A sample without a usable score
(neither option among the returned log-probabilities, a failed request, no line at all) is counted
in `invalid_rate` (and `missing` for no line) and kept: every pair it is in counts one half in AUC
and GAUC, a coin flip (`halved`: it stands as two half-samples, one below and one above every
score), and its log loss is log 2 (P = 0.5). A model that answers little thus cannot look better by
being judged on fewer samples; and, unlike a score of 0.5, which ties only with other 0.5s, the
invalid answers cannot raise AUC when the valid scores sit above 0.5 and the failures fall on
negatives.
"""

from __future__ import annotations

import json
import math
import re
from typing import TypedDict

import numpy as np

from recharness.baselines import TrainData
from recharness.baselines.dlrm import DLRMS
from recharness.core.errors import ConfigError
from recharness.core.io import atomic_write_parquet, atomic_write_text
from recharness.core.rundir import RunDir
from recharness.core.types import BuildConfig, GenerationParams, Parsed, is_number
from recharness.metrics.classification import auc, gauc, gauc_units, logloss
from recharness.tasks.base import Task
from recharness.tasks.options import check
from recharness.tasks.recbench.data import labelled_events, split
from recharness.tasks.recbench.options import CtrOptions
from recharness.tasks.references import reference_records

SUITE = "recbench"
NO_OPTION = "no Yes/No in the top log-probabilities"

#: the authors' instruction (RecBench code, utils/prompt.py: CHAT_SYSTEM), with their "YES"/"NO"
#: written as the options that are scored
SYSTEM = ('You are a recommender. I will provide user behavior sequence, and a candidate item. '
          'Please response "Yes" or "No" to represent whether this user is interested in this item. '
          'You are not allowed to response any other words for any explanation or note. '
          'Now, your role formally begins. Any other information should not disturb you.')
_ANSWER = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)


def ctr_messages(history_titles: list[str], candidate_title: str, *, task_description: bool = True,
                 behaviour: bool = True, format_indicator: bool = True) -> list[dict[str, str]]:
    """The authors' input: "User behavior sequence:" with numbered titles, "Candidate item:", "Answer (Yes/No):"."""
    parts = []
    if behaviour:
        lines = [f"({k}) {t}" for k, t in enumerate(history_titles, 1)] or ["(none)"]
        parts.append("User behavior sequence:\n" + "\n".join(lines))
    parts.append(f"Candidate item: {candidate_title}")
    if format_indicator:
        parts.append("Answer (Yes/No):")
    user = {"role": "user", "content": "\n".join(parts)}
    return [{"role": "system", "content": SYSTEM}, user] if task_description else [user]


class CtrAnswer(TypedDict):
    """A ctr answer: P(Yes) for the sample's (user, item), None when the model gave neither option."""

    p_yes: float | None


def ranking_scores(samples: list[dict], predictions: dict[str, dict]) -> bool:
    """Whether a row's answers are a reference's ranking scores, not probabilities (`ranking_score`): its log
    loss would measure the scale it happens to have (popularity 1.78 against random's 0.96), so none is shown."""
    got = [((predictions.get(s["id"]) or {}).get("parsed") or {}) for s in samples]
    return any(g.get("ranking_score") for g in got)


def halved(y: np.ndarray, p: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sample of each row, labels, scores) with every sample as two rows: a usable one twice at its score, one
    without a usable score once below and once above every score (-1 and 2). Every pair of samples is then four
    pairs of rows, and a pair with an unusable sample in it wins two of its four and ties the rest evenly: one
    half, where a usable pair counts as before. Every sample doubled alike leaves AUC, and each user's AUC and
    weight share, as they were."""
    n = y.size
    rows = np.repeat(np.arange(n), 2)
    lo_hi = np.tile(np.array([-1.0, 2.0]), n)
    s2 = np.where(np.repeat(usable, 2), np.repeat(p, 2), lo_hi)
    return rows, np.repeat(y, 2), s2


class CtrTask(Task):
    headline = "AUC"
    name = "ctr"
    selects_users = True  # honours BuildConfig.users (build --users FILE)
    builds_apart_from = ("seqrec",)  # its own split of the training data (recbench/*.parquet)
    #: the nine DLRMs of §4 Groups A-C and the text / semantic DNNs after the simple references
    baselines = ("popularity", "random", "item_mean", "itemknn", "ease", "als", "markov", *DLRMS)
    request = "options"
    params = GenerationParams(max_tokens=2)
    answer_type = CtrAnswer

    def answer_options(self, sample: dict) -> list[str]:
        return ["Yes", "No"]

    def parse_options(self, sample: dict, scores) -> Parsed:
        if not any(v > -math.inf for v in scores.logprobs.values()):
            return Parsed({"p_yes": None}, valid=False, error=NO_OPTION)
        bounded = (getattr(scores, "extra", None) or {}).get("bounded")
        return Parsed({"p_yes": scores.probabilities()["Yes"], **({"bounded": list(bounded)} if bounded else {})})

    def import_answer(self, sample: dict, line: dict) -> tuple[dict | None, str | None] | None:
        """`score --predictions`: a line's "probability" (P(Yes), in [0, 1]) is the answer; other keys: `parse`."""
        if "probability" not in line:
            return None
        v = line["probability"]
        try:  # a bool is no probability; an int too large for a float (OverflowError) is out of range
            p = math.nan if isinstance(v, bool) else float(v)
        except (TypeError, ValueError, OverflowError):
            p = math.nan
        if not (0.0 <= p <= 1.0):
            return None, f"probability {line['probability']!r} is not a number in [0, 1]"
        return {"parsed": {"p_yes": p}, "valid": True, "error": None, "output": json.dumps({"probability": p})}, None

    def parse(self, sample: dict, text: str) -> Parsed:
        """A generated answer: leading "Yes" is P(Yes) = 1, "No" is 0 (the runner asks for log-probabilities instead)."""
        m = _ANSWER.match(text)
        if not m:
            return Parsed({"p_yes": None}, valid=False, error="the answer does not start with Yes or No")
        return Parsed({"p_yes": 1.0 if m.group(1).lower() == "yes" else 0.0})

    def build(self, dataset, config: BuildConfig):
        opts = check(CtrOptions, config.options, f"{SUITE}/{self.name}")
        events, mode = labelled_events(dataset.events(), dataset.items["item_id"].to_list(),
                                       negatives=opts.negatives, neg_ratio=opts.neg_ratio, seed=config.seed)
        self._seen = {"mode": mode, "funnel": {"users": 0}, "pairs": events.height}  # what `why_empty` reports
        if events.is_empty():
            return
        cut_t = self._cut_time(dataset, opts)
        sp = split(events, test_users=config.limit or (len(config.users) if config.users else opts.test_users),
                   only=config.users, per_user=opts.test_pairs_per_user,
                   train_pairs=opts.train_pairs, valid_fraction=opts.valid_fraction, history_len=opts.history_len,
                   min_history=opts.min_history, seed=config.seed, cut_time=cut_t)
        self._seen["funnel"] = sp.funnel
        # an item without a title (MicroLens and Amazon have some) is shown by its id, never as "None"
        titles = {i: t or i for i, t in zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list())}
        prompt = {"task_description": opts.task_description, "behaviour": opts.behaviour,
                  "format_indicator": opts.format_indicator}
        samples = [{
            "id": f"ctr-{u}-{i}", "task": self.name, "user_id": u, "item_id": i, "label": int(y),
            "timestamp": int(t), "history": h,
            "messages": ctr_messages([titles.get(x, x) for x in h], titles.get(i, i), **prompt),
        } for u, i, y, t, h in sp.test.iter_rows()]
        if config.out is not None:
            for part, df in (("train", sp.train), ("valid", sp.valid)):
                atomic_write_parquet(RunDir(config.out).pairs(SUITE, part), df)
            info = {"split": opts.split, **({"cut": opts.cut_quantile, "cut_time": cut_t} if cut_t is not None else {}),
                    "negatives": mode, "eligible_users": sp.eligible_users, "test_users": sp.test["user_id"].n_unique(),
                    **{f"{part}_{what}": v for part, df in (("test", sp.test), ("train", sp.train), ("valid", sp.valid))
                       for what, v in (("pairs", df.height), ("positive_rate", float(df["label"].mean() or 0)))}}
            atomic_write_text(RunDir(config.out).pairs(SUITE, "split", "json"), json.dumps(info, indent=2))
        yield from samples

    @staticmethod
    def _cut_time(dataset, opts):
        """The global split's cut time (None for leave_last_out): the interaction time at quantile `cut`."""
        if opts.split != "global_time":
            return None
        from recharness.data.temporal_split import cut_time

        return cut_time(dataset.events(), opts.cut_quantile, dataset.meta)

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        """Which filter of the split (`data.split`) removed every test user, with its numbers."""
        seen = getattr(self, "_seen", None)
        if seen is None:
            return None
        opts = check(CtrOptions, config.options, f"{SUITE}/{self.name}")
        f, mode = seen["funnel"], seen["mode"]
        if not f.get("users") and opts.split == "global_time" and seen.get("pairs"):
            return (f"ctr: split=global_time cut={opts.cut_quantile}: no labelled pair of {dataset.name} is at or after "
                    "the cut time: cut earlier with --option cut=Q")
        if not f.get("users"):
            rule = {"ratings": " (rating > 3 a click, < 3 not, 3 dropped)", "labels": " (impressions' labels)"}
            return f"ctr: negatives={mode}: {dataset.name} gives no labelled pair{rule.get(mode, '')}"
        if not f["with_pairs"]:
            if opts.split == "global_time":
                return (f"ctr: split=global_time cut={opts.cut_quantile}: test_pairs_per_user={opts.test_pairs_per_user} "
                        f"keeps 0 of the {f['users']} users with labelled pairs at or after the cut (the most any "
                        f"has there is {f['most_pairs']}): lower it, or cut earlier with --option cut=Q")
            return (f"ctr: test_pairs_per_user={opts.test_pairs_per_user} keeps 0 of the {f['users']} users with "
                    f"labelled pairs (a test user needs that many; the most any user has is {f['most_pairs']}): "
                    "lower it with --option test_pairs_per_user=N")
        if not f["with_history"]:
            return (f"ctr: min_history={opts.min_history} keeps 0 of the {f['with_pairs']} users with "
                    f"{opts.test_pairs_per_user} labelled pairs (a test user needs that many positives before their "
                    f"test pairs; the most here is {f['most_history']}): lower it with --option min_history=N")
        return None

    @staticmethod
    def _scores(samples: list[dict], predictions: dict[str, dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Labels, P(Yes) per sample (0.5 where there is no usable score), usable flags, missing lines."""
        n = len(samples)
        y = np.array([s["label"] for s in samples], dtype=np.int8)
        p = np.full(n, 0.5)
        usable = np.zeros(n, dtype=bool)
        missing = 0
        for k, s in enumerate(samples):
            rec = predictions.get(s["id"])
            if rec is None:
                missing += 1
                continue
            v = (rec.get("parsed") or {}).get("p_yes") if rec.get("valid", True) else None
            if is_number(v) and 0.0 <= v <= 1.0:  # a hand-edited record's value may be anything
                p[k], usable[k] = float(v), True
        return y, p, usable, missing

    def score(self, samples: list[dict], predictions: dict[str, dict]) -> dict[str, float]:
        n = len(samples)
        if n == 0:
            return {}
        y, p, usable, missing = self._scores(samples, predictions)
        rows, y2, s2 = halved(y, p, usable)
        g = gauc(y2, s2, [samples[k]["user_id"] for k in rows])
        # answers whose P(Yes) rests on a bound for the option the server's top log-probs left out (said, not hidden)
        bounded = sum(bool(((predictions.get(x["id"]) or {}).get("parsed") or {}).get("bounded")) for x in samples)
        if not usable.any():  # every value would come from the failure rule alone (random's): no number, said so
            nan = float("nan")
            return {"AUC": nan, "GAUC": nan, "GAUC_unweighted": nan, "GAUC_pos": nan,
                    **({} if ranking_scores(samples, predictions) else {"logloss": nan}),
                    "invalid_rate": 1.0, "missing": float(missing), "positive_rate": float(y.mean()),
                    "gauc_users": 0.0}
        return {
            "AUC": auc(y2, s2),
            "GAUC": g.weighted,
            "GAUC_unweighted": g.unweighted,
            "GAUC_pos": g.positive_weighted,
            **({} if ranking_scores(samples, predictions) else {"logloss": logloss(y, p)}),
            "invalid_rate": float((~usable).sum() / n),
            "missing": float(missing),
            "positive_rate": float(y.mean()),
            "gauc_users": float(g.n_groups),
            **({"bounded_rate": bounded / n} if bounded else {}),
        }

    def units(self, samples: list[dict], predictions: dict[str, dict]) -> dict:
        """AUC over samples (scores and labels), log loss and invalid_rate as per-sample means, each
        resampled by user (a user's pairs move together: they are not independent); the three GAUCs
        as ratios over users (per-user AUC times the weight, over the weights)."""
        from recharness.metrics.bootstrap import AUCUnits, mean_units

        if not samples:
            return {}
        ids = [s["id"] for s in samples]
        y, p, usable, _ = self._scores(samples, predictions)
        users = [s["user_id"] for s in samples]
        if not usable.any():  # `score` gives no AUC, GAUC or log loss then: only the invalid rate has units
            return {"invalid_rate": mean_units(ids, ~usable, how="mean over samples, users resampled", clusters=users)}
        e = np.finfo(np.float64).eps
        loss = -np.log(np.clip(np.where(y == 1, p, 1.0 - p), e, 1.0 - e))
        rows, y2, s2 = halved(y, p, usable)
        ids2, users2 = [f"{ids[k]}\x00{h}" for k, h in zip(rows, np.arange(rows.size) % 2)], [users[k] for k in rows]
        return {
            "AUC": AUCUnits(ids2, s2, y2, how="AUC over samples, users resampled", clusters=users2),
            "GAUC": gauc_units(y2, s2, users2, "impressions"),
            "GAUC_unweighted": gauc_units(y2, s2, users2, "uniform"),
            "GAUC_pos": gauc_units(y2, s2, users2, "positives"),
            **({} if ranking_scores(samples, predictions) else
               {"logloss": mean_units(ids, loss, how="mean over samples, users resampled", clusters=users)}),
            "invalid_rate": mean_units(ids, ~usable, how="mean over samples, users resampled", clusters=users),
        }

    def references(self, dataset, samples: list[dict], seed: int = 0) -> dict[str, dict[str, dict]]:
        """popularity, random and item_mean, fitted on the build's training pairs only."""
        if self.run_dir is None or not RunDir(self.run_dir).pairs(SUITE).exists():
            raise ConfigError(f"no training pairs for the reference rows in {self.run_dir}: rebuild the run "
                              f"(`recharness build {SUITE}` writes {SUITE}/train.parquet)")
        train = TrainData.of_build(dataset, self.run_dir, SUITE)
        return reference_records(self, dataset, samples, seed, train=train)

    def reference_answer(self, ranker, sample: dict) -> dict:
        return self.reference_answers(ranker, [sample])[0]

    def reference_answers(self, baseline, samples: list[dict]) -> list[dict]:
        """P(click) per sample; a reference whose click scores are a ranking, not probabilities
        (`Baseline.click_probabilities`), marks its answers so the row shows no log loss."""
        ranking = {} if getattr(baseline, "click_probabilities", True) else {"ranking_score": True}
        # a diverged model's NaN is no score: null, which `score` counts as no usable answer (as before the typed
        # answers refused a NaN and, with it, the whole `score`)
        return [{"p_yes": float(p) if math.isfinite(p) else None, **ranking} for p in baseline.p_clicks(samples)]

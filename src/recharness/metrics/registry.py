"""Every metric name that can appear in a score table, with its direction.

Tables read this registry instead of keeping their own lists: the column order
(`lead` metrics first, in registration order), hidden bookkeeping columns, and
the ↑ / ↓ marker in table headers. A name with `{…}` is a pattern (`HR@{k}`,
`faith[{judge}]`) matched when no exact entry exists; registering `HR@5` too
pins that one's place among the leading columns.

    info = metric_info("NDCG@10")   # Metric(name="NDCG@{k}"...) or the exact entry
    info.higher_is_better           # True / False / None (no better side: counts, costs by choice)
    info.ci                         # False for counts and costs: no confidence interval
    info.label                      # what tables show (default: the name), e.g. "GAUC (impr.)"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recharness.core.registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str
    #: True: higher is better, False: lower is better, None: descriptive (no better side)
    higher_is_better: bool | None
    description: str
    #: shown before other columns, in registration order
    lead: bool = False
    #: kept in scores.json but not shown as a table column
    hidden: bool = False
    #: gets a bootstrap confidence interval (False: counts, costs, timings, properties of the data)
    ci: bool = True
    #: the column header's text when it is not the name
    label: str | None = None
    #: the terminal shows a task's "beyond accuracy" columns in a table of their own (too wide together)
    group: str = "accuracy"

    @property
    def arrow(self) -> str:
        return {True: "↑", False: "↓"}.get(self.higher_is_better, "")


METRICS: Registry[Metric] = Registry("metric")


def metric(name: str, higher_is_better: bool | None, description: str, *, lead: bool = False,
           hidden: bool = False, ci: bool = True, label: str | None = None, group: str = "accuracy") -> Metric:
    """Register one metric name (or `{…}` pattern); the Metric record is also its registry metadata."""
    m = Metric(name, higher_is_better, description, lead, hidden, ci and not hidden, label, group)
    if name in METRICS and METRICS.get(name) == m:  # the same declaration again (a module imported anew)
        return METRICS.get(name)
    METRICS.add(name, m, higher_is_better=higher_is_better, description=description, lead=lead, hidden=hidden)
    return m


#: what a placeholder of a registered pattern stands for: a cut-off or position is a number (so "NDCG@{k}" is not
#: "NDCG@10 order spread"); any other ({acc}, {judge}) is any text
_PLACEHOLDER = {"{k}": r"\d+", "{p}": r"\d+"}


def _pattern(name: str) -> re.Pattern:
    return re.compile("".join(_PLACEHOLDER.get(p, ".+?") if p.startswith("{") else re.escape(p)
                              for p in re.split(r"(\{[^}]*\})", name)))


def metric_info(name: str) -> Metric | None:
    """The exact entry, else the matching pattern with the most literal text, else None (unregistered)."""
    if name in METRICS:
        return METRICS.get(name)
    # the most specific pattern wins: "HR@10 head" is "{acc} head", not "HR@{k}"
    found = [k for k in METRICS if "{" in k and _pattern(k).fullmatch(name)]
    return METRICS.get(max(found, key=lambda k: len(re.sub(r"\{[^}]*\}", "", k)))) if found else None


def lead_order() -> list[str]:
    """The leading columns, in table order."""
    return [name for name in METRICS if METRICS.meta(name)["lead"] and "{" not in name]


def is_hidden(name: str) -> bool:
    info = metric_info(name)
    return bool(info and info.hidden)


def wants_ci(name: str) -> bool:
    """Whether a metric gets a confidence interval: registered, and not a count, cost or timing."""
    info = metric_info(name)
    return bool(info and info.ci)


def metric_group(name: str) -> str:
    """The group a column belongs to ("accuracy" unless registered otherwise, e.g. "beyond accuracy")."""
    info = metric_info(name)
    return info.group if info else "accuracy"


def header(name: str) -> str:
    """A column header with its direction marker ("HR@10 ↑", "RMSE (valid) ↓", "words", "GAUC (impr.) ↑")."""
    info = metric_info(name)
    text = info.label if info and info.label else name
    return f"{text} {info.arrow}" if info and info.arrow else text


# ------------------------------------------------------------------ leading columns (this order is the tables')

metric("tau", True, "Kendall tau of the predicted vs true order within a group, the prediction's ties counted as "
       "coin flips (tau-b when it has none; the original's tau with --option compat=perrecbench), mean over levels "
       "(PerRecBench)", lead=True)
for _lv in ("easy", "medium", "hard"):
    metric(f"tau_{_lv}", True, f"tau on the {_lv} level's groups", lead=True)
for _k in (1, 5, 10):
    metric(f"HR@{_k}", True, f"hit ratio: share of samples with the target in the top {_k}", lead=True)
for _k in (5, 10):
    metric(f"NDCG@{_k}", True, f"normalised discounted cumulative gain of the target in the top {_k}", lead=True)
metric("MRR", True, "mean reciprocal rank of the target (0 when not ranked)", lead=True)
metric("RMSE", False, "root mean squared rating error over valid answers", lead=True, label="RMSE (valid)")
metric("MAE", False, "mean absolute rating error over valid answers", lead=True, label="MAE (valid)")
metric("RMSE_fb", False, "RMSE over every sample, an invalid answer at the worst rating the scale allows", lead=True)
metric("MAE_fb", False, "MAE over every sample, an invalid answer at the worst rating the scale allows", lead=True)
metric("BLEU-1", True, "corpus BLEU with unigrams (sacrebleu, lowercased), 0-100", lead=True)
metric("BLEU-4", True, "corpus BLEU up to 4-grams (sacrebleu, lowercased), 0-100", lead=True)
metric("ROUGE-1", True, "mean ROUGE-1 F1 (stemmed), 0-100", lead=True)
metric("ROUGE-2", True, "mean ROUGE-2 F1 (stemmed), 0-100", lead=True)
metric("ROUGE-L", True, "mean ROUGE-L F1 (stemmed), 0-100", lead=True)
metric("invalid", False, "groups whose answer could not be used (PerRecBench)", lead=True, ci=False)
metric("invalid_rate", False, "share of samples without a usable answer", lead=True)
metric("valid_rate", True, "share of samples with a usable answer", lead=True)
metric("partial_rate", False, "share of rankings that name only some of the candidates", lead=True)
metric("out_of_range_rate", False, "share of rankings naming a number no candidate has (left out: e.g. a 0-based "
       "ranking's 0)", ci=False)
metric("matched_share", True, "share of named titles matched to catalog items", lead=True)
metric("target_seen_rate", None, "share of samples whose held-out item is also in the user's history (a repeat "
       "purchase): LLMRec sequential leaves history out of every list, so none can hit it; in direct it is the one "
       "candidate the user had, a giveaway", ci=False)
metric("unrecognised_rate", False, "share of answers in the right shape that name no catalog item (apart from invalid ones)")
metric("latency_s", False, "mean seconds per answer (cached answers included)", lead=True, ci=False)
metric("latency_concurrency", None, "the most requests the run had in flight at its server while timing an answer: "
       "its latency holds that server's queue (`--concurrency 1` times single calls, as the conventional models are)",
       lead=True, ci=False, label="latency at concurrency")
metric("completion_tokens", None, "mean generated tokens per answer", lead=True, ci=False)
metric("throughput_per_s", True, "samples per second predicted in one batch (trained reference models)", ci=False)
metric("train_s", False, "seconds the `train` stage took to fit the model", ci=False)

# ------------------------------------------------------------------ other columns, in the order they first appear

metric("HR@{k}", True, "hit ratio at k")
metric("NDCG@{k}", True, "normalised discounted cumulative gain at k")
metric("Recall@{k}", True, "share of relevant items in the top k (one target per sample: equals HR@k)")
metric("MRR (full)", True, "a ranker's mean reciprocal rank over the whole catalog, beside MRR over the list length "
       "an LLM is asked for (no LLM row has it)")
metric("Recall@{k} (full)", True, "a ranker's Recall@k over the whole catalog for k beyond the list length an LLM "
       "is asked for (no LLM row has it)")
metric("words", None, "mean words per valid generated text")
metric("n_scored", None, "queries with a prediction", ci=False)
metric("dropped_unparsed", None, "PerRecBench under invalid=drop: groups with no parseable answer (or none), left "
       "out of tau rather than scored 0", ci=False)
metric("levels_without_tau", None, "PerRecBench under invalid=drop: levels whose every group was left out; the "
       "headline tau is the mean of the others", ci=False)
metric("parse_errors", False, "answers the parser failed on", ci=False)
metric("CMR_checkable", None, "share of condition queries whose relations the dataset's KG has: CMR rests on these "
       "alone (an official file may use relations the KG lacks)", ci=False)
metric("failed", False, "samples that failed outright (HTTP error, prompt too long)", ci=False)
metric("AUC", True, "area under the ROC curve (CTR)")
metric("GAUC", True, "impression-weighted group AUC: per-user AUC weighted by the user's test pairs, as DIN (CTR)",
       label="GAUC (impr.)")
metric("GAUC_unweighted", True, "plain mean of per-user AUC over users with both labels, as RecBench's code computes "
       "GAUC (CTR)", label="GAUC (mean)")
metric("GAUC_pos", True, "positive-weighted group AUC: per-user AUC weighted by the user's clicks, as RecBole (CTR)",
       label="GAUC (pos.)")
metric("logloss", False, "binary cross-entropy of predicted click probabilities (CTR)")
metric("positive_rate", None, "share of test pairs that are clicks (CTR): read logloss against it", ci=False)

# ------------------------------------------------------------------ bookkeeping, kept in scores.json only

metric("missing", False, "samples with no prediction line", hidden=True)
metric("latency_uncached_s", False, "mean seconds per answer not served from the cache", hidden=True)
metric("gauc_users", None, "users with both labels among their test pairs: the users GAUC averages over", hidden=True)
BEYOND = "beyond accuracy"
# beyond accuracy (metrics/beyond_accuracy.py): what a ranking method recommends, for every ranking task
# no interval: a set statistic under resampling with replacement is biased (repeated samples name fewer
# distinct items: the percentile interval of coverage lies below its own value, of Gini above it)
metric("coverage@{k}", None, "distinct recommended items in the top k over the catalog size (beyond accuracy)",
       ci=False, group=BEYOND)
metric("Gini@{k}", None, "Gini index of item exposure in the top-k lists, 0 equal, up to (m-1)/m for m items when one item takes all (beyond accuracy)",
       ci=False, group=BEYOND)
metric("ARP@{k}", None, "average recommended popularity: mean training interactions of the top-k items (beyond accuracy)",
       group=BEYOND)
metric("novelty@{k}", None, "mean self-information -log2 p(i) of the top-k items, p(i) = (training users of i + 1) / "
       "(training users + 1): add-one, so an item nobody had is finite, about 1 bit below -log2(n/U) for an item of "
       "one user (beyond accuracy)",
       group=BEYOND)
metric("{acc} head", True, "accuracy on samples whose target is among the 20% most interacted items", group=BEYOND)
metric("{acc} tail", True, "accuracy on samples whose target is outside the 20% most interacted items", group=BEYOND)

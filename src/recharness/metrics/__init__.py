"""Exact, vectorised evaluation metrics, each checked against its reference library.

ranking: HR / precision / recall / NDCG / MRR at k for ranked lists.
classification: AUC, GAUC, log loss for CTR-style predictions.
rating: RMSE / MAE. correlation: Kendall's tau-b. text: BLEU and ROUGE.
registry: METRICS, every score-table metric name with its direction (higher/lower is better).
"""

from recharness.metrics.classification import GAUCResult, auc, gauc, group_auc, logloss
from recharness.metrics.correlation import kendall_tau, kendall_tau_groups, mean_kendall_tau
from recharness.metrics.ranking import METRIC_NAMES, rank_of_target, ranking_metrics, target_metrics
from recharness.metrics.rating import mae, rating_errors, rmse
from recharness.metrics.registry import METRICS, Metric, metric, metric_info
from recharness.metrics.text import ROUGE_TYPES, bleu, rouge, sentence_bleu, text_metrics

__all__ = [
    "GAUCResult",
    "METRICS",
    "METRIC_NAMES",
    "Metric",
    "ROUGE_TYPES",
    "auc",
    "bleu",
    "gauc",
    "group_auc",
    "kendall_tau",
    "kendall_tau_groups",
    "logloss",
    "mae",
    "mean_kendall_tau",
    "metric",
    "metric_info",
    "rank_of_target",
    "ranking_metrics",
    "rating_errors",
    "rmse",
    "rouge",
    "sentence_bleu",
    "target_metrics",
    "text_metrics",
]

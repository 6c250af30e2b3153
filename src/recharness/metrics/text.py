"""Text-generation metrics (explanations, reviews): BLEU via sacrebleu, ROUGE via rouge-score.

Why wrap the reference libraries instead of re-implementing: BLEU and ROUGE
numbers are only comparable across papers when computed by the same code and
tokenisation, so these functions call sacrebleu and rouge-score directly and
only fix the settings.

Normalisation applied (nothing else is done to the text):

* Missing outputs (``None``) become the empty string, so a model that failed
  to answer scores 0 rather than being dropped.
* BLEU: sacrebleu's default ``13a`` tokenizer (the WMT ``mteval-v13a``
  rules: splits punctuation from words, keeps case).  BLEU is case-sensitive
  unless ``lowercase=True`` (sacrebleu's own option).  Scores are on
  sacrebleu's 0-100 scale.  BLEU-n uses uniform weights over 1..n-grams
  (sacrebleu ``max_ngram_order=n``), so BLEU-1 is unigram precision times
  the brevity penalty.  Corpus BLEU pools n-gram counts over all samples,
  with sacrebleu's default ``exp`` smoothing, which changes the score only
  when some n-gram order has no match in the whole corpus (a small run: one
  hypothesis "a b c d e" against "a b c x y" gives BLEU-4 39.76, 0 unsmoothed);
  sentence BLEU is the mean of per-sample scores with
  sacrebleu's ``sentence_bleu`` settings (``exp`` smoothing, effective order).
* ROUGE: rouge-score's tokenizer, which always lowercases, replaces every
  non-alphanumeric character with a space, and (``use_stemmer=True``) applies
  the Porter stemmer.  We report the F1 ("fmeasure") of ROUGE-1, ROUGE-2 and
  ROUGE-L (sentence-level LCS, not ``rougeLsum``), averaged over samples, on
  rouge-score's 0-1 scale.  With several references a sample takes the best
  F1 over its references (rouge-score ``score_multi``).

``references`` is either one string per hypothesis or, per hypothesis, a
sequence of reference strings (counts may differ between samples).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# sacrebleu and rouge-score (which pulls in nltk) are imported where used: every CLI
# start discovers all suites, and most commands never compute a text metric.

__all__ = ["bleu", "sentence_bleu", "rouge", "text_metrics", "ROUGE_TYPES"]

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def _hyps(hypotheses: Sequence[Any]) -> list[str]:
    return ["" if h is None else str(h) for h in hypotheses]


def _refs_per_sample(references: Sequence[Any], n: int) -> list[list[str]]:
    if len(references) != n:
        raise ValueError(f"{n} hypotheses but {len(references)} references")
    out = []
    for i, r in enumerate(references):
        refs = [r] if isinstance(r, str) or r is None else list(r)
        refs = ["" if x is None else str(x) for x in refs]
        if not refs:
            raise ValueError(f"sample {i} has no reference")
        out.append(refs)
    return out


def _ref_streams(per_sample: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu wants one stream per reference slot; shorter samples are padded with None."""
    width = max(len(r) for r in per_sample)
    return [[r[j] if j < len(r) else None for r in per_sample] for j in range(width)]


def bleu(hypotheses: Sequence[Any], references: Sequence[Any], max_order: int = 4, lowercase: bool = False) -> float:
    """Corpus BLEU-``max_order`` (0-100) with sacrebleu defaults; NaN for an empty corpus."""
    hyps = _hyps(hypotheses)
    refs = _refs_per_sample(references, len(hyps))
    if not hyps:
        return float("nan")
    from sacrebleu.metrics import BLEU

    metric = BLEU(max_ngram_order=max_order, lowercase=lowercase)
    return float(metric.corpus_score(hyps, _ref_streams(refs)).score)


def sentence_bleu(
    hypotheses: Sequence[Any],
    references: Sequence[Any],
    max_order: int = 4,
    lowercase: bool = False,
    per_sample: bool = False,
) -> float | np.ndarray:
    """Mean sentence BLEU-``max_order`` (0-100), as ``sacrebleu.sentence_bleu`` scores each sample."""
    hyps = _hyps(hypotheses)
    refs = _refs_per_sample(references, len(hyps))
    from sacrebleu.metrics import BLEU

    metric = BLEU(max_ngram_order=max_order, lowercase=lowercase, effective_order=True)
    scores = np.fromiter((metric.sentence_score(h, r).score for h, r in zip(hyps, refs)), dtype=np.float64, count=len(hyps))
    if per_sample:
        return scores
    return float(scores.mean()) if scores.size else float("nan")


def rouge(
    hypotheses: Sequence[Any], references: Sequence[Any], per_sample: bool = False
) -> dict[str, float] | dict[str, np.ndarray]:
    """Mean ROUGE-1/2/L F1 (0-1) over samples, stemmer on; keys ``rouge1``, ``rouge2``, ``rougeL``."""
    hyps = _hyps(hypotheses)
    refs = _refs_per_sample(references, len(hyps))
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    out = {t: np.empty(len(hyps)) for t in ROUGE_TYPES}
    for i, (h, r) in enumerate(zip(hyps, refs)):
        s = scorer.score(r[0], h) if len(r) == 1 else scorer.score_multi(r, h)
        for t in ROUGE_TYPES:
            out[t][i] = s[t].fmeasure
    if per_sample:
        return out
    return {t: float(v.mean()) if v.size else float("nan") for t, v in out.items()}


def text_metrics(hypotheses: Sequence[Any], references: Sequence[Any], lowercase: bool = False) -> dict[str, float]:
    """Corpus and mean-sentence BLEU-1/BLEU-4 plus mean ROUGE-1/2/L F1 in one dict."""
    out = {
        "bleu1": bleu(hypotheses, references, 1, lowercase),
        "bleu4": bleu(hypotheses, references, 4, lowercase),
        "sentence_bleu1": sentence_bleu(hypotheses, references, 1, lowercase),
        "sentence_bleu4": sentence_bleu(hypotheses, references, 4, lowercase),
    }
    out.update(rouge(hypotheses, references))
    return out

"""LLMRec explanation generation: why did the user rate this item so? Scored against their real review.

Each sample is a user's held-out last review (leave-last-out; only users
whose last review has text are eligible, decided before the seeded
sampling). The model gets the item and the user's real rating (plus, with
behaviour injection, their earlier items, ratings and review titles) and
writes a short explanation; the reference is the text of the user's real
review of that item (P5, whose tasks the paper takes, uses one review sentence
naming a product feature, extracted with Sentires: not done here, so scores are
not comparable to the paper's).

Scoring (shared with summarization.py), all on a 0-100 scale:
  BLEU-1, BLEU-4   corpus BLEU via sacrebleu (13a tokenizer, lowercased,
                   uniform n-gram weights up to 1 / 4, sacrebleu's default
                   `exp` smoothing: it matters only when an n-gram order has
                   no match in the whole corpus, i.e. on tiny runs);
  ROUGE-1/2/L      mean F1 via rouge-score (its tokenizer: lowercase,
                   non-alphanumerics → spaces, Porter stemmer), × 100;
  invalid_rate     answers that failed the FreeText check after the retry,
                   or are missing; they enter every metric as the empty
                   string (score 0), never dropped;
  words            mean word count of the valid answers.
Text normalisation before BLEU/ROUGE (hypotheses and references alike):
`validation.normalize_for_metrics` — HTML ``<br />`` and tags → spaces,
HTML entities unescaped, whitespace collapsed; hypotheses were first
cleaned by `validation.clean_text` (labels like "Explanation:", preamble
lines, markdown emphasis, wrapping quotes removed). Nothing else (no
punctuation stripping, no stop-word removal) is done.

LLM-as-judge (judge.py): when <run>/judgments/*.jsonl exist, `score` adds
for each judge J the mean 1-5 scores ``faith[J]`` and ``pers[J]`` and the
share of samples they cover ``judged[J]``; see judge.py for the matching rule.
Reference row: ``previous_review`` — the user's own most recent earlier
review text (training data only), a personal-but-unrelated baseline.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig, GenerationParams, Parsed, reference_record
from recharness.metrics.text import bleu, rouge
from recharness.tasks.base import Task
from recharness.tasks.llmrec.common import parts_from_options
from recharness.tasks.llmrec.prompts import domain_of
from recharness.tasks.llmrec.rating import item_info, review_splits, why_no_reviews
from recharness.tasks.llmrec.text_prompts import MAX_REVIEW_CHARS, explanation_prompt, hypothesis, rated_history, short
from recharness.tasks.validation import FreeText, normalize_for_metrics

__all__ = ["MAX_REVIEW_CHARS", "ExplanationTask", "ReviewTextTask", "hypothesis", "require_reviews", "text_scores"]



def text_scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """BLEU-1/4 (sacrebleu, lowercased) and ROUGE-1/2/L F1 (rouge-score, stemmed), all 0-100."""
    hyps = [normalize_for_metrics(h) for h in hypotheses]
    refs = [normalize_for_metrics(r) for r in references]
    r = rouge(hyps, refs)
    return {
        "BLEU-1": bleu(hyps, refs, 1, lowercase=True),
        "BLEU-4": bleu(hyps, refs, 4, lowercase=True),
        "ROUGE-1": 100.0 * r["rouge1"],
        "ROUGE-2": 100.0 * r["rouge2"],
        "ROUGE-L": 100.0 * r["rougeL"],
    }


class GeneratedText(TypedDict):
    """A generated text's answer (explanation, summary): the cleaned text BLEU and ROUGE read."""

    text: str


class ReviewTextTask(Task):
    """Shared parse/score for the two text tasks; subclasses build samples."""

    headline = "ROUGE-L"
    selects_users = True  # honours BuildConfig.users (build --users FILE)

    answer_type = GeneratedText
    output_format: FreeText = FreeText()
    #: set by the pipeline (or tests) so `score` can find <run>/judgments; else sample["run_dir"]
    run_dir: Path | None = None

    def setup(self, dataset, context=None) -> None:
        return None

    def parse(self, sample: dict, text: str) -> Parsed:
        return self.output_format.check(text)

    def _run_dir(self, samples) -> Path | None:
        if self.run_dir is not None:
            return Path(self.run_dir)
        rd = samples[0].get("run_dir") if samples else None
        return Path(rd) if rd else None

    def score(self, samples, predictions):
        if not samples:
            return {}
        preds = [predictions.get(s["id"]) for s in samples]
        hyps = [hypothesis(p) for p in preds]
        m = text_scores([h or "" for h in hyps], [s["reference"] for s in samples])
        valid = [h for h in hyps if h is not None]
        m["invalid_rate"] = 1.0 - len(valid) / len(samples)
        m["words"] = float(np.mean([len(h.split()) for h in valid])) if valid else float("nan")  # no answer, no length
        m["missing"] = float(sum(p is None for p in preds))
        rd = self._run_dir(samples)
        if rd is not None:
            from recharness.tasks.llmrec.judge import judge_metrics

            m.update(judge_metrics(samples, predictions, rd))
        return m

    def units(self, samples, predictions):
        """BLEU from per-sentence statistics (corpus BLEU is no mean: its n-gram counts are sums),
        ROUGE as per-sample means, the invalid share, words over valid answers, judge means."""
        from recharness.metrics.bootstrap import bleu_units, mean_units

        if not samples:
            return {}
        ids = [s["id"] for s in samples]
        hyps = [hypothesis(predictions.get(i)) for i in ids]
        h = [normalize_for_metrics(x or "") for x in hyps]
        r = [normalize_for_metrics(s["reference"]) for s in samples]
        per = rouge(h, r, per_sample=True)
        out = {"BLEU-1": bleu_units(ids, h, r, 1, lowercase=True), "BLEU-4": bleu_units(ids, h, r, 4, lowercase=True)}
        for name, key in (("ROUGE-1", "rouge1"), ("ROUGE-2", "rouge2"), ("ROUGE-L", "rougeL")):
            out[name] = mean_units(ids, 100.0 * per[key], how="mean over samples")
        ok = [x is not None for x in hyps]
        out["invalid_rate"] = mean_units(ids, [not v for v in ok], how="mean over samples")
        if any(ok):
            out["words"] = mean_units(ids, [len(x.split()) if x is not None else 0 for x in hyps], ok,
                                      how="mean over valid answers")
        rd = self._run_dir(samples)
        if rd is not None:
            from recharness.tasks.llmrec.judge import judge_units

            out.update(judge_units(samples, predictions, rd))
        return out


def require_reviews(dataset, task: str) -> None:
    if "review_text" not in dataset.interactions.columns:
        raise ConfigError(
            f"{task} needs real review texts, and dataset {dataset.name!r} has none "
            "(no 'review_text' column); use an Amazon Reviews 2023 dataset, e.g. --dataset amazon2023"
        )


class ExplanationTask(ReviewTextTask):
    name = "explanation"
    output_format = FreeText(min_words=1, max_words=120)
    format_reminder = "Please answer with the explanation only: one or two sentences, at most 40 words."
    params = GenerationParams(max_tokens=96)

    def build(self, dataset, config: BuildConfig):
        require_reviews(dataset, self.name)
        opts = config.options
        hist_len = int(opts.get("history_len", 5))
        max_words = int(opts.get("max_words", 40))
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        titles, about = item_info(dataset)
        splits = review_splits(dataset.interactions, min_history=int(opts.get("min_history", 4)), limit=config.limit,
                               seed=config.seed, require=("review_text",), users=config.users, rated=True)
        for sp in splits:
            rating = sp.target.get("rating")
            if rating is None:
                continue
            shown = [
                {"title": titles.get(h["item_id"], h["item_id"]), "rating": h.get("rating"), "review_title": h.get("review_title")}
                for h in sp.history[-hist_len:]
            ]
            item = {"title": titles.get(sp.target["item_id"], sp.target["item_id"]), "about": about.get(sp.target["item_id"], "")}
            earlier = [normalize_for_metrics(h.get("review_text")) for h in sp.history]
            earlier = [t for t in earlier if t]
            context = (
                f'Product: "{short(item["title"])}"' + (f" ({item['about']})" if item["about"] else "")
                + f"\nThe user's rating: {rating:g}/5\nThe user's earlier reviews, oldest first:\n{rated_history(shown)}"
            )
            yield {
                "id": f"explanation-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "item_id": sp.target["item_id"],
                "item_title": item["title"],
                "rating": float(rating),
                "reference": normalize_for_metrics(sp.target["review_text"]),
                "previous_review": earlier[-1] if earlier else "",
                "judge_context": context,
                "messages": explanation_prompt(domain, item, float(rating), shown, parts, max_words),
                "output_format": self.output_format.to_dict(),
                "max_tokens": opts.get("max_tokens"),  # --option max_tokens=N overrides the task default
                "prompt_parts": parts.to_dict(),
                "run_dir": str(Path(config.out).resolve()) if config.out else None,
            }

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        return why_no_reviews(self.name, dataset, int(config.options.get("min_history", 4)), ("review_text",),
                              rated=True)

    def references(self, dataset, samples, seed: int = 0):
        """`previous_review`: the user's last earlier review, read by the check a model's answer meets (at most
        `output_format.max_words` words, else invalid): on the models' terms (before, a 1,455-word review stood,
        and its length alone moved BLEU)."""
        out = {}
        for s in samples:
            p = self.parse(s, s["previous_review"]) if s["previous_review"] else None
            ok = p is not None and p.valid
            out[s["id"]] = reference_record(s["id"], p.value if ok else {"text": s["previous_review"]},
                                            output=s["previous_review"], valid=ok)
        return {"previous_review": out}

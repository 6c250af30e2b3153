"""LLMRec review summarization: a real review's text → a one-line summary; the reference is its title.

Samples are users' held-out last reviews with both text and title
(leave-last-out, eligibility decided before the seeded sampling). Behaviour
injection shows the titles the same reviewer gave their earlier reviews
(their style); the review text is cut to `max_review_chars` (default 1,500)
so prompts fit small models' windows. The answer must be one line of at
most 30 words (FreeText, first non-empty line; the prompt asks for ≤ 10).

Scored like explanation generation (BLEU-1/4, ROUGE-1/2/L on 0-100, same
normalisation, invalid answers as empty strings, judge columns when
judgments exist; see explanation.py). Reference row: ``lead_words`` — the
first N words of the review text (N = option `lead_words`, default 5, about
the mean title length of the Amazon-2023 sample, 4.0 words).
"""

from __future__ import annotations

from pathlib import Path

from recharness.core.types import BuildConfig, GenerationParams, reference_record
from recharness.tasks.llmrec.common import parts_from_options
from recharness.tasks.llmrec.explanation import MAX_REVIEW_CHARS, ReviewTextTask, require_reviews
from recharness.tasks.llmrec.prompts import domain_of
from recharness.tasks.llmrec.rating import review_splits, why_no_reviews
from recharness.tasks.llmrec.text_prompts import short, summarization_prompt
from recharness.tasks.validation import FreeText, normalize_for_metrics


class SummarizationTask(ReviewTextTask):
    name = "summarization"
    output_format = FreeText(min_words=1, max_words=30, single_line=True)
    format_reminder = "Please answer with the summary only: one line of at most 10 words."
    params = GenerationParams(max_tokens=40)

    def build(self, dataset, config: BuildConfig):
        require_reviews(dataset, self.name)
        opts = config.options
        hist_len = int(opts.get("history_len", 5))
        max_chars = int(opts.get("max_review_chars", MAX_REVIEW_CHARS))
        lead = int(opts.get("lead_words", 5))
        max_words = int(opts.get("max_words", 10))
        parts = parts_from_options(opts)
        domain = domain_of(dataset.name, dataset.meta)
        splits = review_splits(dataset.interactions, min_history=int(opts.get("min_history", 4)), limit=config.limit,
                               seed=config.seed, require=("review_text", "review_title"), users=config.users)
        for sp in splits:
            text = normalize_for_metrics(sp.target["review_text"])
            shown_text = short(text, max_chars)
            earlier = [normalize_for_metrics(h.get("review_title")) for h in sp.history]
            earlier = [t for t in earlier if t][-hist_len:]
            yield {
                "id": f"summarization-{sp.user_id}",
                "task": self.name,
                "user_id": sp.user_id,
                "item_id": sp.target["item_id"],
                "review_text": text,
                "reference": normalize_for_metrics(sp.target["review_title"]),
                "lead_words": lead,
                "judge_context": f'The review: "{shown_text}"',
                "messages": summarization_prompt(domain, shown_text, earlier, parts, max_words),
                "output_format": self.output_format.to_dict(),
                "max_tokens": opts.get("max_tokens"),  # --option max_tokens=N overrides the task default
                "prompt_parts": parts.to_dict(),
                "run_dir": str(Path(config.out).resolve()) if config.out else None,
            }

    def why_empty(self, dataset, config: BuildConfig) -> str | None:
        return why_no_reviews(self.name, dataset, int(config.options.get("min_history", 4)),
                              ("review_text", "review_title"))

    def references(self, dataset, samples, seed: int = 0):
        out = {}
        for s in samples:
            t = " ".join(s["review_text"].split()[: s["lead_words"]])
            out[s["id"]] = reference_record(s["id"], {"text": t}, output=t, valid=bool(t))
        return {"lead_words": out}


"""The --option keys each LLMRec task reads, with today's defaults and the
ranges that make sense; the task modules still read the raw dict, these
models only reject typos and bad values before a build starts."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from recharness.core.errors import ConfigError
from recharness.tasks.llmrec.explanation import MAX_REVIEW_CHARS
from recharness.tasks.options import OptionError, TaskOptions, TemporalSplitOptions

_TOKENS = "answer length in tokens; none keeps the task's own"
_MIN_HIST = "users need more than this many interactions"


class LLMRecOptions(TaskOptions):
    suite: ClassVar[str] = "llmrec"

    history_len: int = Field(10, ge=1, description="most recent history items shown in the prompt")
    min_history: int = Field(5, ge=0, description=_MIN_HIST)
    max_tokens: int | None = Field(None, ge=1, description=_TOKENS)


class SplitOptions(LLMRecOptions, TemporalSplitOptions):
    """The ranking tasks, which hold each user's target out by `split` (the others hold nothing out)."""


class SequentialOptions(SplitOptions):
    n_recs: int = Field(10, ge=1, description="items the model is asked to recommend")


class DirectOptions(SplitOptions):
    n_candidates: int = Field(20, ge=2, description="candidates to rank, the target among them")
    retriever: str | None = Field(None, description="rank a published retriever's candidate list (LLMRank data sets)")
    min_history: int | None = Field(None, ge=0, description=_MIN_HIST + "; none: 1 with retriever=, else 5")
    negatives: str = Field(
        "uniform", description="how the other candidates are drawn: uniformly from the unseen catalog (the paper), "
                               "in proportion to training popularity (harder: popular items are what a popularity "
                               "ranker puts first), or retriever:NAME: the top unseen items of a reference fitted on "
                               "the training part (LLMRank's retriever candidates; NAME: popularity, itemknn, ease, "
                               "als, markov)")
    orders: int = Field(1, ge=1, le=50, description="ask each user under this many seeded candidate orders (the "
                                                     "target's position balanced): order spread, position bias and "
                                                     "a Borda-aggregated row")


    @field_validator("negatives")
    @classmethod
    def _known_negatives(cls, v: str) -> str:
        from recharness.tasks.llmrec.direct import retriever_baseline

        try:
            retriever_baseline(v)
        except ConfigError as e:
            raise OptionError("negatives", str(e).split(": ", 1)[1]) from None
        return v


class RatingOptions(LLMRecOptions):
    min_history: int = Field(4, ge=0, description=_MIN_HIST)


class ExplanationOptions(RatingOptions):
    history_len: int = Field(5, ge=1, description="most recent reviews shown in the prompt")
    max_words: int = Field(40, ge=1, description="asked length of the explanation in words")


class SummarizationOptions(RatingOptions):
    history_len: int = Field(5, ge=1, description="the user's earlier review titles shown")
    max_review_chars: int = Field(MAX_REVIEW_CHARS, ge=1, description="review text shown, in characters")
    lead_words: int = Field(5, ge=1, description="words of the review the lead-N reference method keeps")
    max_words: int = Field(10, ge=1, description="asked length of the summary in words")


OPTIONS: dict[str, type[TaskOptions]] = {
    "sequential": SequentialOptions,
    "direct": DirectOptions,
    "rating": RatingOptions,
    "explanation": ExplanationOptions,
    "summarization": SummarizationOptions,
}

"""The LLMRec suite (arXiv 2308.12241): five classic recommendation tasks for LLMs.

sequential and direct run by default (the small demo); rating, explanation
and summarization are picked with --task (explanation and summarization need
review texts, e.g. --dataset amazon2023).
"""

from recharness.tasks.llmrec.common import sampled_vs_full
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.explanation import ExplanationTask
from recharness.tasks.llmrec.rating import RatingTask
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.llmrec.summarization import SummarizationTask
from recharness.tasks.registry import DemoRun, register_suite

TASKS = {
    "sequential": SequentialTask,
    "direct": DirectTask,
    "rating": RatingTask,
    "explanation": ExplanationTask,
    "summarization": SummarizationTask,
}

register_suite(
    "llmrec",
    TASKS,
    "LLMRec: sequential and direct recommendation (HR@k, NDCG@k); rating prediction (RMSE/MAE); "
    "explanation generation and review summarization (BLEU, ROUGE, optional LLM judge)",
    default_tasks=["sequential", "direct"],
    judge="recharness.tasks.llmrec.judge:judge_run",  # `recharness judge`: explanation and summarization
    options="recharness.tasks.llmrec.options:OPTIONS",
    demo=[DemoRun("llmrec", ("sequential", "direct"), 4, order=0)],
    # not a paper layout: direct's references ordered on sampled candidates vs the whole catalog, swaps flagged
    paper_tables=sampled_vs_full,
)

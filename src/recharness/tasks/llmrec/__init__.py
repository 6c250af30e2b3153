"""The LLMRec suite (arXiv 2308.12241): five classic recommendation tasks for LLMs.

sequential and direct run by default (the small demo); rating, explanation
and summarization are picked with --task (explanation and summarization need
review texts, e.g. --dataset amazon2023).
"""

from recharness.metrics.registry import metric
from recharness.tasks.llmrec.common import sampled_vs_full
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.explanation import ExplanationTask
from recharness.tasks.llmrec.rating import RatingTask
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.llmrec.summarization import SummarizationTask
from recharness.tasks.registry import DemoRun, register_suite

# the suite's own columns: the judge's scores (`recharness judge`), direct's order spread and full-catalog ranks
metric("faith[{judge}]", True, "LLM-judge faithfulness, 1-5 (judge in brackets)")
metric("pers[{judge}]", True, "LLM-judge personalization, 1-5 (judge in brackets)")
metric("judged[{judge}]", None, "share of samples the judge rated", ci=False)
metric("NDCG@10 order spread", False, "mean over users of the population std of a user's NDCG@10 across its K "
       "candidate orders (order sensitivity); users without all K left out", ci=False)
# sampled vs full-catalog ranking (trained references: Krichene & Rendle 2020)
metric("NDCG@10 (full)", True, "NDCG@10 of the target's rank among every item the user never had (the whole catalog, "
       "history left out), beside NDCG@10 on the sampled candidates: trained references only")
metric("HR@10 (full)", True, "hit ratio of the target in the top 10 of the whole catalog (history left out), beside "
       "HR@10 on the sampled candidates: trained references only")

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

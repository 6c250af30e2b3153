"""The LLMRec suite (arXiv 2308.12241): five classic recommendation tasks for LLMs."""

from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.registry import register_suite

TASKS = {"sequential": SequentialTask, "direct": DirectTask}

register_suite(
    "llmrec",
    TASKS,
    "LLMRec: sequential and direct recommendation (HR@k, NDCG@k)",
    default_tasks=["sequential", "direct"],
)

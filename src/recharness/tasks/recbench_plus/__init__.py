"""The RecBench+ suite (arXiv 2503.09382): LLMs as personalised recommendation assistants.

Five query types built from real data through an item knowledge graph
(condition-based: explicit, implicit, misinformed; user-profile-based:
interest, demographics), asked with and without the user's history, and
scored by Precision, Recall, Condition Match Rate and Fail-to-Recommend.
"""

from recharness.metrics.registry import metric
from recharness.tasks.recbench_plus.condition_tasks import ExplicitTask, ImplicitTask, MisinformedTask
from recharness.tasks.recbench_plus.context import make_context
from recharness.tasks.recbench_plus.profile_tasks import DemographicsTask, InterestTask
from recharness.tasks.recbench_plus.tables import paper_tables
from recharness.tasks.registry import DemoRun, register_suite

# the suite's own columns (the paper's P, R, CMR, FTR)
metric("P", True, "precision of the recommended list against the ground truth")
metric("R", True, "recall of the ground truth")
metric("CMR", True, "condition match rate: share of recommendations that satisfy the query's conditions")
metric("FTR", None, "fail-to-recommend rate; lower is better, except on misinformed queries where declining is right")
metric("unmatched", False, "share of recommended titles not matched to the catalog")
metric("gt_match_rate", True, "share of ground-truth titles of official files matched to the catalog", ci=False)

TASKS = {
    "explicit": ExplicitTask,
    "implicit": ImplicitTask,
    "misinformed": MisinformedTask,
    "interest": InterestTask,
    "demographics": DemographicsTask,
}

register_suite(
    "recbench-plus",
    TASKS,
    "RecBench+: condition- and profile-based assistant queries (P, R, CMR, FTR)",
    default_tasks=list(TASKS),
    paper_tables=paper_tables,  # Table 2 / Table 3 layouts, appended to scores.md by `recharness score`
    options="recharness.tasks.recbench_plus.options:OPTIONS",
    context=make_context,  # catalog matcher and knowledge graph, built once per build/run
    demo=[DemoRun("recbench-plus", ("explicit", "implicit", "misinformed", "interest", "demographics"), 1, order=1)],
)

__all__ = ["TASKS", "paper_tables"]

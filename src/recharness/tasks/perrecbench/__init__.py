"""The PerRecBench suite (arXiv 2501.13391): rank a group of users by how much each likes one item.

Tasks: ``point`` (predict each rating), ``pair`` (heapsort over two-user
comparisons asked in both orders), ``list`` (rank the whole group at once).
Scored by Kendall tau per group, averaged per level (easy / medium / hard =
groups of 2 / 3 / 4).  Options: see recharness.tasks.perrecbench.build.

Public helpers beyond the task interface:
  original.score_files(labels, predictions, mode, compat=...)   score released files
  original.import_predictions(run_dir, name, {(task, level): path})
  imports.import_files(run_dir, source, name)                     `score --predictions` of released files
  original.write_predictions(samples, predictions, out_dir)       export in the original layout
  table.table1_markdown(score_rows)
"""

from recharness.metrics.registry import metric
from recharness.tasks.perrecbench.build import make_context
from recharness.tasks.perrecbench.table import table1_markdown
from recharness.tasks.perrecbench.tasks import TASKS, ListTask, PairTask, PointTask
from recharness.tasks.registry import DemoRun, register_suite

# the suite's own columns (metrics.registry holds the shared ones: tau and its levels lead every table)
metric("tau_rank", True, "tau with invalid groups counted as 0 (recharness default)")
metric("tau_compat", True, "tau as the original PerRecBench evaluation computes it (invalid groups dropped)")
metric("tied", None, "groups whose prediction ties every user (tau undefined)", ci=False)
metric("dropped_compat", None, "groups the original evaluation drops", ci=False)
metric("groups", None, "groups scored", ci=False)
metric("unparsed_users", False, "users whose pointwise rating could not be parsed", ci=False)
metric("unrated", False, "users without a parsed rating", ci=False)
metric("calls_per_group", False, "model calls per group (cost)", ci=False)
metric("retries", False, "format retries over all groups", ci=False)
metric("comparisons_per_group", False, "pairwise comparisons per group (cost)", ci=False)
metric("disagree_rate", False, "share of comparisons whose two orders disagree")
metric("failed_comparisons", False, "comparisons without a usable answer", ci=False)
metric("clipped_rate", None, "share of ratings clipped into the scale")
metric("tau order spread", False, "mean over groups of the population std of a group's tau across its K "
       "orders of its users (listwise, order sensitivity); groups without all K left out", ci=False)

register_suite(
    "perrecbench",
    TASKS,
    "PerRecBench: rank users of a group by preference for one item (Kendall tau, easy/medium/hard)",
    default_tasks=["point", "pair", "list"],
    paper_tables=table1_markdown,
    options="recharness.tasks.perrecbench.options:OPTIONS",
    context=make_context,  # history indexes and group selections, built once per build/run
    demo=[DemoRun("perrecbench", ("list",), 1, ("profile=false", "k=2"), order=2)],
    import_files="recharness.tasks.perrecbench.imports:import_files",  # the released <mode>-<level>.json files
    finetune="recharness.tasks.perrecbench.finetune:RECIPES",
)

__all__ = ["TASKS", "PointTask", "PairTask", "ListTask"]

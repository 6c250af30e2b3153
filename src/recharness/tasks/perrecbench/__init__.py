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

from recharness.tasks.perrecbench.build import make_context
from recharness.tasks.perrecbench.table import table1_markdown
from recharness.tasks.perrecbench.tasks import TASKS, ListTask, PairTask, PointTask
from recharness.tasks.registry import DemoRun, register_suite

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

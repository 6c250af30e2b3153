"""Which reference recommenders answer a task, and their records: a task names its baselines
(`Task.baselines`) and turns a ranker's answers into its own records (`Task.reference_answer`),
so no baseline knows a suite or a task by name."""

from __future__ import annotations

from recharness.baselines import BASELINES, TrainData, fit
from recharness.core.errors import ConfigError
from recharness.core.rundir import check_name


#: the rows tasks compute themselves (`Task.references`) beside the registered baselines (`BASELINES`)
COMPUTED_REFERENCES = frozenset({
    "global_mean", "user_mean", "item_mean", "user_item_bias",  # llmrec rating
    "previous_review", "lead_words",  # llmrec explanation, summarization
    "user-mean", "item-mean",  # perrecbench
    "kg-conditions",  # recbench-plus
})


def check_method_name(name: str) -> str:
    """A model's row name (`run --name`, `score --predictions --name`): a plain file name, and not a reference
    row's, which would show two rows of one name and leave `compare --models NAME` to pick one of them (`score`
    refuses such a file too: `methods_by_task`)."""
    check_name(name)
    if name in BASELINES or name in COMPUTED_REFERENCES:
        raise ConfigError(f"the row name {name!r} is a reference row's (`recharness baselines`): give the model's "
                          "row another with --name")
    return name


def serving(task, *, on_the_fly: bool = False) -> list[str]:
    """The registered baselines that answer `task` (a Task), in its declared order (the row order).
    `on_the_fly`: only those cheap enough to fit inside `score` (trained models such as the DLRMs
    are registered `heavy` and come only from the `train` stage's files)."""
    return [n for n in task.baselines if n in BASELINES
            and not (on_the_fly and BASELINES.meta(n).get("heavy"))]


def reference_records(task, dataset, samples: list[dict], seed: int = 0,
                      train: TrainData | None = None) -> dict[str, dict[str, dict]]:
    """{baseline: {sample id: record}}: the task's cheap baselines fitted (on `train`, by default the
    leave-last-out part) and asked on the fly."""
    names = serving(task, on_the_fly=True)
    if names and train is None:
        train = TrainData.leave_last_out(dataset)
    return {name: fit(name, train, seed)[0].predict(samples, task) for name in names}

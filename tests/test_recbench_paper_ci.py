"""RecBench's paper-layout tables carry each cell's 95% interval when the row was scored with one."""

from recharness.core.types import ScoreRow
from recharness.tasks.recbench.tables import CI_NOTE, paper_tables


def test_cells_show_the_interval_and_the_note_explains_it():
    with_ci = ScoreRow(method="qwen", task="ctr", n=1000, kind="model", metrics={"AUC": 0.494, "latency_s": 3.74},
                       ci={"AUC": {"lo": 0.45, "hi": 0.532}})
    plain = ScoreRow(method="dnn", task="ctr", n=1000, kind="reference", metrics={"AUC": 0.8168, "latency_s": 2e-4})
    md = paper_tables([with_ci, plain], dataset="ml-1m")
    assert "| qwen | 0.4940 [0.4500, 0.5320] | 0.4940 | 3.74s |" in md  # asymmetric: both bounds, not a ±
    assert "| dnn | 0.8168 | 0.8168 | 0.20ms |" in md  # no interval: the plain value
    assert CI_NOTE in md


def test_no_note_without_intervals():
    plain = ScoreRow(method="dnn", task="ctr", n=1000, kind="reference", metrics={"AUC": 0.8168, "latency_s": 2e-4})
    assert CI_NOTE not in paper_tables([plain], dataset="ml-1m")

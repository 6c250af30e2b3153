"""The example verdicts in report.html agree with how the tasks score: the report asks the sample's task
(`Task.target_rank`), so a suite's own ranking rule needs no branch in report/."""

from recharness.report.html import _target_and_hit, examples_section
from recharness.tasks.registry import get_task


def test_ranker_record_uses_its_rank():
    sample = {"id": "s", "task": "seqrec", "target": "7", "history": ["1", "2"]}
    task = get_task("recbench", "seqrec")
    assert _target_and_hit(sample, {"parsed": {"rank": 1, "top": ["7"]}}, task)[1] == "hit (rank 1)"
    assert _target_and_hit(sample, {"parsed": {"rank": None}}, task)[1] == "miss"


def test_seqrec_llm_answer_ranks_by_its_place_as_written():
    sample = {"id": "s", "task": "seqrec", "target": "7", "history": ["1", "2"]}
    # "1" is history, "3" repeats: each holds its place, as the scorer reads it → rank 4 (before: 2)
    rec = {"parsed": {"items": ["1", "3", "3", "7"]}}
    assert _target_and_hit(sample, rec, get_task("recbench", "seqrec"))[1] == "hit (rank 4)"
    assert _target_and_hit(sample, rec)[1] == "hit (rank 4)"
    # a target the user already had is never a hit for the task (no reference can list it); the generic rule
    # knows no history
    again = {"id": "s", "task": "seqrec", "target": "1", "history": ["1", "2"]}
    assert _target_and_hit(again, rec, get_task("recbench", "seqrec"))[1] == "miss"
    assert _target_and_hit(again, rec)[1] == "hit (rank 1)"


def test_other_tasks_keep_the_plain_list_rank():
    sample = {"id": "s", "task": "sequential", "target": "7", "history": ["1"]}
    assert _target_and_hit(sample, {"parsed": {"items": ["1", "7"]}}, get_task("llmrec", "sequential"))[1] == \
        "hit (rank 2)"


def test_examples_section_ranks_by_the_suite_task(tmp_path):
    from recharness.core.io import write_jsonl_atomic
    from recharness.core.rundir import RunDir

    sample = {"id": "s", "task": "seqrec", "target": "1", "history": ["1", "2"], "messages": []}
    write_jsonl_atomic(RunDir(tmp_path).predictions("m"), [{"id": "s", "task": "seqrec", "valid": True,
                                                             "parsed": {"items": ["1", "3", "3", "7"]}}])
    html = "".join(examples_section(tmp_path, [sample], 3, suite="recbench"))
    assert "miss" in html and "hit (rank" not in html
    assert "hit (rank 1)" in "".join(examples_section(tmp_path, [sample], 3, suite="no-such-suite"))

"""The example verdicts in report.html agree with how the tasks score."""

from recharness.report.html import _target_and_hit


def test_ranker_record_uses_its_rank():
    sample = {"id": "s", "task": "seqrec", "target": "7", "history": ["1", "2"]}
    assert _target_and_hit(sample, {"parsed": {"rank": 1, "top": ["7"]}})[1] == "hit (rank 1)"
    assert _target_and_hit(sample, {"parsed": {"rank": None}})[1] == "miss"


def test_seqrec_llm_answer_ranks_after_dropping_history_and_repeats():
    sample = {"id": "s", "task": "seqrec", "target": "7", "history": ["1", "2"]}
    # "1" is history, "3" repeats: the scorer's list is [3, 7] → rank 2
    rec = {"parsed": {"items": ["1", "3", "3", "7"]}}
    assert _target_and_hit(sample, rec)[1] == "hit (rank 2)"


def test_other_tasks_keep_the_plain_list_rank():
    sample = {"id": "s", "task": "sequential", "target": "7", "history": ["1"]}
    assert _target_and_hit(sample, {"parsed": {"items": ["1", "7"]}})[1] == "hit (rank 2)"

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


def test_recbench_plus_examples_count_hits_as_the_score_does():
    """The review of 2026-11-30: the example's verdict intersected the answer's matched ids with the ground truth
    as they were, where P and R cut the list to k, let a twin title stand for its ground-truth item and leave the
    query's own films out."""
    from recharness.tasks.recbench_plus.evaluate import query_metrics

    task = get_task("recbench-plus", "explicit")
    cases = [
        # k = 2: the third title is past the list the score reads
        ({"id": "q1", "query": "Films directed by X", "gt": ["10"], "k": 2},
         {"strings": ["A", "B", "C"], "item_ids": ["1", "2", "10"], "ftr": False}, "miss"),
        # a twin of the ground-truth item stands for it
        ({"id": "q2", "query": "Films with Y", "gt": ["10"]},
         {"strings": ["Hamlet"], "item_ids": ["11"], "ftr": False, "twins": {"11": ["10"]}}, "hit (1 of 1)"),
        # an implicit query's own reference film is left out
        ({"id": "q3", "query": "Films like Heat", "gt": ["10", "20"], "implicit": {"referenceMovieIds": ["10"]}},
         {"strings": ["Heat"], "item_ids": ["10"], "ftr": False}, "miss"),
        ({"id": "q4", "query": "Films like Heat", "gt": ["10", "20"]},
         {"strings": ["Heat", "Ronin"], "item_ids": ["10", "20"], "ftr": False}, "hit (2 of 2)"),
    ]
    for sample, parsed, verdict in cases:
        rec = {"id": sample["id"], "valid": True, "output": "\n".join(parsed["strings"]), "parsed": parsed}
        assert _target_and_hit(sample, rec, task)[1] == verdict, sample["id"]
        (row,) = query_metrics([sample], {sample["id"]: rec})
        assert (row["R"] > 0) == verdict.startswith("hit"), sample["id"]  # the score agrees


def test_a_text_tasks_example_shows_its_reference_and_a_ratings_its_held_out_rating():
    """An explanation sample carries the user's rating too: its target is the reference review (it showed 4.0);
    a rating sample's target is its held-out `target_rating` (it showed –)."""
    expl = {"id": "e", "task": "explanation", "rating": 4.0, "reference": "great acting and a sharp script"}
    assert _target_and_hit(expl, {"parsed": {"text": "x"}}) == ("great acting and a sharp script", None)
    assert _target_and_hit({"id": "r", "task": "rating", "target_rating": 3.0}, None) == ("rating 3", None)
    assert _target_and_hit({"id": "r", "task": "rating", "rating": 4.5}, None) == ("rating 4.5", None)

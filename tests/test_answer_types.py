"""Typed answers: each task declares the shape of a valid answer (`Task.answer_type`), and every answer
scored — a parser's, a reference model's, an imported one — is checked against it in one place
(`Task.check_answers`, called by `score`): a wrong shape is refused, naming the method, task, sample
and field."""

from __future__ import annotations

import json

import pytest

from recharness.core.errors import AnswerError
from recharness.core.io import read_jsonl
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions
from recharness.tasks.base import answer_problem
from recharness.tasks.recbench.ctr import CtrTask
from recharness.tasks.recbench.seqrec import SeqrecTask
from recharness.tasks.registry import suites


def test_the_declared_types_name_their_required_fields():
    seq, ctr = SeqrecTask.answer_type, CtrTask.answer_type
    assert answer_problem(seq, {"rank": 3, "beams": 20}) is None  # a ranking model's answer
    assert answer_problem(seq, {"items": ["1", "2"], "strings": ["A", "B"]}) is None  # a generated list
    assert answer_problem(seq, {"p_yes": 0.5}) == "the answer has no field 'rank'; or the answer has no field 'items'"
    assert answer_problem(ctr, {"p_yes": None}) is None
    assert "not an object with fields p_yes" in answer_problem(ctr, 0.7)


def test_every_task_of_every_suite_declares_an_answer_type():
    missing = [(name, task) for name, suite in suites().items() if not name.startswith("toy")
               for task, cls in suite.tasks.items() if cls.answer_type is None]
    assert missing == []


def test_the_declared_types_of_the_other_suites_read_their_answers():
    from recharness.tasks.llmrec.explanation import ExplanationTask
    from recharness.tasks.perrecbench.tasks import ListTask, PointTask
    from recharness.tasks.recbench_plus.base import RecBenchTask

    assert answer_problem(ExplanationTask.answer_type, {"text": "a fine film", "words": 3}) is None
    assert answer_problem(ExplanationTask.answer_type, "a fine film") == \
        "the answer is str, not an object with fields text"
    assert answer_problem(ListTask.answer_type, {"ordering": [2, 1, 3]}) is None
    assert answer_problem(ListTask.answer_type, {"ratings": [4.0, 3.0]}) == "the answer has no field 'ordering'"
    # pointwise: the model's ratings, or a reference's order (random)
    assert answer_problem(PointTask.answer_type, {"ratings": [4.0, None], "failed": 1}) is None
    assert answer_problem(PointTask.answer_type, {"ordering": [1, 2]}) is None
    rb = RecBenchTask.answer_type
    assert answer_problem(rb, {"strings": ["Heat (1995)"], "item_ids": ["6"], "ftr": False}) is None
    assert answer_problem(rb, {"strings": ["Heat (1995)"], "item_ids": ["6"]}) == "the answer has no field 'ftr'"


def test_a_wrong_shaped_answer_is_refused_naming_task_sample_and_field(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=4, options={"train_sequences": 50})
    samples = list(read_jsonl(out / "samples.jsonl"))
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"id": s["id"], "answer": "1. Toy Story (1995)"}) + "\n" for s in samples))
    import_predictions(out, src, "good")
    assert {r.method for r in pipeline.score(out, resamples=0)} >= {"good", "popularity"}  # parsed, reference: typed

    # an answer file in another shape (e.g. written by an older import or another tool): refused at score
    recs = list(read_jsonl(out / "predictions" / "good.jsonl"))
    recs[1]["parsed"] = {"score": 0.9}
    (out / "predictions" / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(AnswerError) as e:
        pipeline.score(out, resamples=0)
    msg = str(e.value)
    assert "bad: task 'seqrec'" in msg and repr(samples[1]["id"]) in msg and "no field 'rank'" in msg
    assert "DecodedRank or ListedItems" in msg

    # an invalid answer may have any shape (it is counted invalid, never read as an answer)
    recs[1]["valid"] = False
    (out / "predictions" / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert any(r.method == "bad" for r in pipeline.score(out, resamples=0))


def test_a_field_not_of_its_declared_type_is_refused():
    """The review of 2026-11-30: only the required keys were checked, so a hand-edited rating "four" or a rank "3"
    raised a traceback in `score`, and `true` was scored as a rating of 1 or a hit at rank 1."""
    from recharness.tasks.llmrec.rating import RatingTask
    from recharness.tasks.perrecbench.tasks import PointTask
    from recharness.tasks.recbench_plus.base import RecBenchTask

    rating, seq, point = RatingTask.answer_type, SeqrecTask.answer_type, PointTask.answer_type
    assert answer_problem(rating, {"value": 4}) is None and answer_problem(rating, {"value": 3.5}) is None
    assert answer_problem(rating, {"value": "four"}) == "its field 'value' is \"four\", not a number"
    assert answer_problem(rating, {"value": True}) == "its field 'value' is true, not a number"
    assert answer_problem(rating, {"value": float("nan")}) == "its field 'value' is NaN, not a number"
    assert answer_problem(rating, {"value": 10**400}).startswith("its field 'value' is 1000")
    assert answer_problem(seq, {"rank": None}) is None
    assert answer_problem(seq, {"rank": "3"}) == "its field 'rank' is \"3\", not a number or null"
    # a field of one alternative is checked beside the other's: seqrec's scorer reads "rank" first
    assert answer_problem(seq, {"rank": True, "items": ["1"]}) == "its field 'rank' is true, not a number or null"
    assert answer_problem(seq, {"items": ["1", 2]}) == "its field 'items' is [\"1\", 2], not a list (each str)"
    assert answer_problem(point, {"ratings": [4.0, None]}) is None
    assert answer_problem(point, {"ratings": [True, 2.0]}) == \
        "its field 'ratings' is [true, 2.0], not a list (each a number or null)"
    assert answer_problem(CtrTask.answer_type, {"p_yes": "0.7"}) == "its field 'p_yes' is \"0.7\", not a number or null"
    rb = RecBenchTask.answer_type
    assert answer_problem(rb, {"strings": ["Heat"], "item_ids": [None], "ftr": "no"}) == \
        "its field 'ftr' is \"no\", not bool"


@pytest.mark.parametrize("value", ["four", True])
def test_score_refuses_an_edited_rating_in_one_line_naming_the_field(ml1m, tmp_path, value, monkeypatch, capsys):
    from recharness.cli import main

    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["rating"], seed=0, limit=3)
    samples = list(read_jsonl(out / "samples.jsonl"))
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"id": s["id"], "rating": 4}) + "\n" for s in samples))
    import_predictions(out, src, "edited")
    recs = list(read_jsonl(out / "predictions" / "edited.jsonl"))
    assert recs[1]["valid"] and recs[1]["parsed"]["value"] == 4.0
    recs[1]["parsed"]["value"] = value
    (out / "predictions" / "edited.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setattr("sys.argv", ["recharness", "score", "llmrec", "-o", str(out), "--resamples", "0"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main()
    shown = capsys.readouterr()
    said = " ".join((shown.out + shown.err).split())
    assert e.value.code == 2 and "Traceback" not in said and said.startswith("error: ")
    assert f"edited: task 'rating', sample {samples[1]['id']!r}: its field 'value' is {json.dumps(value)}, " \
           "not a number" in said

"""Answers in the right shape that name no catalog item: counted apart from invalid ones, for every suite
that matches free text (the import summary, the score tables' `unrecognised_rate`, report.html)."""

from __future__ import annotations

import json

from recharness.core.io import read_jsonl
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions

NOWHERE = "1. Zzyzx Quantum Llama Opera (2031)\n2. Glorp Nebula Cucumber (2032)"


def _answers(out, tmp_path, good: int):
    """The first `good` samples answered with a catalog title, the rest with titles no catalog has."""
    samples = list(read_jsonl(out / "samples.jsonl"))
    lines = [{"id": s["id"], "answer": "1. Toy Story (1995)\n2. Fargo (1996)" if n < good else NOWHERE}
             for n, s in enumerate(samples)]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return samples, src


def _units_agree(suite, task_name, out, samples, want):
    """`score` and `units` give the same value (the pipeline reports the units' point value)."""
    from recharness.tasks.registry import get_task

    task = get_task(suite, task_name)
    recs = {r["id"]: r for r in read_jsonl(out / "predictions" / "other.jsonl")}
    assert task.units(samples, recs)["unrecognised_rate"].point() == task.score(samples, recs)["unrecognised_rate"] == want


def _row(rows, task, method="other"):
    return next(r for r in rows if r.task == task and r.method == method)


def test_recbench_plus_counts_answers_naming_no_catalog_item(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("recbench-plus", "ml-1m", out, tasks=["explicit"], seed=0, limit=3)
    samples, src = _answers(out, tmp_path, good=2)
    assert len(samples) >= 3
    rep = import_predictions(out, src, "other")
    bad = len(samples) - 2
    assert rep["invalid"] == 0 and rep["unrecognised"] == bad  # RecBench+ keeps `item_ids`, not `items`
    row = _row(pipeline.score(out, resamples=50), "explicit")
    assert row.metrics["unrecognised_rate"] == bad / len(samples)
    _units_agree("recbench-plus", "explicit", out, samples, bad / len(samples))

    from recharness.report.html import invalid_section

    html = "".join(invalid_section(out, samples))
    assert f"{bad} answered but naming no catalog item" in html


def test_recbench_seqrec_counts_answers_naming_no_catalog_item(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=5,
                   options={"train_sequences": 50})
    samples, src = _answers(out, tmp_path, good=3)
    rep = import_predictions(out, src, "other")
    assert rep["unrecognised"] == 2 and rep["invalid"] == 0
    rows = pipeline.score(out, resamples=50)
    row = _row(rows, "seqrec")
    assert row.metrics["unrecognised_rate"] == 2 / 5
    _units_agree("recbench", "seqrec", out, samples, 2 / 5)
    # reference rows (ranks, no titles) carry no such share
    assert all("unrecognised_rate" not in r.metrics for r in rows if r.method != "other")

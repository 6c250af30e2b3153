"""`recharness score SUITE --predictions FILE --name NAME`: another tool's answers scored exactly like ours.

Each case runs the fake model, converts its predictions file to the documented import schema
(docs/predictions.md), imports that under another name and checks the two rows agree metric for
metric and interval for interval; bad lines are counted and reported with FILE:LINE.
"""

from __future__ import annotations

import csv
import json
import math

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions
from recharness.runner.jsonl import read_jsonl

SKIP = ("latency", "completion_tokens", "prompt_tokens", "calls_per_group", "retries")  # bookkeeping of a run


def _fake_run(out, suite, tasks, limit, options=None):
    pipeline.build(suite, "ml-1m", out, tasks=tasks, seed=0, limit=limit, options=options)
    path, _ = pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    return list(read_jsonl(path)), {s["id"]: s for s in read_jsonl(out / "samples.jsonl")}


def _same(rows, a="fake", b="other"):
    by = {(r.task, r.method): r for r in rows}
    tasks = {r.task for r in rows}
    assert tasks
    for t in tasks:
        ra, rb = by[(t, a)], by[(t, b)]
        ma = {k: v for k, v in ra.metrics.items() if not k.startswith(SKIP)}
        mb = {k: v for k, v in rb.metrics.items() if not k.startswith(SKIP)}
        assert ma.keys() == mb.keys(), t
        for k in ma:
            assert ma[k] == mb[k] or (isinstance(ma[k], float) and math.isnan(ma[k]) and math.isnan(mb[k])), (t, k)
        for k, ci in ra.ci.items():
            assert (ci["lo"], ci["hi"]) == (rb.ci[k]["lo"], rb.ci[k]["hi"]), (t, k)


def _write_jsonl(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_llmrec_answers_and_item_ids_score_like_the_run(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "llmrec", ["sequential", "direct"], 6)
    # free-text answers, by sample id
    _write_jsonl(tmp_path / "answers.jsonl", [{"id": r["id"], "answer": r["output"]} for r in recs])
    rep = import_predictions(out, tmp_path / "answers.jsonl", "other")
    assert rep["imported"] == len(recs) and not rep["problems"]
    _same(pipeline.score(out, resamples=200))
    # ranked item ids, by user + task (direct: the parsed ranking; sequential: the matched items)
    lines = []
    for r in recs:
        items = r["parsed"]["ranking"] if r["task"] == "direct" else r["parsed"]["items"]
        lines.append({"user_id": samples[r["id"]]["user_id"], "task": r["task"], "items": items})
    _write_jsonl(tmp_path / "items.jsonl", lines)
    rep = import_predictions(out, tmp_path / "items.jsonl", "other")
    assert rep["imported"] == len(recs)
    direct = [r for r in pipeline.score(out, resamples=200) if r.task == "direct"]
    _same(direct)


def test_ctr_probabilities_from_csv_score_like_the_run(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "recbench", ["ctr"], 6, {"train_pairs": 2000})
    with open(tmp_path / "p.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user_id", "item_id", "probability"])
        for r in recs:
            w.writerow([samples[r["id"]]["user_id"], samples[r["id"]]["item_id"], repr(r["parsed"]["p_yes"])])
    rep = import_predictions(out, tmp_path / "p.csv", "other")
    assert rep["imported"] == len(recs) and not rep["problems"]
    _same(pipeline.score(out, resamples=200))


def test_recbench_plus_free_text_scores_like_the_run(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, _ = _fake_run(out, "recbench-plus", ["explicit", "interest"], 2)
    _write_jsonl(tmp_path / "a.jsonl", [{"id": r["id"], "answer": r["output"]} for r in recs])
    import_predictions(out, tmp_path / "a.jsonl", "other")
    _same(pipeline.score(out, resamples=200))


def test_perrecbench_orderings_and_original_files_score_like_the_run(ml1m, tmp_path):
    from recharness.tasks.perrecbench.original import write_predictions

    out = tmp_path / "run"
    recs, samples = _fake_run(out, "perrecbench", ["list"], 2, {"profile": False})
    _write_jsonl(tmp_path / "o.jsonl", [{"id": r["id"], "ordering": r["parsed"]["ordering"]} for r in recs
                                        if r["valid"]] + [{"id": r["id"], "ordering": "[]"} for r in recs
                                                          if not r["valid"]])
    import_predictions(out, tmp_path / "o.jsonl", "other")
    _same([r for r in pipeline.score(out, resamples=200)])
    # the original layout: <mode>-<level>.json, as the authors released them
    files = write_predictions(list(samples.values()), {r["id"]: r for r in recs}, tmp_path / "released")
    assert files
    from recharness.cli import _perrecbench_files

    rep = import_predictions(out, tmp_path / "released", "other", native=_perrecbench_files)
    assert rep["imported"] == len(recs)
    _same(pipeline.score(out, resamples=200))


def test_bad_lines_are_counted_with_file_and_line(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, _ = _fake_run(out, "llmrec", ["direct"], 4)
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join([
        json.dumps({"id": recs[0]["id"], "items": [recs[0]["parsed"]["ranking"][0], "no-such-item"]}),
        "{not json",
        json.dumps({"id": "direct-nobody", "answer": "1, 2"}),
        json.dumps({"id": recs[0]["id"], "answer": "3, 2"}),  # a second answer for the same sample
        json.dumps({"user_id": "nobody", "answer": "1"}),
        json.dumps({"id": recs[1]["id"]}),  # no answer field
        json.dumps({"id": recs[2]["id"], "answer": "1, 2, 3"}),
    ]) + "\n")
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--predictions", str(src), "--name", "ext",
                                   "--resamples", "50"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "imports" / "ext.json").read_text())
    where = {p["where"].rsplit(":", 1)[1]: p["problem"] for p in rep["problems"]}
    assert rep["lines"] == 7 and rep["imported"] == 2 and rep["unanswered"] == len(recs) - 2
    assert set(where) == {"1", "2", "3", "4", "5", "6"}
    assert "no-such-item" in where["1"] and "not valid JSON" in where["2"] and "unknown sample id" in where["3"]
    assert "second answer" in where["4"] and "unknown user_id" in where["5"] and "no answer field" in where["6"]
    assert "bad.jsonl:2: malformed: not valid JSON" in res.output and "7 lines" in res.output, res.output
    assert str(tmp_path) not in json.dumps(rep)  # paths shown relative, never the machine's
    scores = json.loads((out / "scores.json").read_text())
    ext = next(r for r in scores if r["method"] == "ext")
    assert ext["metrics"]["missing"] == len(recs) - 2  # unanswered samples count, as for a model of ours
    from recharness.report.html import write_report
    from recharness.report.tables import load_scores

    html = write_report(load_scores(out), out).read_text()
    assert "Imported <b>ext</b>" in html and "bad.jsonl:2" in html


def test_predictions_need_a_name(ml1m, tmp_path):
    out = tmp_path / "run"
    _fake_run(out, "llmrec", ["direct"], 2)
    (tmp_path / "x.jsonl").write_text("")
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--predictions", str(tmp_path / "x.jsonl")])
    assert res.exit_code != 0
    with pytest.raises(Exception, match="empty"):
        import_predictions(out, tmp_path / "x.jsonl", "x")

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
from recharness.core.errors import ConfigError, InputError
from recharness.core.io import read_jsonl
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions

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
    rep = import_predictions(out, tmp_path / "items.jsonl", "other", force=True)  # replaces answers.jsonl's
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
    from recharness.tasks.perrecbench.imports import import_files

    rep = import_predictions(out, tmp_path / "released", "other", native=import_files, force=True)
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
    # scored on the samples it answers, and says so: never the unanswered ones counted as wrong answers
    assert ext["n"] == 2 and ext["coverage"] == {"answered": 2, "of": len(recs), "why": "imported"}
    assert ext["metrics"]["missing"] == 0
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
    with pytest.raises(ConfigError, match=r"x\.jsonl: empty$"):
        import_predictions(out, tmp_path / "x.jsonl", "x")


def test_an_import_never_overwrites_a_run_or_another_import_without_force(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, _ = _fake_run(out, "llmrec", ["direct"], 3)
    a = _write_jsonl(tmp_path / "a.jsonl", [{"id": r["id"], "answer": r["output"]} for r in recs])
    b = _write_jsonl(tmp_path / "b.jsonl", [{"id": r["id"], "answer": "1, 2"} for r in recs])
    run_file = out / "predictions" / "fake.jsonl"
    before = run_file.read_bytes()
    with pytest.raises(ConfigError, match=r"predictions/fake\.jsonl already exists \(a run of fake:fake\).*--force"):
        import_predictions(out, a, "fake")
    assert run_file.read_bytes() == before  # the model's own answers are untouched
    import_predictions(out, a, "other")
    import_predictions(out, a, "other")  # the same file again: a refresh, allowed
    with pytest.raises(ConfigError, match=r"other\.jsonl already exists \(an import of .*a\.jsonl\)"):
        import_predictions(out, b, "other")
    assert all(r["output"] != "1, 2" for r in read_jsonl(out / "predictions" / "other.jsonl"))
    import_predictions(out, b, "other", force=True)
    assert all(r["output"] == "1, 2" for r in read_jsonl(out / "predictions" / "other.jsonl"))
    import_predictions(out, a, "fake", force=True)
    assert all(r["model"]["backend"] == "imported" for r in read_jsonl(run_file))
    (out / "predictions" / "junk.jsonl").write_text("not json\n")
    with pytest.raises(ConfigError, match="junk.jsonl already exists"):
        import_predictions(out, a, "junk")


def test_perrecbench_rejects_nan_ratings_and_fractional_orderings(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("perrecbench", "ml-1m", out, tasks=["point", "list"], seed=0, limit=2, options={"profile": False})
    samples = list(read_jsonl(out / "samples.jsonl"))
    point = [s for s in samples if s["task"] == "point"]
    lst = [s for s in samples if s["task"] == "list"]
    assert len(point) >= 2 and len(lst) >= 2
    n_p, n_l = len(point[0]["truth"]["user_ids"]), len(lst[0]["truth"]["user_ids"])
    src = tmp_path / "p.jsonl"
    src.write_text("\n".join([
        json.dumps({"id": point[0]["id"], "ratings": [3.0] * n_p}),
        json.dumps({"id": point[1]["id"], "ratings": ["nan"] + [3.0] * (n_p - 1)}),
        '{"id": %s, "ratings": [%s]}' % (json.dumps(point[1]["id"]), ", ".join(["NaN"] + ["3"] * (n_p - 1))),
        json.dumps({"id": lst[0]["id"], "ordering": [1.9] + list(range(2, n_l + 1))}),
        json.dumps({"id": lst[0]["id"], "ordering": [float(i) for i in range(1, n_l + 1)]}),  # whole: fine
        json.dumps({"id": lst[1]["id"], "ordering": "|".join(["1.5"] + [str(i) for i in range(2, n_l + 1)])}),
        json.dumps({"id": point[1]["id"], "ratings": [float("inf")] + [3.0] * (n_p - 1)}),
    ]) + "\n")
    rep = import_predictions(out, src, "ext")
    where = {p["where"].rsplit(":", 1)[1]: p["problem"] for p in rep["problems"]}
    assert set(where) == {"2", "3", "4", "6", "7"}, rep["problems"]
    assert all("finite number" in where[k] for k in ("2", "3", "7"))
    assert all("whole numbers" in where[k] for k in ("4", "6"))
    assert rep["imported"] == 2
    got = {r["id"]: r for r in read_jsonl(out / "predictions" / "ext.jsonl")}
    assert got[lst[0]["id"]]["parsed"]["ordering"] == list(range(1, n_l + 1))
    assert got[lst[0]["id"]]["imported_from"].endswith(":5")


def test_bytes_that_are_not_utf8_are_named_by_line(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "llmrec", ["direct"], 3)
    src = tmp_path / "b.jsonl"
    src.write_bytes(b"".join([
        json.dumps({"id": recs[0]["id"], "answer": recs[0]["output"]}).encode() + b"\n",
        b'{"id": "x", "answer": "caf\xe9"}\n',  # latin-1
        json.dumps({"id": recs[1]["id"], "answer": "caf\u00e9"}, ensure_ascii=False).encode() + b"\n",
    ]))
    rep = import_predictions(out, src, "ext")
    assert rep["imported"] == 2 and len(rep["problems"]) == 1
    assert rep["problems"][0]["where"].endswith("b.jsonl:2") and "not valid UTF-8" in rep["problems"][0]["problem"]
    csv_src = tmp_path / "b.csv"
    csv_src.write_bytes(b"id,answer\n" + f"{recs[0]['id']},1\n".encode() + f"{recs[1]['id']},caf".encode()
                        + b"\xe9\n")
    with pytest.raises(InputError, match=r"b\.csv, line 3: not valid UTF-8"):
        import_predictions(out, csv_src, "ext2")
    assert not (out / "predictions" / "ext2.jsonl").exists()
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--predictions", str(csv_src), "--name", "ext2"])
    assert isinstance(res.exception, InputError) and "line 3" in str(res.exception)  # main() prints it cleanly


def test_score_cli_reads_perrecbench_released_files(ml1m, tmp_path):
    """`score perrecbench --predictions DIR` through the command line: the suite's released-file reader
    (a lazy hook) is loaded, not called as a string."""
    from recharness.tasks.perrecbench.original import write_predictions

    out = tmp_path / "run"
    recs, samples = _fake_run(out, "perrecbench", ["list"], 2, {"profile": False})
    files = write_predictions(list(samples.values()), {r["id"]: r for r in recs}, tmp_path / "released")
    assert files
    for src in (tmp_path / "released", files[0]):  # the folder, and one .json file
        res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(out), "--predictions", str(src),
                                       "--name", "released", "--resamples", "20", "--force"],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
        rep = json.loads((out / "imports" / "released.json").read_text())
        level = None if src.is_dir() else src.stem.split("-")[1]
        want = {r["id"]: r["parsed"] for r in recs if level is None or samples[r["id"]]["level"] == level}
        assert rep["imported"] == len(want) >= 2 and rep["problems"] == []
        got = {r["id"]: r["parsed"] for r in read_jsonl(out / "predictions" / "released.jsonl")}
        assert got == want


def test_a_json_array_reads_like_jsonl(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, _ = _fake_run(out, "llmrec", ["sequential"], 4)
    lines = [{"id": r["id"], "answer": r["output"]} for r in recs]
    for suffix in (".json", ".jsonl"):  # the array is recognised by its "[", whatever the name says
        src = tmp_path / f"arr{suffix}"
        src.write_text(json.dumps(lines, indent=2))
        rep = import_predictions(out, src, "other", force=True)
        assert rep["imported"] == len(recs) == rep["lines"] and rep["problems"] == []
        _same(pipeline.score(out, resamples=100))
    # a broken array: the elements before the error are read, the error is named once with its line
    text = json.dumps(lines[:2], indent=1)[:-1] + ",\n{\"id\": oops}\n]"
    (tmp_path / "bad.json").write_text(text)
    rep = import_predictions(out, tmp_path / "bad.json", "other", force=True)
    assert rep["imported"] == 2 and len(rep["problems"]) == 1
    p = rep["problems"][0]
    assert p["where"].endswith(f":{text.count(chr(10), 0, text.index('oops')) + 1}") and "JSON array" in p["problem"]


def _released_tree(tmp_path, samples, recs):
    """Our predictions in the authors' released tree: result-<level>/…/processed-<mode>/output/0.json, beside
    the raw answers (0_original.json) and a self-consistency variant (0-sc5.json) that are not read."""
    from recharness.tasks.perrecbench.original import write_predictions

    flat = write_predictions(list(samples.values()), {r["id"]: r for r in recs}, tmp_path / "flat")
    root = tmp_path / "PerRecBench" / "code"
    for f in flat:
        mode, level = f.stem.split("-")
        d = root / f"result-{level}" / "abs_rating" / "Qwen2.5-7B-Instruct" / "0shot" / "all" / "exp0" / "k4" / \
            f"processed-{mode}" / "output"
        d.mkdir(parents=True)
        (d / "0.json").write_text(f.read_text())
        (d / "0_original.json").write_text('{"not": "predictions"}')
        (d / "0-sc5.json").write_text('{"not": "predictions"}')
    return root, flat


def test_score_cli_reads_the_perrecbench_released_tree(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "perrecbench", ["list"], 2, {"profile": False})
    root, flat = _released_tree(tmp_path, samples, recs)
    assert len(flat) == 3  # easy, medium, hard
    res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(out), "--predictions", str(root),
                                   "--name", "released", "--resamples", "20"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "imports" / "released.json").read_text())
    assert rep["imported"] == len(recs)
    assert sorted(p["problem"] for p in rep["problems"]) == [
        "3 files of raw answers (*_original*): not read (the processed <n>.json are)",
        "3 files of variants (self-consistency, CoT): not read (the processed <n>.json are)"]
    got = {r["id"]: r["parsed"] for r in read_jsonl(out / "predictions" / "released.jsonl")}
    assert got == {r["id"]: r["parsed"] for r in recs}
    _same(pipeline.score(out, resamples=50), "fake", "released")
    # two models' runs in one tree: one row cannot be both
    other = root / "result-easy" / "abs_rating" / "Other-Model" / "0shot" / "all" / "exp0" / "k4" / "processed-group" / "output"
    other.mkdir(parents=True)
    (other / "0.json").write_text(flat[0].read_text())
    res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(out), "--predictions", str(root),
                                   "--name", "released", "--force"])
    assert res.exit_code != 0 and "2 released files for list/easy" in str(res.exception)


def test_score_cli_scores_released_files_against_label_files_alone(ml1m, tmp_path):
    from recharness.tasks.perrecbench.build import SIDE_DIR

    out = tmp_path / "run"
    recs, samples = _fake_run(out, "perrecbench", ["list"], 2, {"profile": False})
    root, _ = _released_tree(tmp_path, samples, recs)
    labels = out / SIDE_DIR  # the label files of the build, in the authors' layout
    assert sorted(p.name for p in labels.glob("item2group*.json")) == [
        f"item2group_avg_diff_sample-{lv}.json" for lv in ("easy", "hard", "medium")]
    nobuild = tmp_path / "labels-only"
    res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(nobuild), "--predictions", str(root),
                                   "--labels", str(labels), "--name", "released"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = json.loads((nobuild / "label_scores" / "released.json").read_text())["scores"]
    assert sorted(got) == ["list-easy", "list-hard", "list-medium"]
    fake = next(r for r in pipeline.score(out, resamples=0) if r.method == "fake")
    for lv in ("easy", "medium", "hard"):  # the same groups, the same answers: the run's per-level tau
        assert got[f"list-{lv}"][f"tau_{lv}"] == pytest.approx(fake.metrics[f"tau_{lv}"], abs=1e-12)
    assert not (nobuild / "predictions").exists()  # nothing imported: there is no build to import into


def test_no_label_file_message_names_the_build(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "perrecbench", ["list"], 2, {"profile": False})
    f = tmp_path / "group-easy.json"
    f.write_text(json.dumps({"no-such-item": [[[1, 2]]]}))
    res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(out), "--predictions", str(f), "--name", "x"])
    msg = str(res.exception)
    assert res.exit_code != 0 and isinstance(res.exception, InputError)
    assert "no group in the label file" not in msg and "item has no group in this build's list/easy samples" in msg


def test_lines_with_their_own_target_are_counted_when_it_is_not_the_builds(ml1m, tmp_path):
    out = tmp_path / "run"
    recs, samples = _fake_run(out, "llmrec", ["sequential"], 4)
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    ids = list(samples)
    other = next(i for i in titles if i not in {s["target"] for s in samples.values()})
    lines = [{"id": ids[0], "answer": "1. Heat (1995)", "target": samples[ids[0]]["target"]},  # the same id
             {"id": ids[1], "answer": "1. Heat (1995)", "target": titles[samples[ids[1]]["target"]]},  # its title
             {"id": ids[2], "answer": "1. Heat (1995)", "target": other},  # another item
             {"id": ids[3], "answer": "1. Heat (1995)", "target": titles[other]}]
    src = _write_jsonl(tmp_path / "t.jsonl", lines)
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--predictions", str(src), "--name", "t",
                                   "--resamples", "0"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "imports" / "t.json").read_text())
    assert rep["differs"] == {"target": {"lines": 2, "first": [f"{rep['source']}:3", f"{rep['source']}:4"]}}
    assert "2 lines give a target other than the build's sample" in res.output


def test_released_tree_takes_a_lone_variant_as_the_run(tmp_path):
    """The fine-tuned models' folders hold only 0-sc1.json (and its _original): that file is the run."""
    from recharness.tasks.perrecbench.imports import released_files

    out = tmp_path / "result-medium" / "abs_rating" / "ft" / "0shot" / "all" / "exp0" / "k4" / "processed-pair" / "output"
    out.mkdir(parents=True)
    for n in ("0-sc1.json", "0_original-sc1.json"):
        (out / n).write_text("{}")
    files, problems = released_files(tmp_path)
    assert files == {("pair", "medium"): out / "0-sc1.json"}
    assert [p["problem"] for p in problems] == ["1 files of raw answers (*_original*): not read (the processed <n>.json are)"]


def test_score_help_names_every_format_predictions_takes():
    """`score --help` says what --predictions reads: JSONL, a JSON array or CSV, and PerRecBench's released
    files, their folder or its result-<level>/ tree."""
    import re

    res = CliRunner().invoke(app, ["score", "--help"], env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"})
    assert res.exit_code == 0, res.output
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    help_ = text[text.index("--predictions"):text.index("--name")]
    assert help_ == ("--predictions <path> Import another tool's answers first (JSONL, a JSON array or CSV, schema in "
                     "docs/predictions.md; PerRecBench: its original <mode>-<level>.json files, their folder or the "
                     "released result-<level>/ tree), scored like a model of ours. ")


def test_an_imported_rating_keeps_its_digits_and_lines_name_their_sample_exactly(ml1m, tmp_path):
    """A regressor's rating 3.8765432 is that number (as text it was read with at most 4 decimals: invalid); a line
    whose own item is not its sample's is refused; a finetuned line's "items": "sid" is its kind, not an answer."""
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["rating", "sequential"], seed=0, limit=3)
    samples = list(read_jsonl(out / "samples.jsonl"))
    rating = [s for s in samples if s["task"] == "rating"]
    seq = [s for s in samples if s["task"] == "sequential"]
    lines = [{"id": rating[0]["id"], "rating": 3.8765432},
             {"id": rating[1]["id"], "item_id": "not-" + str(rating[1]["item_id"]), "rating": 4},
             {"id": rating[2]["id"], "rating": 7.5},
             {"id": seq[0]["id"], "kind": "finetuned", "items": "sid", "titles": ["Toy Story (1995)"]}]
    rep = import_predictions(out, _write_jsonl(tmp_path / "p.jsonl", lines), "other")
    recs = {r["id"]: r for r in read_jsonl(out / "predictions" / "other.jsonl")}
    assert recs[rating[0]["id"]]["valid"] and recs[rating[0]["id"]]["parsed"]["value"] == 3.8765432
    assert not recs[rating[2]["id"]]["valid"]  # beyond the scale's slack: no rating
    assert rating[1]["id"] not in recs and "item_id" in rep["problems"][0]["problem"]
    assert recs[seq[0]["id"]]["valid"] and recs[seq[0]["id"]]["parsed"]["items"] == ["1"]


def test_a_user_item_pair_several_tasks_share_needs_the_task():
    from recharness.runner.imported import _Resolver

    samples = [{"id": "rating-u1", "task": "rating", "user_id": "u1", "item_id": "i9"},
               {"id": "explanation-u1", "task": "explanation", "user_id": "u1", "item_id": "i9"}]
    r = _Resolver(samples)
    s, why = r.find({"user_id": "u1", "item_id": "i9", "rating": 4})
    assert s is None and "give \"id\" or \"task\"" in why  # before: the explanation sample, silently
    assert r.find({"user_id": "u1", "item_id": "i9", "task": "rating"})[0]["id"] == "rating-u1"


def test_an_imported_id_outside_the_candidates_holds_its_place(ml1m, tmp_path):
    """A direct ranking imported as item ids: an id that is no candidate holds its place, as an LLM's out-of-range
    number does (before, it was left out and the target moved up)."""
    out = tmp_path / "run"
    _, samples = _fake_run(out, "llmrec", ["direct"], 2)
    s = next(iter(samples.values()))
    src = _write_jsonl(tmp_path / "ext.jsonl", [{"id": s["id"], "items": ["no-such-item", s["target"]]}])
    res = CliRunner().invoke(app, ["score", "llmrec", "-o", str(out), "--predictions", str(src), "--name", "ext",
                                   "--resamples", "50"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rec = next(r for r in read_jsonl(out / "predictions" / "ext.jsonl") if r["id"] == s["id"])
    assert rec["parsed"]["slots"] == [None, s["target"]] and rec["parsed"]["out_of_range"] == 1
    ext = next(r for r in json.loads((out / "scores.json").read_text()) if r["method"] == "ext")
    assert ext["metrics"]["HR@1"] == 0.0 and ext["metrics"]["MRR"] == 0.5
    rep = json.loads((out / "imports" / "ext.json").read_text())
    assert any("holds its place" in p["problem"] for p in rep["problems"])


def test_answers_of_the_wrong_json_type_are_named_not_scored_as_their_python_text(ml1m, tmp_path):
    """A list or object in "answer" was scored as its Python text ("['Yes', 'No']": a valid "Yes"; {"ranking":
    [12]}: candidate 12), a null or number among "titles" was matched, a null "answer" beside a numeric
    "rating" made the rating invalid (the review of 2026-11-29)."""
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["rating", "sequential", "direct"], seed=0, limit=3)
    samples = list(read_jsonl(out / "samples.jsonl"))
    rating, seq, direct = ([s for s in samples if s["task"] == t] for t in ("rating", "sequential", "direct"))
    lines = [{"id": direct[0]["id"], "answer": {"ranking": [12]}},
             {"id": seq[0]["id"], "answer": ["Sleepers (1996)", "Toy Story (1995)"]},
             {"id": seq[1]["id"], "answer": float("nan")},
             {"id": seq[2]["id"], "titles": [["Net, The (1995)"], None, 7]},
             {"id": direct[1]["id"], "items": [direct[1]["candidates"][0], None]},
             {"id": rating[0]["id"], "rating": [4]},
             {"id": rating[1]["id"], "answer": None, "rating": 2.0000001},
             {"id": direct[2]["id"], "items": [direct[2]["candidates"][0], 7]}]
    rep = import_predictions(out, _write_jsonl(tmp_path / "p.jsonl", lines), "other")
    where = {int(p["where"].rsplit(":", 1)[1]): p["problem"] for p in rep["problems"]}
    assert where[1] == '"answer" is an object, not text (give a list as "items" or "titles")'
    assert where[2] == '"answer" is a list, not text (give a list as "items" or "titles")'
    assert where[3].startswith('"answer" is NaN, not text')
    assert where[4] == '"titles" holds a list: titles are text'
    assert where[5] == '"items" holds null: item ids are text or whole numbers'
    assert where[6] == '"rating" is a list, not a number'
    recs = {r["id"]: r for r in read_jsonl(out / "predictions" / "other.jsonl")}
    assert set(recs) == {rating[1]["id"], direct[2]["id"]} and 7 not in where
    assert where[8].startswith("item '7' is not one of the sample's candidates")  # a whole number is an id
    assert recs[rating[1]["id"]]["valid"] and recs[rating[1]["id"]]["parsed"]["value"] == 2.0000001


def test_an_imported_id_outside_the_catalog_holds_its_place(ml1m, tmp_path):
    """A sequential list ["junk", target] ranked the target first (the id was left out); an LLM listing an
    invented title first ranks it second (the review of 2026-11-29)."""
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=2)
    seq = list(read_jsonl(out / "samples.jsonl"))
    lines = [{"id": seq[0]["id"], "items": ["junk-id", seq[0]["target"]]},
             {"id": seq[1]["id"], "items": ["junk-id"]}]
    rep = import_predictions(out, _write_jsonl(tmp_path / "p.jsonl", lines), "other")
    assert [p["problem"] for p in rep["problems"]] == [
        "item 'junk-id' is not in the dataset's catalog (it holds its place, as a title no item has)"] * 2
    recs = {r["id"]: r for r in read_jsonl(out / "predictions" / "other.jsonl")}
    assert recs[seq[0]["id"]]["parsed"]["slots"] == [None, seq[0]["target"]]
    assert rep["unrecognised"] == 1 and recs[seq[1]["id"]]["valid"] and not recs[seq[1]["id"]]["parsed"]["refusal"]
    rows = pipeline.score(out, resamples=0)
    m = next(r for r in rows if r.method == "other").metrics
    assert m["HR@1"] == 0.0 and m["HR@5"] == 0.5 and m["NDCG@5"] == pytest.approx(0.5 / math.log2(3))

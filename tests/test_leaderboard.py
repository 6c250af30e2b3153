"""The cross-run leaderboard (`report --runs`, and what `eval` writes): no row dropped or hidden, every row
named once, partial rows said to be partial in the CSV too, links that stay paths."""

from __future__ import annotations

import csv
import io
import json
import shutil

from recharness.report.html import _rel_link, run_labels, write_leaderboard
from recharness.report.tables import write_scores
from recharness.runner import pipeline
from tests.test_confidence_tables import _fake_run


def _rows(run):
    return json.loads((run / "scores.json").read_text())


def test_two_runs_of_one_build_keep_both_model_rows_and_one_copy_of_equal_references(ml1m, tmp_path):
    a = _fake_run("llmrec", "direct", "ml-1m", tmp_path / "evalA" / "llmrec", limit=8)
    write_scores(pipeline.score(a, resamples=50), a)
    b = tmp_path / "evalB" / "llmrec"
    shutil.copytree(a, b)
    rows = _rows(b)
    fake = next(r for r in rows if r["method"] == "fake")
    fake["metrics"]["NDCG@10"] = 0.123456  # the same model name, another result (e.g. other settings)
    fake["coverage"] = {"answered": 6, "of": 8, "why": "partial"}
    (b / "scores.json").write_text(json.dumps(rows))
    assert run_labels([a, b]) == {str(a): "evalA/llmrec", str(b): "evalB/llmrec"}  # the last part is shared
    paths = write_leaderboard([a, b], tmp_path / "board")
    table = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    fakes = [r for r in table if r["method"] == "fake"]
    assert len(fakes) == 2 and {float(r["NDCG@10"]) for r in fakes} >= {0.123456}  # neither dropped
    assert [r["coverage"] for r in fakes if float(r["NDCG@10"]) == 0.123456] == ["partial: n = 6 of 8"]
    refs = [r for r in table if r["kind"] == "reference"]
    assert len(refs) == len({r["method"] for r in refs}) > 0  # equal reference rows once
    html = paths["html"].read_text()
    assert "fake [evalA/llmrec]" in html and "fake [evalB/llmrec]" in html


def test_a_run_folder_named_like_a_url_scheme_stays_a_relative_link(tmp_path):
    run = tmp_path / "javascript:alert(1)#x?y"
    run.mkdir()
    link = _rel_link(run / "report.html", tmp_path / "board")
    assert link.startswith("./") and "javascript:" not in link and "#" not in link and "?" not in link
    assert link == "./../javascript%3Aalert%281%29%23x%3Fy/report.html"


def test_scores_older_than_their_predictions_are_refused(ml1m, tmp_path):
    """`report` shows scores.json beside the predictions' examples and settings: after the predictions changed
    (run --overwrite, --redo-invalid, a resumed run) the old numbers would stand beside answers they are not of."""
    import pytest

    from recharness.core.errors import ConfigError
    from recharness.report.tables import load_scores

    run = _fake_run("llmrec", "direct", "ml-1m", tmp_path / "run", limit=6)
    write_scores(pipeline.score(run, resamples=0), run)
    assert any(r.extra.get("predictions_sha256") for r in load_scores(run))
    f = run / "predictions" / "fake.jsonl"
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:-1]))  # one answer fewer, as after --redo-invalid took it out
    with pytest.raises(ConfigError, match=r"fake's scores from before predictions/fake.jsonl changed"):
        load_scores(run)
    write_scores(pipeline.score(run, resamples=0, partial=True), run)
    assert load_scores(run)


def test_scores_older_than_a_trained_reference_or_a_new_model_are_refused(ml1m, tmp_path):
    """A reference `train` wrote, or replaced (--retrain, --tune), after `score`, and a model run after it, were
    shown with the old rows (or none) beside the training section and the examples that are of the new files."""
    import shutil

    import pytest

    from recharness.core.errors import ConfigError
    from recharness.core.rundir import RunDir
    from recharness.report.tables import load_scores
    from recharness.runner.train import train

    run = _fake_run("llmrec", "direct", "ml-1m", tmp_path / "run", limit=6)
    write_scores(pipeline.score(run, resamples=0), run)
    computed = {r.method for r in load_scores(run) if r.kind == "reference" and r.extra.get("computed")}
    assert "popularity" in computed and "markov" not in computed
    train(run, suite="llmrec", baselines=["popularity"], latency_runs=1)
    with pytest.raises(ConfigError, match=r"the reference popularity computed on the fly from before "
                                          r"predictions/reference/popularity.jsonl was trained"):
        load_scores(run)
    write_scores(pipeline.score(run, resamples=0), run)
    train(run, suite="llmrec", baselines=["markov"], latency_runs=1)  # a reference with no row yet
    with pytest.raises(ConfigError, match=r"no row for that reference from before predictions/reference/markov.jsonl"):
        load_scores(run)
    write_scores(pipeline.score(run, resamples=0), run)
    (markov,) = [r for r in load_scores(run) if r.method == "markov"]
    assert markov.extra.get("predictions_sha256") and not markov.extra.get("computed")
    f = RunDir(run).reference("markov")
    f.write_text("".join(f.read_text().splitlines(keepends=True)[:-1]))  # as a retrain rewrites it
    with pytest.raises(ConfigError, match=r"markov's scores from before predictions/reference/markov.jsonl changed"):
        load_scores(run)
    write_scores(pipeline.score(run, resamples=0, partial=True), run)
    shutil.copy(run / "predictions" / "fake.jsonl", run / "predictions" / "newmodel.jsonl")
    with pytest.raises(ConfigError, match=r"no row for that model from before predictions/newmodel.jsonl was written"):
        load_scores(run)


def test_rows_of_builds_of_different_sizes_each_show_their_n(ml1m, tmp_path):
    """The heading's 'n = 6–8' does not say which row rests on which: each row says its own n."""
    import re

    a = _fake_run("llmrec", "direct", "ml-1m", tmp_path / "a" / "llmrec", limit=8)
    b = _fake_run("llmrec", "direct", "ml-1m", tmp_path / "b" / "llmrec", limit=6)
    for run, resamples in ((a, 200), (b, 100)):
        write_scores(pipeline.score(run, resamples=resamples), run)
    html = write_leaderboard([a, b], tmp_path / "board")["html"].read_text()
    section = html[html.index("(n = 6–8)"):]
    section = section[: section.index("<h2>") if "<h2>" in section else None]
    table = section[: section.index("</table>")]
    # each run's interval settings, not the first run's for all
    assert "200 resamples of the independent units, seed 0; 100 resamples of the independent units, seed 0, by run" \
        in section
    # each verdict names its own run's reference row, as the table names it: never one "it" for two rows
    refs = re.findall(r"Strongest reference by NDCG@10: ([^;]+);", section)
    assert sorted(refs) == sorted({r for r in refs}) and len(refs) == 2, refs
    assert all(r.endswith(("[a/llmrec]", "[b/llmrec]")) for r in refs), refs
    assert "<th>method</th><th>n</th>" in table
    ns = dict(re.findall(r"<td class='method'>([^<]+)(?:<small[^>]*>[^<]*</small>)?</td><td>([^<]+)</td>", table))
    assert ns["fake [a/llmrec]"] == "8" and ns["fake [b/llmrec]"] == "6", ns
    # one build: the heading's n is every row's, no column
    one = write_leaderboard([a], tmp_path / "one")["html"].read_text()
    assert "(n = 8)" in one and "<th>n</th>" not in one


def test_a_dataset_given_by_its_folder_shows_no_absolute_path(ml1m, tmp_path):
    """`build -d /home/alice/data/ml`: build.json keeps the path (to load it again), but the report, the
    leaderboard, its CSV and the logged commands show it as any path is shown, never the machine's own."""
    from recharness.cli import _log_command
    from recharness.data.store import _locate
    from recharness.report.html import write_report
    from recharness.report.tables import load_scores

    folder = tmp_path / "alice" / "prepared-ml"
    shutil.copytree(_locate("ml-1m"), folder)
    run = _fake_run("llmrec", "direct", str(folder), tmp_path / "run", limit=6)
    assert json.loads((run / "build.json").read_text())["dataset"] == str(folder)
    write_scores(pipeline.score(run, resamples=0), run)
    _log_command(run, "build", "llmrec", dataset=str(folder), out="run")
    page = write_report(load_scores(run), run).read_text()
    board = write_leaderboard([run], tmp_path / "board")
    texts = {"report": page, "board": board["html"].read_text(), "csv": board["csv"].read_text(),
             "commands": json.loads((run / "commands.jsonl").read_text())["command"]}
    for name, text in texts.items():
        assert str(tmp_path) not in text and "/alice/" not in text.replace("…/alice/prepared-ml", ""), name
    assert "on …/alice/prepared-ml" in page and "--dataset …/alice/prepared-ml" in texts["commands"].replace("'", "")
    # a prepared dataset's name is shown as it is
    from recharness.core.paths import shown_dataset

    assert shown_dataset("ml-1m") == "ml-1m" and shown_dataset(None) == ""

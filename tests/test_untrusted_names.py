"""Names and URLs a user types are untrusted: a dataset name never reaches (or, on a replace, deletes)
anything outside the data home, a run never lands inside a dataset given by its path, a key in a model
URL never reaches a file the run writes, and a damaged scores.json is one error naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.errors import ConfigError, InputError
from recharness.core.paths import dataset_dir, dataset_runs_name, runs_dir
from recharness.core.rundir import RunDir
from recharness.report.tables import load_scores

FIX = Path(__file__).parent / "fixtures" / "data" / "movielens_dat"


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("RECHARNESS_HOME", str(h))
    return h


@pytest.mark.parametrize("name", ["../runs", "/abs/olddata", "a/b", ".hidden", "x\\y", ""])
def test_a_dataset_name_stays_one_folder_under_the_data_home(home, name):
    with pytest.raises(ConfigError, match="bad dataset name"):
        dataset_dir(name)
    assert dataset_dir("ml-1m") == home / "datasets" / "ml-1m"


def test_prepare_as_a_path_is_refused_and_deletes_nothing(home, tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("raw data")
    for as_name in (str(keep), f"../../{keep.name}"):
        res = CliRunner().invoke(app, ["prepare", "movielens-dat", str(FIX), "--as", as_name])
        assert res.exit_code != 0 and "bad dataset name" in str(res.exception), res.output
    assert (keep / "precious.txt").read_text() == "raw data"


def test_prepare_never_replaces_a_folder_that_is_not_a_dataset(home):
    target = home / "datasets" / "mine"
    target.mkdir(parents=True)
    (target / "notes.txt").write_text("mine")
    res = CliRunner().invoke(app, ["prepare", "movielens-dat", str(FIX), "--as", "mine"])
    assert "is not a prepared dataset (no meta.json): not replacing it" in str(res.exception), res.output
    assert (target / "notes.txt").read_text() == "mine" and not (target / "meta.json").exists()
    # a prepared dataset is replaced as before
    assert CliRunner().invoke(app, ["prepare", "movielens-dat", str(FIX), "--as", "fresh"]).exit_code == 0
    assert CliRunner().invoke(app, ["prepare", "movielens-dat", str(FIX), "--as", "fresh"]).exit_code == 0
    assert (home / "datasets" / "fresh" / "meta.json").exists()


def test_prepare_replaces_a_dataset_of_another_kind_only_with_force(home):
    games = Path(__file__).parent / "fixtures" / "data" / "llmrank"
    assert CliRunner().invoke(app, ["prepare", "movielens-dat", str(FIX), "--as", "mine"]).exit_code == 0
    before = (home / "datasets" / "mine" / "interactions.parquet").read_bytes()
    res = CliRunner().invoke(app, ["prepare", "llmrank-games", str(games), "--as", "mine"])
    assert res.exit_code != 0 and "holds a dataset prepared from movielens-dat, not llmrank-games" in str(res.exception)
    assert (home / "datasets" / "mine" / "interactions.parquet").read_bytes() == before  # untouched
    assert CliRunner().invoke(app, ["prepare", "llmrank-games", str(games), "--as", "mine", "--force"]).exit_code == 0
    assert json.loads((home / "datasets" / "mine" / "meta.json").read_text())["preparer"] == "llmrank-games"


def test_a_dataset_given_by_path_gets_its_runs_under_the_runs_folder(home, tmp_path):
    assert dataset_runs_name("ml-1m") == "ml-1m"
    assert dataset_runs_name(str(tmp_path / "prepared" / "ml")) == "ml"
    assert RunDir.default("llmrec", str(tmp_path / "prepared" / "ml")).path == runs_dir() / "llmrec" / "ml"
    assert RunDir.default("llmrec", "../../x").path == runs_dir() / "llmrec" / "x"
    with pytest.raises(ConfigError, match="bad dataset name"):
        RunDir.default("llmrec", "..")
    with pytest.raises(ConfigError, match="bad suite name"):
        RunDir.default("../llmrec", "ml-1m")


def test_a_key_in_the_model_url_reaches_no_file_of_an_eval(ml1m, tmp_path):
    """`eval` records its command in every run, logs it and titles its report; the server is down, so the
    run stops early, after those have been written."""
    out = tmp_path / "eval"
    spec = "openai:m@http://user:S3CRETKEY@127.0.0.1:9/v1?api_key=K3Y"
    res = CliRunner().invoke(app, ["eval", "-m", spec, "--suites", "llmrec", "--limit", "1", "-o", str(out),
                                   "--no-train-references"])
    assert res.exit_code != 0
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "commands.jsonl" for p in written) and (out / "eval.log").exists()
    assert "***@127.0.0.1:9" in (out / "eval.log").read_text()
    for p in written:
        data = p.read_bytes()
        assert b"S3CRETKEY" not in data and b"K3Y" not in data, p
    assert "S3CRETKEY" not in res.output and "K3Y" not in res.output


def test_a_damaged_scores_file_is_one_error_naming_it(tmp_path):
    scores = RunDir(tmp_path).scores("json")
    scores.parent.mkdir(parents=True, exist_ok=True)
    for text in ("{not json", json.dumps([{"method": "m", "unknown_field": 1}]), json.dumps({"a": 1})):
        scores.write_text(text)
        with pytest.raises(InputError, match="not a scores file written by `recharness score`") as e:
            load_scores(tmp_path)
        assert str(scores) in str(e.value)
    # rows of the right shape with a field of another type: the row and field named (it was a TypeError in the
    # tables or a chart: metrics null, ci null, a bound as text, one bound alone)
    good = {"method": "m", "task": "t", "metrics": {"HR@10": 0.5}, "n": 3, "ci": {"HR@10": {"lo": 0.1, "hi": 0.9}}}
    for change, field in (({"metrics": None}, "metrics"), ({"ci": None}, "ci"), ({"extra": None}, "extra"),
                          ({"metrics": {"HR@10": "0.5"}}, "metrics.HR@10"),
                          ({"ci": {"HR@10": {"lo": None, "hi": 0.9}}}, "ci.HR@10.lo"),
                          ({"ci": {"HR@10": {"lo": 0.9, "hi": 0.1}}}, "ci.HR@10"),
                          ({"ci": {"HR@10": {"lo": "a", "hi": 0.9}}}, "ci.HR@10.lo"),
                          ({"method": 7}, "method"), ({"n": 2.5}, "n")):
        scores.write_text(json.dumps([good, {**good, **change}]))
        with pytest.raises(InputError) as e:
            load_scores(tmp_path)
        assert str(scores) in str(e.value) and "row 1" in str(e.value) and e.value.field == field, (change, e.value)
    # undefined metrics and an entry without an interval (a note) are what score may write: allowed
    scores.write_text(json.dumps([good, {**good, "metrics": {"HR@10": None}, "ci": {"HR@10": {"why": "n too small"}}}]))
    assert [r.metrics for r in load_scores(tmp_path)] == [{"HR@10": 0.5}, {"HR@10": None}]
    shutil.rmtree(tmp_path)


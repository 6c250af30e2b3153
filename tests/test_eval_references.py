"""`recharness eval` trains the references by default (the slow ones named and left out), records what it
ran as command lines (generation flags and the sampling seed included), and the small CLI gaps around it:
bare `recharness models` lists the models, an old model alias names the file as the model it names."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recharness.core.errors import ConfigError


def cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recharness", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def test_an_old_alias_names_the_predictions_file_as_the_model_it_names(capsys):
    from recharness.models import builtin
    from recharness.specs import default_name

    builtin._WARNED.discard("qwen2.5-0.5b")
    assert default_name("qwen2.5-0.5b") == "qwen2.5-coder-0.5b-instruct"
    assert default_name("qwen2.5-0.5b") == "qwen2.5-coder-0.5b-instruct"
    err = capsys.readouterr().err
    assert err.count("deprecated") == 1 and "use 'qwen2.5-coder-0.5b-instruct'" in err
    assert default_name("qwen2.5-1.5b") == "qwen2.5-coder-1.5b-instruct"
    assert default_name("fake:b") == "fake_b" and default_name("smollm2-135m") == "smollm2-135m"


def test_bare_models_lists_every_builtin_with_what_it_is():
    from recharness.models.builtin import BUILTIN_MODELS

    p = cli("models")
    assert p.returncode == 0, p.stderr
    assert "Usage" not in p.stdout + p.stderr
    for name, m in BUILTIN_MODELS.items():
        assert name in p.stdout
        assert m.description.split(" (")[0] in p.stdout  # "SmolLM2-135M-Instruct Q4_1", "Qwen2.5-Coder-0.5B-Instruct"
    assert cli("models", "list").stdout == p.stdout


def test_references_plan_leaves_out_the_slow_ones_with_the_reason(ml1m, tmp_path):
    from recharness.evaluate import SLOW_REFERENCES, references_plan
    from recharness.runner.pipeline import build

    build("recbench", "ml-1m", tmp_path / "seq", tasks=["seqrec"], seed=0, limit=2)
    quick, skipped = references_plan(tmp_path / "seq")
    assert quick == ["popularity", "itemknn", "ease", "als", "markov"]
    assert set(skipped) == {"sasrec", "sasrec-1l", "sasrec-3l", "sasrec-4l", "sid-sasrec", "sid-sasrec-free",
                            "title-cbs"}
    assert skipped["sasrec"] == "slow: " + SLOW_REFERENCES["sasrec"]
    assert skipped["title-cbs"].startswith("opt-in: trained only when named (recharness train -b title-cbs)")
    every, none_left = references_plan(tmp_path / "seq", "all")
    assert none_left == {} and every == [*quick[:1], *every[1:]] and "sasrec" in every and "title-cbs" in every
    with pytest.raises(ConfigError, match="--references some: quick"):
        references_plan(tmp_path / "seq", "some")


def test_references_note_names_trained_and_left_out_with_why(tmp_path):
    from recharness.evaluate import EvalRun, references_note

    a = EvalRun("llmrec", "llmrec", ["direct"], 4, [], tmp_path, trained=["popularity", "ease"], kept=["als"])
    b = EvalRun("recbench-seqrec", "recbench", ["seqrec"], 4, [], tmp_path, trained=["markov"],
                skipped={"sasrec": "slow: minutes", "sasrec-1l": "slow: minutes", "title-cbs": "opt-in: named"})
    assert references_note([a, b]) == [
        "llmrec: references trained: popularity, ease, als",
        "recbench-seqrec: references trained: markov",
        "left out: sasrec, sasrec-1l — slow: minutes",
        "left out: title-cbs — opt-in: named",
        "(`--references all` trains the left-out references; `recharness train -b NAME` one of them)"]
    assert references_note([a, b], train_references=False)[0].startswith("references: not trained")


@pytest.mark.slow
def test_eval_trains_references_by_default_and_records_every_command(ml1m, tmp_path):
    out = tmp_path / "ev"
    prompt = tmp_path / "sys.txt"
    prompt.write_text("You are a movie recommender.\n")
    first = cli("eval", "-m", "fake", "--suites", "llmrec", "-o", str(out), "--no-train-references",
                "--gen-seed", "7", "--temperature", "0.3", "--max-tokens", "64", "--system-prompt", str(prompt))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "references: not trained (--no-train-references)" in first.stdout
    run = out / "llmrec"
    assert not (run / "predictions" / "reference").exists()
    from recharness.core.rundir import RunDir
    from recharness.runner.coverage import read_run

    rec = read_run(RunDir(run), "fake")
    assert rec["settings"]["generation"] == {"temperature": 0.3, "max_tokens": 64, "seed": 7}, rec
    import hashlib

    sha = hashlib.sha256(b"You are a movie recommender.").hexdigest()[:16]
    assert rec["settings"]["system_prompt_sha256"] == sha

    second = cli("eval", "-m", "fake", "--suites", "llmrec", "-o", str(out), "--gen-seed", "7", "--temperature",
                 "0.3", "--max-tokens", "64", "--system-prompt", str(prompt))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing to answer (no model call) · trained 6 references" in second.stderr
    assert "llmrec: references trained: popularity, random, itemknn, ease, als, markov" in second.stdout
    assert sorted(p.stem for p in (run / "predictions" / "reference").glob("*.jsonl")) == \
        ["als", "ease", "itemknn", "markov", "popularity", "random"]
    first_rec = json.loads((run / "predictions" / "reference" / "ease.jsonl").open().readline())
    assert first_rec["latency_runs"] == 100

    cmds = [json.loads(x)["command"] for x in (run / "commands.jsonl").read_text().splitlines()]
    stages = [c.split()[1] for c in cmds]
    assert stages == ["eval", "build", "run", "score", "eval", "train", "score"], cmds
    assert "--no-train-references" in cmds[0] and "--gen-seed 7" in cmds[0] and "--temperature 0.3" in cmds[0]
    assert "--system-prompt" in cmds[0] and "sys.txt" in cmds[0]
    assert "--temperature 0.3 --max-tokens 64 --seed 7 --system-prompt" in cmds[2] and "--model fake" in cmds[2]
    assert ("--baseline popularity --baseline random --baseline itemknn --baseline ease --baseline als "
            "--baseline markov --seed 0 --latency-runs 100") in cmds[5]
    html = (run / "report.html").read_text()
    assert "recharness train llmrec" in html and "--gen-seed 7" in html
    assert f"system prompt sha256 {sha}" in html

    third = cli("eval", "-m", "fake", "--suites", "llmrec", "-o", str(out), "--gen-seed", "7", "--temperature",
                "0.3", "--max-tokens", "64", "--system-prompt", str(prompt))
    assert "nothing to answer (no model call) · 6 references already trained" in third.stderr
    assert [json.loads(x)["command"].split()[1] for x in
            (run / "commands.jsonl").read_text().splitlines()][-2:] == ["eval", "score"]


def test_generation_settings_skip_tasks_that_drive_the_model_themselves(ml1m, tmp_path):
    """eval --temperature on a suite whose task makes its own calls (PerRecBench list) runs, and says the
    settings do not apply there, instead of failing the whole evaluation."""
    from typer.testing import CliRunner

    from recharness.cli import app

    res = CliRunner().invoke(app, ["eval", "-m", "fake", "--suites", "perrecbench", "--temperature", "0.7",
                                   "--no-train-references", "--out", str(tmp_path / "ev")])
    assert res.exit_code == 0, res.output
    assert "so the generation settings and system prompt given are not used anywhere in perrecbench" in \
        " ".join(res.output.split())


def test_a_kept_reference_whose_settings_changed_in_the_code_is_fitted_again():
    """A reference's answers are kept when its stamp matches; an untuned one is also checked against the settings
    its class gives now (a changed default would otherwise be reported under the old model's name)."""
    from recharness.baselines import BASELINES
    from recharness.runner.train import _settings_changed

    now = json.loads(json.dumps(BASELINES.get("ease").create(seed=0).identity(), default=str))
    untuned = {"tune_trials": 0}
    assert not _settings_changed("ease", 0, {"model": now}, untuned)
    old = {**now, "settings": {**now["settings"], "l2": 123.0}}
    assert _settings_changed("ease", 0, {"model": old}, untuned)
    assert not _settings_changed("ease", 0, {"model": old}, {"tune_trials": 20})  # a search chose them


def test_a_setting_fit_decides_is_no_change_of_settings():
    """SASRec's max_len is None unfitted and the data's longest history once fitted (its records say 20): a kept
    SASRec is not fitted again for it (every `train` re-run refitted the SASRec family, minutes each); another
    value of a setting the class fixes still is a change."""
    from recharness.baselines import BASELINES
    from recharness.runner.train import _settings_changed

    untuned = {"tune_trials": 0}
    for name in ("sasrec", "sid-sasrec"):
        now = json.loads(json.dumps(BASELINES.get(name).create(seed=0).identity(), default=str))
        assert now["settings"]["max_len"] is None
        fitted = {**now, "settings": {**now["settings"], "max_len": 20}}
        assert not _settings_changed(name, 0, {"model": fitted}, untuned)
        other = {**fitted, "settings": {**fitted["settings"], "hidden": fitted["settings"]["hidden"] + 1}}
        assert _settings_changed(name, 0, {"model": other}, untuned)
        fewer = {**fitted, "settings": {k: v for k, v in fitted["settings"].items() if k != "hidden"}}
        assert _settings_changed(name, 0, {"model": fewer}, untuned)
    # a setting None unfitted that fit does not decide (SASRec's stride): another recorded value is a change
    now = json.loads(json.dumps(BASELINES.get("sasrec").create(seed=0).identity(), default=str))
    assert now["settings"]["stride"] is None
    strided = {**now, "settings": {**now["settings"], "max_len": 20, "stride": 1}}
    assert _settings_changed("sasrec", 0, {"model": strided}, untuned)


def test_eval_leaves_a_reference_out_of_a_suite_none_of_whose_tasks_ask_it(ml1m, tmp_path):
    """-m baseline:popularity over PerRecBench (no task asks a ranker): that suite is left out with one line, and
    eval goes on to its report (it stopped there with a ConfigError)."""
    from typer.testing import CliRunner

    from recharness.cli import app

    res = CliRunner().invoke(app, ["eval", "-m", "baseline:popularity", "--suites", "perrecbench",
                                   "--no-train-references", "--out", str(tmp_path / "ev")])
    assert res.exit_code == 0, res.output
    assert "baseline:popularity answers none of its tasks" in " ".join(res.output.split())


def test_a_tuned_reference_is_tuned_again_when_its_search_space_changes(ml1m, tmp_path, monkeypatch):
    """A tuned model is kept on a second `train --tune N` only when its search is the same: a range changed in the
    code (ALS's alpha 0.5-50 became 1-50) was kept with the old space's choice, reported as tuned with N trials."""
    from recharness.baselines.markov import Markov
    from recharness.core.io import read_jsonl
    from recharness.core.rundir import RunDir
    from recharness.runner import pipeline
    from recharness.runner.train import train

    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=6)
    said: list[str] = []
    train(out, suite="llmrec", baselines=["markov"], latency_runs=1, tune=2, progress=said.append)
    first = next(iter(read_jsonl(RunDir(out).reference("markov"))))
    assert first["tune_trials"] == 2 and len(first["tune_space"]) == 16
    said.clear()
    train(out, suite="llmrec", baselines=["markov"], latency_runs=1, tune=2, progress=said.append)
    assert any("kept: markov" in m for m in said), said  # the same search: kept
    monkeypatch.setattr(Markov, "space", {"order": ("int", 1, 3), "decay": ("float", 0.1, 0.5)})
    said.clear()
    train(out, suite="llmrec", baselines=["markov"], latency_runs=1, tune=2, progress=said.append)
    assert not any("kept: markov" in m for m in said), said
    again = next(iter(read_jsonl(RunDir(out).reference("markov"))))
    assert again["tune_space"] != first["tune_space"]
    assert 1 <= again["model"]["settings"]["order"] <= 3 and 0.1 <= again["model"]["settings"]["decay"] <= 0.5

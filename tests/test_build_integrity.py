"""A build's samples file is checked before every stage reads it; a predictions file answers each sample
once; a build that keeps no sample says so. Through the CLI as a user runs it: one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recharness.core.errors import InputError
from recharness.core.rundir import RunDir, file_sha256
from recharness.runner import pipeline


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recharness", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def built(ml1m, tmp_path):
    d = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", d, tasks=["sequential"], seed=0, limit=6)
    return d


def test_build_records_the_samples_files_hash_and_count(built):
    info = json.loads((built / "build.json").read_text())
    assert info["samples_count"] == 6 and info["samples_sha256"] == file_sha256(built / "samples.jsonl")


@pytest.mark.parametrize("damage", ["truncate", "empty", "duplicate"])
def test_a_changed_samples_file_is_refused_by_run_and_score(built, damage):
    path = built / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text({"truncate": "".join(lines[:-1]), "empty": "",
                     "duplicate": "".join(lines + lines[-1:])}[damage])
    with pytest.raises(InputError, match="changed since `build` wrote it") as e:
        RunDir(built).load_build()
    assert f"{len(lines)} built" in str(e.value)
    for stage in (["run", "llmrec", "-o", str(built), "-m", "fake"], ["score", "llmrec", "-o", str(built)]):
        p = cli(*stage)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "samples.jsonl: changed since `build` wrote it" in " ".join(p.stderr.split())
    assert not (built / "predictions" / "fake.jsonl").exists()  # nothing was answered


def test_a_duplicated_sample_id_is_refused_with_its_lines(built):
    info = json.loads((built / "build.json").read_text())
    for k in ("samples_sha256", "samples_count"):  # a build from before the hash was recorded
        info.pop(k)
    (built / "build.json").write_text(json.dumps(info))
    path = built / "samples.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[1:2]))
    with pytest.raises(InputError, match=r"line 7, field 'id': sample id .* again \(first on line 2\)"):
        RunDir(built).load_build()


def test_an_answer_twice_in_a_predictions_file_is_refused_by_score(built):
    from recharness.models.fake import FakeBackend

    path, _ = pipeline.run(built, FakeBackend("fake"), "fake", use_cache=False)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + lines[:1]))
    p = cli("score", "llmrec", "-o", str(built))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    msg = " ".join(p.stderr.split())
    assert "fake.jsonl, line 7, field 'id': sample" in msg and "is answered twice (first on line 1)" in msg


def test_a_build_that_keeps_no_sample_exits_2_naming_the_task(ml1m, tmp_path):
    p = cli("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-o", str(tmp_path / "run"), "-n", "5",
            "--option", "min_history=100000")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    msg = " ".join(p.stderr.split())
    # the filter that removed every user, with its numbers (ML-1M's longest history: 2,314 ratings)
    assert "0 samples: sequential: min_history=100000 keeps 0 of 6040 users" in msg, msg
    assert "the longest history here has 2314" in msg
    assert not (tmp_path / "run" / "samples.jsonl").exists()


def test_resuming_a_method_with_another_model_is_refused_and_overwrite_starts_afresh(built):
    pred = built / "predictions" / "m.jsonl"
    first = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "m", "-n", "3")
    assert first.returncode == 0, first.stderr
    before = pred.read_text()
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake:other", "--name", "m")
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "holds the answers of another model" in msg and '"model": "fake"' in msg and '"model": "other"' in msg
    assert "--overwrite" in msg and pred.read_text() == before  # nothing mixed in
    again = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "m")  # the same model resumes
    assert again.returncode == 0, again.stderr
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake:other", "--name", "m", "--overwrite")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in pred.read_text().splitlines()]
    assert len(recs) == 6 and {r["model"]["model"] for r in recs} == {"other"}


def test_a_limited_run_is_scored_on_its_samples_and_a_cut_one_only_with_partial(built):
    from recharness.models.fake import FakeBackend
    from recharness.tasks.llmrec.sequential import SequentialTask

    _, samples = pipeline.load_build(built)
    pipeline.run(built, FakeBackend("fake"), "lim", limit=3, use_cache=False)
    row = next(r for r in pipeline.score(built, resamples=0) if r.method == "lim")
    recs = {r["id"]: r for r in map(json.loads, (built / "predictions" / "lim.jsonl").read_text().splitlines())}
    assert row.n == 3 and row.coverage == {"answered": 3, "of": 6, "why": "limit"}
    assert row.metrics["NDCG@10"] == pytest.approx(SequentialTask().score(samples[:3], recs)["NDCG@10"])
    # a full run cut short (killed, file truncated): refused, then scored on what it has with --partial
    path, _ = pipeline.run(built, FakeBackend("fake"), "cut", use_cache=False)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
    p = cli("score", "llmrec", "-o", str(built))
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "cut: 2 of 6 sequential samples answered" in msg and "--partial" in msg, p.stderr
    p = cli("score", "llmrec", "-o", str(built), "--partial")
    assert p.returncode == 0, p.stderr
    rows = {r["method"]: r for r in json.loads((built / "scores.json").read_text())}
    assert rows["cut"]["n"] == 2 and rows["cut"]["coverage"] == {"answered": 2, "of": 6, "why": "partial"}
    assert rows["lim"]["coverage"]["why"] == "limit" and rows["popularity"]["coverage"] is None
    assert rows["popularity"]["n"] == 6
    md, csv = (built / "scores.md").read_text(), (built / "scores.csv").read_text()
    assert "cut [partial: n = 2 of 6]" in md and "lim [limit: n = 3 of 6]" in md  # every table says what a row covers
    assert "sequential,cut,model,2,partial: n = 2 of 6," in csv and "sequential,lim,model,3,limit: n = 3 of 6," in csv


def test_scores_are_written_as_one_set_and_a_killed_writers_temp_files_go(built):
    from recharness.core.io import write_set
    from recharness.report.tables import write_scores

    stale = built / ".scores.json.99999.tmp"  # what a writer killed mid-way leaves
    stale.write_text("{")
    paths = write_scores(pipeline.score(built, resamples=0), built)
    assert not stale.exists() and not list(built.glob(".scores.*.tmp"))
    assert json.loads(paths["json"].read_text()) and paths["md"].read_text().startswith("###")
    with pytest.raises(IsADirectoryError):  # one file cannot be staged: none is replaced
        (built / "b.txt").mkdir()
        write_set({built / "a.txt": "new", built / "b.txt": "new"})
    assert not (built / "a.txt").exists() and not list(built.glob(".a.txt.*.tmp"))


def test_a_reference_whose_training_did_not_finish_is_named(ml1m, tmp_path):
    d = tmp_path / "ctr"
    pipeline.build("recbench", "ml-1m", d, tasks=["ctr"], seed=0, limit=4, options={"train_pairs": 2000})
    (d / "models" / "dnn").mkdir(parents=True)  # `train -b dnn` was killed before it wrote predictions
    rows = pipeline.score(d, resamples=0)
    assert rows[0].extra["unfinished_references"] == ["dnn"]
    p = cli("score", "recbench", "-o", str(d), "--resamples", "0")
    assert p.returncode == 0 and "reference dnn has a model folder but no predictions" in " ".join(p.stderr.split())


def test_generation_settings_and_a_system_prompt_are_part_of_the_run(built, tmp_path):
    from recharness.core.types import Completion
    from recharness.models.base import ModelBackend

    class Recording(ModelBackend):
        backend = "rec"
        seen: list = []

        async def agenerate(self, messages, params):
            Recording.seen.append((messages, params))
            return Completion(text="1. Toy Story (1995)")

    path, _ = pipeline.run(built, Recording("r"), "r", use_cache=False, generation={"temperature": 0.7, "max_tokens": 20},
                           system_prompt="You are a film critic.")
    messages, params = Recording.seen[0]
    assert messages[0] == {"role": "system", "content": "You are a film critic."} and messages[1]["role"] == "user"
    assert (params.temperature, params.max_tokens) == (0.7, 20)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert all(r["params"]["temperature"] == 0.7 and r["params"]["max_tokens"] == 20 for r in recs)
    (tmp_path / "sys.txt").write_text("You are a film critic.")
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r2", "--temperature", "0.7", "-n", "2")
    assert p.returncode == 0, p.stderr
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r2", "--temperature", "0.2")
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "answers were made with" in msg and '"temperature": 0.7' in msg, p.stderr
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r3", "--system-prompt", str(tmp_path / "sys.txt"),
            "--top-p", "0.9")
    assert p.returncode == 0, p.stderr

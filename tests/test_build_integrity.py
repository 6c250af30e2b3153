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


def _most(df, by: str = "user_id") -> tuple[int, int]:
    counts = df.group_by(by).len()["len"]
    return counts.len(), int(counts.max())


@pytest.mark.parametrize("suite, task, option", [
    ("recbench", "ctr", "test_pairs_per_user=100000"),
    ("recbench", "ctr", "min_history=100000"),
    ("recbench", "seqrec", "min_history=100000"),
    ("perrecbench", "point", "gamma=100000"),
    ("perrecbench", "list", "lambda=10"),
    ("recbench-plus", "interest", "interest_support=100000"),
])
def test_a_build_of_another_suite_that_keeps_no_sample_names_the_filter(ml1m, tmp_path, suite, task, option):
    import polars as pl

    p = cli("build", suite, "-d", "ml-1m", "-t", task, "-o", str(tmp_path / "run"), "-n", "5", "--option", option)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    msg = " ".join(p.stderr.split())
    assert f"build {suite} on ml-1m: 0 samples: " in msg and "yielded 0 samples" not in msg, msg  # not the generic one
    r = ml1m.interactions
    if task == "ctr":  # ML-1M's labelled pairs: ratings other than 3 (a 3 is dropped), per user
        users, most = _most(r.filter(pl.col("rating") != 3))
        assert (users, most) == (6040, 1556)
        if option.startswith("test_pairs"):
            assert (f"ctr: test_pairs_per_user=100000 keeps 0 of the {users} users with labelled pairs (a test user "
                    f"needs that many; the most any user has is {most})") in msg, msg
        else:
            assert (f"ctr: min_history=100000 keeps 0 of the {users} users with 4 labelled pairs (a test user needs "
                    "that many positives before their test pairs; the most here is 1431)") in msg, msg
    elif task == "seqrec":  # positives: ratings above 3
        users, most = _most(r.filter(pl.col("rating") > 3))
        assert (users, most) == (6038, 1435)
        assert (f"seqrec: min_history=100000 keeps 0 of the {users} users with positives (a test user needs "
                f"min_history positives before their validation target, min_history + 2 in all; the most here is "
                f"{most})") in msg, msg
    elif option.startswith("gamma"):  # ML-1M's 1,000,209 ratings; the longest history (2,314) has 2,313 before its last
        assert (f"perrecbench: gamma=100000 keeps 0 of the {r.height} ratings (a member needs more than gamma ratings "
                "before it; the most here is 2313)") in msg, msg
    elif task == "list":  # ratings are 1-5: no two relative ratings differ by more than 10
        assert "perrecbench: none of the " in msg and "items with 2 or more raters (gamma=20) has 2 of them within " \
            "window_days=7 whose relative ratings differ by more than lambda=10" in msg, msg
    else:
        assert ("interest: no sequence of interest_len=3 items is shared by interest_support=100000 of the 6040 "
                "users") in msg, msg
    assert not (tmp_path / "run" / "samples.jsonl").exists()


def test_a_review_task_that_keeps_no_sample_names_the_filter(ml1m, tmp_path):
    p = cli("build", "llmrec", "-d", "ml-1m", "-t", "rating", "-o", str(tmp_path / "run"), "-n", "5",
            "--option", "min_history=100000")
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert ("0 samples: rating: min_history=100000 keeps 0 of 6040 users (a user needs more than min_history "
            "interactions; the longest history here has 2314)") in msg, msg


def test_review_tasks_name_the_review_field_their_targets_lack():
    """Three users with three interactions each (min_history=2 keeps all); the last (held-out) one is the target:
    u1's has a review text and no title, u2's and u3's have neither (None, blank); no target is rated."""
    import polars as pl

    from recharness.core.types import BuildConfig
    from recharness.data.store import Dataset
    from recharness.tasks.llmrec.explanation import ExplanationTask
    from recharness.tasks.llmrec.rating import RatingTask
    from recharness.tasks.llmrec.summarization import SummarizationTask

    users = [u for u in ("u1", "u2", "u3") for _ in range(3)]
    text = ["a", "b", "fine film", "c", "d", None, "e", "f", "   "]
    inter = pl.DataFrame({"user_id": users, "item_id": [f"i{k}" for k in range(9)],
                          "rating": [4.0, 5.0, None] * 3, "timestamp": list(range(9)),
                          "review_title": ["t", "t", None] * 3, "review_text": text})
    ds = Dataset("tiny", inter, pl.DataFrame({"item_id": [f"i{k}" for k in range(9)], "title": ["x"] * 9}),
                 pl.DataFrame({"user_id": ["u1", "u2", "u3"]}))
    config = BuildConfig(options={"min_history": 2})
    summ, expl, rating = SummarizationTask(), ExplanationTask(), RatingTask()
    assert [list(t.build(ds, config)) for t in (summ, expl, rating)] == [[], [], []]
    assert summ.why_empty(ds, config) == (
        "summarization: none of the 3 users with more than min_history=2 interactions, 1 with a review_text has a "
        "review_title on their held-out last interaction (the target needs one): use a dataset with reviews for "
        "them, or lower --option min_history")
    assert expl.why_empty(ds, config) == (
        "explanation: none of the 3 users with more than min_history=2 interactions, 1 with a review_text has a rating "
        "on their held-out last interaction (implicit feedback): use a dataset with explicit ratings")
    assert rating.why_empty(ds, config) == (
        "rating: none of the 3 users with more than min_history=2 interactions has a rating on their held-out last "
        "interaction (implicit feedback): use a dataset with explicit ratings")
    assert rating.why_empty(ds, BuildConfig(options={"min_history": 3})).startswith(
        "rating: min_history=3 keeps 0 of 3 users (a user needs more than min_history interactions; the longest "
        "history here has 3)")


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


def test_overwrite_forgets_what_the_replaced_answers_covered(built):
    """A full run, then `--overwrite --limit 2`: the new run covers 2 samples on purpose. The replaced run's
    record (limit: none) was merged into the new one, so `score` refused the row as 2 of 6 answered."""
    from recharness.models.fake import FakeBackend

    pipeline.run(built, FakeBackend("fake"), "m", use_cache=False)
    pipeline.run(built, FakeBackend("fake"), "m", use_cache=False, overwrite=True, limit=2)
    row = next(r for r in pipeline.score(built, resamples=0) if r.method == "m")
    assert row.n == 2 and row.coverage == {"answered": 2, "of": 6, "why": "limit"}, row.coverage


def test_an_exported_gguf_without_its_sidecar_still_names_its_build(ml1m, tmp_path):
    """The guard read the `.gguf.json` sidecar only: a copied .gguf without it passed on any build. What
    export-gguf embeds in the file (the llama.cpp backend's identity) now carries the dataset and build."""
    from recharness.core.errors import ConfigError
    from recharness.finetune.gguf import identity_of
    from recharness.models.fake import FakeBackend

    a, b = tmp_path / "a", tmp_path / "b"
    fa = pipeline.build("llmrec", "ml-1m", a, tasks=["sequential"], seed=0, limit=3)["fingerprint"]
    pipeline.build("llmrec", "ml-1m", b, tasks=["sequential"], seed=1, limit=3)
    ft = tmp_path / "ft"
    ft.mkdir()
    (ft / "finetune.json").write_text(json.dumps({"base": "x", "dataset": "ml-1m", "build": fa, "weights": "w",
                                                  "merge": {"sources": [{"dir": "s", "dataset": "ml-1m", "build": fa}]}}))
    ident = identity_of(ft, "f16", "1")
    assert ident["dataset"] == "ml-1m" and ident["build"] == fa and ident["merge"]["sources"][0]["build"] == fa

    class Gguf(FakeBackend):  # a GGUF file with no sidecar: its identity is all there is
        def identity(self):
            return {**super().identity(), "finetune": ident}

    g = Gguf("fake")
    g.model_path = str(tmp_path / "copied.gguf")
    with pytest.raises(ConfigError, match=f"fine-tuned on another build of ml-1m \\(build {fa}"):
        pipeline.run(b, g, "g", use_cache=False)


def test_two_runs_limited_to_other_tasks_are_each_scored_on_their_limit(ml1m, tmp_path):
    """`run --task direct --limit 1`, then `run --task sequential --limit 1`: the record merged them into "the
    first 1 of both tasks", which holds no direct sample, and `score` refused the direct row as unfinished."""
    from recharness.models.fake import FakeBackend

    d = tmp_path / "r"
    pipeline.build("llmrec", "ml-1m", d, tasks=["sequential", "direct"], seed=0, limit=2)
    pipeline.run(d, FakeBackend("fake"), "m", use_cache=False, tasks=["direct"], limit=1)
    pipeline.run(d, FakeBackend("fake"), "m", use_cache=False, tasks=["sequential"], limit=1)
    rows = {r.task: r for r in pipeline.score(d, resamples=0) if r.method == "m"}
    assert {t: r.coverage for t, r in rows.items()} == {
        "sequential": {"answered": 1, "of": 2, "why": "limit"}, "direct": {"answered": 1, "of": 2, "why": "limit"}}
    # a record from before the asks were kept (limit and tasks only): its own ask is kept when the next run adds one
    rec = d / "predictions" / "old.run.json"
    pipeline.run(d, FakeBackend("fake"), "old", use_cache=False, tasks=["direct"], limit=1)
    rec.write_text(json.dumps({k: v for k, v in json.loads(rec.read_text()).items() if k != "asks"}))
    pipeline.run(d, FakeBackend("fake"), "old", use_cache=False, tasks=["sequential"], limit=1)
    rows = {r.task: r for r in pipeline.score(d, resamples=0) if r.method == "old"}
    assert {r.coverage["why"] for r in rows.values()} == {"limit"}


def test_an_answer_twice_in_a_predictions_file_is_refused_by_run(built):
    pred = built / "predictions" / "fake.jsonl"
    first = cli("run", "llmrec", "-o", str(built), "-m", "fake", "-n", "3")
    assert first.returncode == 0, first.stderr
    lines = pred.read_text().splitlines(keepends=True)
    twice = json.loads(lines[1])["id"]
    pred.write_text("".join(lines + lines[1:2]))  # concatenated or edited: line 4 answers line 2's sample again
    before, record = pred.read_text(), (built / "predictions" / "fake.run.json").read_text()
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    msg = " ".join(p.stderr.split())
    assert f"fake.jsonl, line 4, field 'id': sample {twice!r} is answered twice (first on line 2)" in msg, msg
    assert pred.read_text() == before  # nothing answered into it
    assert (built / "predictions" / "fake.run.json").read_text() == record  # nor its run record widened
    from recharness.models.fake import FakeBackend

    with pytest.raises(InputError, match=rf"line 4, field 'id': sample '{twice}' is answered twice "
                                         r"\(first on line 2\)"):
        pipeline.run(built, FakeBackend("fake"), "fake", use_cache=False)
    assert pred.read_text() == before


def test_a_run_records_its_prompt_versions_and_a_resume_under_another_is_refused(built, monkeypatch):
    import recharness
    from recharness.core.errors import ConfigError
    from recharness.models.fake import FakeBackend
    from recharness.tasks.llmrec.sequential import SequentialTask

    path, _ = pipeline.run(built, FakeBackend("fake"), "m", limit=3, use_cache=False)
    record = json.loads((built / "predictions" / "m.run.json").read_text())
    assert record["prompt_versions"] == {"sequential": "1"} and record["harness_version"] == recharness.__version__
    assert [json.loads(x)["prompt_version"] for x in path.read_text().splitlines()] == ["1", "1", "1"]
    before = path.read_text()
    monkeypatch.setattr(SequentialTask, "prompt_version", "2")  # the task's prompt changed since
    with pytest.raises(ConfigError) as e:
        pipeline.run(built, FakeBackend("fake"), "m", use_cache=False)
    assert (f"m's answers were asked with sequential prompt version 1 (recharness {recharness.__version__}), not "
            f"sequential prompt version 2 (recharness {recharness.__version__})") in str(e.value)
    assert "another --name" in str(e.value) and "--overwrite" in str(e.value)
    assert path.read_text() == before  # no answer to the new prompt mixed in
    pipeline.run(built, FakeBackend("fake"), "m", use_cache=False, overwrite=True)  # afresh, under version 2
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 6 and {r["prompt_version"] for r in recs} == {"2"}
    assert json.loads((built / "predictions" / "m.run.json").read_text())["prompt_versions"] == {"sequential": "2"}


def test_a_resume_is_refused_for_another_prompt_version_not_for_another_harness_version(built):
    pred, record = built / "predictions" / "fake.jsonl", built / "predictions" / "fake.run.json"
    assert cli("run", "llmrec", "-o", str(built), "-m", "fake", "-n", "2").returncode == 0
    rec = json.loads(record.read_text())
    # a run made by another recharness whose prompts were the same: resumes
    record.write_text(json.dumps({**rec, "harness_version": "0.0.9"}))
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "-n", "3")
    assert p.returncode == 0, p.stderr
    assert len(pred.read_text().splitlines()) == 3
    # a run file from before prompt versions were recorded: unknown, resumes (and records them now)
    record.write_text(json.dumps({k: v for k, v in rec.items() if k not in ("prompt_versions", "harness_version")}))
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "-n", "4")
    assert p.returncode == 0, p.stderr
    assert json.loads(record.read_text())["prompt_versions"] == {"sequential": "1"}
    # a run asked with an older prompt of the task: refused, both versions named
    record.write_text(json.dumps({**json.loads(record.read_text()), "prompt_versions": {"sequential": "0"},
                                  "harness_version": "0.0.9"}))
    before = pred.read_text()
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake")
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert ("fake's answers were asked with sequential prompt version 0 (recharness 0.0.9), not sequential prompt "
            "version 1 (recharness ") in msg, msg
    assert "another --name to keep both, or --overwrite" in msg and pred.read_text() == before


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
    # format retries decide which answers stand invalid: a resume with others is refused too (it mixed them)
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r4", "--max-retries", "0", "-n", "2")
    assert p.returncode == 0, p.stderr
    p = cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r4", "--max-retries", "3")
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and '"max_retries": 0' in msg, p.stderr
    # a run record from before max_retries was recorded resumes (unknown there, not a refusal)
    rec = built / "predictions" / "r4.run.json"
    old = json.loads(rec.read_text())
    old["settings"].pop("max_retries")
    rec.write_text(json.dumps(old))
    assert cli("run", "llmrec", "-o", str(built), "-m", "fake", "--name", "r4", "--max-retries", "3").returncode == 0


def test_a_run_refused_before_its_first_answer_leaves_the_run_record_as_it_was(built):
    """A run is recorded (`<method>.run.json`: its limit, settings, prompt versions) only once its first answer
    is written: a second run stopped by the first one's lock, or a run whose endpoint refuses every request,
    used to widen the record (limit 3 -> all), and `score` then refused the answers the first run made."""
    from recharness.core.errors import EndpointRefused
    from recharness.core.io import GroupCommitLog
    from recharness.models.fake import FakeBackend

    pipeline.run(built, FakeBackend("fake"), "m", limit=3, use_cache=False)
    record = built / "predictions" / "m.run.json"
    before = record.read_text()
    assert json.loads(before)["limit"] == 3
    from recharness.core.io import FileLocked

    with GroupCommitLog(built / "predictions" / "m.jsonl"), pytest.raises(FileLocked):  # another run writes it
        pipeline.run(built, FakeBackend("fake"), "m", use_cache=False)
    assert record.read_text() == before

    class Refusing(FakeBackend):
        async def agenerate(self, messages, params):
            raise EndpointRefused("HTTP 401: bad key", 401)

    with pytest.raises(EndpointRefused):
        pipeline.run(built, Refusing("fake"), "m", use_cache=False)
    assert record.read_text() == before
    # a first run refused at once leaves no record, so a corrected run with other settings is not refused
    with pytest.raises(EndpointRefused):
        pipeline.run(built, Refusing("fake"), "r", use_cache=False)
    assert not (built / "predictions" / "r.run.json").exists()
    pipeline.run(built, FakeBackend("fake"), "r", use_cache=False, generation={"temperature": 0.7})
    assert json.loads((built / "predictions" / "r.run.json").read_text())["settings"]["generation"] == {"temperature": 0.7}


def test_a_build_leaves_a_predictions_file_a_run_is_writing_alone(built):
    """A `run` that opened its file while a `build` ran on the directory: the build re-stamped it as its own
    (answers of the earlier build passing as the new one's) and replaced it under the writer."""
    from recharness.core.io import GroupCommitLog
    from recharness.runner.pipeline import _stamp_imported_predictions

    pred = RunDir(built).predictions("m")
    pred.parent.mkdir(parents=True, exist_ok=True)
    pred.write_text(json.dumps({"id": "x", "build": "old"}) + "\n")
    log = GroupCommitLog(pred)  # a run holding the file
    try:
        _stamp_imported_predictions(built, "new", {})
        assert [json.loads(x)["build"] for x in pred.read_text().splitlines()] == ["old"]
    finally:
        log.close()
    _stamp_imported_predictions(built, "new", {})  # a builder's own file, no writer: stamped
    assert [json.loads(x)["build"] for x in pred.read_text().splitlines()] == ["new"]


def test_a_finetune_answers_only_the_build_it_was_carved_from(ml1m, tmp_path):
    """Its training examples are held out of its own build's test samples only: on another build of the same
    dataset (another seed or limit) they may hold that build's test answers. Refused, naming both builds; its own
    build, and another dataset, are answered."""
    from recharness.core.errors import ConfigError
    from recharness.models.fake import FakeBackend

    a, b = tmp_path / "a", tmp_path / "b"
    fa = pipeline.build("llmrec", "ml-1m", a, tasks=["sequential"], seed=0, limit=3)["fingerprint"]
    fb = pipeline.build("llmrec", "ml-1m", b, tasks=["sequential"], seed=1, limit=3)["fingerprint"]
    ft = tmp_path / "ft"
    ft.mkdir()
    (ft / "finetune.json").write_text(json.dumps({"dataset": "ml-1m", "build": fa, "run_dir": str(a)}))
    backend = FakeBackend("fake")
    backend.model = str(ft)
    with pytest.raises(ConfigError, match=f"fine-tuned on another build of ml-1m \\(build {fa}.*this run's is {fb}"):
        pipeline.run(b, backend, "ft", use_cache=False)
    assert not (b / "predictions" / "ft.jsonl").exists()
    _, stats = pipeline.run(a, backend, "ft", use_cache=False)
    assert stats.complete
    # an exported GGUF: the sidecar beside it repeats finetune.json
    gguf = tmp_path / "ft.gguf"
    gguf.write_bytes(b"")
    (tmp_path / "ft.gguf.json").write_text(json.dumps({"finetune.json": {"dataset": "ml-1m", "build": fa}}))
    g = FakeBackend("fake")
    g.model_path = str(gguf)
    with pytest.raises(ConfigError, match="fine-tuned on another build"):
        pipeline.run(b, g, "g", use_cache=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "finetune.json").write_text(json.dumps({"dataset": "amazon-x", "build": fa}))
    backend.model = str(other)
    _, stats = pipeline.run(b, backend, "o", use_cache=False)  # another dataset: nothing of this one in training
    assert stats.complete


def test_a_merge_of_two_builds_and_a_finetune_of_a_finetune_answer_neither_other_build(ml1m, tmp_path):
    """A merge of fine-tunes of two builds recorded no common build (None), and a fine-tune trained from another
    fine-tune recorded only its own: both passed the guard on a build whose test answers their weights saw."""
    from recharness.core.errors import ConfigError
    from recharness.finetune.api import base_finetune
    from recharness.models.fake import FakeBackend

    a, b = tmp_path / "a", tmp_path / "b"
    fa = pipeline.build("llmrec", "ml-1m", a, tasks=["sequential"], seed=0, limit=3)["fingerprint"]
    fb = pipeline.build("llmrec", "ml-1m", b, tasks=["sequential"], seed=1, limit=3)["fingerprint"]
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "finetune.json").write_text(json.dumps({"dataset": "ml-1m", "build": None, "merge": {"sources": [
        {"dir": "x", "dataset": "ml-1m", "build": fa}, {"dir": "y", "dataset": "ml-1m", "build": fb}]}}))
    backend = FakeBackend("fake")
    backend.model = str(merged)
    for run_dir, fp in ((a, fb), (b, fa)):
        with pytest.raises(ConfigError, match=rf"fine-tuned on another build of ml-1m \(build {fp}"):
            pipeline.run(run_dir, backend, "merged", use_cache=False)
    base = tmp_path / "base-ft"
    base.mkdir()
    (base / "finetune.json").write_text(json.dumps({"dataset": "ml-1m", "build": fa, "run_dir": str(a)}))
    chained = tmp_path / "chained"
    chained.mkdir()  # what `finetune` writes when its --model is that fine-tune: its origin kept
    (chained / "finetune.json").write_text(json.dumps({"dataset": "ml-1m", "build": fb,
                                                      "base_finetune": base_finetune(str(base))}))
    backend.model = str(chained)
    with pytest.raises(ConfigError, match=rf"\(build {fa}"):
        pipeline.run(b, backend, "chained", use_cache=False)


def test_a_task_with_no_answer_at_all_is_refused_like_any_other_gap(ml1m, tmp_path):
    """A full run whose file holds no line of one task (killed before it, lines lost): refused, "0 of 3 direct"
    (before, the task's row was silently missing from scores.json, exit 0); `--partial` scores the other task and
    warns; a run limited to the other task (`--task`) is no gap."""
    from recharness.models.fake import FakeBackend

    out = tmp_path / "two"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential", "direct"], seed=0, limit=3)
    path, _ = pipeline.run(out, FakeBackend("fake"), "cut", use_cache=False)
    lines = [x for x in path.read_text().splitlines(keepends=True) if json.loads(x)["task"] == "sequential"]
    path.write_text("".join(lines))
    p = cli("score", "llmrec", "-o", str(out))
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "cut: 0 of 3 direct samples answered" in msg and "--partial" in msg, p.stderr
    p = cli("score", "llmrec", "-o", str(out), "--partial")
    assert p.returncode == 0, p.stderr
    assert {(r["task"], r["method"]) for r in json.loads((out / "scores.json").read_text())} >= {("sequential", "cut")}
    pipeline.run(out, FakeBackend("fake"), "seq", use_cache=False, tasks=["sequential"])
    (out / "predictions" / "cut.jsonl").unlink()
    (out / "predictions" / "cut.run.json").unlink()
    assert {r.method for r in pipeline.score(out, resamples=0) if r.task == "sequential"} >= {"seq"}


def test_report_refuses_samples_changed_after_scoring(ml1m, tmp_path):
    """report.html shows example answers beside their samples: samples edited after `score` were shown beside scores
    of the built ones (before: a report written anyway)."""
    from recharness.models.fake import FakeBackend

    out = tmp_path / "rep"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=3)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    assert cli("score", "llmrec", "-o", str(out), "--resamples", "0").returncode == 0
    path = out / "samples.jsonl"
    first, *rest = path.read_text().splitlines(keepends=True)
    edited = {**json.loads(first), "target": "9999"}
    path.write_text(json.dumps(edited) + "\n" + "".join(rest))
    p = cli("report", "llmrec", "-o", str(out))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "samples.jsonl: changed since `build` wrote it" in " ".join(p.stderr.split())


def test_a_record_naming_no_prompt_of_a_task_is_not_refused_for_it(ml1m, tmp_path):
    """A reference run through `run -m baseline:X` (its record from before 2026-11-28 said tasks: all) answers only
    the tasks that ask it: its record names no prompt of the others, so no "0 of M answered" for them."""
    from recharness.models.fake import FakeBackend

    out = tmp_path / "old"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential", "direct"], seed=0, limit=3)
    path, _ = pipeline.run(out, FakeBackend("fake"), "ref", use_cache=False)
    path.write_text("".join(x for x in path.read_text().splitlines(keepends=True) if json.loads(x)["task"] == "sequential"))
    record = out / "predictions" / "ref.run.json"
    rec = json.loads(record.read_text())
    rec["prompt_versions"] = {"sequential": rec["prompt_versions"]["sequential"]}
    record.write_text(json.dumps(rec))
    assert {r.method for r in pipeline.score(out, resamples=0) if r.task == "sequential"} >= {"ref"}



@pytest.mark.parametrize("edit, says", [
    (lambda r: {**r, "valid": "false"}, 'line 2, field \'valid\': valid is "false", not true or false'),
    (lambda r: {**r, "parsed": {**r["parsed"], "items": "1061"}}, "line 2, field 'parsed.items': parsed.items is "
                                                                   '"1061", not a list'),
    (lambda r: {**r, "id": "sequential-nobody"}, "field 'id': the record of 'sequential-nobody' (task 'sequential') "
                                                 "answers no sample of this build"),
])
def test_a_hand_edited_record_of_the_wrong_type_or_sample_is_named_by_score(built, edit, says):
    """"valid": "false" scored as a valid answer (a hit), "items": "1061" gave matched_share 2.333, a record of no
    sample was dropped without a word (the review of 2026-11-29)."""
    from recharness.models.fake import FakeBackend

    path, _ = pipeline.run(built, FakeBackend("fake"), "fake", use_cache=False)
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = json.dumps(edit(json.loads(lines[1]))) + "\n"
    path.write_text("".join(lines))
    p = cli("score", "llmrec", "-o", str(built))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert says in " ".join(p.stderr.split()), p.stderr


@pytest.mark.parametrize("key, value, says", [
    ("tasks", [1], "field 'tasks': [1] is not a list of task names"),
    ("options", [1], "field 'options': [1] is not an object of options"),
    ("dataset", ["ml-1m"], "field 'dataset': [\"ml-1m\"] is not a dataset's name or path"),
    ("samples_sha256", 5, "field 'samples_sha256': 5 is not a sha256 in hex"),
    ("seed", "abc", "field 'seed': \"abc\" is not a whole number >= 0"),
])
def test_an_edited_build_json_is_named_by_field(built, key, value, says):
    """Each was a TypeError traceback, or (seed, limit) taken as it was (the review of 2026-11-29)."""
    info = json.loads((built / "build.json").read_text())
    (built / "build.json").write_text(json.dumps({**info, key: value}))
    p = cli("score", "llmrec", "-o", str(built))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert says in " ".join(p.stderr.split()), p.stderr


def test_a_sample_id_that_is_not_text_is_named(built):
    info = json.loads((built / "build.json").read_text())
    (built / "build.json").write_text(json.dumps({k: v for k, v in info.items() if k != "samples_sha256"}))
    lines = (built / "samples.jsonl").read_text().splitlines(keepends=True)
    lines[2] = json.dumps({**json.loads(lines[2]), "id": ["x"]}) + "\n"
    (built / "samples.jsonl").write_text("".join(lines))
    with pytest.raises(InputError, match=r"line 3, field 'id': \[\"x\"\] is not text"):
        RunDir(built).load_build()


@pytest.mark.parametrize("record, says", [
    ({"limit": "abc", "tasks": None}, "field 'limit': \"abc\" is not null or a whole number >= 1"),
    ({"limit": -1, "tasks": None}, "field 'limit': -1 is not null or a whole number >= 1"),
    ({"asks": [{"limit": 2, "tasks": 5}]}, "field 'asks[0].tasks': 5 is not null or a list of task names"),
    ([1], "expected a JSON object"),
    ({"imported": "no", "limit": None}, "field 'imported': \"no\" is not true or false"),
])
def test_an_edited_run_record_is_named_by_field(built, record, says):
    """A run cut short with its run record edited: a traceback (limit "abc", a list), or the gap taken for a
    limited or imported row (limit -1, imported "no") where it must be refused (the review of 2026-11-29)."""
    from recharness.models.fake import FakeBackend

    path, _ = pipeline.run(built, FakeBackend("fake"), "fake", use_cache=False)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # one answer lost
    (built / "predictions" / "fake.run.json").write_text(json.dumps(record))
    p = cli("score", "llmrec", "-o", str(built))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "fake.run.json" in p.stderr and says in " ".join(p.stderr.split()), p.stderr

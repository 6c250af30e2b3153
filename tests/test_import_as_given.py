"""`score --predictions F --targets as-given`: each imported line scored against its own target / candidates
(ids or titles), that row only; the build and every other method's row stay as they were."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions


def _write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _row(rows, method, task):
    return next(r for r in rows if r.method == method and r.task == task)


@pytest.fixture()
def seq_run(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=4)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    samples = list(read_jsonl(out / "samples.jsonl"))
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    return out, samples, titles


def _seq_lines(samples, titles):
    """s0/s1 name `other` and say it is their target (by id, by title); s2 names its build target and gives
    none; s3 names `other` but says its target is `third`."""
    targets = {s["target"] for s in samples}
    seen = set().union(*(s["seen"] for s in samples))
    other, third = [i for i in titles if i not in targets and i not in seen][:2]
    s0, s1, s2, s3 = samples
    return [{"id": s0["id"], "answer": f"1. {titles[other]}", "target": other},
            {"id": s1["id"], "answer": f"1. {titles[other]}", "target": titles[other]},
            {"id": s2["id"], "answer": f"1. {titles[s2['target']]}"},
            {"id": s3["id"], "answer": f"1. {titles[other]}", "target": titles[third]}], other, third


def test_sequential_lines_are_scored_against_their_own_target(seq_run, tmp_path):
    out, samples, titles = seq_run
    before = hashlib.sha256((out / "samples.jsonl").read_bytes()).hexdigest()
    fake_before = _row(pipeline.score(out, resamples=0, references=False), "fake", "sequential").metrics
    lines, other, third = _seq_lines(samples, titles)
    src = _write(tmp_path / "a.jsonl", lines)

    import_predictions(out, src, "build-targets")
    rep = import_predictions(out, src, "own-targets", targets="as-given")
    assert rep["targets"] == "as-given" and rep["as_given"] == 3
    assert rep["differs"]["target"]["lines"] == 3
    recs = {r["id"]: r for r in read_jsonl(out / "predictions" / "own-targets.jsonl")}
    assert [recs[s["id"]].get("as_given") for s in samples] == [{"target": other}, {"target": other}, None,
                                                                 {"target": third}]
    assert recs[samples[0]["id"]]["model"]["targets"] == "as-given"

    rows = pipeline.score(out, resamples=0, references=False)
    assert _row(rows, "build-targets", "sequential").metrics["HR@10"] == 0.25  # only s2 names the build's target
    own = _row(rows, "own-targets", "sequential").metrics
    assert own["HR@10"] == 0.75 and own["HR@1"] == 0.75  # s0, s1 (own target named first) and s2; s3 misses
    assert own["NDCG@10"] == pytest.approx(0.75)
    # the build and the other methods are untouched
    assert hashlib.sha256((out / "samples.jsonl").read_bytes()).hexdigest() == before
    assert _row(rows, "fake", "sequential").metrics == fake_before


def test_direct_lines_parse_and_score_against_their_own_candidates(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=3, options={"n_candidates": 5})
    samples = list(read_jsonl(out / "samples.jsonl"))
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    lines = []
    for s in samples:
        # the authors' candidates: the build's reversed, given by title, the target moved to the front
        cands = [s["target"]] + [c for c in reversed(s["candidates"]) if c != s["target"]]
        lines.append({"id": s["id"], "answer": "1, 2, 3, 4, 5", "candidates": [titles[c] for c in cands],
                      "target": s["target"]})
    src = _write(tmp_path / "d.jsonl", lines)
    import_predictions(out, src, "build-targets")
    rep = import_predictions(out, src, "own", targets="as-given")
    assert rep["as_given"] == 3 and rep["differs"]["candidates"]["lines"] == 3
    rows = pipeline.score(out, resamples=0, references=False)
    own = _row(rows, "own", "direct").metrics
    assert own["HR@1"] == 1.0 and own["MRR"] == 1.0  # "1" is the line's own first candidate: its target
    built = _row(rows, "build-targets", "direct").metrics  # "1" is the build's first candidate
    expect = sum(s["candidates"][0] == s["target"] for s in samples) / 3
    assert built["HR@1"] == pytest.approx(expect) and expect < 1.0
    rec = next(iter(read_jsonl(out / "predictions" / "own.jsonl")))
    assert rec["parsed"]["ranking"][0] == samples[0]["target"]  # parsed against the line's candidates


def test_an_unresolvable_title_names_line_and_field(seq_run, tmp_path):
    out, samples, titles = seq_run
    src = _write(tmp_path / "bad.jsonl", [{"id": samples[0]["id"], "answer": "1. Heat (1995)"},
                                          {"id": samples[1]["id"], "answer": "1. Heat (1995)",
                                           "target": "No Such Film (1901)"}])
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: field \"target\": 'No Such Film \(1901\)' is neither an "
                                          r"item id nor a title"):
        import_predictions(out, src, "bad", targets="as-given")
    # with the build's targets the line is only counted
    rep = import_predictions(out, src, "bad")
    assert rep["differs"]["target"]["lines"] == 1 and rep["targets"] == "build" and rep["as_given"] == 0


def test_a_target_outside_the_lines_candidates_is_refused(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=2, options={"n_candidates": 5})
    s = next(iter(read_jsonl(out / "samples.jsonl")))
    others = [c for c in s["candidates"] if c != s["target"]]
    src = _write(tmp_path / "d.jsonl", [{"id": s["id"], "answer": "1", "candidates": others, "target": s["target"]}])
    with pytest.raises(ConfigError, match=r"d\.jsonl:1: field \"target\": .* is not one of the line's candidates"):
        import_predictions(out, src, "x", targets="as-given")


def test_cli_targets_as_given(seq_run, tmp_path):
    out, samples, titles = seq_run
    lines, _, _ = _seq_lines(samples, titles)
    src = _write(tmp_path / "a.jsonl", lines)
    args = ["score", "llmrec", "-o", str(out), "--predictions", str(src), "--resamples", "0", "--no-references"]
    res = CliRunner().invoke(app, [*args, "--name", "b"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "3 lines give a target other than the build's sample (scored against the build's; --targets as-given" in res.output
    res = CliRunner().invoke(app, [*args, "--name", "g", "--targets", "as-given"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "--targets as-given: 3 answers scored against their line's own target/candidates" in res.output
    scores = json.loads((out / "scores.json").read_text())
    flat = json.dumps(scores)
    assert flat  # written
    res = CliRunner().invoke(app, [*args, "--name", "h", "--targets", "authors"])
    assert res.exit_code != 0 and "--targets 'authors': one of build, as-given" in str(res.exception)


def test_an_imported_rows_n_is_the_imported_set(seq_run, tmp_path):
    """The header counts the build's samples; the imported row says its own n, of them."""
    from recharness.report.tables import to_markdown

    out, samples, titles = seq_run
    src = _write(tmp_path / "a.jsonl", [{"id": s["id"], "answer": "1. Heat (1995)"} for s in samples[:3]])
    import_predictions(out, src, "part")
    rows = pipeline.score(out, resamples=0, references=False)
    part = _row(rows, "part", "sequential")
    assert part.n == 3 and part.coverage == {"answered": 3, "of": 4, "why": "imported"}
    md = to_markdown(rows)
    assert "### sequential (n = 4)" in md and "| part [imported: n = 3 of 4] |" in md
    assert "| fake |" in md  # the model over every sample carries no mark


def test_a_title_without_its_year_is_the_same_target(seq_run, tmp_path):
    """Released files often drop the year ("Heat" for "Heat (1995)"): the same item, not a differing target."""
    from recharness.matching import split_year

    out, samples, titles = seq_run
    s0, s1 = samples[:2]
    bare = split_year(titles[s0["target"]])[0]
    src = _write(tmp_path / "y.jsonl", [{"id": s0["id"], "answer": "1. Heat (1995)", "target": bare},
                                        {"id": s1["id"], "answer": "1. Heat (1995)", "target": bare + " (1901)"}])
    rep = import_predictions(out, src, "y")
    assert rep["differs"] == {"target": {"lines": 1, "first": [f"{rep['source']}:2"]}}


def test_candidates_keep_the_titles_the_line_gives_and_a_title_of_several_films_is_refused(ml1m, tmp_path):
    """The authors' candidates as their prompt showed them (no years): the answer is parsed against those words;
    a year-less title several films carry names no one item."""
    from recharness.matching import split_year

    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=2, options={"n_candidates": 5})
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    s = next(iter(read_jsonl(out / "samples.jsonl")))
    bare = [split_year(titles[c])[0] for c in s["candidates"]]
    t = s["candidates"].index(s["target"])
    other = bare[(t + 1) % 5]
    src = _write(tmp_path / "n.jsonl", [{"id": s["id"], "answer": f"1. {other} - {bare[t]}\n2. {bare[t]}",
                                          "candidates": bare, "target": bare[t]}])
    import_predictions(out, src, "nir", targets="as-given")
    rec = next(iter(read_jsonl(out / "predictions" / "nir.jsonl")))
    assert rec["as_given"]["candidate_titles"] == bare and rec["as_given"]["candidates"] == s["candidates"]
    assert rec["valid"] and s["target"] in rec["parsed"]["ranking"]
    hamlets = sorted(v for v in titles.values() if split_year(v)[0] == "Hamlet")
    assert len(hamlets) > 1
    bad = _write(tmp_path / "h.jsonl", [{"id": s["id"], "answer": "1", "candidates": bare, "target": "Hamlet"}])
    with pytest.raises(ConfigError, match=r"h\.jsonl:1: field \"target\": 'Hamlet' names \d+ catalog titles "
                                          r"\(Hamlet \(\d{4}\);.*give the title with its year, or the item id"):
        import_predictions(out, bad, "h", targets="as-given")

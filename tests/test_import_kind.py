"""`score --predictions F --kind llm|reference|finetuned`: an imported row is filed by what made it in RecBench's
Table 5 layout (default: the file's own "kind" where its lines have one, else an LLM's free text)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from recharness.cli import app
from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from recharness.runner.imported import import_predictions
from recharness.tasks.recbench.tables import TABLE5_GROUPS, table5_row


@pytest.fixture()
def seqrec_run(ml1m, tmp_path):
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=4, options={"train_sequences": 50})
    return out, list(read_jsonl(out / "samples.jsonl"))


def _write(path, samples, **extra):
    path.write_text("".join(json.dumps({"id": s["id"], "titles": ["Heat (1995)", "Fargo (1996)"], **extra}) + "\n"
                            for s in samples))
    return path


def _placed(out, name):
    row = next(r for r in pipeline.score(out, resamples=0, references=False) if r.method == name)
    return table5_row(row)


def test_kind_decides_the_table5_section(seqrec_run, tmp_path):
    out, samples = seqrec_run
    src = _write(tmp_path / "a.jsonl", samples)
    import_predictions(out, src, "plain")
    assert _placed(out, "plain") == ("Z", "plain (free text)", 1.0)  # no kind given: an LLM's titles
    import_predictions(out, src, "pop", kind="reference")
    assert _placed(out, "pop") == ("R", "pop (imported)", 0.0)
    import_predictions(out, src, "ft", kind="finetuned")
    assert _placed(out, "ft")[0] == "F" and "F" in TABLE5_GROUPS
    # the file says what it is: "kind" (and a fine-tune's "items") on its lines
    meta = _write(tmp_path / "m.jsonl", samples, kind="finetuned", items="id")
    rep = import_predictions(out, meta, "p5-like")
    assert rep["kind"] == "finetuned" and _placed(out, "p5-like") == ("I", "p5-like (imported)", 0.0)
    with pytest.raises(ConfigError, match="one of llm, reference, finetuned"):
        import_predictions(out, src, "bad", kind="conventional")


def test_kind_through_the_cli_reaches_the_paper_layout(seqrec_run, tmp_path):
    out, samples = seqrec_run
    src = _write(tmp_path / "a.jsonl", samples)
    res = CliRunner().invoke(app, ["score", "recbench", "-o", str(out), "--predictions", str(src), "--name", "ext-pop",
                                   "--kind", "reference", "--resamples", "0", "--no-references"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    md = (out / "scores.md").read_text()
    refs = md.index(TABLE5_GROUPS["R"])
    assert md.index("ext-pop (imported)") > refs and TABLE5_GROUPS["Z"] not in md


def test_kind_is_kept_for_perrecbench_released_files(ml1m, tmp_path):
    """The suite's own reader of released files (PerRecBench's <mode>-<level>.json) honours --kind as any import
    does: in every record's model identity and in the import report; a bad --kind stops before anything is read."""
    from recharness.tasks.perrecbench.original import write_predictions

    out = tmp_path / "run"
    pipeline.build("perrecbench", "ml-1m", out, tasks=["list"], seed=0, limit=2, options={"profile": False})
    path, _ = pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    recs = list(read_jsonl(path))
    samples = list(read_jsonl(out / "samples.jsonl"))
    released = tmp_path / "released"
    assert write_predictions(samples, {r["id"]: r for r in recs}, released)

    def score(name, *kind):
        return CliRunner().invoke(app, ["score", "perrecbench", "-o", str(out), "--predictions", str(released),
                                        "--name", name, *kind, "--resamples", "0", "--no-references"])

    res = score("ref", "--kind", "reference")
    assert res.exit_code == 0, res.output
    got = list(read_jsonl(out / "predictions" / "ref.jsonl"))
    assert len(got) == len(recs) == 6 and {r["model"]["kind"] for r in got} == {"reference"}
    assert json.loads((out / "imports" / "ref.json").read_text())["kind"] == "reference"
    res = score("plain")  # no --kind: the released files say nothing, so an LLM's, as for a JSONL import
    assert res.exit_code == 0, res.output
    assert all("kind" not in r["model"] for r in read_jsonl(out / "predictions" / "plain.jsonl"))
    assert json.loads((out / "imports" / "plain.json").read_text())["kind"] == "llm"
    res = score("bad", "--kind", "conventional")
    assert res.exit_code != 0 and isinstance(res.exception, ConfigError)
    assert str(res.exception) == "kind 'conventional': one of llm, reference, finetuned"
    assert not (out / "predictions" / "bad.jsonl").exists()


def test_kind_with_label_files_alone_is_refused(tmp_path):
    """`score --predictions P --labels L` with no build makes no row for a table to file: --kind is refused in
    one line, not ignored."""
    from recharness.core.errors import RecharnessError

    res = CliRunner().invoke(app, ["score", "perrecbench", "-o", str(tmp_path / "none"), "--predictions",
                                   str(tmp_path), "--labels", str(tmp_path), "--name", "x", "--kind", "reference"])
    assert res.exit_code != 0 and isinstance(res.exception, RecharnessError)
    assert str(res.exception) == ("--kind files an imported row in a build's tables; scores from label files alone "
                                  "make no row (build first, or leave --kind out)")


def test_kind_decides_the_ctr_tables_too(ml1m, tmp_path):
    """Tables 3/4 (ctr, `across_datasets`): an imported reference sits with the conventional models of Table 4,
    an imported fine-tune in its items' group, an import without a kind with the zero-shot LLMs of Table 3."""
    from recharness.tasks.recbench.tables import across_datasets

    out = tmp_path / "ctr"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=4,
                   options={"test_pairs_per_user": 2, "train_pairs": 2000})
    samples = list(read_jsonl(out / "samples.jsonl"))
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps({"id": s["id"], "probability": 0.25 + 0.5 * (k % 2)}) + "\n"
                           for k, s in enumerate(samples)))
    import_predictions(out, src, "ext-llm")
    import_predictions(out, src, "ext-ref", kind="reference")
    import_predictions(out, src, "ext-ft", kind="finetuned")
    text = across_datasets({"ml-1m": pipeline.score(out, resamples=0, references=False)})
    table3, table4 = text.split("#### Table 4")
    assert "| ext-llm |" in table3 and "| ext-ref |" not in table3 and "| ext-ft |" not in table3
    fine_tuned, conventional = table4.split("| **conventional models trained here** |")
    assert "| ext-ref |" in conventional and "| ext-ref |" not in fine_tuned
    assert "| ext-ft |" in fine_tuned.split("| **E: LLMs, text (fine-tuned)** |")[1]


def test_a_line_of_another_kind_is_not_part_of_the_row(seqrec_run, tmp_path):
    """One row is one kind, set by the first line that says: a later line saying another (or no valid one) is a
    problem named with its line, not silently filed under the first (before: ignored, or never checked)."""
    out, samples = seqrec_run
    lines = [{"id": samples[0]["id"], "titles": ["Heat (1995)"], "kind": "finetuned", "items": "id"},
             {"id": samples[1]["id"], "titles": ["Heat (1995)"], "kind": "reference"},
             {"id": samples[2]["id"], "titles": ["Heat (1995)"], "kind": "conventional"},
             {"id": samples[3]["id"], "titles": ["Heat (1995)"]}]
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rep = import_predictions(out, src, "mixed")
    assert rep["kind"] == "finetuned" and rep["imported"] == 2
    assert [p["where"].rsplit(":", 1)[1] for p in rep["problems"]] == ["2", "3"]
    assert "one row is one kind" in rep["problems"][0]["problem"] and "conventional" in rep["problems"][1]["problem"]

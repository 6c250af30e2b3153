"""Each model row is stated against the strongest reference on the task's headline metric, by the
same paired test as the table's bold (on a tiny run: the exact sign-flip test below 21 units, checked against
SciPy's on the per-user values worked from the answers)."""

import json
import math

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from recharness.cli import app
from recharness.runner.compare import compare
from recharness.runner.pipeline import methods_by_task


def test_model_rows_say_whether_they_beat_the_strongest_reference(ml1m, tmp_path):
    r = CliRunner()
    out = tmp_path / "run"
    assert r.invoke(app, ["build", "llmrec", "-t", "direct", "-o", str(out), "-n", "12"]).exit_code == 0
    assert r.invoke(app, ["run", "llmrec", "-o", str(out), "-m", "fake"]).exit_code == 0
    res = r.invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    rows = {x["method"]: x for x in json.loads((out / "scores.json").read_text())}
    refs = {k: v for k, v in rows.items() if v["kind"] == "reference" and "NDCG@10" in v["ci"]}
    strongest = max(refs, key=lambda k: refs[k]["metrics"]["NDCG@10"])
    assert rows[strongest]["extra"]["strongest_reference"] == "NDCG@10"
    v = rows["fake"]["extra"]["vs_strongest_reference"]
    assert v["reference"] == strongest and v["test"] == "exact sign-flip"  # 12 users: the exact test
    assert v["diff"] == pytest.approx(rows["fake"]["metrics"]["NDCG@10"] - rows[strongest]["metrics"]["NDCG@10"])
    # the same exact test `recharness compare` runs on the pair (12 users: all 2**12 sign flips)
    pair = [x for x in compare(out, ["fake", strongest], task="direct") if x["metric"] == "NDCG@10"]
    assert len(pair) == 1 and pair[0]["exact"] and pair[0]["permutations"] == 2**12
    assert v["p"] == pytest.approx(pair[0]["p_perm"], abs=1e-12) and 0 < v["p"] <= 1
    # and against SciPy's exact paired permutation test on the per-user NDCG@10 worked from the answers (one
    # target each: 1/log2(r + 1) at place r of the top 10, else 0; an invalid answer 0)
    (_, _, samples, methods), = methods_by_task(out, seed=0, only={"fake", strongest})
    recs = {name: got for name, _, got, _ in methods}

    def ndcg(rec, target):
        ranking = (rec.get("parsed") or {}).get("ranking") or [] if rec.get("valid", True) else []
        return 1 / math.log2(ranking.index(target) + 2) if target in ranking[:10] else 0.0

    x, y = ([ndcg(recs[m][s["id"]], s["target"]) for s in samples] for m in ("fake", strongest))
    assert np.mean(x) == pytest.approx(rows["fake"]["metrics"]["NDCG@10"])
    assert np.mean(y) == pytest.approx(rows[strongest]["metrics"]["NDCG@10"])
    ref = stats.permutation_test((x, y), lambda a, b: np.mean(a) - np.mean(b), permutation_type="samples",
                                 n_resamples=np.inf).pvalue
    assert v["p"] == pytest.approx(ref, abs=1e-12)
    # and the table's bold mark against that row, the column's best here (popularity ranks 20 uniform candidates)
    assert rows[strongest]["ci"]["NDCG@10"].get("top") and rows[strongest]["ci"]["NDCG@10"]["p_vs_best"] is None
    assert v["p"] == pytest.approx(rows["fake"]["ci"]["NDCG@10"]["p_vs_best"])
    assert v["verdict"] == ("not distinguishable" if v["p"] >= 0.05 else "beats" if v["diff"] > 0 else "below")
    assert f"Strongest reference by NDCG@10: {strongest}" in (out / "scores.md").read_text()
    said = {"not distinguishable": "is not distinguishable from it", "beats": "beats it", "below": "is below it"}
    assert f"fake {said[v['verdict']]} ({v['diff']:+.4f}" in (out / "scores.md").read_text()
    # the strongest reference's row is marked in the table, and a run of simple references only says so
    md = (out / "scores.md").read_text()
    assert f"| {strongest} (ref) ◆ |" in md and md.count("◆ |") == 1
    assert rows[strongest]["extra"]["untrained_references"] == ["itemknn", "ease", "als", "markov"]
    assert (f"No trained reference is in this run, so {strongest} is the strongest only among simple ones "
            "(this task offers itemknn, ease, als, markov") in md
    assert r.invoke(app, ["report", "llmrec", "-o", str(out)]).exit_code == 0
    assert f"<td class='method'>{strongest} (ref) ◆" in (out / "report.html").read_text()
    # with a trained reference in the run the warning goes, whichever row is the strongest
    assert r.invoke(app, ["train", "llmrec", "-o", str(out), "-b", "ease"]).exit_code == 0
    assert r.invoke(app, ["score", "llmrec", "-o", str(out), "--resamples", "200"]).exit_code == 0
    md = (out / "scores.md").read_text()
    assert "No trained reference is in this run" not in md and md.count("◆ |") == 1
    rows = {x["method"]: x for x in json.loads((out / "scores.json").read_text())}
    assert "ease" in rows and not any(x["extra"].get("untrained_references") for x in rows.values())


def test_tuned_line_names_the_search_objective():
    from recharness.runner.train_log import summary_line, tuned_line

    tuning = {"budget": {"trials": 50}, "seconds": 593.0, "objective": "auc on the validation pairs",
              "best": {"trial": 17, "valid": 0.8541, "params": {"embed_dim": 8, "lr": 5.41e-4}}}
    line = summary_line("deepfm", {"tuning": tuning, "train_s": 9.8})
    assert line == ("deepfm: tuned, 50 trials (593.0 s), best valid auc 0.8541 (trial 17) with embed_dim=8, "
                    "lr=0.000541; the chosen configuration trained again in 9.8 s")
    # a model trained in epochs: the per-trial cap named, and what `train` says of the refit
    tuning["budget"]["epochs_per_trial"] = 3
    assert tuned_line("sasrec", tuning, "refitted with its own epoch limit") == (
        "sasrec: tuned, 50 trials of 3 epochs (593.0 s), best valid auc 0.8541 (trial 17) with embed_dim=8, "
        "lr=0.000541; refitted with its own epoch limit")


def test_each_verdict_names_its_own_reference_when_rows_come_from_several_runs():
    from recharness.core.types import ScoreRow
    from recharness.report.tables import ci_note

    def row(name, ref):
        return ScoreRow(name, "t", {"NDCG@10": 0.1}, 10, ci={"NDCG@10": {"lo": 0.0, "hi": 0.2}},
                        extra={"vs_strongest_reference": {"metric": "NDCG@10", "reference": ref, "diff": -0.01,
                                                          "p": 0.5, "test": "paired bootstrap",
                                                          "verdict": "not distinguishable"}})

    note = ci_note([row("a", "ease"), row("b", "sasrec"), row("c", "ease")])
    assert note.count("Strongest reference by NDCG@10: ease; a is not distinguishable from it") == 1
    assert "; c is not distinguishable from it" in note.split("sasrec")[0]
    assert "Strongest reference by NDCG@10: sasrec; b is not distinguishable from it" in note


def test_compare_says_which_metric_one_side_cannot_have(ml1m, tmp_path):
    """A model with no valid rating has no RMSE (NaN, from no data): `compare` used to leave RMSE out of the
    pair without a word; it now says it is undefined for that side and not compared."""
    r = CliRunner()
    out = tmp_path / "run"
    assert r.invoke(app, ["build", "llmrec", "-t", "rating", "-o", str(out), "-n", "6"]).exit_code == 0
    assert r.invoke(app, ["run", "llmrec", "-o", str(out), "-m", "fake"]).exit_code == 0
    recs = [json.loads(x) for x in (out / "predictions" / "fake.jsonl").read_text().splitlines()]
    dead = [{**x, "parsed": None, "valid": False, "error": "no rating in the answer"} for x in recs]
    (out / "predictions" / "dead.jsonl").write_text("".join(json.dumps(x) + "\n" for x in dead))
    got = compare(out, ["fake", "dead"], task="rating")
    notes = "; ".join(x.get("note") or "" for x in got)  # the pair's note, on its first row
    assert "RMSE: undefined for dead (nothing to compute it from, e.g. no usable answer): not compared" in notes
    assert "RMSE" not in {x["metric"] for x in got}

"""A reference row is scored on the samples it answered, and says so when that is not all of them."""

from __future__ import annotations


def test_a_reference_that_answered_part_is_scored_and_marked_on_that_part(ml1m, tmp_path, monkeypatch):
    """A reference row covering only some samples (title-cbs answers the first N on purpose) says so, is
    scored on those, and is compared with no row scored on other samples."""
    from recharness.models.fake import FakeBackend
    from recharness.runner import pipeline
    from recharness.runner.pipeline import reference_coverage
    from recharness.tasks.llmrec.sequential import SequentialTask

    samples = [{"id": f"s{i}"} for i in range(4)]
    assert reference_coverage(samples, {f"s{i}": {} for i in range(4)}) == (samples, None)
    capped = {"s0": {"parsed": {"sample_cap": 2}}, "s1": {"parsed": {"sample_cap": 2}}}
    assert reference_coverage(samples, capped) == (samples[:2], {"answered": 2, "of": 4, "why": "sample cap"})
    assert reference_coverage(samples, {"s3": {}})[1] == {"answered": 1, "of": 4, "why": "partial"}

    out = tmp_path / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["sequential"], seed=0, limit=12)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    real = SequentialTask.references

    def half_popularity(self, dataset, task_samples, seed=0):
        refs = real(self, dataset, task_samples, seed=seed)
        refs["popularity"] = {k: v for k, v in list(refs["popularity"].items())[:6]}
        return refs

    monkeypatch.setattr(SequentialTask, "references", half_popularity)
    rows = {r.method: r for r in pipeline.score(out, resamples=100)}
    pop, rnd = rows["popularity"], rows["random"]
    assert pop.n == 6 and pop.coverage == {"answered": 6, "of": 12, "why": "partial"}
    assert rnd.n == 12 and rnd.coverage is None
    # the half row is in no comparison with the full rows: the model's verdict names a full-sample reference
    verdict = rows["fake"].extra.get("vs_strongest_reference")
    assert verdict is None or verdict["reference"] != "popularity"


def test_the_note_says_bold_compares_only_rows_on_the_same_samples():
    from recharness.core.types import ScoreRow
    from recharness.report.tables import ci_note

    full = ScoreRow("sasrec", "t", {"NDCG@10": 0.1}, 400, kind="reference", ci={"NDCG@10": {"lo": 0.0, "hi": 0.2}})
    part = ScoreRow("llm", "t", {"NDCG@10": 0.1}, 40, ci={"NDCG@10": {"lo": 0.0, "hi": 0.2}})
    part.coverage = {"answered": 40, "of": 400, "why": "limit"}
    assert "compared only with rows scored on the same samples" in ci_note([full, part])
    assert "compared only with rows scored on the same samples" not in ci_note([full, full])

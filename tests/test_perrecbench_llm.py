"""PerRecBench end to end with the real local model (SmolLM2 behind the session's llama.cpp server).

Tiny on purpose: one medium group (3 users), one retrieved item per user,
no profiles, no retries: about ten short calls.  Checks the bookkeeping a real run must keep: every call
counted, pairwise calls = 2 x heapsort comparisons (+ retries) within
heapsort's worst case, unparseable answers counted, and the Table 1 rows.
"""

from __future__ import annotations

import math

import pytest
from scipy.stats import kendalltau

from recharness.core.io import read_jsonl
from recharness.models.registry import resolve_model
from recharness.runner.pipeline import build, run, score
from recharness.tasks.perrecbench.heapsort import max_comparisons
from recharness.tasks.perrecbench.scoring import prediction_scores
from recharness.tasks.perrecbench.table import table1_markdown


@pytest.mark.llm
def test_tiny_run_with_smollm2(ml1m, llama_server, tmp_path):
    build("perrecbench", "ml-1m", tmp_path, limit=1, seed=0,
          options={"levels": "medium", "k": 1, "profile": False, "max_tokens": 16, "max_retries": 0})
    backend = resolve_model(f"openai:smollm2-135m@{llama_server.base_url}")
    _, stats = run(tmp_path, backend, "smollm2-135m")
    assert stats.done == 3
    samples = {s["id"]: s for s in read_jsonl(tmp_path / "samples.jsonl")}
    recs = {r["id"]: r for r in read_jsonl(tmp_path / "predictions" / "smollm2-135m.jsonl")}
    assert set(recs) == set(samples)
    for sid, r in recs.items():
        n = samples[sid]["size"]
        assert len(r["outputs"]) == r["calls"]
        assert r["valid"] or r["error"]  # a failure always says why
        if sid.startswith("pair"):
            p = r["parsed"]
            assert r["calls"] == 2 * p["comparisons"] + r["retries"]
            assert n - 1 <= p["comparisons"] <= max_comparisons(n)
            assert p["agree"] + p["disagree"] + p["failed"] == p["comparisons"]
            assert sorted(p["ordering"]) == list(range(1, n + 1))
        elif sid.startswith("point"):
            assert r["calls"] == n + r["retries"]
        else:
            assert r["calls"] == 1 + r["retries"]
    rows = score(tmp_path)
    model_rows = {r.task: r for r in rows if r.method == "smollm2-135m"}
    assert set(model_rows) == {"point", "pair", "list"}
    for t, row in model_rows.items():
        bad = sum(not recs[s]["valid"] for s in samples if s.startswith(t))
        assert row.metrics["invalid"] == bad
        # one group per task: its tau is scipy's between the answer's scores and the true relative ratings
        # (an invalid answer, or one that ties every user, counts 0)
        (s,) = [samples[sid] for sid in samples if sid.startswith(t)]
        scores = prediction_scores(s, recs[s["id"]].get("parsed"))[0] if recs[s["id"]]["valid"] else None
        want = 0.0 if scores is None else kendalltau(scores, s["truth"]["relative_ratings"]).statistic
        assert row.metrics["tau"] == pytest.approx(0.0 if math.isnan(want) else want, abs=1e-12)
    table = table1_markdown(rows)
    assert table.count("\n| ") >= 4 and "| smollm2-135m |" in table

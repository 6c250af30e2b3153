"""RecBench+ end to end with the real SmolLM2 server: a handful of queries, small answers."""

from __future__ import annotations

import pytest

from recharness.core.io import read_jsonl
from recharness.runner.pipeline import build, run, score

pytestmark = pytest.mark.llm


def test_run_and_score_with_smollm2(llama_server, shared, ml1m, tmp_path):
    from recharness.models.registry import resolve_model

    demo = shared("data", "recbench_plus", "movie", "UserBasedQuery.json")
    info = build("recbench-plus", "ml-1m", tmp_path, seed=0, limit=1, tasks=["explicit", "misinformed", "demographics"],
                 options={"demographics_file": str(demo), "max_tokens": 32})
    assert info["counts"] == {"explicit": 2, "misinformed": 2, "demographics": 1}
    backend = resolve_model(f"openai:smollm2-135m@{llama_server.base_url}")
    path, stats = run(tmp_path, backend, "smollm2", max_retries=1)
    preds = list(read_jsonl(path))
    assert len(preds) == 5 and stats.retried == 0  # refusals are answers here: no format retry
    for p in preds:
        assert set(p["parsed"]) == {"strings", "item_ids", "ftr"}
        assert p["completion_tokens"] <= 32
    rows = score(tmp_path)
    model_rows = {r.task: r for r in rows if r.method == "smollm2"}
    assert set(model_rows) == {"explicit", "misinformed", "demographics"}
    for r in model_rows.values():
        assert 0.0 <= r.metrics["P"] <= 1.0 and 0.0 <= r.metrics["FTR"] <= 1.0 and r.metrics["n_scored"] == r.n
        assert "history=without" in r.extra["breakdown"]
    assert {"popularity", "kg-conditions"} <= {r.method for r in rows if r.task == "explicit"}


def test_llm_phrasing_with_appendix_h_prompts(llama_server, ml1m, tmp_path):
    spec = f"openai:smollm2-135m@{llama_server.base_url}"
    build("recbench-plus", "ml-1m", tmp_path, seed=0, limit=1, tasks=["explicit", "implicit"],
          options={"phrase_model": spec, "phrase_max_tokens": 32, "history": "without"})
    samples = list(read_jsonl(tmp_path / "samples.jsonl"))
    assert len(samples) == 2
    import json

    recs = json.loads((tmp_path / "recbench_plus" / "ImplicitQuery.json").read_text())
    for s in samples:
        ph = s["query_phrasing"]
        # either the LLM's query, or the template with the reason it was rejected -- never unmarked
        assert ph.startswith("llm:openai:smollm2-135m") or ph.startswith("template (llm:"), ph
        if ph.startswith("llm:"):
            assert s["query"] and s["query"] in s["messages"][-1]["content"]
    for r in recs:
        if r["query_phrasing"].startswith("llm:"):
            assert r["implicitCondition"]["value"].lower() not in r["situational_description_query"].lower()

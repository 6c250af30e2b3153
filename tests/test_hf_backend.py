"""The hf backend for real: the built-in SmolLM2 GGUF loaded through transformers (dequantised),
answering through the same calls as llama.cpp. Regression: with transformers 5,
`apply_chat_template(return_tensors="pt")` returns a BatchEncoding and both paths died on `.shape`.

Parity with llama.cpp on the same prompts, measured: P(Yes) within 0.022 on CTR prompts (fp32
dequantised weights vs llama.cpp's quantised matmuls), greedy text identical for its first line.
"""

from __future__ import annotations

import pytest

from recharness.core.io import read_jsonl
from recharness.core.types import GenerationParams
from recharness.runner import pipeline

pytestmark = pytest.mark.llm
pytest.importorskip("transformers", reason="the hf extra is not installed")
pytest.importorskip("gguf", reason="the hf extra is not installed")
pytest.importorskip("accelerate", reason="the hf extra is not installed")

PROMPT = [{"role": "user", "content": "Name three movies about space."}]


@pytest.fixture(scope="module")
def backends(smollm2_path):
    from recharness.models.hf import HFBackend
    from recharness.models.llamacpp import LlamaCppBackend

    hf = HFBackend(str(smollm2_path))
    hf.load()
    return hf, LlamaCppBackend(smollm2_path, name="smollm2-135m", n_ctx=2048)


@pytest.fixture(scope="module")
def ctr_run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=1)
    return out


def test_greedy_generation_matches_llama_cpp_first_line(backends):
    hf, llama = backends
    params = GenerationParams(max_tokens=24, temperature=0)
    a, b = hf._generate_sync(PROMPT, params), llama._generate_sync(PROMPT, params)
    assert a.text.strip() and a.completion_tokens > 0 and a.prompt_tokens > 5
    assert a.text.strip().splitlines()[0] == b.text.strip().splitlines()[0]


def test_yes_no_scores_match_llama_cpp(backends, ctr_run):
    hf, llama = backends
    _, samples = pipeline.load_build(ctr_run)
    for s in samples:
        p_hf = hf.score_options_sync(s["messages"], ["Yes", "No"]).probabilities()["Yes"]
        p_ll = llama.score_options_sync(s["messages"], ["Yes", "No"]).probabilities()["Yes"]
        assert abs(p_hf - p_ll) < 0.05, (s["id"], p_hf, p_ll)


def test_a_run_through_the_hf_backend(backends, ctr_run):
    hf, _ = backends
    path, stats = pipeline.run(ctr_run, hf, "hf-smollm2", use_cache=False)
    recs = list(read_jsonl(path))
    assert len(recs) == 4 and all(r["valid"] and 0 < r["parsed"]["p_yes"] < 1 for r in recs)
    assert all(r["latency_s"] > 0 for r in recs)

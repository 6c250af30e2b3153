"""Model backends against the real thing: SmolLM2 in process and behind a real llama.cpp server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math

import pytest

from recharness.core.errors import ConfigError
from recharness.core.types import GenerationParams, OptionScores
from recharness.execution.cache import ResponseCache
from recharness.execution.executor import CachedModel
from recharness.models.builtin import BUILTIN_MODELS
from recharness.models.openai_compat import OpenAICompatibleBackend, option_logprobs
from recharness.models.registry import resolve_model, slug

PROMPTS = [
    [{"role": "user", "content": "Name three famous movies from the 1990s as a numbered list."}],
    [{"role": "user", "content": "Recommend one video game for a fan of Zelda. Answer with the title only."}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}],
]
YES_NO = [{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}]


def test_option_logprobs_sums_every_spelling():
    toks = [("Yes", math.log(0.5)), (" Yes", math.log(0.2)), ("No", math.log(0.1)), ("yes", math.log(0.1)), ("Yes", -0.1)]
    lp = option_logprobs(toks, ["Yes", "No", "Maybe"])
    assert lp["Yes"] == pytest.approx(math.log(0.8))  # "Yes" + " Yes" + "yes"; a repeated token once
    assert lp["No"] == pytest.approx(math.log(0.1))
    # not returned: each of its 64 spellings (32 casings, with and without a space) at most the smallest returned
    # (64 x 0.1 = 6.4), and all of them at most what the returned tokens leave: 1 - 0.9 = 0.1 (before: 6.4, a
    # "probability" above 1 that made Maybe the answer at 0.88)
    assert lp["Maybe"] == pytest.approx(math.log(0.1))
    probs = OptionScores(lp).probabilities()
    assert probs["Yes"] == pytest.approx(0.8 / (0.8 + 0.1 + 0.1)) and probs["Maybe"] == pytest.approx(0.1)


def test_option_first_tokens_drop_a_token_the_options_share():
    from recharness.core.errors import ConfigError
    from recharness.models.base import option_first_tokens

    # SentencePiece-like: " Yes" -> [bare space 1, "Yes" 10], " No" -> [1, "No" 20]; "Yes" -> [10], "No" -> [20]
    # (other casings, "yes" / "YES", spelled here in two pieces: not counted, their first piece starts other words)
    def enc(table):
        return lambda text: table.get(text, [98, 99])

    sp = {"Yes": [10], " Yes": [1, 10], "No": [20], " No": [1, 20]}
    assert option_first_tokens(enc(sp), ["Yes", "No"]) == {"Yes": {10}, "No": {20}}
    # byte-level BPE: both spellings are their own tokens, all kept; so is another casing of one token
    bpe = {"Yes": [10], " Yes": [11], "No": [20], " No": [21], "yes": [12], " YES": [13], " no": [22]}
    assert option_first_tokens(enc(bpe), ["Yes", "No"]) == {"Yes": {10, 11, 12, 13}, "No": {20, 21, 22}}
    # an option whose only first token is shared cannot be scored
    bad = {"Yes": [1, 10], " Yes": [1, 10], "No": [20], " No": [1, 20]}
    with pytest.raises(ConfigError, match="'Yes' begin with no token of their own"):
        option_first_tokens(enc(bad), ["Yes", "No"], "m")


def test_model_specs():
    assert slug("openai:gpt-4o-mini@https://api.openai.com/v1") == "openai-gpt-4o-mini"
    assert slug("llamacpp:/x/y z.gguf") == "llamacpp_x_y_z.gguf"
    with pytest.raises(ConfigError, match="unknown model"):
        resolve_model("gpt-9")
    with pytest.raises(ConfigError, match="unknown model backend"):
        resolve_model("nope:thing")
    with pytest.raises(ConfigError, match="GGUF file not found"):
        resolve_model("llamacpp:/does/not/exist.gguf")


def test_remote_api_needs_a_key_and_never_shows_it(monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(ConfigError, match="MY_KEY"):
        OpenAICompatibleBackend("gpt-x", base_url="https://api.example.com/v1", api_key_env="MY_KEY")
    monkeypatch.setenv("MY_KEY", "sk-very-secret-123")
    b = OpenAICompatibleBackend("gpt-x", base_url="https://api.example.com/v1", api_key_env="MY_KEY")
    assert "sk-very-secret" not in json.dumps(b.identity())
    assert b.extra_body == {}  # nothing non-standard is sent to a remote API


def test_builtin_smollm2_is_verified(smollm2_path):
    h = hashlib.sha256(smollm2_path.read_bytes()).hexdigest()
    assert h == BUILTIN_MODELS["smollm2-135m"].sha256


@pytest.mark.llm
def test_server_and_in_process_agree_greedy(smollm2_path, llama_server):
    local = resolve_model("smollm2-135m")
    remote = resolve_model(f"openai:smollm2-135m@{llama_server.base_url}")
    params = GenerationParams(max_tokens=40)

    async def both():
        a = [await local.agenerate(p, params) for p in PROMPTS]
        b = await asyncio.gather(*(remote.agenerate(p, params) for p in PROMPTS))
        sa = await local.ascore_options(YES_NO, ["Yes", "No"])
        sb = await remote.ascore_options(YES_NO, ["Yes", "No"])
        await remote.aclose()
        return a, b, sa, sb

    a, b, sa, sb = asyncio.run(both())
    assert [c.text for c in a] == [c.text for c in b]
    assert all(c.text.strip() for c in a)
    assert [c.prompt_tokens for c in a] == [c.prompt_tokens for c in b]
    assert [c.completion_tokens for c in a] == [c.completion_tokens for c in b]
    for opt in ("Yes", "No"):
        # both sum every casing of the option; the server only those among its top 20, so in process is a little
        # higher (by 0.008 for SmolLM2 here), never lower
        assert sb.logprobs[opt] - 2e-3 <= sa.logprobs[opt] <= sb.logprobs[opt] + 0.02
        assert sa.logprobs[opt] < 0
    assert sum(sa.probabilities().values()) == pytest.approx(1.0)


@pytest.mark.llm
def test_cache_serves_second_call_and_stores_no_key(llama_server, tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_ENV", "sk-live-do-not-leak-42")
    backend = resolve_model(f"openai:smollm2-135m@{llama_server.base_url}", api_key_env="SECRET_ENV")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    model = CachedModel(backend, cache)
    params = GenerationParams(max_tokens=16)

    async def twice():
        first = await model.generate(PROMPTS[2], params)
        second = await model.generate(PROMPTS[2], params)
        await backend.aclose()
        return first, second

    first, second = asyncio.run(twice())
    assert not first.cached and second.cached and first.text == second.text
    cache.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("cache.sqlite*"))
    assert b"sk-live-do-not-leak-42" not in raw


def test_a_gguf_llama_cpp_cannot_load_stops_the_run_and_records_no_answer(smollm2_path, tmp_path):
    """A damaged weights file is the model's fault, not a sample's: a ConfigError before any line is written
    (before, every sample was committed as an invalid answer that a resume would not ask again)."""
    from recharness.execution.executor import run_samples
    from recharness.tasks.llmrec.sequential import SequentialTask

    cut = tmp_path / "cut.gguf"
    with smollm2_path.open("rb") as f:  # the header and metadata intact, the tensors cut off
        cut.write_bytes(f.read(2_000_000))
    backend = resolve_model(f"llamacpp:{cut}")
    task = SequentialTask()
    samples = [{"id": f"s{i}", "task": task.name, "messages": [{"role": "user", "content": "hi"}], "target": "1"}
               for i in range(3)]
    out = tmp_path / "pred.jsonl"
    with pytest.raises(ConfigError, match="llama.cpp cannot load"):
        asyncio.run(run_samples(samples, {task.name: task}, CachedModel(backend, None), out, max_retries=0))
    assert not out.exists() or out.read_text() == ""


def test_an_hf_folders_identity_follows_its_weights(tmp_path, monkeypatch):
    """New weights saved to the same folder are another model: their answers never come from the old ones' cache."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from recharness.models.hf import HFBackend

    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "model.safetensors").write_bytes(b"weights one")
    (d / "notes.txt").write_text("not read by the loader")
    first = HFBackend(str(d)).identity()
    assert first["backend"] == "hf" and len(first["weights"]) == 16
    (d / "notes.txt").write_text("changed: still the same model")
    assert HFBackend(str(d)).identity() == first
    (d / "model.safetensors").write_bytes(b"weights two")
    assert HFBackend(str(d)).identity()["weights"] != first["weights"]
    assert "weights" not in HFBackend("no/such-model-anywhere").identity()

"""The constrained request (`ModelBackend.arank_constrained`): a trie's paths ranked by the model.

Checked on both in-process backends with the built-in SmolLM2 against a hand-made trie of three
titles: every path comes back (as many beams as paths: the search is exact), best first, and each
log-prob is the sum of the model's per-step log-softmax computed here independently (a fresh
llama.cpp context with every position's logits; one transformers forward pass over the whole
sequence). A backend without the model in process refuses in one line.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from recharness.core.errors import ConfigError
from recharness.core.types import ConstrainedRequest
from recharness.models.cbs import Trie, log_softmax

MESSAGES = [{"role": "user", "content": "Name three movies, one per line."}]
#: 2, 3 and 4 tokens in SmolLM2 (" Casablanca" is 3, then the newline)
TITLES = (" Heat\n", " Toy Story\n", " Casablanca\n")
#: 2 tokens each: transformers' beam search ranks finished paths by log-prob per token (see HFBackend)
SAME_LENGTH = (" Heat\n", " Alien\n", " Rocky\n")


def _request(trie: Trie, beams: int, **kw) -> ConstrainedRequest:
    return ConstrainedRequest(MESSAGES, trie, beams, answer_start="1.", **kw)


def _check_ranked(ranked, trie: Trie, truth: dict[tuple[int, ...], float], tol: float) -> None:
    """All of the trie's paths, best first, each with the log-prob computed independently."""
    assert sorted(ranked.paths) == sorted(tuple(p) for p in trie.paths())
    assert all(a >= b - 1e-6 for a, b in zip(ranked.logprobs, ranked.logprobs[1:]))
    for path, lp in zip(ranked.paths, ranked.logprobs):
        assert lp == pytest.approx(truth[path], abs=tol), path
    assert ranked.latency_s > 0


@pytest.mark.parametrize("make", ["fake", "openai"])
def test_a_backend_without_the_model_in_process_refuses_in_one_line(make):
    from recharness.models.fake import FakeBackend
    from recharness.models.openai_compat import OpenAICompatibleBackend

    backend = FakeBackend() if make == "fake" else OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError) as e:
        asyncio.run(backend.arank_constrained(ConstrainedRequest(MESSAGES, Trie([[1, 2]]), beams=1)))
    msg = str(e.value)
    assert msg.startswith(f"{backend.name} cannot decode under a constraint") and "\n" not in msg


# --- llama.cpp ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama(smollm2_path):
    from recharness.models.llamacpp import LlamaCppBackend

    return LlamaCppBackend(smollm2_path, name="smollm2-135m", n_ctx=512, n_threads=1)


def _llama_truth(llama, smollm2_path, paths, end: tuple[int, ...] = ()) -> dict[tuple[int, ...], float]:
    """Sum of log-softmax over prompt + path (+ end) in a fresh context: prompt in one batch, then one
    token at a time (as `cbs.llama_cbs` evaluates)."""
    from llama_cpp import Llama

    full = Llama(model_path=str(smollm2_path), n_ctx=512, n_threads=1, seed=0, verbose=False, logits_all=True)
    text = llama.chat_prompt(full, MESSAGES) + "1."
    prompt = full.tokenize(text.encode(), add_bos=False, special=True)
    out = {}
    for path in paths:
        full.reset()
        full.eval(prompt)
        seq = [*path, *end]
        for t in seq:
            full.eval([t])
        lp = log_softmax(np.asarray(full.scores[: full.n_tokens]))
        out[tuple(path)] = float(sum(lp[len(prompt) - 1 + i, t] for i, t in enumerate(seq)))
    return out


@pytest.mark.llm
@pytest.mark.parametrize("ends_turn", [False, True])
def test_llama_cpp_ranks_the_trie_by_cumulative_log_prob(llama, smollm2_path, ends_turn):
    trie = Trie(llama.tokenize(t) for t in TITLES)
    assert sorted(len(p) for p in trie.paths()) == [2, 3, 4]
    truth = _llama_truth(llama, smollm2_path, trie.paths(), (llama.load().token_eos(),) if ends_turn else ())
    for path in trie.paths():  # one beam decodes one token at a time, as the truth does: the very same numbers
        one = llama.rank_constrained_sync(_request(Trie([path]), 1, ends_turn=ends_turn))
        assert one.paths == [tuple(path)] and one.logprobs == [pytest.approx(truth[tuple(path)], abs=1e-9)]
    # three beams decode in one batch per step, whose kernels round otherwise (`cbs.LlamaBeams`: a few tenths
    # of a nat over a path)
    _check_ranked(llama.rank_constrained_sync(_request(trie, 3, ends_turn=ends_turn)), trie, truth, tol=0.5)


@pytest.mark.llm
def test_llama_cpp_forbidding_a_prefix_path_keeps_the_paths_that_extend_it(llama):
    """With `ends_turn`, one item's tokens may be a prefix of another's: forbidding the short one masks its
    end of turn, never the longer items (before, its last token was masked, and every extension with it)."""
    a, b, c = llama.tokenize(" Alien")[0], llama.tokenize(" Heat")[0], llama.tokenize(" Fargo")[0]
    trie = Trie([(a,), (a, b), (a, b, c), (c,)])
    every = llama.rank_constrained_sync(_request(trie, 4, ends_turn=True))
    assert sorted(every.paths) == sorted(map(tuple, trie.paths()))
    kept = llama.rank_constrained_sync(_request(trie, 4, ends_turn=True, forbid=((a,),)))
    assert sorted(kept.paths) == sorted([(a, b), (a, b, c), (c,)])


@pytest.mark.llm
def test_llama_cpp_forbidden_paths_and_the_async_call(llama):
    trie = Trie(llama.tokenize(t) for t in TITLES)
    ranked = llama.rank_constrained_sync(_request(trie, 3))
    again = asyncio.run(llama.arank_constrained(_request(trie, 3)))
    assert (again.paths, again.logprobs) == (ranked.paths, ranked.logprobs)
    without = llama.rank_constrained_sync(_request(trie, 3, forbid=(ranked.paths[0],)))
    assert without.paths == ranked.paths[1:] and without.logprobs == ranked.logprobs[1:]


@pytest.mark.llm
def test_llama_cpp_a_prompt_beyond_the_search_context_is_a_sample_error(smollm2_path):
    from recharness.core.errors import SampleError
    from recharness.models.llamacpp import LlamaCppBackend

    small = LlamaCppBackend(smollm2_path, n_ctx=512, n_threads=1, beam_n_ctx=40)
    trie = Trie(small.tokenize(t) for t in TITLES)
    with pytest.raises(SampleError, match="KV cells; the search has beam_n_ctx=40"):
        small.rank_constrained_sync(_request(trie, 3))


# --- transformers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf(smollm2_path):
    for extra in ("transformers", "gguf", "accelerate"):
        pytest.importorskip(extra, reason="the hf extra is not installed")
    import torch

    from recharness.models.hf import HFBackend

    torch.set_num_threads(1)
    backend = HFBackend(str(smollm2_path))
    backend.load()
    return backend


def _hf_truth(hf, paths, end: tuple[int, ...] = ()) -> dict[tuple[int, ...], float]:
    """Sum of log-softmax (float64) from one forward pass over prompt + path (+ end), no KV cache."""
    import torch

    tok, model = hf.load()
    prompt = hf.tokenize(tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False) + "1.")
    out = {}
    for path in paths:
        seq = [*prompt, *path, *end]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([seq])).logits[0].double(), -1)
        out[tuple(path)] = float(sum(lp[len(prompt) - 1 + i, t] for i, t in enumerate(seq[len(prompt):])))
    return out


@pytest.mark.llm
def test_hf_ranks_the_trie_by_cumulative_log_prob(hf):
    trie = Trie(hf.tokenize(t) for t in TITLES)
    assert sorted(len(p) for p in trie.paths()) == [2, 3, 4]
    _check_ranked(hf.rank_constrained_sync(_request(trie, 3)), trie, _hf_truth(hf, trie.paths()), tol=1e-3)


@pytest.mark.llm
def test_hf_ending_the_turn_ranks_by_transformers_beam_search(hf):
    tok, _ = hf.load()
    end = (tok.convert_tokens_to_ids("<|im_end|>"),)
    trie = Trie(hf.tokenize(t) for t in SAME_LENGTH)
    assert {len(p) for p in trie.paths()} == {2}
    ranked = hf.rank_constrained_sync(_request(trie, 3, ends_turn=True))
    _check_ranked(ranked, trie, _hf_truth(hf, trie.paths(), end), tol=1e-3)
    best = hf.rank_constrained_sync(_request(trie, 1, ends_turn=True))  # one beam: greedy search
    assert best.paths == ranked.paths[:1] and best.logprobs == [pytest.approx(ranked.logprobs[0], abs=1e-4)]
    without = hf.rank_constrained_sync(_request(trie, 2, ends_turn=True, forbid=(ranked.paths[0],)))
    assert without.paths == ranked.paths[1:]


@pytest.mark.llm
def test_llama_cpp_appends_the_end_of_turn_to_a_trie_once_not_per_sample(llama, monkeypatch):
    """With `ends_turn` each path gets the end-of-turn token: a new trie of the whole catalog, which was made for
    every sample inside its timed latency (a cost SID-SASRec and title-cbs do not pay); now once per trie."""
    from recharness.models import cbs

    made = []

    class Counting(cbs.Trie):
        def __init__(self, *a, **k):
            made.append(1)
            super().__init__(*a, **k)

    trie = Trie(llama.tokenize(t) for t in TITLES)
    monkeypatch.setattr(cbs, "Trie", Counting)
    first = llama.rank_constrained_sync(_request(trie, 2, ends_turn=True))
    second = llama.rank_constrained_sync(_request(trie, 2, ends_turn=True))
    assert len(made) == 1 and first.paths == second.paths
    llama.rank_constrained_sync(_request(Trie(llama.tokenize(t) for t in TITLES[:2]), 2, ends_turn=True))
    assert len(made) == 2  # another trie: its own

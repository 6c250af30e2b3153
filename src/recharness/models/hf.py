"""Hugging Face transformers models, in process (optional extra: `pip install recharness[hf]`).

Weights must already be local (a path or the HF cache): nothing is downloaded
at run time.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time

from recharness.core.errors import ConfigError, one_line
from recharness.core.types import (
    Completion,
    ConstrainedRequest,
    GenerationParams,
    Messages,
    OptionScores,
    RankedSequences,
)
from recharness.models.base import ModelBackend, option_first_tokens


class HFBackend(ModelBackend):
    backend = "hf"

    def __init__(self, model: str):
        super().__init__(model)
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            raise ConfigError("the hf backend needs `pip install 'recharness[hf]'` (transformers + torch)") from None
        self._lock = threading.Lock()
        self._tok = self._model = None
        self._weights: str | None | bool = False  # `weights_fingerprint`, computed by the first `identity()`

    def identity(self) -> dict:
        """A model written by `recharness finetune` adds what it is (base, settings, steps, a hash of its
        weights): the response cache never answers a new fine-tune saved to the same directory from an old one."""
        from pathlib import Path

        ident = super().identity()
        if self._weights is False:  # once per backend: identity() keys every cached call
            self._weights = weights_fingerprint(self.model)
        if self._weights:  # the bytes it loads: new weights in the same folder (or a new hub snapshot) are another model
            ident["weights"] = self._weights
        info = Path(self.model) / "finetune.json"
        if info.is_file():
            import json

            try:
                d = json.loads(info.read_text())
            except (OSError, ValueError):
                d = {}
            keys = ("base", "task", "items", "settings", "examples", "steps", "train_s", "weights")
            ident["finetune"] = {k: d.get(k) for k in keys}
            m = d.get("merge")
            if isinstance(m, dict):  # `recharness merge`: how, and of which fine-tunes
                ident["finetune"]["merge"] = {"method": m.get("method"), "weights": m.get("weights"),
                                              "density": m.get("density"),
                                              "sources": [x.get("task") for x in m.get("sources") or []]}
        return ident

    def load(self):
        """The tokenizer and weights, loaded once (training and scoring share this one copy)."""
        if self._model is None:
            from pathlib import Path

            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            where, kw = self.model, {"local_files_only": True}
            path = Path(self.model)
            if path.is_file() and path.suffix == ".gguf":  # a GGUF file: transformers dequantises it
                where, kw = str(path.parent), {**kw, "gguf_file": path.name, "dtype": torch.float32}
            elif path.is_dir() and not (path / "config.json").exists() and (ggufs := sorted(path.glob("*.gguf"))):
                kw = {**kw, "gguf_file": ggufs[0].name, "dtype": torch.float32}
            try:
                self._tok = AutoTokenizer.from_pretrained(where, **kw)
                self._model = AutoModelForCausalLM.from_pretrained(where, **kw)
            except Exception as e:  # noqa: BLE001 - not downloaded, a typo, not a causal LM, damaged weights: the model, not a sample
                self._tok = self._model = None
                raise ConfigError(f"hf:{self.model}: cannot load it from local files ({one_line(e)}): give a local "
                                  "folder or GGUF file, or a Hugging Face name already in the local cache") from None
            self._model.eval()
        return self._tok, self._model

    def _prompt_ids(self, tok, messages: Messages, answer_start: str = ""):
        """The chat prompt (the answer started with `answer_start`) as a [1, n] tensor of token ids. The
        template is rendered to text first: `apply_chat_template(return_tensors="pt")` returns a tensor in
        transformers 4 but a BatchEncoding in 5, and the text path is the same in both."""
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + answer_start
        return tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    def _generate_sync(self, messages: Messages, params: GenerationParams) -> Completion:
        import torch

        with self._lock:
            tok, model = self.load()
            t0 = time.perf_counter()
            ids = self._prompt_ids(tok, messages)
            torch.manual_seed(params.seed)
            kw = dict(max_new_tokens=params.max_tokens, do_sample=params.temperature > 0)
            if params.temperature > 0:
                kw.update(temperature=params.temperature, top_p=params.top_p)
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
            new = out[0, ids.shape[1]:]
            text = tok.decode(new, skip_special_tokens=True)
            for s in params.stop:
                text = text.split(s)[0]
            return Completion(text=text, prompt_tokens=int(ids.shape[1]), completion_tokens=int(new.shape[0]),
                              latency_s=time.perf_counter() - t0)

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        return await asyncio.to_thread(self._generate_sync, messages, params)

    def score_options_sync(self, messages: Messages, options: list[str]) -> OptionScores:
        import torch

        with self._lock:
            tok, model = self.load()
            t0 = time.perf_counter()
            ids = self._prompt_ids(tok, messages)
            with torch.no_grad():
                logp = torch.log_softmax(model(ids).logits[0, -1].double(), -1)
            res = {}
            firsts = option_first_tokens(lambda text: tok.encode(text, add_special_tokens=False), options, self.name)
            for o in options:
                p = sum(math.exp(float(logp[i])) for i in firsts[o])
                res[o] = math.log(p) if p > 0 else -math.inf
            return OptionScores(logprobs=res, latency_s=time.perf_counter() - t0)

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await asyncio.to_thread(self.score_options_sync, messages, options)

    def tokenize(self, text: str) -> list[int]:
        """`text` as the model reads it inside an answer (no special tokens added): how the paths of a
        `ConstrainedRequest` are spelled."""
        with self._lock:
            tok, _ = self.load()
            return tok.encode(text, add_special_tokens=False)

    def rank_constrained_sync(self, request: ConstrainedRequest) -> RankedSequences:
        """CBS. With `ends_turn`: transformers' beam search (`_rank_by_generate`); without: `cbs.beam_search`
        over the next-token log-probs, best cumulative log-prob first."""
        with self._lock:
            tok, model = self.load()
            t0 = time.perf_counter()
            ids = self._prompt_ids(tok, request.messages, request.answer_start)
            rank = self._rank_by_generate if request.ends_turn else self._rank_by_search
            paths, logprobs = rank(tok, model, ids, request)
            return RankedSequences(paths, logprobs, time.perf_counter() - t0)

    @staticmethod
    def _rank_by_search(tok, model, ids, request: ConstrainedRequest) -> tuple[list[tuple[int, ...]], list[float]]:
        from recharness.models.cbs import beam_search, forbid_paths, torch_step_logprobs

        step = forbid_paths(torch_step_logprobs(lambda x: model(x).logits, context=ids[0].tolist()), request.forbid)
        found = beam_search(step, request.trie, request.beams, request.trie.max_len)
        return [tuple(p) for p, _ in found], [s for _, s in found]

    @staticmethod
    def _rank_by_generate(tok, model, ids, request: ConstrainedRequest) -> tuple[list[tuple[int, ...]], list[float]]:
        """`generate` with the trie as its `prefix_allowed_tokens_fn` and the end-of-turn token as EOS: `beams`
        rows ranked by log-prob per token (the cumulative order when all paths have one length: IDs, SIDs;
        with fewer paths than beams some rows are no path). A beam of it cannot die at a masked token, so
        `forbid` paths are never finished and a token all of whose paths are forbidden never offered
        (`hf_prefix_allowed_tokens_fn`), the catalog's trie not rebuilt per sample."""
        import torch

        from recharness.models.cbs import hf_prefix_allowed_tokens_fn

        trie = request.trie
        eos = end_of_turn_id(tok)
        n = ids.shape[1]
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=request.beams,
                                 num_return_sequences=request.beams, max_new_tokens=trie.max_len + 1,
                                 do_sample=False, early_stopping=True, eos_token_id=eos, pad_token_id=eos,
                                 prefix_allowed_tokens_fn=hf_prefix_allowed_tokens_fn(trie, n, eos, request.forbid),
                                 # the model's own generation config may penalise repeats (Qwen2.5: 1.05): the
                                 # beams would be chosen on scores other than the log-probs reported for them
                                 repetition_penalty=1.0, no_repeat_ngram_size=0, length_penalty=1.0,
                                 output_logits=True, return_dict_in_generate=True)
        rows = out.sequences[:, n:].tolist()
        # each step's log-probs of the beam the row came from (-1: finished before; one beam is greedy
        # search, which has no beam indices)
        steps = [torch.log_softmax(x.double(), -1) for x in out.logits]
        froms = out.beam_indices.tolist() if request.beams > 1 else [[0] * len(rows[0])]
        logprobs = [sum(float(steps[t][b, x]) for t, (b, x) in enumerate(zip(beams, row)) if b >= 0)
                    for beams, row in zip(froms, rows)]
        return [tuple(x for x in row if x != eos) for row in rows], logprobs

    async def arank_constrained(self, request: ConstrainedRequest) -> RankedSequences:
        return await asyncio.to_thread(self.rank_constrained_sync, request)


#: the files whose bytes decide a transformers model's answers
_WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf", "config.json", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "*.jinja")


def weights_fingerprint(model: str) -> str | None:
    """A short hash of what `hf:MODEL` loads: for a local folder or file, each weight / config / tokenizer
    file's sha256 (hashed once per size and mtime, `file_sha256_cached`); for a hub name, the cached
    snapshot's revision. None when neither is found (the load then fails with its own message)."""
    import hashlib
    from pathlib import Path

    from recharness.models.llamacpp import file_sha256_cached

    path = Path(model)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted({f for pattern in _WEIGHT_FILES for f in path.glob(pattern) if f.is_file()})
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            got = try_to_load_from_cache(model, "config.json")
        except Exception:  # noqa: BLE001 - not a hub name, or no hub library: no fingerprint
            return None
        return f"snapshot {Path(got).parent.name[:16]}" if isinstance(got, str) else None
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{file_sha256_cached(f)}\n".encode())
    return h.hexdigest()[:16]


def end_of_turn_id(tok) -> int:
    """The token an answer ends with: ChatML's <|im_end|> where the tokenizer has it (SmolLM2, Qwen2.5), else its
    EOS. Fine-tuning (`finetune.api`) trains an item answer to end with it and constrained decoding stops at it:
    one rule for both."""
    return tok.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tok.get_vocab() else tok.eos_token_id

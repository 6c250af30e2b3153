"""In-process GGUF models through llama-cpp-python: the offline default.

One Llama object serves one request at a time (it holds a single KV cache),
so calls are serialised behind a lock and run in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from pathlib import Path

from recharness.core.cpus import usable_cpus
from recharness.core.errors import ConfigError, RecharnessError, SampleError, one_line
from recharness.core.types import (
    Completion,
    ConstrainedRequest,
    GenerationParams,
    Messages,
    OptionScores,
    RankedSequences,
)
from recharness.models.base import ModelBackend, option_first_tokens
from recharness.models.gguf_header import read_general
from recharness.models.llama_native import llama_native


def import_llama():
    """The llama_cpp module, or a ConfigError saying how to install it."""
    try:
        import llama_cpp
    except ImportError:
        from recharness.models.llama_build import install_hint

        raise ConfigError(f"llama-cpp-python is not installed: {install_hint()}; or use --model openai:...") from None
    return llama_cpp


class LlamaCppBackend(ModelBackend):
    backend = "llamacpp"

    def __init__(self, model_path: str | Path, name: str | None = None, n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0,
                 reuse_prefix: bool = True, sha256: str | None = None, beam_n_ctx: int | None = None):
        path = Path(model_path)
        if not path.exists():
            raise ConfigError(f"GGUF file not found: {path}")
        super().__init__(name or path.stem)
        self.model_path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or usable_cpus()
        self.seed = seed
        #: option scoring keeps the evaluated prompt prefix in the KV cache (see _reusable_prefix)
        self.reuse_prefix = reuse_prefix
        self._llm = None
        self._lock = threading.Lock()
        self._finetune: dict | None | bool = False  # not read yet
        #: what the file says it is (general.name, quantisation), read from its header once
        self._header: dict | None = None
        #: the file's sha256: a built-in model's published hash, else hashed once (`file_sha256_cached`)
        self.sha256 = sha256
        #: KV cells of a constrained search (the prompt + the beams' tokens), in a context of its own
        self.beam_n_ctx = beam_n_ctx or n_ctx
        self._beams = None  # cbs.LlamaBeams, made by the first constrained request
        #: (the request's trie, the end tokens, that trie with them appended): made once per trie, not per sample
        #: (it walks the whole catalog; inside a sample's timed latency it cost what a decoder without it does not)
        self._ended = None

    def identity(self) -> dict:
        # The file name, not its directory, so caches survive moving the data home.
        ident = {"backend": self.backend, "model": self.model, "file": self.model_path.name, "n_ctx": self.n_ctx}
        if self._header is None:
            from recharness.models.gguf_header import read_header

            self._header = read_header(self.model_path)
        ident.update(self._header)
        if not self.sha256:  # a user's own GGUF: its bytes, so a file replaced under the same name is another model
            self.sha256 = file_sha256_cached(self.model_path)
        ident["sha256"] = self.sha256[:16]
        if self._finetune is False:
            self._finetune = finetune_identity(self.model_path)
        if self._finetune:
            # a GGUF written by `recharness export-gguf`: what the fine-tune is (its weights' hash, the
            # quantisation), so two fine-tunes saved under one file name never share cached answers
            ident["finetune"] = self._finetune
        return ident

    def load(self):
        """The llama.cpp model, loaded once per backend."""
        if self._llm is None:
            llama_cpp = import_llama()
            try:
                self._llm = llama_cpp.Llama(
                    model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                    seed=self.seed, verbose=False,
                )
            except Exception as e:  # noqa: BLE001 - damaged file, unknown architecture, no memory: the model, not a sample
                raise ConfigError(f"{self.name}: llama.cpp cannot load {self.model_path} ({one_line(e)}): every "
                                  "sample would fail alike, so the run stops") from None
        return self._llm

    def _generate_sync(self, messages: Messages, params: GenerationParams) -> Completion:
        with self._lock:
            llm = self.load()
            t0 = time.perf_counter()
            try:
                out = llm.create_chat_completion(
                    messages=messages, max_tokens=params.max_tokens, temperature=params.temperature,
                    top_p=params.top_p, seed=params.seed, stop=list(params.stop) or None,
                )
            except ValueError as e:  # e.g. prompt longer than the context window
                kind = "context_overflow" if "context" in str(e).lower() else "bad_request"
                raise SampleError(kind, f"{self.name}: {e}") from None
            latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
        )

    async def agenerate(self, messages: Messages, params: GenerationParams) -> Completion:
        return await asyncio.to_thread(self._generate_sync, messages, params)

    def score_options_sync(self, messages: Messages, options: list[str]) -> OptionScores:
        """Next-token log-probs after the chat prompt; both spellings ("Yes", " Yes") summed."""
        import numpy as np

        with self._lock:
            llm = self.load()
            t0 = time.perf_counter()
            tokens = self._prompt_tokens(llm, messages)
            if len(tokens) >= self.n_ctx:
                raise SampleError("context_overflow", f"{self.name}: prompt of {len(tokens)} tokens exceeds the "
                                  f"context window ({self.n_ctx})")
            keep = self._reusable_prefix(llm, tokens) if self.reuse_prefix else 0
            if keep > 0 and llama_native(llm).context.kv_cache_seq_rm(-1, keep, -1):
                llm.n_tokens = keep  # the KV cache already holds these tokens: evaluate only the rest
            else:
                llm.reset()
                keep = 0
            llm.eval(tokens[keep:])
            # Without logits_all llama-cpp-python keeps no copy: read the context's last row.
            logits = np.ctypeslib.as_array(llama_native(llm).context.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
            m = logits.max()
            logz = m + math.log(np.exp(logits - m).sum())
            result = {}
            firsts = option_first_tokens(lambda text: llm.tokenize(text.encode("utf-8"), add_bos=False, special=False),
                                         options, self.name)
            for opt in options:
                p = sum(math.exp(logits[i] - logz) for i in firsts[opt])
                result[opt] = math.log(p) if p > 0 else -math.inf
            latency = time.perf_counter() - t0
        return OptionScores(logprobs=result, latency_s=latency)

    @staticmethod
    def _reusable_prefix(llm, tokens: list[int]) -> int:
        """How many leading tokens of `tokens` the KV cache already holds (at most all but the last one:
        the last must be evaluated to produce the logits). Consecutive candidates of one user share
        the system prompt and the history, so only the candidate's few tokens are evaluated again."""
        held = llm.input_ids[: llm.n_tokens]
        n = min(len(held), len(tokens) - 1)
        k = 0
        while k < n and held[k] == tokens[k]:
            k += 1
        return k

    def _prompt_tokens(self, llm, messages: Messages, answer_start: str = "") -> list[int]:
        """The chat prompt with the answer started with `answer_start`, as token ids."""
        text = self.chat_prompt(llm, messages) + answer_start
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def tokenize(self, text: str) -> list[int]:
        """`text` as the model reads it inside an answer (no BOS, special tokens spelled as text): how the
        paths of a `ConstrainedRequest` are spelled."""
        with self._lock:
            return self.load().tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def rank_constrained_sync(self, request: ConstrainedRequest) -> RankedSequences:
        """CBS with every live beam in its own KV sequence and one decode call per step (`cbs.LlamaBeams`),
        best cumulative log-prob first. With `ends_turn` the GGUF's EOS token ends every path."""
        from recharness.models.cbs import LlamaBeams, Trie

        with self._lock:
            llm = self.load()
            t0 = time.perf_counter()
            tokens = self._prompt_tokens(llm, request.messages, request.answer_start)
            end = (llm.token_eos(),) if request.ends_turn else ()
            if end and (self._ended is None or self._ended[0] is not request.trie or self._ended[1] != end):
                self._ended = (request.trie, end, Trie(tuple(p) + end for p in request.trie.paths()))
            trie = self._ended[2] if end else request.trie
            # KV cells: the prompt, the live beams' tokens and those of the beams that died a step ago
            need = len(tokens) + 2 * request.beams * trie.max_len
            if need > self.beam_n_ctx:
                raise SampleError("context_overflow", f"{self.name}: a prompt of {len(tokens)} tokens and "
                                  f"{request.beams} beams over paths of up to {trie.max_len} tokens need "
                                  f"{need} KV cells; the search has beam_n_ctx={self.beam_n_ctx}")
            if self._beams is None or self._beams.beams != request.beams:
                if self._beams is not None:
                    self._beams.close()
                self._beams = LlamaBeams(llm, request.beams, n_ctx=self.beam_n_ctx, n_threads=self.n_threads)
            # a forbidden path ends at its end-of-turn token too: masking that, not its last item token, leaves
            # the paths that extend it (one item's tokens a prefix of another's, what `ends_turn` is for) allowed
            found = self._beams.search(tokens, trie, trie.max_len, forbid=[tuple(p) + end for p in request.forbid])
            latency = time.perf_counter() - t0
        return RankedSequences([tuple(p[:len(p) - len(end)]) for p, _ in found], [s for _, s in found], latency)

    async def arank_constrained(self, request: ConstrainedRequest) -> RankedSequences:
        return await asyncio.to_thread(self.rank_constrained_sync, request)

    @staticmethod
    def chat_prompt(llm, messages: Messages) -> str:
        """The chat template of the GGUF applied to `messages`: the exact text the model is scored on."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise RecharnessError("this GGUF has no chat template; cannot build the scoring prompt")
        eos = llm.detokenize([llm.token_eos()]).decode("utf-8", "ignore")
        bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "ignore")
        fmt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        return fmt(messages=messages).prompt

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await asyncio.to_thread(self.score_options_sync, messages, options)


#: `general.description` of a GGUF written by `recharness export-gguf` starts with this, then JSON
FINETUNE_MARKER = "recharness-finetune:"


#: file name (in the data home) of the remembered hashes of model files: {path: {size, mtime_ns, sha256}}
HASHES_FILE = "file_hashes.json"


def file_sha256_cached(path: str | Path) -> str:
    """The sha256 of a (large) model file, hashed once: remembered in `<data home>/file_hashes.json` under
    its absolute path with its size and modification time, and hashed again when either changes."""
    from recharness.core.io import atomic_write_text
    from recharness.core.paths import data_home
    from recharness.core.rundir import file_sha256

    path = Path(path)
    st = path.stat()
    key, stamp = str(path.resolve()), {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    store = data_home() / HASHES_FILE
    try:
        known = json.loads(store.read_text(encoding="utf-8"))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):  # none yet, or unreadable: hashed again, the store rewritten
        known = {}
    got = known.get(key)
    if isinstance(got, dict) and {k: got.get(k) for k in stamp} == stamp and isinstance(got.get("sha256"), str):
        return got["sha256"]
    digest = file_sha256(path)
    known[key] = {**stamp, "sha256": digest}
    try:
        atomic_write_text(store, json.dumps(known, indent=0, sort_keys=True))
    except OSError:  # a read-only data home: the hash is still right, only not remembered
        pass
    return digest


def finetune_identity(path: str | Path) -> dict | None:
    """What `recharness export-gguf` embedded in the file (None for any other GGUF, whose identity
    stays as it always was)."""
    desc = read_general(path).get("general.description")  # a damaged or unreadable header reads as none
    if not isinstance(desc, str) or not desc.startswith(FINETUNE_MARKER):
        return None
    try:
        d = json.loads(desc[len(FINETUNE_MARKER):])
    except ValueError:
        return None
    return d if isinstance(d, dict) else None

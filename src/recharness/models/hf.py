"""Hugging Face transformers models, in process (optional extra: `pip install recharness[hf]`).

Weights must already be local (a path or the HF cache): nothing is downloaded
at run time.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time

from recharness.core.errors import ConfigError
from recharness.core.types import Completion, GenerationParams, Messages, OptionScores
from recharness.models.base import ModelBackend


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

    def identity(self) -> dict:
        """A model written by `recharness finetune` adds what it is (base, settings, steps, a hash of its
        weights): the response cache never answers a new fine-tune saved to the same directory from an old one."""
        from pathlib import Path

        ident = super().identity()
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
            self._tok = AutoTokenizer.from_pretrained(where, **kw)
            self._model = AutoModelForCausalLM.from_pretrained(where, **kw)
            self._model.eval()
        return self._tok, self._model

    def _prompt_ids(self, tok, messages: Messages):
        """The chat prompt as a [1, n] tensor of token ids. The template is rendered to text first:
        `apply_chat_template(return_tensors="pt")` returns a tensor in transformers 4 but a
        BatchEncoding in 5, and the text path is the same in both."""
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
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
            for o in options:
                first = {t[0] for t in (tok.encode(o, add_special_tokens=False), tok.encode(" " + o, add_special_tokens=False)) if t}
                p = sum(math.exp(float(logp[i])) for i in first)
                res[o] = math.log(p) if p > 0 else -math.inf
            return OptionScores(logprobs=res, latency_s=time.perf_counter() - t0)

    async def ascore_options(self, messages: Messages, options: list[str]) -> OptionScores:
        return await asyncio.to_thread(self.score_options_sync, messages, options)

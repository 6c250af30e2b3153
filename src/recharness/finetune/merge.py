"""Weight merging of fine-tunes of one base model (`recharness merge`): linear and TIES.

PerRecBench §6 merges the parameters trained separately on pointwise, pairwise and listwise ranking,
θ = α θ_pt + β θ_pr + (1 − α − β) θ_ls with α = β = 1/3. With fine-tunes of one base θ_0 that is
task arithmetic on the deltas: θ = θ_0 + Σ_i w_i Δ_i with Σ w_i = 1, Δ_i = θ_i − θ_0. For a LoRA
fine-tune Δ_i = (α_i / r_i) B_i A_i on each adapted matrix (read from the adapter `finetune`
keeps in `<model>/adapter/`); a source without an adapter (another tool's fine-tune in the same
layout) contributes its full weights minus the base's.

* linear: θ_0 + Σ w_i Δ_i, weights 1/N each by default (the paper's average).
* ties (Yadav et al. 2023, TIES-merging): each Δ_i keeps its top `density` fraction of entries by
  magnitude (per matrix), the sign of each entry is elected (sign of the sum of the trimmed deltas,
  `majority_sign="total"`; or of the count, "frequency"), and each entry is the mean of the
  (weighted) trimmed deltas that agree with the elected sign ("disjoint mean"); weights 1 each by
  default (λ = 1).

The arithmetic is peft's (`peft.utils.merge_utils.task_arithmetic` / `ties`), applied to the
exact deltas. peft's own `add_weighted_adapter(combination_type="linear" | "ties")` is not used:
it combines the A and B factors separately (Σ√w A · Σ√w B), which is not Σ w B A, the parameter
average the paper describes; its exact "cat" equals our linear merge at the cost of a rank-sum adapter.

The output is a plain `hf:DIR` (float32 `model.safetensors`, the base's tokenizer, `finetune.json`
naming the method, weights, density and every source with its task and weights fingerprint),
written atomically. Nothing is unpickled: adapters and weights are read with safetensors.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

from recharness.core.errors import ConfigError

METHODS = ("linear", "ties")


def _torch():
    import torch

    return torch


def combine(deltas: list, weights: list[float], method: str = "linear", *, density: float = 0.5,
            majority_sign: str = "total"):
    """One merged delta from same-shaped `deltas` (see the module docstring)."""
    from peft.utils.merge_utils import task_arithmetic, ties

    torch = _torch()
    w = torch.tensor([float(x) for x in weights], dtype=deltas[0].dtype)
    if method == "linear":
        return task_arithmetic(list(deltas), w)
    if method == "ties":
        with warnings.catch_warnings():  # density 1: peft warns that it keeps every entry, as asked
            warnings.simplefilter("ignore", UserWarning)
            return ties(list(deltas), w, density, majority_sign)
    raise ConfigError(f"merge: method must be one of {', '.join(METHODS)}, not {method!r}")


def _param_name(module: str) -> str:
    """peft's saved key prefix for a module → the base model's parameter name of its weight."""
    return module.removeprefix("base_model.model.") + ".weight"


def adapter_deltas(adapter_dir: Path) -> dict:
    """{base parameter name: ΔW} of a saved LoRA adapter: (alpha / r) · B @ A (alpha / √r with rsLoRA)."""
    from safetensors.torch import load_file

    adapter_dir = Path(adapter_dir)
    cfg_path, w_path = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not (cfg_path.exists() and w_path.exists()):
        raise ConfigError(f"{adapter_dir}: no LoRA adapter (adapter_config.json + adapter_model.safetensors)")
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("peft_type", "LORA") != "LORA" or cfg.get("use_dora"):
        raise ConfigError(f"{adapter_dir}: only plain LoRA adapters can be merged (peft_type {cfg.get('peft_type')}, "
                          f"use_dora {cfg.get('use_dora')})")
    if cfg.get("rank_pattern") or cfg.get("alpha_pattern"):
        raise ConfigError(f"{adapter_dir}: adapters with per-module rank or alpha patterns are not supported")
    r, alpha = int(cfg["r"]), float(cfg["lora_alpha"])
    scale = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
    sd = load_file(str(w_path))
    out = {}
    for k in sorted(sd):
        if k.endswith(".lora_A.weight"):
            mod = k[: -len(".lora_A.weight")]
            b = sd.get(mod + ".lora_B.weight")
            if b is None:
                raise ConfigError(f"{w_path}: {k} has no lora_B")
            d = scale * (b.float() @ sd[k].float())
            out[_param_name(mod)] = d.T if cfg.get("fan_in_fan_out") else d
        elif not k.endswith(".lora_B.weight"):
            raise ConfigError(f"{w_path}: cannot merge {k} (only LoRA A/B matrices; no trainable tokens, "
                              "embeddings or biases)")
    if not out:
        raise ConfigError(f"{w_path}: no LoRA matrices")
    return out


def full_deltas(model_dir: Path, base_params: dict) -> dict:
    """{parameter name: W − W_base} of a full fine-tuned model's safetensors (entries that differ)."""
    from safetensors.torch import load_file

    torch = _torch()
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{model_dir}: neither adapter/ nor *.safetensors weights")
    out = {}
    for f in files:
        for k, v in load_file(str(f)).items():
            if k not in base_params:
                continue
            b = base_params[k]
            if tuple(v.shape) != tuple(b.shape):
                raise ConfigError(f"{f}: {k} has shape {tuple(v.shape)}, the base {tuple(b.shape)}: not a fine-tune "
                                  "of this base model")
            d = v.float() - b.detach().float()
            if torch.count_nonzero(d):
                out[k] = d
    return out


def read_source(model_dir: Path) -> dict:
    """What a merge needs to know of one fine-tune: its finetune.json and whether it kept an adapter."""
    import json

    from recharness.core.errors import InputError
    from recharness.finetune.export import ADAPTER_DIR, FINETUNE_INFO

    model_dir = Path(str(model_dir).removeprefix("hf:")).expanduser()
    if not model_dir.is_dir():
        raise ConfigError(f"merge: {model_dir} is not a directory")
    path = model_dir / FINETUNE_INFO
    info: dict = {}
    if path.is_file():  # without it: another tool's fine-tune in the same layout (`merge` then needs --base)
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:  # a cut or damaged file: said as such, not as "no base model"
            raise InputError(path, f"unreadable ({' '.join(str(e).split())[:200]})") from None
        if not isinstance(info, dict):
            raise InputError(path, "not a JSON object: not a fine-tune's record")
    if (model_dir / "item_vocab.json").exists() or info.get("items") not in (None, "text"):
        raise ConfigError(f"merge: {model_dir} has item tokens ({info.get('items')}); only text fine-tunes merge")
    return {"dir": model_dir, "info": info, "adapter": (model_dir / ADAPTER_DIR / "adapter_config.json").exists(),
            "no_info": not path.is_file()}


def merge(sources: list[Path], out: Path, *, method: str = "linear", weights: list[float] | None = None,
          density: float = 0.5, majority_sign: str = "total", base: str | None = None, base_model=None,
          on_status=None) -> Path:
    """Merge the fine-tunes in `sources` (hf:DIR folders made by `finetune`) into the `hf:DIR` `out`.

    `weights`: one per source (default 1/N for linear, 1 for ties); `density`: the fraction of each
    delta TIES keeps; `base`: the base model (default: the `base` every source's finetune.json names);
    `base_model`: its (tokenizer, model) already loaded (changed in place), else loaded by `load_base`."""
    from recharness.finetune._fs import atomic_dir
    from recharness.finetune.api import load_base
    from recharness.finetune.export import FINETUNE_INFO, strip_gguf, weights_fingerprint

    torch = _torch()
    status = on_status or (lambda msg: None)
    if method not in METHODS:
        raise ConfigError(f"merge: method must be one of {', '.join(METHODS)}, not {method!r}")
    if len(sources) < 2:
        raise ConfigError("merge: give at least two fine-tuned model directories")
    if not 0 < density <= 1:
        raise ConfigError(f"merge: density must be in (0, 1], got {density}")
    if majority_sign not in ("total", "frequency"):
        raise ConfigError(f"merge: majority sign method is total or frequency, not {majority_sign!r}")
    srcs = [read_source(s) for s in sources]
    n = len(srcs)
    if weights is None:
        weights = [1.0 / n] * n if method == "linear" else [1.0] * n
    weights = [float(w) for w in weights]
    if len(weights) != n or not all(math.isfinite(w) for w in weights):
        raise ConfigError(f"merge: give one finite weight per model ({n}), got {weights}")
    bases = {s["info"].get("base") for s in srcs}
    named = {b for b in bases if b is not None}
    if len(named) > 1:  # deltas from different base weights: added to one base, the sum is no model of either
        raise ConfigError(f"merge: the models were fine-tuned from different base models ({', '.join(sorted(map(str, named)))}): "
                          "their deltas cannot be added to one base; merge fine-tunes of one base model")
    bare = list(dict.fromkeys(str(s["dir"]) for s in srcs if s.get("no_info")))
    if base is None and bare:
        raise ConfigError(f"merge: {', '.join(bare)} has no {FINETUNE_INFO} (not a fine-tune made by `recharness "
                          "finetune`): give the base model with --base")
    if base is None:
        if len(bases) != 1 or None in bases:
            raise ConfigError(f"merge: the models name no base model ({sorted(map(str, bases))}); give the base "
                              "with --base")
        base = bases.pop()
    out = Path(out)
    for s in srcs:
        if s["dir"].resolve() == out.resolve():
            raise ConfigError(f"merge: the output {out} is one of the inputs")
    status(f"loading {base}…")
    tok, model = base_model if base_model is not None else load_base(base)
    params = dict(model.named_parameters())
    deltas = []
    for s in srcs:
        status(f"reading {s['dir']}…")
        d = adapter_deltas(s["dir"] / "adapter") if s["adapter"] else full_deltas(s["dir"], params)
        for k, v in d.items():
            if k not in params:
                raise ConfigError(f"merge: {s['dir']} changes {k}, which the base model {base} does not have")
            if tuple(v.shape) != tuple(params[k].shape):
                raise ConfigError(f"merge: {s['dir']}: {k} {tuple(v.shape)} vs the base's {tuple(params[k].shape)}")
        deltas.append(d)
    status(f"merging ({method})…")
    names = sorted(set().union(*deltas))
    with torch.no_grad():
        for k in names:
            p = params[k]
            ds = [d.get(k) if d.get(k) is not None else torch.zeros(p.shape) for d in deltas]
            p.add_(combine(ds, weights, method, density=density, majority_sign=majority_sign).to(p.dtype))
    strip_gguf(model)
    model.config.use_cache = True
    model.to(torch.float32)

    def common(key: str):
        """The sources' shared value of `key`, or None when they differ."""
        vals = {json.dumps(s["info"].get(key), sort_keys=True, default=str) for s in srcs}
        return srcs[0]["info"].get(key) if len(vals) == 1 else None

    info = {
        "base": base, "suite": common("suite"), "task": "merged", "dataset": common("dataset"), "items": "text",
        "build": common("build"), "merge": {
            "method": method, "weights": weights, "density": density if method == "ties" else None,
            "majority_sign": majority_sign if method == "ties" else None, "parameters": len(names),
            "sources": [{"dir": str(s["dir"]), "task": s["info"].get("task"), "suite": s["info"].get("suite"),
                         "dataset": s["info"].get("dataset"), "build": s["info"].get("build"),
                         "base_finetune": s["info"].get("base_finetune"), "weights": s["info"].get("weights"),
                         "examples_fingerprint": s["info"].get("examples_fingerprint"),
                         "settings": s["info"].get("settings"),
                         "delta_from": "adapter" if s["adapter"] else "full weights"} for s in srcs]},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    status(f"saving {out}…")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        for k in ("dtype", "torch_dtype", "gguf_file"):  # loading options of the GGUF, not tokenizer settings
            tok.init_kwargs.pop(k, None)
        tok.save_pretrained(tmp)
        info["weights"] = weights_fingerprint(tmp)
        (tmp / FINETUNE_INFO).write_text(json.dumps(info, indent=2, default=str))
    return out

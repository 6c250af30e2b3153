"""A fitted torch baseline on disk: `model.pt` (the state dict) and `config.json` (what rebuilds it).

SASRec, SID-SASRec and the DLRMs save and load this one way, so a model saved by one version
loads in the next. Never a pickled object: the state dict is read back with `weights_only=True`
(tensors only, no code run), and both files are written atomically, so a killed `train` never
leaves a torn model. A fit's state between epochs is `core.fit_checkpoint.EpochCheckpoint`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, NamedTuple

import torch

from recharness.core.io import atomic_write_bytes, atomic_write_text


def save_model(path: Path, state_dict: dict[str, torch.Tensor], config: dict[str, Any]) -> Path:
    """Write `path`/model.pt and `path`/config.json (`config` holds "baseline" and "settings"); returns `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save(state_dict, buf)
    atomic_write_bytes(path / "model.pt", buf.getvalue())
    atomic_write_text(path / "config.json", json.dumps(config))
    return path


class SavedModel(NamedTuple):
    """What `read_model` found: the class to build, its constructor's seed and settings, the whole
    config (vocabularies, fit log) and the weights."""

    cls: type
    seed: int
    settings: dict[str, Any]
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]


def read_model(path: Path, variants: dict[str, type], default_cls: type, drop: tuple[str, ...] = ()) -> SavedModel:
    """Read what `save_model` wrote. The class is the saved variant's (`variants[config["baseline"]]`,
    else `default_cls`); `settings` lose "seed" (returned apart) and the `drop` keys, which the
    class itself fixes (its layer count, model name...) and its constructor does not take."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    settings = dict(config["settings"])
    seed = settings.pop("seed", 0)
    for k in drop:
        settings.pop(k, None)
    state = torch.load(path / "model.pt", map_location="cpu", weights_only=True)
    return SavedModel(variants.get(config["baseline"], default_cls), seed, settings, config, state)

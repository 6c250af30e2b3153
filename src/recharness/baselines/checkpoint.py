"""A fitted torch baseline on disk: `model.pt` (the state dict) and `config.json` (what rebuilds it).

SASRec, SID-SASRec and the DLRMs save and load this one way, so a model saved by one version
loads in the next. Never a pickled object: the state dict is read back with `weights_only=True`
(tensors only, no code run), and both files are written atomically, so a killed `train` never
leaves a torn model.
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


class EpochCheckpoint:
    """A fit loop's whole state after each epoch, so a killed `train` goes on from its last whole epoch
    instead of epoch 1 (SASRec's fits take minutes to tens of minutes).

    `<dir>/epoch-N.pt` holds the tensors (weights, optimiser moments, RNG states, the best epoch's
    weights), read back with `weights_only=True`; `<dir>/state.json` the rest (epoch, counters, the epochs'
    log) and the `stamp` it was saved for (build, baseline, settings, seed, the CPU's instruction set; and,
    added by the fit, a hash of its training and validation data, its thread count and torch version): its atomic rename is the
    commit point, the previous epoch's tensors are removed after it. A checkpoint of another stamp is
    never resumed (the fit starts afresh), so a resumed loop trains exactly what an uninterrupted run
    would: the shuffling and dropout generators' states are part of it."""

    def __init__(self, path: Path, stamp: dict[str, Any]):
        self.path = Path(path)
        # the CPU's vector instruction set too: another one computes other roundings, so a resumed fit would no
        # longer end with the uninterrupted fit's weights (a run directory moved to another machine starts afresh)
        stamp = {**stamp, "cpu": torch.backends.cpu.get_cpu_capability()}
        self.stamp = json.loads(json.dumps(stamp, default=str))  # as it reads back

    def extend(self, **parts: Any) -> None:
        """Add to the stamp what only the fit knows (its data's hash, the thread count it trains with)."""
        self.stamp = {**self.stamp, **json.loads(json.dumps(parts, default=str))}

    def load(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(tensors, state) of the last committed epoch saved for this stamp, else None."""
        try:
            record = json.loads((self.path / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("stamp") != self.stamp:
            return None
        try:
            tensors = torch.load(self.path / record["file"], map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - a damaged checkpoint only costs the epochs it held
            return None
        return tensors, record["state"]

    def save(self, epoch: int, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(tensors, buf)
        name = f"epoch-{epoch}.pt"
        atomic_write_bytes(self.path / name, buf.getvalue())
        atomic_write_text(self.path / "state.json",
                          json.dumps({"stamp": self.stamp, "epoch": epoch, "file": name, "state": state}))
        for old in self.path.glob("epoch-*.pt"):
            if old.name != name:
                old.unlink(missing_ok=True)

"""Where recharness keeps prepared data, models, runs and caches.

Everything lives under one data home so a user can move or wipe it in one go.
"""

from __future__ import annotations

import os
from pathlib import Path


def data_home() -> Path:
    """`RECHARNESS_HOME`, else `~/.cache/recharness`."""
    env = os.environ.get("RECHARNESS_HOME")
    home = Path(env).expanduser() if env else Path.home() / ".cache" / "recharness"
    if home.exists() and not home.is_dir():
        from recharness.core.errors import ConfigError

        raise ConfigError(f"RECHARNESS_HOME={home} is a file, not a directory: point it at a folder for datasets, "
                          "models and runs")
    home.mkdir(parents=True, exist_ok=True)
    return home


def datasets_dir() -> Path:
    return data_home() / "datasets"


def is_plain_name(name: str) -> bool:
    """A name that stays one folder below its parent: no separator, no leading dot, no NUL."""
    return bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


def plain_name(name: str, what: str = "dataset name") -> str:
    """`name` if `is_plain_name`, else a ConfigError: user-given names become folders under the data
    home, and `../x` or `/abs/path` must not reach (and, on a replace, delete) anything outside it."""
    if not is_plain_name(str(name)):
        from recharness.core.errors import ConfigError

        raise ConfigError(f"bad {what} {name!r}: expected a plain name such as 'ml-1m' (no '/', '\\', leading "
                          "'.' or NUL)")
    return str(name)


def dataset_dir(name: str) -> Path:
    """A prepared dataset's folder under the data home (`name` must be a plain name)."""
    return datasets_dir() / plain_name(name)


def runs_dir() -> Path:
    return data_home() / "runs"


def dataset_runs_name(dataset: str) -> str:
    """The folder name a dataset's default runs go under: the name itself, or for a dataset given by
    its path (`-d /data/prepared/ml`) that folder's name, so a run never lands inside the dataset or
    outside the runs folder."""
    d = str(dataset)
    return plain_name(d if is_plain_name(d) else Path(d).name)


def models_dir() -> Path:
    return data_home() / "models"


def downloads_dir() -> Path:
    return data_home() / "downloads"


def cache_path() -> Path:
    """`RECHARNESS_CACHE`, else `<data home>/cache.sqlite` (one cache shared by all runs)."""
    env = os.environ.get("RECHARNESS_CACHE")
    return Path(env).expanduser() if env else data_home() / "cache.sqlite"


#: what `recharness finetune` writes beside a fine-tuned model (base, task, build, settings...): read by `run` too
FINETUNE_INFO = "finetune.json"


def finetune_info_at(where) -> dict | None:
    """The `finetune.json` of a fine-tuned model at `where`: a model folder's own, or the `<file>.json` beside an
    exported GGUF, which repeats it under that key; None for anything else (or an unreadable file)."""
    import json

    p = Path(where)
    for f in (p / FINETUNE_INFO, p.with_name(p.name + ".json")):
        try:
            d = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and f.name != FINETUNE_INFO:
            d = d.get(FINETUNE_INFO)
        if isinstance(d, dict):
            return d
    return None


def shown_dataset(name_or_path) -> str:
    """A build's dataset as a reader should see it: a prepared dataset's name as it is, a dataset given by its
    folder (`-d /home/alice/data/ml`) as `shown_path` shows a path (build.json keeps the path to load it)."""
    text = "" if name_or_path is None else str(name_or_path)
    return text if not text or is_plain_name(text) else shown_path(text)


def shown_path(p: Path | str | None) -> str:
    """A path as a reader should see it (reports, import reports): relative to the data home
    (`<data home>/runs/...`), else to the working directory, else only its last two parts, so no
    machine's absolute path ends up in a shared page."""
    if p is None:
        return ""
    p = Path(p).resolve()
    for base, label in ((data_home().resolve(), "<data home>"), (Path.cwd().resolve(), ".")):
        try:
            return f"{label}/{p.relative_to(base).as_posix()}"
        except ValueError:
            continue
    return "…/" + "/".join(p.parts[-2:])

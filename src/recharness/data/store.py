"""The canonical dataset: three Parquet tables every suite reads.

Schema (ids are always strings, so every source maps onto one type):
- interactions: user_id Utf8, item_id Utf8, rating Float64 (null if implicit),
  timestamp Int64 (Unix seconds, null if unknown); may carry extra columns
  (e.g. review_title, review_text for Amazon data).
- items: item_id Utf8, title Utf8, then attribute columns. Multi-valued
  attributes are List(Utf8) (genres, directors, cast, languages); scalars
  otherwise (year Int64, certificate Utf8, ...).
- users: user_id Utf8 and demographics where known (gender, age, occupation, zip).
- extras: optional named tables a source ships beside these (e.g. `candidates`:
  user_id Utf8, retriever Utf8, item_ids List(Utf8), for LLMRank candidate lists).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from recharness.errors import ConfigError
from recharness.paths import dataset_dir, datasets_dir

TABLES = ("interactions", "items", "users")


@dataclass
class Dataset:
    name: str
    interactions: pl.DataFrame
    items: pl.DataFrame
    users: pl.DataFrame
    meta: dict = field(default_factory=dict)
    extras: dict[str, pl.DataFrame] = field(default_factory=dict)

    def validate(self) -> None:
        """Fail early if a loader broke the schema the suites rely on."""
        for table, cols in (
            ("interactions", {"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64}),
            ("items", {"item_id": pl.Utf8, "title": pl.Utf8}),
            ("users", {"user_id": pl.Utf8}),
        ):
            df = getattr(self, table)
            for col, dtype in cols.items():
                if col not in df.columns:
                    raise ValueError(f"{self.name}.{table}: missing column {col!r}")
                if df.schema[col] != dtype:
                    raise ValueError(f"{self.name}.{table}.{col}: dtype {df.schema[col]} != {dtype}")

    def items_by_id(self) -> dict[str, dict]:
        return {row["item_id"]: row for row in self.items.iter_rows(named=True)}


def save_dataset(ds: Dataset, root: Path | None = None) -> Path:
    """Write atomically: a crash never leaves a half-written dataset behind."""
    ds.validate()
    target = Path(root) if root is not None else dataset_dir(ds.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{ds.name}-", dir=target.parent))
    try:
        for table in TABLES:
            getattr(ds, table).write_parquet(tmp / f"{table}.parquet")
        for extra, df in ds.extras.items():
            df.write_parquet(tmp / f"extra_{extra}.parquet")
        meta = dict(ds.meta)
        meta.update(
            name=ds.name,
            counts={t: getattr(ds, t).height for t in TABLES},
            extras=sorted(ds.extras),
        )
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if target.exists():
            old = target.with_name(target.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def load_dataset(name_or_path: str | Path) -> Dataset:
    """Load a prepared dataset by name (under the data home) or by directory path."""
    p = Path(name_or_path)
    if not (p / "meta.json").exists():
        p = dataset_dir(str(name_or_path))
    if not (p / "meta.json").exists():
        have = sorted(d.name for d in datasets_dir().glob("*") if (d / "meta.json").exists()) if datasets_dir().exists() else []
        raise ConfigError(
            f"dataset {str(name_or_path)!r} is not prepared (looked in {p}). "
            f"Run `recharness prepare {name_or_path}` first. Prepared: {', '.join(have) or 'none'}"
        )
    meta = json.loads((p / "meta.json").read_text())
    tables = {t: pl.read_parquet(p / f"{t}.parquet") for t in TABLES}
    extras = {e: pl.read_parquet(p / f"extra_{e}.parquet") for e in meta.get("extras", [])}
    return Dataset(name=meta.get("name", p.name), meta=meta, extras=extras, **tables)

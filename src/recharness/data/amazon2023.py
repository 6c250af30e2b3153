"""Amazon Reviews 2023 (McAuley lab): `<Category>.jsonl[.gz]` reviews and
`meta_<Category>.jsonl[.gz]` item metadata, one JSON object per line.

Reviews become interactions keyed by parent_asin (the product, not the
variant), with the review's title and text kept for the explanation and
summarisation tasks; timestamps are converted from milliseconds to seconds.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from recharness.data._parse import finish_interactions
from recharness.data.store import Dataset
from recharness.errors import ConfigError, InputError


def _category(path: Path) -> str:
    name = path.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".json")
    return name.removeprefix("meta_")


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """(1-based line, object) for each non-blank line, naming the bad line."""
    if not path.is_file():
        raise InputError(path, "file not found")
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(path, f"not valid UTF-8 ({e.reason})", line=lineno) from None
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as e:
                    raise InputError(path, f"not valid JSON ({e.msg}, column {e.colno})", line=lineno) from None
                if not isinstance(obj, dict):
                    raise InputError(path, "a line must be one JSON object", line=lineno)
                yield lineno, obj
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise InputError(path, f"truncated or corrupt gzip file ({e})", line=lineno + 1) from None


def _str(path, line, obj, key, *, required=False) -> str | None:
    v = obj.get(key)
    if v is None or v == "":
        if required:
            raise InputError(path, f"missing {key!r}", line=line, field=key)
        return None
    if not isinstance(v, str):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        raise InputError(path, f"{key!r} must be a string, not {type(v).__name__}", line=line, field=key)
    return v


def _reviews(path: Path) -> pl.DataFrame:
    rows: dict[str, list] = {k: [] for k in ("user_id", "item_id", "rating", "timestamp", "review_title", "review_text")}
    for line, obj in _records(path):
        rating = obj.get("rating")
        if isinstance(rating, bool) or not isinstance(rating, (int, float)):
            raise InputError(path, f"rating {rating!r} is not a number", line=line, field="rating")
        ts = obj.get("timestamp")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != int(ts)):
            raise InputError(path, f"timestamp {ts!r} is not a whole number of milliseconds", line=line, field="timestamp")
        rows["user_id"].append(_str(path, line, obj, "user_id", required=True))
        rows["item_id"].append(_str(path, line, obj, "parent_asin", required=True))
        rows["rating"].append(float(rating))
        rows["timestamp"].append(None if ts is None else int(ts) // 1000)
        rows["review_title"].append(_str(path, line, obj, "title"))
        rows["review_text"].append(_str(path, line, obj, "text"))
    if not rows["user_id"]:
        raise InputError(path, "no reviews (empty file?)")
    schema = {"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64,
              "review_title": pl.Utf8, "review_text": pl.Utf8}  # fmt: skip
    return pl.DataFrame(rows, schema=schema).with_columns(pl.lit(_category(path)).alias("category"))


def _price(v) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):  # e.g. "$12.99"; "None" and ranges are unknown prices
        try:
            return float(v.strip().lstrip("$").replace(",", ""))
        except ValueError:
            return None
    return None


def _meta(path: Path) -> pl.DataFrame:
    rows: list[dict] = []
    for line, obj in _records(path):
        row = {
            "item_id": _str(path, line, obj, "parent_asin", required=True),
            "title": _str(path, line, obj, "title"),
            "main_category": _str(path, line, obj, "main_category"),
            "store": _str(path, line, obj, "store"),
            "price": _price(obj.get("price")),
        }
        if "categories" in obj:
            cats = obj["categories"] or []
            if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
                raise InputError(path, "'categories' must be a list of strings", line=line, field="categories")
            row["categories"] = cats
        if "author" in obj:
            a = obj["author"]
            row["author"] = a.get("name") if isinstance(a, dict) else (a if isinstance(a, str) else None)
        rows.append(row)
    schema = {"item_id": pl.Utf8, "title": pl.Utf8, "main_category": pl.Utf8, "store": pl.Utf8, "price": pl.Float64}
    if any("categories" in r for r in rows):
        schema["categories"] = pl.List(pl.Utf8)
    if any("author" in r for r in rows):
        schema["author"] = pl.Utf8
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def find_files(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(review files, meta files) among files and directories, sorted by name."""
    reviews, metas = [], []
    for p in map(Path, paths):
        if p.is_dir():
            cands = sorted(list(p.glob("*.jsonl")) + list(p.glob("*.jsonl.gz")))
        elif p.exists():
            cands = [p]
        else:
            raise InputError(p, "file not found")
        for f in cands:
            (metas if f.name.startswith("meta_") else reviews).append(f)
    if not reviews:
        raise ConfigError(f"no Amazon review file (<Category>.jsonl[.gz]) among {', '.join(map(str, paths))}")
    return reviews, metas


def load_amazon2023(paths: list[Path] | Path, *, name: str = "amazon2023") -> Dataset:
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    reviews, metas = find_files(paths)
    inter = pl.concat([_reviews(f) for f in reviews], how="vertical")
    inter = finish_interactions(inter, ["review_title", "review_text", "category"])
    frames = [m for m in (_meta(f) for f in metas) if m.height]
    base = {"item_id": pl.Utf8, "title": pl.Utf8, "main_category": pl.Utf8, "store": pl.Utf8, "price": pl.Float64}
    items = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=base)
    items = items.unique("item_id", keep="first", maintain_order=True)
    missing = inter.select("item_id").unique(maintain_order=True).join(items.select("item_id"), on="item_id", how="anti")
    items = pl.concat([items, missing], how="diagonal_relaxed")
    users = inter.select("user_id").unique(maintain_order=True)
    meta = {
        "source": "amazon-reviews-2023",
        "files": [str(f) for f in reviews + metas],
        "categories": sorted({_category(f) for f in reviews}),
        "items_without_metadata": missing.height,
        "timestamp_unit": "seconds (source: milliseconds)",
    }
    return Dataset(name=name, interactions=inter, items=items, users=users, meta=meta)

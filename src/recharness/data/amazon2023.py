"""Amazon Reviews 2023 (McAuley lab): `<Category>.jsonl[.gz]` reviews and
`meta_<Category>.jsonl[.gz]` item metadata, one JSON object per line.

Reviews become interactions keyed by parent_asin (the product, not the
variant), with the review's title and text kept for the explanation and
summarisation tasks; timestamps are converted from milliseconds to seconds.
A review must rate 1-5 whole stars and be dated from 1990 to a year from now in milliseconds (a copy
in seconds would otherwise become 1970 dates); a parent_asin listed again in the meta files must repeat
its first row. Either is an InputError naming the line, on the in-memory and the streaming path alike.
"""

from __future__ import annotations

import gzip
import json
import math
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.core.types import is_number
from recharness.data.normalize import EARLIEST_S
from recharness.data.parsing import INTERACTION_COLUMNS, finish_interactions
from recharness.data.store import Dataset


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
                    text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")  # a BOM may open the file
                except UnicodeDecodeError as e:
                    raise InputError(path, f"not valid UTF-8 ({e.reason})", line=lineno) from None
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as e:
                    raise InputError(path, f"not valid JSON ({e.msg}, column {e.colno})", line=lineno) from None
                except ValueError as e:  # valid JSON, but an integer of more than 4300 digits (int's limit) in it
                    raise InputError(path, f"a number of more digits than Python reads ({e})", line=lineno) from None
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
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # an escaped lone surrogate ("\ud83d": an emoji cut in half) is valid JSON only
            if required:  # an id: corrupt, named
                raise InputError(path, f"{key!r} holds a lone surrogate escape (no character): a damaged line",
                                 line=line, field=key) from None
            v = v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")  # text: the half shown as U+FFFD
    return v


def _ms_range() -> tuple[int, int]:
    """Plausible review times in ms: from 1990 (`normalize.EARLIEST_S`) to a year from now. Seconds read as
    milliseconds fall in 1970, so the bound catches a file re-saved in the wrong unit."""
    return EARLIEST_S * 1000, int((time.time() + 365 * 86400) * 1000)


def _review_row(path: Path, line: int, obj: dict) -> tuple:
    """One review line → (user_id, item_id, rating, timestamp in ms, review_title, review_text), checked: the
    published files rate 1–5 whole stars and stamp every review in milliseconds (an undated review would sort
    last and become its user's held-out target; one in seconds would be dated 1970). Milliseconds until the
    reviews are in time order (`to_seconds_after_sort`)."""
    rating = obj.get("rating")
    if isinstance(rating, bool) or not isinstance(rating, (int, float)) or not 1 <= rating <= 5 \
            or rating != int(rating):
        raise InputError(path, f"rating {rating!r} is not a whole number of stars from 1 to 5", line=line,
                         field="rating")
    ts = obj.get("timestamp")
    if ts is None:
        raise InputError(path, "missing 'timestamp' (every review of the published files has one)", line=line,
                         field="timestamp")
    if not is_number(ts) or ts != int(ts):
        raise InputError(path, f"timestamp {ts!r} is not a whole number of milliseconds", line=line, field="timestamp")
    row = (_str(path, line, obj, "user_id", required=True), _str(path, line, obj, "parent_asin", required=True),
           float(rating), int(ts), _str(path, line, obj, "title"), _str(path, line, obj, "text"))
    lo, hi = _ms_range()
    if not lo <= ts <= hi:
        when = "before 1990 (a copy in seconds?)" if ts < lo else "more than a year from now"
        raise InputError(path, f"timestamp {ts!r} read as milliseconds (the published unit) is {when}", line=line,
                         field="timestamp")
    return row


def to_seconds_after_sort(df: pl.DataFrame) -> pl.DataFrame:
    """Reviews in (user, millisecond, file) order, then stamped in seconds: two reviews of one second keep
    their order in time, not in the file (`finish_interactions` sorts stably on the seconds)."""
    order = [c for c in ("user_id", "timestamp", "__order") if c in df.columns]
    return df.sort(order, maintain_order=True).with_columns(pl.col("timestamp") // 1000)


_REVIEW_COLS = ("user_id", "item_id", "rating", "timestamp", "review_title", "review_text")
_REVIEW_SCHEMA = {"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64,
                  "review_title": pl.Utf8, "review_text": pl.Utf8}  # fmt: skip


def _reviews(path: Path) -> pl.DataFrame:
    rows: dict[str, list] = {k: [] for k in _REVIEW_COLS}
    for line, obj in _records(path):
        for k, v in zip(_REVIEW_COLS, _review_row(path, line, obj)):
            rows[k].append(v)
    if not rows["user_id"]:
        raise InputError(path, "no reviews (empty file?)")
    return pl.DataFrame(rows, schema=_REVIEW_SCHEMA).with_columns(pl.lit(_category(path)).alias("category"))


def _price(v) -> float | None:
    """The price as a number, or None (unknown): "None", ranges, and non-finite values such as "nan"."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        out = float(v)
    elif isinstance(v, str):  # e.g. "$12.99"; "None" and ranges are unknown prices
        try:
            out = float(v.strip().lstrip("$").replace(",", ""))
        except ValueError:
            return None
    else:
        return None
    return out if math.isfinite(out) else None


def _meta(path: Path) -> pl.DataFrame:
    rows: list[dict] = []
    for line, obj in _records(path):
        row = {
            "item_id": _str(path, line, obj, "parent_asin", required=True),
            "title": _str(path, line, obj, "title"),
            "main_category": _str(path, line, obj, "main_category"),
            "store": _str(path, line, obj, "store"),
            "price": _price(obj.get("price")),
            "__line": line,
        }
        if "categories" in obj:
            cats = obj["categories"] or []
            if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
                raise InputError(path, "'categories' must be a list of strings", line=line, field="categories")
            row["categories"] = cats
        if "author" in obj:
            a = obj["author"]
            name = a.get("name") if isinstance(a, dict) else a
            if name is not None and not isinstance(name, str):
                raise InputError(path, f"the author's name must be a string, not {type(name).__name__}", line=line,
                                 field="author")
            row["author"] = name
        rows.append(row)
    schema = {"item_id": pl.Utf8, "title": pl.Utf8, "main_category": pl.Utf8, "store": pl.Utf8, "price": pl.Float64,
              "__line": pl.Int64}
    if any("categories" in r for r in rows):
        schema["categories"] = pl.List(pl.Utf8)
    if any("author" in r for r in rows):
        schema["author"] = pl.Utf8
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


#: review bytes (a .gz counted 4×) above which `load_amazon2023` streams instead of parsing in memory
STREAM_BYTES = 512 << 20


def review_bytes(files: list[Path]) -> int:
    return sum(f.stat().st_size * (4 if f.name.endswith(".gz") else 1) for f in files)


def _same_repeats(items: pl.DataFrame) -> None:
    """A parent_asin listed again (in another category's meta file, say) must repeat its first row: keeping
    the first of two different titles would silently pick one. The repeat is an error naming both lines."""
    dup = items.filter(pl.col("item_id").is_duplicated())
    if not dup.height:
        return
    cols = [c for c in items.columns if c not in ("item_id", "__line", "__file")]
    first = dup.unique("item_id", keep="first", maintain_order=True)
    for row in dup.join(first, on="item_id", suffix="__first", maintain_order="left").iter_rows(named=True):
        for c in cols:
            if row[c] != row[c + "__first"]:
                where = f"line {row['__line__first']}"
                if row["__file__first"] != row["__file"]:
                    where = f"{Path(row['__file__first']).name}, {where}"
                raise InputError(row["__file"], f"product {row['item_id']!r} listed twice with a different {c} "
                                                f"(first: {where})", line=row["__line"], field=c)


def items_and_users(inter_item_ids: pl.DataFrame, users: pl.DataFrame, metas: list[Path], reviews: list[Path]):
    """(items, meta) from the meta files and the interactions' item ids in first-seen order."""
    frames = [m.with_columns(pl.lit(str(f)).alias("__file")) for f, m in ((f, _meta(f)) for f in metas) if m.height]
    base = {"item_id": pl.Utf8, "title": pl.Utf8, "main_category": pl.Utf8, "store": pl.Utf8, "price": pl.Float64}
    items = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=base)
    if frames:
        _same_repeats(items)
        items = items.drop("__line", "__file")
    items = items.unique("item_id", keep="first", maintain_order=True)
    missing = inter_item_ids.join(items.select("item_id"), on="item_id", how="anti", maintain_order="left")
    items = pl.concat([items, missing], how="diagonal_relaxed")
    meta = {
        "source": "amazon-reviews-2023",
        "files": [str(f) for f in reviews + metas],
        "categories": sorted({_category(f) for f in reviews}),
        "items_without_metadata": missing.height,
        "timestamp_unit": "seconds (source: milliseconds)",
    }
    return items, meta


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


def load_amazon2023(paths: list[Path] | Path, *, name: str = "amazon2023", streaming: bool | None = None,
                    spill_dir: Path | None = None) -> Dataset:
    """The dataset of these review (+ meta_) files. `streaming` (default: when the review files exceed
    `STREAM_BYTES`): bounded memory, see `load_streaming`; the interactions then stay
    on disk (a `StreamedTable` that `save_dataset` moves into place) and equal the in-memory result."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    reviews, metas = find_files(paths)
    if streaming is None:
        streaming = review_bytes(reviews) > STREAM_BYTES
    if streaming:
        return load_streaming(reviews, metas, name=name, spill_dir=spill_dir)
    inter = to_seconds_after_sort(pl.concat([_reviews(f) for f in reviews], how="vertical"))
    inter = finish_interactions(inter, ["review_title", "review_text", "category"])
    users = inter.select("user_id").unique(maintain_order=True)
    items, meta = items_and_users(inter.select("item_id").unique(maintain_order=True), users, metas, reviews)
    return Dataset(name=name, interactions=inter, items=items, users=users, meta=meta)


# ---- streaming: bounded memory for full categories (tens of millions of reviews) ---------------------
#
# Pass 1 reads each review file in blocks (pyarrow's streaming JSON reader, explicit schema, gzip
# streamed), checks and converts a block with polars, and appends it to one of K spill files by
# user-id range (ranges: quantiles of the first block's user ids, K from the files' sizes), each row
# carrying its global line order. Pass 2 takes the spill files in range order, sorts each in memory
# (user, timestamp, line order: the in-memory loader's order) and appends it to interactions.parquet;
# users and first-seen items come out of the same pass. A block the fast reader cannot take (a bad
# line, a number where a string belongs...) sends the rest of that file through the line-by-line
# parser, which names the bad line exactly as the in-memory loader does (or accepts what it accepts).

#: target rows per spill file (sorted in memory one at a time); a file that grows past twice this is split again
BUCKET_ROWS = 2_000_000
#: bytes per block of the streaming JSON reader
BLOCK_BYTES = 8 << 20
#: lines per chunk on the line-by-line path
PY_CHUNK = 100_000

_ARROW_FIELDS = (("user_id", "string"), ("parent_asin", "string"), ("rating", "float64"), ("timestamp", "int64"),
                 ("title", "string"), ("text", "string"))


class _NotFast(Exception):
    """This block needs the line-by-line parser."""


class StreamedTable:
    """A table written to a Parquet file instead of held in memory: what `save_dataset` needs of a frame
    (`height`, `columns`, `schema`, `write_parquet` — which moves the file into place)."""

    def __init__(self, path: Path, height: int, schema: pl.Schema, cleanup_dir: Path | None = None):
        self.path = Path(path)
        self.height = height
        self.schema = schema
        self.columns = list(schema.names())
        self._cleanup_dir = cleanup_dir

    def write_parquet(self, target) -> None:
        import shutil

        shutil.move(str(self.path), str(target))
        self.path = Path(target)

    def collect(self) -> pl.DataFrame:
        return pl.read_parquet(self.path)

    def cleanup(self) -> None:
        import shutil

        if self._cleanup_dir is not None:
            shutil.rmtree(self._cleanup_dir, ignore_errors=True)


def _arrow_blocks(path: Path):
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([pa.field(n, getattr(pa, t)()) for n, t in _ARROW_FIELDS])
    stream = pa.input_stream(str(path), compression="gzip" if path.name.endswith(".gz") else None)
    reader = pj.open_json(stream, read_options=pj.ReadOptions(block_size=BLOCK_BYTES),
                          parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    try:
        yield from reader
    finally:
        stream.close()


def _fast_frame(batch) -> pl.DataFrame:
    """A pyarrow block → canonical review columns, or _NotFast when a row needs the exact checks (which also
    name a non-UTF-8 line: pyarrow passes the bytes through, and they would fail later, in a spill file)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for col in batch.schema.names:
        if pa.types.is_string(batch.schema.field(col).type) and not pc.all(pc.utf8_is_valid(batch.column(col))).as_py():
            raise _NotFast
    df = pl.from_arrow(batch)
    lo, hi = _ms_range()
    bad = df.select((pl.col("user_id").is_null() | (pl.col("user_id") == "") | pl.col("parent_asin").is_null()
                     | (pl.col("parent_asin") == "") | pl.col("rating").is_null() | ~pl.col("rating").is_between(1, 5)
                     | (pl.col("rating") != pl.col("rating").round())
                     | pl.col("timestamp").is_null() | ~pl.col("timestamp").is_between(lo, hi)).any()).item()
    if bad:
        raise _NotFast
    blank = {c: pl.when(pl.col(c) == "").then(None).otherwise(pl.col(c)) for c in ("title", "text")}
    return df.select(pl.col("user_id"), pl.col("parent_asin").alias("item_id"), pl.col("rating"),
                     pl.col("timestamp"), blank["title"].alias("review_title"),  # ms until sorted
                     blank["text"].alias("review_text"))


def _python_frames(path: Path, skip: int):
    """The line-by-line parser's rows (checked, exact errors) after the first `skip` records, in chunks."""
    rows: list[tuple] = []
    seen = 0
    for line, obj in _records(path):
        seen += 1
        if seen <= skip:
            continue
        rows.append(_review_row(path, line, obj))
        if len(rows) >= PY_CHUNK:
            yield pl.DataFrame(rows, schema=_REVIEW_SCHEMA, orient="row")
            rows = []
    if rows:
        yield pl.DataFrame(rows, schema=_REVIEW_SCHEMA, orient="row")


def _review_frames(path: Path):
    """Checked review frames of one file, in line order: fast blocks, then (from the first block the fast
    reader cannot take) the line-by-line parser for the rest of the file."""
    done = 0
    try:
        for batch in _arrow_blocks(path):
            if batch.num_rows == 0:
                continue
            df = _fast_frame(batch)
            done += df.height
            yield df
        return
    except (_NotFast, Exception) as e:  # noqa: BLE001 - pyarrow's parse errors: the exact parser decides
        if isinstance(e, InputError):
            raise
    yield from _python_frames(path, done)


class _Spill:
    """Rows appended to K range-partitioned Parquet files (by user id), each with its global order."""

    def __init__(self, folder: Path, bounds: list[str]):
        self.folder = folder
        self.bounds = pl.Series("b", bounds, dtype=pl.Utf8)
        self.writers: dict[int, object] = {}
        self.rows: dict[int, int] = {}

    def path(self, k: int) -> Path:
        return self.folder / f"bucket-{k:05d}.parquet"

    def add(self, df: pl.DataFrame) -> None:
        import pyarrow.parquet as pq

        df = df.with_columns(self.bounds.search_sorted(df["user_id"], side="right").cast(pl.Int32).alias("__b"))
        for (k,), part in df.partition_by("__b", as_dict=True).items():
            table = part.drop("__b").to_arrow()
            w = self.writers.get(k)
            if w is None:
                w = self.writers[k] = pq.ParquetWriter(self.path(k), table.schema, compression="lz4")
            w.write_table(table)
            self.rows[k] = self.rows.get(k, 0) + part.height

    def close(self) -> list[int]:
        for w in self.writers.values():
            w.close()
        return sorted(self.writers)


def _bounds(user_ids: pl.Series, k: int) -> list[str]:
    """k-1 user ids cutting the (sorted) sample into k ranges of about equal size."""
    u = user_ids.drop_nulls().sort()
    if k <= 1 or u.len() == 0:
        return []
    cuts = sorted({u[min(u.len() - 1, (u.len() * i) // k)] for i in range(1, k)})
    return cuts


def _sorted_runs(path: Path, rows: int, folder: Path, depth: int = 0):
    """The frames of one spill file in canonical order; split again by range when it is too big."""
    if rows <= 2 * BUCKET_ROWS or depth >= 3:
        df = pl.read_parquet(path)
        yield to_seconds_after_sort(df).drop("__order")
        return
    users = pl.read_parquet(path, columns=["user_id"])["user_id"]
    sub = folder / f"split-{path.stem}-{depth}"
    sub.mkdir()
    spill = _Spill(sub, _bounds(users, -(-rows // BUCKET_ROWS)))
    del users
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        spill.add(pl.from_arrow(pf.read_row_group(i)))
    keys = spill.close()
    path.unlink()
    for k in keys:
        yield from _sorted_runs(spill.path(k), spill.rows[k], sub, depth + 1)


def load_streaming(reviews: list[Path], metas: list[Path], *, name: str = "amazon2023",
                   spill_dir: Path | None = None) -> Dataset:
    """`load_amazon2023` with bounded memory: interactions written to disk as they are sorted."""
    import shutil
    import tempfile

    import pyarrow.parquet as pq

    if spill_dir is not None:
        Path(spill_dir).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="recharness-amazon-spill-", dir=spill_dir))
    try:
        est_rows = None
        spill: _Spill | None = None
        order = 0
        for f in reviews:
            cat = _category(f)
            n = 0
            for df in _review_frames(f):
                if spill is None:  # ranges from the first block: K from the files' size per line
                    per_line = max(1, BLOCK_BYTES // max(1, df.height)) if df.height else 1
                    est_rows = review_bytes(reviews) // per_line
                    spill = _Spill(folder, _bounds(df["user_id"], max(1, -(-est_rows // BUCKET_ROWS))))
                df = df.with_columns(pl.lit(cat).alias("category"),
                                     pl.int_range(order, order + df.height, dtype=pl.Int64).alias("__order"))
                order += df.height
                n += df.height
                spill.add(df)
            if n == 0:
                raise InputError(f, "no reviews (empty file?)")
        keys = spill.close()
        out = folder / "interactions.parquet"
        writer = None
        height = 0
        user_frames: list[pl.DataFrame] = []
        seen_items = pl.DataFrame(schema={"item_id": pl.Utf8})
        item_frames: list[pl.DataFrame] = []
        for k in keys:
            for run in _sorted_runs(spill.path(k), spill.rows[k], folder):
                run = run.select([pl.col(c).cast(t) for c, t in INTERACTION_COLUMNS.items()]
                                 + [pl.col(c) for c in ("review_title", "review_text", "category")])
                table = run.to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(out, table.schema, compression="zstd")
                    schema = run.schema
                writer.write_table(table, row_group_size=256_000)
                height += run.height
                user_frames.append(run.select("user_id").unique(maintain_order=True))
                new = run.select("item_id").unique(maintain_order=True).join(
                    seen_items, on="item_id", how="anti", maintain_order="left")
                item_frames.append(new)
                seen_items = pl.concat([seen_items, new])
                del run, table
            spill.path(k).unlink(missing_ok=True)
        writer.close()
        users = pl.concat(user_frames).unique(maintain_order=True)
        items, meta = items_and_users(pl.concat(item_frames), users, metas, reviews)
        meta["prepared_streaming"] = True
        inter = StreamedTable(out, height, schema, cleanup_dir=folder)
        return Dataset(name=name, interactions=inter, items=items, users=users, meta=meta)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise

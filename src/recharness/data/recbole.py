"""RecBole atomic files (`.inter`, `.item`, `.user`): tab-separated, with a
typed header such as `user_id:token  item_id:token  rating:float`.

Many published benchmark files use this format (RecBole's own examples, the
RecSysDatasets hub, LLMRank), so one strict reader serves them all; field
names are mapped onto the canonical schema by a small, overridable table.
User and item ids are tokens as written even where a header declares them `:float` (never '10.0'),
and never empty. An .inter file that declares a timestamp must date every row; one whose timestamps
are all empty is read as if it had none (rows in file order).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.data.parsing import (
    LINE,
    decode,
    finish_interactions,
    first_bad,
    no_empty_ids,
    no_repeats,
    parse_number,
    read_bytes,
    split_list,
    split_table,
)
from recharness.data.store import Dataset

TYPES = ("token", "token_seq", "float", "float_seq")

# RecBole field name -> canonical column, applied unless the caller overrides it.
DEFAULT_MAPPING = {
    "user_id": "user_id",
    "item_id": "item_id",
    "rating": "rating",
    "timestamp": "timestamp",
    "title": "title",
    "movie_title": "title",
    "book_title": "title",
    "app_name": "title",
    "name": "title",
    "genre": "genres",
    "genres": "genres",
    "class": "genres",
    "categories": "categories",
    "release_year": "year",
    "year": "year",
    "zip_code": "zip",
}
# token_seq fields that are prose, not tag lists: kept as one string.
TEXT_FIELDS = ("title", "movie_title", "book_title", "app_name", "name", "text", "description", "plot", "review_title",
               "review_text")
INT_COLUMNS = ("year", "age")  # made Int64 when every value is a whole number
ID_COLUMNS = ("user_id", "item_id", "item_id_list")  # read as tokens whatever the header declares


def _id_fields(mapping: dict[str, str]) -> set[str]:
    """The header fields that become ids under `mapping` (a field named like an id and not mapped away too)."""
    return {f for f, c in mapping.items() if c in ID_COLUMNS} | {c for c in ID_COLUMNS if mapping.get(c, c) == c}


#: what a canonical column must be declared as, read into it: one value a row, a sequence, or a text
SCALAR_COLUMNS = ("user_id", "item_id", "rating", "timestamp")
SEQUENCE_COLUMNS = ("item_id_list",)
TEXT_COLUMNS = ("title",)


def _check_header(path: Path, fields: dict[str, str], mapping: dict[str, str]) -> None:
    """A field read into a canonical column has a type that column can hold (an item_id declared `:token_seq`
    would be a list of ids per row), and no field is named like the internal columns (`__line`)."""
    renames = _renames(list(fields), mapping)
    for name, ftype in fields.items():
        if name.startswith("__"):
            raise InputError(path, f"field {name!r}: names starting with '__' are reserved", line=1, field=name)
        col, need = renames.get(name, name), None
        if col in SCALAR_COLUMNS and ftype.endswith("_seq"):
            need = "one value a row (:token or :float)"
        elif col in SEQUENCE_COLUMNS and not ftype.endswith("_seq"):
            need = "a sequence (:token_seq)"
        elif col in TEXT_COLUMNS and not ftype.startswith("token"):
            need = "a text (:token or :token_seq)"
        if need:
            raise InputError(path, f"field {name!r} is declared :{ftype}; {need} is required", line=1, field=name)


def read_atomic(path: str | Path, data: bytes | None = None, tokens: Collection[str] | None = None,
                mapping: dict[str, str] | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Parse one atomic file into typed columns named by its header fields.

    token -> Utf8, token_seq -> List(Utf8) (space-separated; TEXT_FIELDS stay
    strings), float -> Float64, float_seq -> List(Float64). Fields in `tokens` (ids; by default those
    `mapping` makes ids) are read as tokens whatever their declared type: an id declared `:float` keeps
    its spelling ('10', not '10.0'). A field `mapping` (default DEFAULT_MAPPING) reads into a canonical
    column must be declared a type that column can hold (`_check_header`).
    Returns (frame with LINE, {field: type as declared}).
    """
    mapping = DEFAULT_MAPPING if mapping is None else mapping
    tokens = _id_fields(mapping) if tokens is None else tokens
    path = Path(path)
    text, _ = decode(path, read_bytes(path) if data is None else data)
    if not text.strip():
        raise InputError(path, "file is empty")
    header, _, body = text.partition("\n")
    fields: dict[str, str] = {}
    for part in header.rstrip("\r").split("\t"):
        name, colon, ftype = part.partition(":")
        if not colon or not name or ftype not in TYPES:
            raise InputError(
                path, f"header field {part!r} is not `name:type` with type one of {', '.join(TYPES)}", line=1, field=name or part
            )
        if name in fields:
            raise InputError(path, f"header repeats field {name!r}", line=1, field=name)
        fields[name] = ftype
    _check_header(path, fields, mapping)
    df = split_table(path, body, "\t", list(fields), first_line=2)
    for name, ftype in fields.items():
        if name in tokens:
            ftype = {"float": "token", "float_seq": "token_seq"}.get(ftype, ftype)
        if ftype == "float":
            df = parse_number(path, df, name, nullable=True)
        elif ftype == "token_seq" and name not in TEXT_FIELDS:
            df = df.with_columns(split_list(name, " "))
        elif ftype == "float_seq":
            df = df.with_columns(split_list(name, " "))
            parse_number(path, df.select(name, LINE).explode(name).drop_nulls(name), name)  # raises on a bad element
            df = df.with_columns(pl.col(name).list.eval(pl.element().cast(pl.Float64)))
    return df, fields


def _renames(columns: list[str], mapping: dict[str, str]) -> dict[str, str]:
    ren = {c: mapping[c] for c in columns if c in mapping and mapping[c] != c}
    targets = [ren.get(c, c) for c in columns]
    dup = {t for t in targets if targets.count(t) > 1}
    if dup:  # e.g. both `title` and `movie_title`: keep the one literally named so
        ren = {c: t for c, t in ren.items() if t not in dup}
    return ren


def _rename(df: pl.DataFrame, mapping: dict[str, str]) -> pl.DataFrame:
    return df.rename(_renames(df.columns, mapping))


def _canonical_types(df: pl.DataFrame, path: Path) -> pl.DataFrame:
    """rating -> Float64 and timestamp -> Int64 strictly (naming a bad line);
    year/age -> Int64 only where every value is a whole number."""
    scalar = {c for c in df.columns if df.schema[c] in (pl.Float64, pl.Utf8)}
    if "rating" in scalar:
        df = parse_number(path, df, "rating", nullable=True)
    if "timestamp" in scalar:
        df = parse_number(path, df, "timestamp", pl.Int64, nullable=True)
    for col in INT_COLUMNS:
        if col in scalar:
            try:
                df = parse_number(path, df, col, pl.Int64, nullable=True)
            except InputError:
                pass
    return df


def _dated_or_not(path: Path, df: pl.DataFrame) -> pl.DataFrame:
    """A file that declares a timestamp dates every row: an undated row would sort after its user's dated ones
    and become the held-out target, so it is an error naming its line. A file whose timestamps are all empty
    dates nothing: the column is dropped, and its rows keep their file order, as in a file without one."""
    if "timestamp" not in df.columns:
        return df
    empty = df["timestamp"].null_count()
    if empty == df.height:
        return df.drop("timestamp")
    first_bad(path, df, pl.col("timestamp").is_null(), "timestamp",
              lambda r: "empty timestamp where the other rows have one (this row would sort last and become the "
                        "user's held-out item)")
    return df


def expand_sequences(df: pl.DataFrame) -> pl.DataFrame:
    """LLMRank/UniSRec sequence rows (user, item_id_list, next item) -> one
    interaction per item, timestamp = position, the next item last, so that
    leave-last-out recovers the official target."""
    return (
        df.with_columns(pl.concat_list(pl.col("item_id_list"), pl.col("item_id")).alias("item_id"))
        .drop("item_id_list")
        .with_columns(pl.int_ranges(0, pl.col("item_id").list.len(), dtype=pl.Int64).alias("timestamp"))
        .explode("item_id", "timestamp")
    )


def longest_sequences(frames: list[tuple[Path, pl.DataFrame]]) -> pl.DataFrame:
    """One sequence row per user from several sequence files (LLMRank/UniSRec ship a .valid and a .test file,
    the test row's history the valid row's plus the valid target): the longest, every other row of the user
    being a prefix of it (else an InputError naming the row); expanded once, not once per file."""
    rows = pl.concat([df.select("user_id", pl.concat_list("item_id_list", "item_id").alias("_seq"), LINE,
                                pl.lit(str(f)).alias("_file")) for f, df in frames], how="vertical_relaxed")
    rows = rows.with_columns(pl.col("_seq").list.len().alias("_len"))
    best = rows.sort("_len", descending=True, maintain_order=True).unique("user_id", keep="first", maintain_order=True)
    longest = dict(zip(best["user_id"].to_list(), best["_seq"].to_list()))
    for user, seq, line, file in rows.select("user_id", "_seq", LINE, "_file").iter_rows():
        full = longest[user]
        if full[:len(seq)] != seq:
            raise InputError(file, f"user {user!r}: this sequence is not the start of the user's longest one in the "
                                   "files given (two different histories for one user)", line=line, field="item_id_list")
    order = rows.select("user_id").unique(maintain_order=True)  # users in first-seen order
    seqs = order.join(best.select("user_id", "_seq"), on="user_id", how="left", maintain_order="left")
    return seqs.select("user_id", pl.col("_seq").list.slice(0, pl.col("_seq").list.len() - 1).alias("item_id_list"),
                       pl.col("_seq").list.last().alias("item_id"))


#: RecBole's split files in the order of time: a folder's are read so, never alphabetically (test < train <
#: valid), as file order breaks ties in time and orders undated rows: the official test item stays last
SPLIT_ORDER = {"train": 0, "valid": 1, "validation": 1, "dev": 1, "test": 2}


def _split_rank(p: Path) -> tuple[int, str]:
    part = p.name[: -len(p.suffix)].rsplit(".", 1)[-1].lower() if "." in p.name[: -len(p.suffix)] else ""
    return SPLIT_ORDER.get(part, -1), p.name


def find_atomic_files(paths: list[Path]) -> dict[str, list[Path]]:
    files: dict[str, list[Path]] = {"inter": [], "item": [], "user": []}
    for p in map(Path, paths):
        if p.is_dir():
            for kind in files:
                files[kind] += sorted(p.glob(f"*.{kind}"), key=_split_rank)
        elif p.suffix.lstrip(".") in files:
            files[p.suffix.lstrip(".")].append(p)
        elif not p.exists():
            raise InputError(p, "file not found")
        else:
            raise ConfigError(f"{p}: not a RecBole atomic file (.inter, .item or .user)")
    if not files["inter"]:
        raise ConfigError(f"no .inter file among {', '.join(map(str, paths))}")
    return files


def load_recbole(
    paths: list[Path] | Path, *, name: str | None = None, mapping: dict[str, str] | None = None
) -> Dataset:
    """Load RecBole atomic files (or directories of them) into a Dataset.

    `mapping` renames RecBole fields to canonical columns on top of
    DEFAULT_MAPPING (e.g. {"parent_asin": "item_id"}). Fields without a
    mapping are kept under their own names. Several .inter files (e.g. a
    benchmark's .train/.valid/.test) are concatenated in the order given; a folder's in the order of time
    (train, valid, test: `SPLIT_ORDER`), never alphabetically. Every file dated, or none.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files = find_atomic_files(paths)
    mp = {**DEFAULT_MAPPING, **(mapping or {})}
    ids = _id_fields(mp)
    inters, inter_files, sequences = [], [], []
    for f in files["inter"]:
        df, fields = read_atomic(f, tokens=ids, mapping=mp)
        df = _canonical_types(_rename(df, mp), f)
        missing = [c for c in ("user_id", "item_id") if c not in df.columns]
        if missing:
            raise InputError(f, f"no field maps to {missing[0]!r} (fields: {', '.join(fields)}); pass a mapping", line=1)
        no_empty_ids(f, df, ("user_id", "item_id"))
        df = _dated_or_not(f, df)
        if "item_id_list" in df.columns:
            sequences.append((f, df))
        else:
            inters.append(df.drop(LINE))
            inter_files.append(f)
    dated = {f: "timestamp" in df.columns for f, df in zip(inter_files, inters)}
    if any(dated.values()) and not all(dated.values()):  # an undated file's rows would sort after every dated one
        undated = next(f for f, d in dated.items() if not d)
        raise InputError(undated, "has no timestamps where the other .inter files have them: its rows would sort "
                                  "after the dated ones and become the held-out items; date every file, or none",
                         field="timestamp")
    if sequences:
        if inters:
            raise ConfigError(f"{sequences[0][0]} holds sequences (item_id_list) and {files['inter'][0]} "
                              "interactions: give one kind of .inter file")
        inters.append(expand_sequences(longest_sequences(sequences)))
    inter = pl.concat(inters, how="diagonal_relaxed")
    extra = [c for c in inter.columns if c not in ("user_id", "item_id", "rating", "timestamp")]
    inter = finish_interactions(inter, extra)

    def side(kind: str, key: str) -> pl.DataFrame | None:
        frames = []
        for f in files[kind]:
            df, _ = read_atomic(f, tokens=ids, mapping=mp)
            df = _canonical_types(_rename(df, mp), f)
            if key not in df.columns:
                raise InputError(f, f"no field maps to {key!r}; pass a mapping", line=1)
            no_empty_ids(f, df, (key,))
            frames.append(df.with_columns(pl.lit(str(f)).alias("__file")))
        if not frames:
            return None
        rows = pl.concat(frames, how="diagonal_relaxed")
        no_repeats(files[kind][0], rows.with_columns(pl.col(key).cast(pl.Utf8)), key, key)  # no silent pick
        return rows.drop(LINE, "__file")

    items = side("item", "item_id")
    if items is None:
        items = inter.select("item_id").unique(maintain_order=True)
    if "title" not in items.columns:
        items = items.with_columns(pl.lit(None, dtype=pl.Utf8).alias("title"))
    items = items.select("item_id", "title", pl.exclude("item_id", "title")).with_columns(pl.col("item_id", "title").cast(pl.Utf8))
    users = side("user", "user_id")
    if users is None:
        users = inter.select("user_id").unique(maintain_order=True)
    users = users.select("user_id", pl.exclude("user_id")).with_columns(pl.col("user_id").cast(pl.Utf8))
    stem = files["inter"][0].name.split(".")[0]
    return Dataset(
        name=name or f"recbole-{stem}",
        interactions=inter,
        items=items,
        users=users,
        meta={"source": "recbole-atomic", "files": [str(f) for fs in files.values() for f in fs],
              **({"sequence_timestamps": "position in the user's sequence; the last one is the held-out target"}
                 if sequences else {})},
    )

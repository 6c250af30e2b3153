"""LLMRank's sequential benchmark files (RUCAIBox/LLMRank), e.g. Amazon Games:

- `<D>.item`: RecBole atomic, `item_id:token  title:token_seq`;
- `<D'>.test.inter` / `.valid.inter`: `user_id  item_id_list  item_id`, the
  chronological history then the next item;
- `<D>.<retriever>`: `user_id<TAB>100 candidate ids`, one line per evaluated user.

The candidate files' user ids are the .inter files' user tokens: LLMRank looks
them up in the same RecBole token map and, for each, ranks the candidates
against that user's test target (inserting the target when `has_gt`; the
lists as shipped mostly do not contain it). We keep one split (test by
default) as interactions with timestamp = position, the target last, so
leave-last-out recovers the official target. A retriever lists the same
number of candidates for every user, and all retrievers list the same users:
a file that breaks either was cut short, so it is an error, not fewer users.
An empty user id, or an item id (in a sequence or a candidate list) that the .item file does not
list, is an error naming its line and field: the released folders are complete.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.data.parsing import (
    LINE,
    decode,
    finish_interactions,
    no_empty_ids,
    read_bytes,
    split_list,
    split_table,
)
from recharness.data.recbole import expand_sequences, read_atomic
from recharness.data.store import Dataset

NOT_RETRIEVERS = {"item", "inter", "user", "kg", "link", "index", "npy", "yaml", "md", "txt", "json", "py"}


def _one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise InputError(directory / pattern, f"{what} files match {pattern!r} in {directory}; expected exactly one")
    return found[0]


def read_candidates(path: Path, retriever: str) -> pl.DataFrame:
    text, _ = decode(path, read_bytes(path))
    df = split_table(path, text, "\t", ["user_id", "item_ids"])
    df = df.with_columns(pl.col("user_id").str.strip_chars(), split_list("item_ids", " "))
    no_empty_ids(path, df, ("user_id",))
    bad = df.filter(pl.col("item_ids").list.len() == 0).head(1)
    if bad.height:
        raise InputError(path, "no candidate item ids", line=bad[LINE][0], field="item_ids")
    dup = df.filter(pl.col("user_id").is_duplicated()).tail(1)
    if dup.height:
        raise InputError(path, f"user {dup['user_id'][0]!r} listed twice", line=dup[LINE][0], field="user_id")
    full = df["item_ids"].list.len().max()
    short = df.filter(pl.col("item_ids").list.len() < full).head(1)
    if short.height:  # a retriever lists the same number of candidates for every user
        raise InputError(path, f"{short['item_ids'][0].len()} candidate ids where the other lines have {full} (truncated?)",
                         line=short[LINE][0], field="item_ids")
    return df.with_columns(pl.lit(retriever).alias("retriever"))


def _known(path: Path, df: pl.DataFrame, fields: tuple[str, ...], known: pl.Series, item_path: Path) -> None:
    """Every item id a sequence or candidate list names is in the .item file (the released folders are
    complete): an unknown one has no title to show a model, so it is an error naming its line and field."""
    parts = []
    for field in fields:
        part = df.select(LINE, pl.col(field).alias("_id"), pl.lit(field).alias("_field"))
        parts.append(part.explode("_id") if isinstance(part.schema["_id"], pl.List) else part)
    hit = (pl.concat(parts).sort(LINE, maintain_order=True)
           .filter(pl.col("_id").is_not_null() & ~pl.col("_id").is_in(known)).head(1))
    if hit.height:
        raise InputError(path, f"item {hit['_id'][0]!r} is not in {item_path.name}", line=hit[LINE][0],
                         field=hit["_field"][0])


def check_same_users(frames: dict[Path, pl.DataFrame]) -> None:
    """Every retriever ranks candidates for the same evaluated users: a file
    that lacks some was cut short, and its users would silently drop out."""
    if not frames:
        return
    ref_path, ref = max(frames.items(), key=lambda kv: kv[1].height)
    for path, df in frames.items():
        missing = ref.join(df.select("user_id"), on="user_id", how="anti")
        if missing.height:
            more = f" and {missing.height - 1} more" if missing.height > 1 else ""
            raise InputError(path, f"ends after {df.height} of the {ref.height} users in {ref_path.name} (no line for user "
                                   f"{missing['user_id'][0]!r}{more}); truncated?", line=int(df[LINE].max()))


def load_llmrank(directory: Path, *, split: str = "test", name: str = "llmrank-games") -> Dataset:
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "not a directory (expected LLMRank's dataset folder)")
    if split not in ("test", "valid"):
        raise ConfigError(f"split must be 'test' or 'valid', not {split!r}")
    inter_path = _one(directory, f"*.{split}.inter")
    item_path = _one(directory, "*.item")

    items, ifields = read_atomic(item_path)
    if "item_id" not in ifields or "title" not in ifields:
        raise InputError(item_path, f"header must have item_id and title, has {list(ifields)}", line=1)
    no_empty_ids(item_path, items, ("item_id",))
    dup = items.filter(pl.col("item_id").is_duplicated()).tail(1)
    if dup.height:
        raise InputError(item_path, f"item {dup['item_id'][0]!r} listed twice", line=dup[LINE][0], field="item_id")
    items = items.select("item_id", "title", pl.exclude("item_id", "title", LINE))
    known_items = items["item_id"].implode()

    seq, fields = read_atomic(inter_path)
    need = ["user_id", "item_id_list", "item_id"]
    if [f for f in need if f not in fields]:
        raise InputError(inter_path, f"header must have fields {need}, has {list(fields)}", line=1)
    no_empty_ids(inter_path, seq, ("user_id",))
    dup = seq.filter(pl.col("user_id").is_duplicated()).tail(1)
    if dup.height:
        raise InputError(inter_path, f"user {dup['user_id'][0]!r} appears twice", line=dup[LINE][0], field="user_id")
    empty = seq.filter(pl.col("item_id").str.strip_chars() == "").head(1)
    if empty.height:
        raise InputError(inter_path, "empty next item", line=empty[LINE][0], field="item_id")
    _known(inter_path, seq, ("item_id_list", "item_id"), known_items, item_path)
    targets = seq.select("user_id", pl.col("item_id").alias("target"))
    inter = finish_interactions(expand_sequences(seq.select(need)))

    prefix = item_path.name[: -len(".item")]
    known_users = set(seq["user_id"])
    frames: dict[Path, pl.DataFrame] = {}
    for f in sorted(directory.glob(f"{prefix}.*")):
        retriever = f.name[len(prefix) + 1 :]
        if "." in retriever or retriever in NOT_RETRIEVERS or not f.is_file():
            continue
        df = read_candidates(f, retriever)
        _known(f, df, ("item_ids",), known_items, item_path)
        stray = df.filter(~pl.col("user_id").is_in(list(known_users))).head(1)
        if stray.height:
            raise InputError(f, f"user {stray['user_id'][0]!r} is not in {inter_path.name}", line=stray[LINE][0], field="user_id")
        frames[f] = df
    check_same_users(frames)
    cands, stats = [], {}
    for f, df in frames.items():
        retriever = df["retriever"][0]
        hit = df.join(targets, on="user_id").select(pl.col("item_ids").list.contains(pl.col("target")).sum())[0, 0]
        stats[retriever] = {"users": df.height, "candidates_per_user": int(df["item_ids"].list.len().max()),
                            "target_in_candidates": int(hit)}  # fmt: skip
        cands.append(df.select("user_id", "retriever", "item_ids"))
    extras = {}
    if cands:
        extras["candidates"] = pl.concat(cands).with_columns(pl.col("item_ids").cast(pl.List(pl.Utf8)))
    unknown = inter.join(items.select("item_id"), on="item_id", how="anti").height
    meta = {
        "source": "llmrank",
        "split": split,
        "files": [str(inter_path), str(item_path)] + [str(directory / f"{prefix}.{r}") for r in stats],
        "sequence_timestamps": "position in the user's sequence; the last one is the split's target",
        "retrievers": stats,
        "interactions_with_unknown_item": unknown,
        "note": "LLMRank (has_gt) inserts each user's target into its candidate list; the files mostly lack it.",
    }
    return Dataset(name=name, interactions=inter, items=items, users=seq.select("user_id"), meta=meta, extras=extras)

"""MIND, the Microsoft News Dataset, in its official layout (e.g. the folder MINDsmall_train):

- `news.tsv`, tab-separated, no header: NewsID, Category, SubCategory, Title, Abstract, URL,
  TitleEntities, AbstractEntities;
- `behaviors.tsv`, tab-separated, no header: ImpressionID, UserID, Time ("11/11/2019 9:05:58 AM",
  read as UTC), History ("N1 N2 …", the user's earlier clicks oldest first, may be empty),
  Impressions ("N5-1 N6-0 …": news id, "-", 1 clicked / 0 shown and not clicked).

Interactions keep MIND's real labels: one row per impression entry (`label` 1/0, `impression_id`,
timestamp = the impression's time) and one row per history click (`label` 1, `impression_id`
null), stamped just before the first impression that lists it, in history order (the k-th of n
at time - (n - k + 1) s), so a history click always precedes the impressions it was shown with.
A (user, news) click repeated in later histories is kept once (its earliest). `rating` is null.
Items: item_id, title, category, subcategory, abstract.

A news id in History or Impressions that news.tsv does not list is an error (file, line, field):
the official folders are self-contained, so it means news.tsv and behaviors.tsv come from
different splits. So are an ImpressionID on two lines and a news id listed twice in one impression
(each would count twice, the second perhaps with the opposite label).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from recharness.core.errors import InputError
from recharness.data.parsing import (
    LINE,
    decode,
    finish_interactions,
    first_bad,
    read_bytes,
    split_list,
    split_table,
)
from recharness.data.store import Dataset

NEWS_COLUMNS = ["news_id", "category", "subcategory", "title", "abstract", "url", "title_entities",
                "abstract_entities"]
BEHAVIOR_COLUMNS = ["impression_id", "user_id", "time", "history", "impressions"]
TIME_FORMAT = "%m/%d/%Y %I:%M:%S %p"


def _table(path: Path, names: list[str]) -> pl.DataFrame:
    text, _ = decode(path, read_bytes(path))
    return split_table(path, text, "\t", names)


def read_news(path: Path) -> pl.DataFrame:
    df = _table(path, NEWS_COLUMNS).with_columns(pl.col("news_id").str.strip_chars())
    first_bad(path, df, pl.col("news_id") == "", "NewsID", lambda r: "empty news id")
    first_bad(path, df, pl.col("news_id").is_duplicated() & (pl.col(LINE) > pl.col(LINE).min().over("news_id")),
           "NewsID", lambda r: f"news id {r['news_id']!r} listed twice")
    return df.select(pl.col("news_id").alias("item_id"), pl.col("title").str.strip_chars(),
                     *(pl.col(c).str.strip_chars().replace("", None) for c in ("category", "subcategory", "abstract")))


def _repeated(tokens: list[str]) -> str:
    """The first news id that an impression's entries ("N5-1 N6-0 …") name a second time, for the message."""
    seen = set()
    for tok in tokens:
        news = tok.rsplit("-", 1)[0]
        if news in seen:
            return news
        seen.add(news)
    return ""


def read_behaviors(path: Path, known: set[str]) -> pl.DataFrame:
    """One row per (impression, entry) and per (impression, history click), before dedupe."""
    df = _table(path, BEHAVIOR_COLUMNS).with_columns(pl.col("impression_id", "user_id", "time").str.strip_chars())
    first_bad(path, df, pl.col("impression_id") == "", "ImpressionID", lambda r: "empty impression id")
    first_bad(path, df, pl.col("user_id") == "", "UserID", lambda r: "empty user id")
    # one line per impression: a repeated line would count its entries twice
    df = df.with_columns(pl.col(LINE).min().over("impression_id").alias("_first"))
    first_bad(path, df, pl.col(LINE) > pl.col("_first"), "ImpressionID",
              lambda r: f"impression id {r['impression_id']!r} appears twice (first: line {r['_first']})")
    df = df.with_columns(pl.col("time").str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False).alias("_t"))
    first_bad(path, df, pl.col("_t").is_null(), "Time",
           lambda r: f"{r['time']!r} is not a time like '11/11/2019 9:05:58 AM'")
    df = df.with_columns(pl.col("_t").dt.epoch("s").alias("timestamp"),
                         split_list("history", " "), split_list("impressions", " "))
    first_bad(path, df, pl.col("impressions").list.len() == 0, "Impressions", lambda r: "no impression entries")

    imp = df.select("impression_id", "user_id", "timestamp", LINE, pl.col("impressions").alias("tok")).explode("tok")
    imp = imp.with_columns(pl.col("tok").str.extract(r"^(.+)-([01])$", 1).alias("item_id"),
                           pl.col("tok").str.extract(r"^(.+)-([01])$", 2).cast(pl.Int8).alias("label"))
    first_bad(path, imp, pl.col("item_id").is_null(), "Impressions",
           lambda r: f"{r['tok']!r} is not a news id followed by -1 (clicked) or -0 (not clicked)")
    # a news shown twice in one impression (perhaps as clicked and not clicked) is not a real log
    ids = pl.col("impressions").list.eval(pl.element().str.replace(r"-[01]$", ""))
    first_bad(path, df, ids.list.n_unique() < pl.col("impressions").list.len(), "Impressions",
              lambda r: f"news id {_repeated(r['impressions'])!r} listed twice in one impression")
    hist = (df.select("impression_id", "user_id", "timestamp", LINE, pl.col("history").alias("item_id"))
            .with_columns(pl.col("item_id").list.len().alias("_n")).explode("item_id")
            .filter(pl.col("item_id").is_not_null())
            .with_columns((pl.col("timestamp") - pl.col("_n") + pl.int_range(pl.len()).over(LINE)).alias("timestamp"),
                          pl.lit(1, pl.Int8).alias("label"), pl.lit(None, pl.Utf8).alias("impression_id")))
    for field, part in (("History", hist), ("Impressions", imp)):
        first_bad(path, part, ~pl.col("item_id").is_in(list(known)), field,
               lambda r: f"news id {r['item_id']!r} is not in news.tsv (files from different MIND splits?)")
    cols = ["user_id", "item_id", "timestamp", "label", "impression_id", LINE]
    # history first, so the stable sort by time keeps a click before an entry of the same second
    return pl.concat([hist.select(cols), imp.select(cols)])


def load_mind(directory: Path, *, name: str = "mind") -> Dataset:
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, "not a folder (give the MIND folder holding news.tsv and behaviors.tsv)")
    news_path, beh_path = directory / "news.tsv", directory / "behaviors.tsv"
    items = read_news(news_path)
    rows = read_behaviors(beh_path, set(items["item_id"].to_list()))
    is_hist = pl.col("impression_id").is_null()
    hist = (rows.filter(is_hist).sort("timestamp", LINE, maintain_order=True)
            .unique(["user_id", "item_id"], keep="first", maintain_order=True))
    rows = pl.concat([hist, rows.filter(~is_hist)])
    interactions = finish_interactions(rows.drop(LINE), extra=["label", "impression_id"])
    users = interactions.select("user_id").unique().sort("user_id")
    ds = Dataset(name=name, interactions=interactions, items=items, users=users)
    ds.meta.update(source="MIND (official layout)", files=[str(news_path), str(beh_path)],
                   impressions=int(rows.filter(~is_hist)["impression_id"].n_unique()), labels="real")
    ds.validate()
    return ds

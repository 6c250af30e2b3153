"""MicroLens (Westlake University's micro-video dataset, github.com/westlake-repl/MicroLens), in the layout of
its download folders (https://recsys.westlake.edu.cn/MicroLens-100k-Dataset/, …-50k-Dataset/):

- `MicroLens-100k_pairs.csv` (or `MicroLens-50k_pairs.csv`): a header `user,item,timestamp`, then one
  interaction per line; ids are integers, the timestamp is in milliseconds (13 digits, 2022). The
  folder's readme.txt calls the columns "userID", "videoID" and "timestamp", so that header is
  accepted too.
- titles: `MicroLens-100k_title_en.csv` has no header and one `<item>, <title>` line per video (a comma
  and a space; the English titles are unquoted, so the title is everything after the first comma, and
  may be empty), or `MicroLens-50k_titles.csv` (what RecBench reads): a header `item,title` and
  CSV-quoted titles (`1,"Gu long song gaga bad, even …"`).
Sources (checked, not downloaded): the RecBench authors' reader (github.com/Jyonn/RecBench,
process/microlens_processor.py) reads MicroLens-50k_pairs.csv and MicroLens-50k_titles.csv with pandas'
header row as columns `user`, `item`, `timestamp` and `item`, `title`; a copy of the 50k readme.txt
(github.com/sananm/multimodal-video-recommender, data/raw/microlens/readme.txt) names the pairs columns;
copies of MicroLens-100k_title_en.csv (github.com/lol-chang/sosp) begin `1, Gu long song gaga bad`, and
scripts that read it (e.g. "load_titles: header-less, title = the fields after the first comma") agree.
The `*_pairs.tsv` files (user, then that user's videos in order, no times) carry no timestamps and are
not read.

Interactions: every pair is a positive (`rating` null, so RecBench CTR samples 2 negatives per positive,
as the paper does for MicroLens); timestamp = the milliseconds // 1000, after a stable sort by the
milliseconds, so a user's views within one second keep their true order. (A pairs file whose times are
all below 10^11 is already in seconds and is taken as it is; meta `timestamp_unit` says which. A file
mixing the two is an error naming the first row whose unit differs from the first row's.)
Items: item_id, title (empty -> null). Users: the users in the pairs file.
Ids are whole numbers, as RecBench's pandas reader reads them: `01` and `1` are one video (or user), kept
as `1`; so a titles file listing both lists that video twice (an error naming the later line).

A bad line is an InputError naming the file, the line and the field; an item in the pairs file that
the titles file does not list is one too (the official folders are self-contained).
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import polars as pl

from recharness.core.errors import InputError
from recharness.data.parsing import LINE, finish_interactions, first_bad
from recharness.data.hm import decoded_lines, ends_mid_line, parse_int, read_plain_csv
from recharness.data.store import Dataset

PAIRS_HEADER = ["user", "item", "timestamp"]
README_HEADER = ["userID", "videoID", "timestamp"]
MS_THRESHOLD = 10**11  # 1973-03-03 in ms, year 5138 in seconds


class _Quiet:
    def update(self, *_a, **_k) -> None:
        pass


def find_files(directory: Path) -> tuple[Path, Path]:
    """(pairs CSV, titles file) in a MicroLens folder: one `*_pairs.csv`, then the titles of the same prefix
    (`<prefix>_title_en.csv`, else `<prefix>_titles.csv`)."""
    pairs = sorted(directory.glob("*_pairs.csv"))
    if not pairs:
        raise InputError(directory, "no MicroLens pairs file (e.g. MicroLens-100k_pairs.csv) in this folder")
    if len(pairs) > 1:
        raise InputError(directory, f"several pairs files ({', '.join(p.name for p in pairs)}): give a folder with one")
    prefix = pairs[0].name.removesuffix("_pairs.csv")
    for name in (f"{prefix}_title_en.csv", f"{prefix}_titles.csv"):
        if (directory / name).is_file():
            return pairs[0], directory / name
    raise InputError(directory, f"no titles file for {pairs[0].name} ({prefix}_title_en.csv or {prefix}_titles.csv)")


def read_titles(path: Path) -> pl.DataFrame:
    """item_id, title (null when empty), LINE; the two official layouts (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    ids, titles, lines = [], [], []
    text_lines = decoded_lines(path)  # each line decoded on its own: a bad byte is reported on its line
    try:
        first = next(text_lines, "")
        if not first.strip():
            raise InputError(path, "file is empty", line=1)
        header = first.strip().replace(" ", "").lower() in ("item,title", "videoid,title")
        start = 1
        try:
            if header:  # MicroLens-50k_titles.csv: a header and CSV quoting
                reader = csv.reader(text_lines, strict=True)
                start = 2
                for row in reader:
                    if row and any(v.strip() for v in row):
                        if len(row) != 2:
                            raise InputError(path, f"{len(row)} fields where 2 (item,title) were expected", line=start,
                                             field="title" if len(row) < 2 else None)
                        ids.append(row[0])
                        titles.append(row[1])
                        lines.append(start)
                    start = reader.line_num + 2
            else:  # MicroLens-100k_title_en.csv: "<item>, <title>", no header, no quoting
                for start, text in enumerate(itertools.chain([first], text_lines), 1):
                    if not text.endswith("\n") and text.strip():  # the last line, cut (mid-title, say)
                        raise InputError(path, "file ends mid-line (truncated?): the last line has no newline",
                                         line=start, field="title" if "," in text else "item")
                    text = text.rstrip("\r\n")
                    if not text.strip():
                        continue
                    item, sep, title = text.partition(",")
                    if not sep:
                        raise InputError(path, "no comma: a line is '<item>, <title>'", line=start, field="title")
                    ids.append(item)
                    titles.append(title)
                    lines.append(start)
        except csv.Error as e:
            raise InputError(path, f"bad CSV quoting ({e})", line=start) from None
    finally:
        text_lines.close()
    if not ids:
        raise InputError(path, "no data rows")
    if header and ends_mid_line(path):  # the csv module takes a row cut mid-title as a whole one
        raise InputError(path, "file ends mid-line (truncated?): the last line has no newline", line=lines[-1],
                         field="title")
    df = pl.DataFrame({"item": ids, "title": titles, LINE: lines},
                      schema={"item": pl.Utf8, "title": pl.Utf8, LINE: pl.Int64})
    df = df.with_columns(pl.col("item").str.strip_chars(), pl.col("title").str.strip_chars().replace("", None))
    # ASCII digits only: polars' \d also takes other scripts' digits ("٣", "７"), which no integer reader upstream does
    first_bad(path, df, ~pl.col("item").str.contains(r"^[0-9]+$"), "item",
              lambda r: f"{r['item']!r} is not a video id (a whole number)")
    df = df.with_columns(pl.col("item").alias("as_written"), whole_number("item"))
    first_bad(path, df, pl.col("item").is_duplicated() & (pl.col(LINE) > pl.col(LINE).min().over("item")), "item",
              lambda r: f"video {r['as_written']!r} listed twice" + (
                  f" (ids are whole numbers: {r['as_written']!r} is video {r['item']!r})"
                  if r["as_written"] != r["item"] else ""))
    return df.select(pl.col("item").alias("item_id"), "title")


def whole_number(col: str) -> pl.Expr:
    """An id column of digits as the number it names ("007" -> "7", "0" stays): read as integers upstream, so
    ids that differ only in leading zeros are one id. Kept as text, so no length limit."""
    return pl.col(col).str.strip_chars_start("0").replace("", "0").alias(col)


def read_pairs(path: Path, known: set[str]) -> tuple[pl.DataFrame, str]:
    """(user_id, item_id, timestamp in seconds) in file order, and the unit the file was in."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.readline().decode("utf-8-sig", errors="replace").strip().split(",")
    names = README_HEADER if head and head[0] == "userID" else PAIRS_HEADER
    df = read_plain_csv(path, names, names).rename(dict(zip(names, PAIRS_HEADER)))
    fields = dict(zip(PAIRS_HEADER, names))
    for col in PAIRS_HEADER:
        first_bad(path, df, pl.col(col).is_null(), fields[col],
                  lambda r: "missing (empty field, or the line is cut short)")
    for col in ("user", "item"):
        first_bad(path, df, ~pl.col(col).str.contains(r"^[0-9]+$"), fields[col],
                  lambda r, c=col: f"{r[c]!r} is not an id (a whole number)")
    df = df.with_columns(pl.col("item").alias("as_written"), whole_number("user"), whole_number("item"))
    df = parse_int(path, df, "timestamp", lo=0)
    first_bad(path, df, ~pl.col("item").is_in(list(known)), fields["item"],
              lambda r: f"video {r['as_written']!r} is not in the titles file" + (
                  f" (ids are whole numbers: {r['as_written']!r} is video {r['item']!r})"
                  if r["as_written"] != r["item"] else ""))
    ms = bool(df["timestamp"][0] >= MS_THRESHOLD)  # the unit of the first row; every other row must share it
    unit = {True: "milliseconds", False: "seconds"}
    first_line, first_ts = df[LINE][0], df["timestamp"][0]
    first_bad(path, df, (pl.col("timestamp") >= MS_THRESHOLD) != ms, fields["timestamp"],
              lambda r: f"{r['timestamp']} looks like {unit[not ms]} but line {first_line}'s {first_ts} like "
                        f"{unit[ms]}: one file holds one unit (read as {unit[ms]}, this row would be misdated)")
    df = df.sort("user", "timestamp", LINE, maintain_order=True) if ms else df
    ts = (pl.col("timestamp") // 1000) if ms else pl.col("timestamp")
    out = df.select(pl.col("user").alias("user_id"), pl.col("item").alias("item_id"), ts.alias("timestamp"))
    return out, "seconds (source: milliseconds)" if ms else "seconds"


def load_microlens(directory: Path, *, name: str = "microlens", status=None) -> Dataset:
    directory = Path(directory)
    status = status or _Quiet()
    if not directory.is_dir():
        raise InputError(directory, "not a folder (give the MicroLens folder holding MicroLens-100k_pairs.csv "
                                    "and MicroLens-100k_title_en.csv)")
    pairs_path, titles_path = find_files(directory)
    status.update(f"Reading {titles_path}…")
    items = read_titles(titles_path)
    status.update(f"Reading {pairs_path}…")
    rows, unit = read_pairs(pairs_path, set(items["item_id"].to_list()))
    interactions = finish_interactions(rows)
    users = interactions.select("user_id").unique(maintain_order=True)
    ds = Dataset(name=name, interactions=interactions, items=items, users=users)
    ds.meta.update(source="MicroLens (official layout)", files=[str(pairs_path), str(titles_path)],
                   timestamp_unit=unit)
    ds.validate()
    return ds

"""H&M Personalized Fashion Recommendations (Kaggle, 2022), in the competition's published layout:

- `articles.csv`, comma-separated with a header, fields quoted where they hold commas:
  article_id, product_code, prod_name, product_type_no, product_type_name, product_group_name,
  graphical_appearance_no, graphical_appearance_name, colour_group_code, colour_group_name,
  perceived_colour_value_id, perceived_colour_value_name, perceived_colour_master_id,
  perceived_colour_master_name, department_no, department_name, index_code, index_name, index_group_no,
  index_group_name, section_no, section_name, garment_group_no, garment_group_name, detail_desc
  (e.g. `0108775015,0108775,Strap top,253,Vest top,Garment Upper body,…,Jersey top with narrow shoulder straps.`);
- `transactions_train.csv`: t_dat (YYYY-MM-DD), customer_id (64 hex digits), article_id, price (scaled,
  not negative), sales_channel_id (1 or 2), one row per purchased piece, no quoting, every field present;
- `customers.csv` (optional): customer_id, FN, Active ("1.0" or empty), club_member_status,
  fashion_news_frequency, age (16-99 in the published file; outside `AGES` is an error), postal_code.
Source: https://kaggle.com/competitions/h-and-m-personalized-fashion-recommendations (RecBench's [30]); the
RecBench authors' reader (github.com/Jyonn/RecBench, process/hm_processor.py) reads the same three columns of
transactions_train.csv and articles.csv with article_id as a string.

Interactions: every purchase is a positive (`rating` null, so RecBench CTR samples 2 negatives per positive,
as the paper does for H&M), timestamp = t_dat at 00:00 UTC in epoch seconds; a customer's purchases of one
day keep their file order (the sort is stable), and a repeated purchase is kept as its own row. Extra
columns: price (Float64), sales_channel_id (Int64).
Items: item_id = article_id as 10 digits with its leading zero (a copy re-saved without the zero, e.g. by
pandas, is padded back), title = prod_name, then product_type_name, product_group_name,
graphical_appearance_name, colour_group_name, department_name, index_name, index_group_name,
section_name, garment_group_name, detail_desc (RecBench's text attribute for H&M, Table 2 "desc").
Users: customer_id with fn, active (Boolean), club_member_status, fashion_news_frequency, age, postal_code
from customers.csv, else just the customers who bought something.

Not done here (RecBench's own preprocessing, left to the task builders): the authors keep only articles
with a detail_desc and read the first 10M transaction lines.

A bad line is an InputError naming the file, the line and the field; an article id or customer id in
transactions_train.csv that articles.csv / customers.csv does not list is one too (the three Kaggle files
are one consistent release).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from recharness.core.errors import InputError
from recharness.data.parsing import LINE, finish_interactions, first_bad, no_repeated_columns
from recharness.data.store import Dataset

ARTICLES_HEADER = [
    "article_id", "product_code", "prod_name", "product_type_no", "product_type_name", "product_group_name",
    "graphical_appearance_no", "graphical_appearance_name", "colour_group_code", "colour_group_name",
    "perceived_colour_value_id", "perceived_colour_value_name", "perceived_colour_master_id",
    "perceived_colour_master_name", "department_no", "department_name", "index_code", "index_name",
    "index_group_no", "index_group_name", "section_no", "section_name", "garment_group_no", "garment_group_name",
    "detail_desc",
]
TRANSACTIONS_HEADER = ["t_dat", "customer_id", "article_id", "price", "sales_channel_id"]
CUSTOMERS_HEADER = ["customer_id", "FN", "Active", "club_member_status", "fashion_news_frequency", "age",
                    "postal_code"]
#: plausible customer ages (customers.csv, inclusive)
AGES = (10, 120)
#: articles.csv columns kept as item attributes (names as published), after item_id and title
ITEM_ATTRIBUTES = ["product_type_name", "product_group_name", "graphical_appearance_name", "colour_group_name",
                   "department_name", "index_name", "index_group_name", "section_name", "garment_group_name",
                   "detail_desc"]


class _Quiet:
    def update(self, *_a, **_k) -> None:
        pass


# --- strict CSV reading, shared with microlens.py ---------------------------------------------------


def _header(path: Path, expected: list[str], required: Iterable[str]) -> list[str]:
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    with open(path, "rb") as fh:
        first = fh.readline()
        fh.seek(0, 2)
        size = fh.tell()
        if size:
            fh.seek(size - 1)
            last = fh.read(1)
    if not first.strip():
        raise InputError(path, "file is empty" if size == 0 else "no header line", line=1)
    try:
        names = first.decode("utf-8-sig").rstrip("\r\n").split(",")
    except UnicodeDecodeError:
        raise InputError(path, "not valid UTF-8", line=1) from None
    no_repeated_columns(path, names)
    for col in required:
        if col not in names:
            raise InputError(path, f"the header has no column {col!r} (expected {','.join(expected)})",
                             line=1, field=col)
    if last != b"\n":
        _truncated(path, names)
    return names


def decoded_lines(path: Path) -> Iterator[str]:
    """The file's lines (line ends kept, as the csv module wants them), each decoded on its own so that a
    non-UTF-8 byte is reported on its own line: a text-mode reader decodes ahead in blocks and fails on
    a line it has not handed out yet."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                yield raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, f"not valid UTF-8 ({e.reason})", line=lineno) from None


def ends_mid_line(path: Path) -> bool:
    """Does the file's last line lack its newline (a cut download: every published copy ends with one)?
    Spaces after the last newline are not a cut."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 4096))
        tail = fh.read()
    return bool(tail.rsplit(b"\n", 1)[-1].strip())


def _truncated(path: Path, names: list[str]) -> None:
    n = 0
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            pass
    fields = len(raw.split(b","))
    raise InputError(path, "file ends mid-line (truncated?): the last line has no newline", line=n,
                     field=names[min(fields, len(names)) - 1])


def _locate(path: Path, names: list[str], error: Exception) -> None:
    """polars refused the file: find the first line it could not take (encoding, too many fields)."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, f"not valid UTF-8 ({e.reason})", line=lineno) from None
            text = text.rstrip("\r\n")
            n = len(text.split(","))
            if text.strip() and n > len(names):
                raise InputError(path, f"{n} fields where {len(names)} were expected (separator ',')", line=lineno)
    raise InputError(path, f"unreadable CSV ({str(error).splitlines()[0]})") from None


def read_plain_csv(path: Path, expected: list[str], required: list[str], optional: Iterable[str] = ()) -> pl.DataFrame:
    """A comma-separated file with a header and no quoting (H&M transactions and customers, MicroLens
    pairs), read by polars: `required` and the `optional` columns present, all Utf8, empty fields null,
    plus LINE (the 1-based line). Blank lines are skipped; a line with fewer fields than the header
    (cut short) or more is an error; empty fields are null, which the callers report where they matter."""
    path = Path(path)
    names = _header(path, expected, required)
    cols = list(required) + [c for c in optional if c in names and c not in required]
    named = names[: max(i + 1 for i, n in enumerate(names) if n.strip() or i == 0)]  # no trailing empty names
    read = cols + [named[-1]] * (named[-1] not in cols)  # the last column is null on every line cut short
    try:
        df = pl.read_csv(path, has_header=True, infer_schema=False, quote_char=None, columns=read,
                         row_index_name=LINE, row_index_offset=2, encoding="utf8")
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError, UnicodeDecodeError) as e:
        _locate(path, names, e)
    if not df.height:
        raise InputError(path, "no data rows")
    df = df.with_columns(pl.col(LINE).cast(pl.Int64), *(pl.col(c).str.strip_chars().replace("", None) for c in read))
    blank = pl.all_horizontal(pl.col(c).is_null() for c in read)
    df = df.filter(~blank)
    if not df.height:
        raise InputError(path, "no data rows")
    _no_short_lines(path, named, df.filter(pl.col(named[-1]).is_null())[LINE])
    return df.select(LINE, *cols)


def _no_short_lines(path: Path, names: list[str], lines: pl.Series) -> None:
    """Every line has every header column: polars fills a short line's missing fields with nulls, which would
    pass for empty optional fields (a cut price, say). Only lines whose last field is empty are looked at."""
    if not lines.len():
        return
    todo = set(lines.to_list())
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno in todo:
                n = len(raw.rstrip(b"\r\n").split(b","))
                if n < len(names):
                    raise InputError(path, f"truncated line: {n} of {len(names)} fields (separator ','; missing "
                                           f"from {names[n]!r} on)", line=lineno, field=names[n])
                todo.discard(lineno)
                if not todo:
                    return


def require(path: Path, df: pl.DataFrame, cols: Iterable[str]) -> None:
    for col in cols:
        first_bad(path, df, pl.col(col).is_null(), col, lambda r: "missing (empty field, or the line is cut short)")


def parse_int(path: Path, df: pl.DataFrame, col: str, *, lo: int | None = None, hi: int | None = None,
              why: str = "") -> pl.DataFrame:
    """Whole numbers ("25", also "25.0"); null stays null. `why` ends the message for a value out of range.
    One written as an integer is read exactly (through a float, 17-19 digits lose their last ones)."""
    num = pl.col(col).cast(pl.Float64, strict=False)
    first_bad(path, df, pl.col(col).is_not_null() & (num.is_null() | ~num.is_finite() | (num != num.round())), col,
              lambda r: f"{r[col]!r} is not a whole number")
    first_bad(path, df, num.abs() >= 2.0**63, col, lambda r: f"{r[col]!r} is too large for a whole number")
    if lo is not None:
        first_bad(path, df, num < lo, col, lambda r: f"{r[col]!r} is below {lo}{why}")
    if hi is not None:
        first_bad(path, df, num > hi, col, lambda r: f"{r[col]!r} is above {hi}{why}")
    return df.with_columns(pl.coalesce(pl.col(col).cast(pl.Int64, strict=False), num.cast(pl.Int64)).alias(col))


def parse_float(path: Path, df: pl.DataFrame, col: str) -> pl.DataFrame:
    num = pl.col(col).cast(pl.Float64, strict=False)
    first_bad(path, df, pl.col(col).is_not_null() & (num.is_null() | ~num.is_finite()), col,
              lambda r: f"{r[col]!r} is not a number")
    return df.with_columns(num.alias(col))


# --- the three H&M files -----------------------------------------------------------------------------


def _article_id(col: str = "article_id") -> pl.Expr:
    return pl.col(col).str.zfill(10)


def _check_article_ids(path: Path, df: pl.DataFrame) -> None:
    first_bad(path, df, ~pl.col("article_id").str.contains(r"^\d{1,10}$"), "article_id",
              lambda r: f"{r['article_id']!r} is not an article id (up to 10 digits, e.g. 0108775015)")


def read_articles(path: Path) -> pl.DataFrame:
    """articles.csv through the csv module: its quoted fields (detail_desc, prod_name) may hold commas,
    quotes and, in principle, newlines, so each record is numbered by the line it starts on."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    rows: list[list[str]] = []
    lines: list[int] = []
    lines_in = decoded_lines(path)
    try:
        reader = csv.reader(lines_in, strict=True)
        start = 1
        try:
            header = next(reader, None)
            if not header:
                raise InputError(path, "file is empty", line=1)
            no_repeated_columns(path, header)
            for col in ("article_id", "prod_name"):
                if col not in header:
                    raise InputError(path, f"the header has no column {col!r} (expected {','.join(ARTICLES_HEADER)})",
                                     line=1, field=col)
            width = len(header)
            start = reader.line_num + 1
            for row in reader:
                if row and any(v.strip() for v in row):
                    if len(row) < width:
                        raise InputError(path, f"truncated line: {len(row)} of {width} fields", line=start,
                                         field=header[len(row)])
                    if len(row) > width:
                        raise InputError(path, f"{len(row)} fields where {width} were expected", line=start)
                    rows.append(row)
                    lines.append(start)
                start = reader.line_num + 1
        except csv.Error as e:
            raise InputError(path, f"bad CSV quoting ({e})", line=start) from None
    finally:
        lines_in.close()
    if not rows:
        raise InputError(path, "no data rows")
    if ends_mid_line(path):  # cut inside the last field: the csv module takes what is there as the whole row
        raise InputError(path, "file ends mid-line (truncated?): the last line has no newline", line=lines[-1],
                         field=header[min(len(rows[-1]), width) - 1])
    keep = ("article_id", "prod_name", *ITEM_ATTRIBUTES)
    data = {name: [r[i] for r in rows] for i, name in enumerate(header) if name in keep}
    df = pl.DataFrame(data, schema={k: pl.Utf8 for k in data}).with_columns(pl.Series(LINE, lines, pl.Int64))
    df = df.with_columns(pl.col(c).str.strip_chars().replace("", None) for c in data)
    require(path, df, ["article_id"])
    _check_article_ids(path, df)
    df = df.with_columns(_article_id())
    first_bad(path, df, pl.col("article_id").is_duplicated() & (pl.col(LINE) > pl.col(LINE).min().over("article_id")),
              "article_id", lambda r: f"article id {r['article_id']!r} listed twice")
    attrs = [c for c in ITEM_ATTRIBUTES if c in df.columns]
    return df.select(pl.col("article_id").alias("item_id"), pl.col("prod_name").alias("title"), *attrs)


def read_customers(path: Path) -> pl.DataFrame:
    df = read_plain_csv(path, CUSTOMERS_HEADER, ["customer_id"], CUSTOMERS_HEADER[1:])
    first_bad(path, df, pl.col("customer_id").is_duplicated() & (pl.col(LINE) > pl.col(LINE).min().over("customer_id")),
              "customer_id", lambda r: f"customer id {r['customer_id']!r} listed twice")
    out = [pl.col("customer_id").alias("user_id")]
    for col, name in (("FN", "fn"), ("Active", "active")):
        if col in df.columns:
            df = parse_float(path, df, col)
            out.append((pl.col(col) != 0).alias(name))
    if "age" in df.columns:  # the published ages run 16-99; anything outside 10-120 is a typo or a placeholder
        df = parse_int(path, df, "age", lo=AGES[0], hi=AGES[1], why=" (not a plausible age)")
    out += [pl.col(c) for c in ("club_member_status", "fashion_news_frequency", "age", "postal_code")
            if c in df.columns]
    return df.select(out)


def read_transactions(path: Path, articles: set[str], customers: set[str] | None) -> pl.DataFrame:
    df = read_plain_csv(path, TRANSACTIONS_HEADER, TRANSACTIONS_HEADER[:3], TRANSACTIONS_HEADER[3:])
    require(path, df, TRANSACTIONS_HEADER[:3])
    day = pl.col("t_dat").str.strptime(pl.Date, "%Y-%m-%d", strict=False)
    first_bad(path, df, day.is_null(), "t_dat", lambda r: f"{r['t_dat']!r} is not a date like 2018-09-20")
    _check_article_ids(path, df)
    df = df.with_columns(_article_id())
    first_bad(path, df, ~pl.col("article_id").is_in(list(articles)), "article_id",
              lambda r: f"article id {r['article_id']!r} is not in articles.csv")
    if customers is not None:
        first_bad(path, df, ~pl.col("customer_id").is_in(list(customers)), "customer_id",
                  lambda r: f"customer id {r['customer_id']!r} is not in customers.csv")
    if "price" in df.columns:
        df = parse_float(path, df, "price")
        first_bad(path, df, pl.col("price") < 0, "price", lambda r: f"{r['price']!r} is negative")
    if "sales_channel_id" in df.columns:
        df = parse_int(path, df, "sales_channel_id")
        first_bad(path, df, pl.col("sales_channel_id").is_not_null() & ~pl.col("sales_channel_id").is_in([1, 2]),
                  "sales_channel_id", lambda r: f"{r['sales_channel_id']!r} is not a sales channel (1 or 2)")
    extra = [c for c in ("price", "sales_channel_id") if c in df.columns]
    return df.select(pl.col("customer_id").alias("user_id"), pl.col("article_id").alias("item_id"),
                     day.cast(pl.Datetime("us")).dt.epoch("s").alias("timestamp"), *extra)


def load_hm(directory: Path, *, name: str = "hm", status=None) -> Dataset:
    directory = Path(directory)
    status = status or _Quiet()
    if not directory.is_dir():
        raise InputError(directory, "not a folder (give the H&M folder holding articles.csv and "
                                    "transactions_train.csv)")
    art_path, tr_path, cu_path = (directory / f for f in ("articles.csv", "transactions_train.csv", "customers.csv"))
    status.update(f"Reading {art_path}…")
    items = read_articles(art_path)
    users = None
    if cu_path.exists():
        status.update(f"Reading {cu_path}…")
        users = read_customers(cu_path)
    size = tr_path.stat().st_size if tr_path.is_file() else 0
    status.update(f"Reading {tr_path} ({size / 1e6:,.0f} MB)…")
    inter = read_transactions(tr_path, set(items["item_id"].to_list()),
                              None if users is None else set(users["user_id"].to_list()))
    status.update(f"Sorting {inter.height:,} purchases…")
    interactions = finish_interactions(inter, extra=[c for c in ("price", "sales_channel_id") if c in inter.columns])
    if users is None:
        users = interactions.select("user_id").unique(maintain_order=True)
    files = [art_path, tr_path] + ([cu_path] if cu_path.exists() else [])
    ds = Dataset(name=name, interactions=interactions, items=items, users=users)
    ds.meta.update(source="H&M Personalized Fashion Recommendations (Kaggle layout)", files=[str(f) for f in files],
                   timestamp_unit="seconds (source: t_dat dates, 00:00 UTC)", text_attribute="detail_desc")
    ds.validate()
    return ds

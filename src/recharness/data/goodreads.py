"""Goodreads (the UCSD Book Graph, Wan & McAuley, RecSys'18; mengtingwan.github.io/data/goodreads), in its
published layout: gzipped JSON lines, one object per line, every id a string.

- `goodreads_interactions_<genre>.json.gz` (e.g. _poetry, _children, _young_adult; or the complete
  `goodreads_interactions_dedup.json.gz`): user_id, book_id, review_id, is_read (true/false), rating
  (0-5, 0 = not rated), review_text_incomplete, date_added, date_updated, read_at, started_at, the dates
  like "Thu Aug 17 15:15:28 -0700 2017" (strftime "%a %b %d %H:%M:%S %z %Y", empty when unknown);
- `goodreads_books_<genre>.json.gz` (or the complete `goodreads_books.json.gz`): book_id, title,
  title_without_series, authors ([{"author_id": "13195", "role": ""}, …]), work_id, publication_year,
  num_pages, publisher, language_code, format, description, … with numbers as strings ("2016", "36").
Sources: the dataset's repository github.com/MengtingWan/goodreads (dataset_names.csv for the file names,
samples.ipynb for sample records of both files, statistics.ipynb for the per-genre files read with the
same fields), and the RecBench authors' reader (github.com/Jyonn/RecBench, process/goodreads_processor.py).
Uncompressed `.json` copies are read too; goodreads_interactions.csv (remapped integer ids) is not.

Interactions: one row per shelved book, item_id = book_id, timestamp = date_added as the UTC instant in
epoch seconds (the offset is applied; the authors' reader replaces it with UTC instead, shifting times by
7-8 hours, which changes no order within a user but a few across the DST switch). rating = the stars, and
0 (shelved, not rated) becomes null, never a dislike. `label` = is_read (1/0): RecBench counts Goodreads
among the datasets that come with their negatives (§4.3, no sampling for it), and the authors' reader
takes is_read as the click, so `recbench -t ctr` uses these labels by default (negatives=auto picks a
`label` column); `-o negatives=ratings` uses the stars instead (> 3 click, < 3 not, 3 and unrated dropped).
Items: item_id, title, author_ids (list), work_id, publication_year, num_pages, publisher, language_code,
format, description (empty strings -> null). Behaviour-derived book fields (average_rating, ratings_count,
popular_shelves, similar_books) are left out: they count the very interactions a benchmark holds out.

Every bad line is an InputError naming the file, line and field; a book_id in the interactions that the
books file does not list is one too (each genre's two files are one consistent release), and so is a
(user_id, book_id) pair listed twice (the published files list each once).
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.data.parsing import LINE, finish_interactions, first_bad
from recharness.data.store import Dataset

DATE_FORMAT = "%a %b %d %H:%M:%S %z %Y"
DATE_EXAMPLE = "Tue Oct 17 16:53:21 -0700 2017"
BATCH = 500_000  # lines per polars parse

INTERACTION_SCHEMA = {"user_id": pl.Utf8, "book_id": pl.Utf8, "is_read": pl.Boolean, "rating": pl.Int64,
                      "date_added": pl.Utf8}
AUTHOR = pl.Struct({"author_id": pl.Utf8, "role": pl.Utf8})
BOOK_SCHEMA = {"book_id": pl.Utf8, "title": pl.Utf8, "authors": pl.List(AUTHOR),
               "work_id": pl.Utf8, "publication_year": pl.Utf8, "num_pages": pl.Utf8, "publisher": pl.Utf8,
               "language_code": pl.Utf8, "format": pl.Utf8, "description": pl.Utf8}


class _Quiet:
    def update(self, *_a, **_k) -> None:
        pass


# --- JSON lines in batches ------------------------------------------------------------------------


def _batches(path: Path, status) -> Iterator[tuple[list[int], list[bytes]]]:
    """(line numbers, raw lines) of the non-blank lines, BATCH at a time; gz by name."""
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    nums: list[int] = []
    lines: list[bytes] = []
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if lineno == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM may open the file
                if raw.strip():
                    nums.append(lineno)
                    lines.append(raw.rstrip(b"\r\n"))
                    if len(lines) >= BATCH:
                        status.update(f"Reading {path.name}: {lineno:,} lines…")
                        yield nums, lines
                        nums, lines = [], []
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise InputError(path, f"truncated or corrupt gzip file ({e})", line=lineno + 1) from None
    if lines:
        yield nums, lines


def _python_check(path: Path, nums: list[int], lines: list[bytes], check) -> None:
    """Find the line polars refused: parse each with json and run `check(line, obj)`."""
    for n, raw in zip(nums, lines):
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InputError(path, f"not valid UTF-8 ({e.reason})", line=n) from None
        except json.JSONDecodeError as e:
            raise InputError(path, f"not valid JSON ({e.msg}, column {e.colno})", line=n) from None
        except ValueError as e:  # valid JSON, but an integer of more than 4300 digits (int's limit) in it
            raise InputError(path, f"a number of more digits than Python reads ({e})", line=n) from None
        if not isinstance(obj, dict):
            raise InputError(path, "a line must be one JSON object", line=n)
        check(n, obj)


def _not_strings(keys: tuple[str, ...]) -> str:
    """A regex for a line giving one of `keys` a value that is no string (nor null): polars would read a
    number, a list or an object as its text ('1.5', '["x"]'), so such lines go through `check`. A match
    inside a string value (a description quoting JSON) costs only that check."""
    return r'"(?:' + "|".join(keys) + r')"\s*:\s*[^"\sn]'


def _frames(path: Path, schema: dict, check, status, strings: tuple[str, ...] = ()) -> Iterator[pl.DataFrame]:
    got = False
    for nums, lines in _batches(path, status):
        got = True
        try:
            df = pl.read_ndjson(io.BytesIO(b"\n".join(lines)), schema=schema)
            if df.height != len(nums):
                raise pl.exceptions.ComputeError(f"{df.height} rows from {len(nums)} lines")
            if strings:
                odd = pl.Series(lines).cast(pl.Utf8).str.contains(_not_strings(strings)).arg_true().to_list()
                _python_check(path, [nums[i] for i in odd], [lines[i] for i in odd], check)
        except (pl.exceptions.PolarsError, UnicodeDecodeError) as e:
            _python_check(path, nums, lines, check)
            raise InputError(path, f"unreadable JSON lines {nums[0]}-{nums[-1]} ({str(e).splitlines()[0]})") from None
        yield df.with_columns(pl.Series(LINE, nums, pl.Int64))
    if not got:
        raise InputError(path, "file is empty")


def _need_string(path, line, obj, key, *, required=True, number=False):
    """obj[key] is a string (as every id and text of the published files; `number`: or a whole number)."""
    v = obj.get(key)
    if v is None or v == "":
        if required:
            raise InputError(path, f"missing {key!r}", line=line, field=key)
        return
    if isinstance(v, bool) or not isinstance(v, (str, int) if number else str):
        raise InputError(path, f"{key!r} must be a string, not {type(v).__name__}", line=line, field=key)


# --- the two files --------------------------------------------------------------------------------


def _check_interaction(path: Path):
    def check(line: int, obj: dict) -> None:
        _need_string(path, line, obj, "user_id")
        _need_string(path, line, obj, "book_id")
        if not isinstance(obj.get("is_read"), bool):
            raise InputError(path, f"is_read {obj.get('is_read')!r} is not true or false", line=line, field="is_read")
        r = obj.get("rating")
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= 5:
            raise InputError(path, f"rating {r!r} is not a whole number 0-5", line=line, field="rating")
        _need_string(path, line, obj, "date_added")
    return check


def read_interactions(path: Path, status=None) -> pl.DataFrame:
    """user_id, item_id, rating (null for 0), timestamp, label (is_read), LINE."""
    path = Path(path)
    status = status or _Quiet()
    out = []
    for df in _frames(path, INTERACTION_SCHEMA, _check_interaction(path), status,
                      ("user_id", "book_id", "date_added")):
        for col in ("user_id", "book_id", "date_added"):
            first_bad(path, df, pl.col(col).is_null() | (pl.col(col).str.strip_chars() == ""), col,
                      lambda r, c=col: f"missing {c!r}")
        first_bad(path, df, pl.col("is_read").is_null(), "is_read", lambda r: "missing 'is_read' (true or false)")
        first_bad(path, df, pl.col("rating").is_null(), "rating", lambda r: "missing 'rating' (0-5, 0 = not rated)")
        first_bad(path, df, ~pl.col("rating").is_between(0, 5), "rating",
                  lambda r: f"rating {r['rating']} is not 0 (not rated) to 5")
        when = pl.col("date_added").str.strip_chars().str.strptime(pl.Datetime("us", "UTC"), DATE_FORMAT, strict=False)
        df = df.with_columns(when.alias("_t"))
        first_bad(path, df, pl.col("_t").is_null(), "date_added",
                  lambda r: f"{r['date_added']!r} is not a date like {DATE_EXAMPLE!r}")
        out.append(df.select(
            pl.col("user_id").str.strip_chars(), pl.col("book_id").str.strip_chars().alias("item_id"),
            pl.when(pl.col("rating") > 0).then(pl.col("rating").cast(pl.Float64)).alias("rating"),
            pl.col("_t").dt.epoch("s").alias("timestamp"), pl.col("is_read").cast(pl.Int8).alias("label"), LINE))
    df = pl.concat(out)
    _shelved_once(path, df)
    return df


def _shelved_once(path: Path, df: pl.DataFrame) -> None:
    """Each (user, book) once: the published files have one row per shelved book (the complete one is named
    `_dedup`), so a repeat is an edited or merged copy, and keeping both would count the book twice or give
    it two labels. The first repeat is an error naming both lines."""
    dup = df.filter(pl.struct("user_id", "item_id").is_duplicated())
    if not dup.height:
        return
    dup = dup.with_columns(pl.col(LINE).min().over("user_id", "item_id").alias("_first"))
    row = dup.filter(pl.col(LINE) > pl.col("_first")).sort(LINE).row(0, named=True)
    raise InputError(path, f"user {row['user_id']!r} shelves book {row['item_id']!r} twice (first: line "
                           f"{row['_first']})", line=row[LINE], field="book_id")


def _check_book(path: Path):
    def check(line: int, obj: dict) -> None:
        _need_string(path, line, obj, "book_id")
        for key in BOOK_TEXT:
            _need_string(path, line, obj, key, required=False)
        for key in ("publication_year", "num_pages"):
            _need_string(path, line, obj, key, required=False, number=True)
        a = obj.get("authors")
        if a is not None and not (isinstance(a, list) and all(isinstance(x, dict) for x in a)):
            raise InputError(path, "'authors' must be a list of {\"author_id\": …, \"role\": …}", line=line,
                             field="authors")
        for x in a or []:
            if not isinstance(x.get("author_id"), str):
                raise InputError(path, f"an author's author_id must be a string, not {x.get('author_id')!r:.60}",
                                 line=line, field="authors")
    return check


#: the books file's ids and texts: strings (polars would read a number or a list as its text)
BOOK_TEXT = ("title", "work_id", "publisher", "language_code", "format", "description")


def read_books(path: Path, status=None) -> pl.DataFrame:
    path = Path(path)
    status = status or _Quiet()
    out = []
    text = [c for c, t in BOOK_SCHEMA.items() if t == pl.Utf8]
    for df in _frames(path, BOOK_SCHEMA, _check_book(path), status, ("book_id", *BOOK_TEXT, "author_id")):
        df = df.with_columns(pl.col(c).str.strip_chars().replace("", None) for c in text)
        first_bad(path, df, pl.col("book_id").is_null(), "book_id", lambda r: "missing 'book_id'")
        first_bad(path, df, pl.col("authors").list.eval(pl.element().struct.field("author_id").is_null()).list.any(),
                  "authors", lambda r: "an author without an author_id")
        for col in ("publication_year", "num_pages"):
            num = pl.col(col).cast(pl.Int64, strict=False)
            first_bad(path, df, pl.col(col).is_not_null() & num.is_null(), col,
                      lambda r, c=col: f"{c} {r[c]!r} is not a whole number")
            df = df.with_columns(num.alias(col))
        ids = pl.col("authors").list.eval(pl.element().struct.field("author_id")).fill_null([])
        out.append(df.select(pl.col("book_id").alias("item_id"), "title", ids.alias("author_ids"), "work_id",
                             "publication_year", "num_pages", "publisher", "language_code", "format", "description",
                             LINE))
    df = pl.concat(out)
    first_bad(path, df, pl.col("item_id").is_duplicated() & (pl.col(LINE) > pl.col(LINE).min().over("item_id")),
              "book_id", lambda r: f"book {r['item_id']!r} listed twice")
    return df.drop(LINE)


# --- finding the files ----------------------------------------------------------------------------


def _stem(p: Path) -> str:
    return p.name.removesuffix(".gz").removesuffix(".json")


def find_files(paths: list[Path]) -> tuple[Path, Path]:
    """(interactions, books) among files and folders: one goodreads_interactions_<x>.json[.gz] and its
    books file (goodreads_books_<x>, or goodreads_books for the complete _dedup interactions)."""
    cands: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            cands += sorted(f for f in p.iterdir() if f.name.endswith((".json", ".json.gz")))
        elif p.exists():
            cands.append(p)
        else:
            raise InputError(p, "file not found")
    inter = [f for f in cands if _stem(f).startswith("goodreads_interactions_")]
    books = [f for f in cands if _stem(f) == "goodreads_books" or _stem(f).startswith("goodreads_books_")]
    where = ", ".join(map(str, paths))
    if len(inter) != 1:
        found = f" (found {', '.join(f.name for f in inter)}; give the two files)" if inter else ""
        raise ConfigError(f"`prepare goodreads` needs one goodreads_interactions_<genre>.json.gz among {where}{found}")
    suffix = _stem(inter[0]).removeprefix("goodreads_interactions_")
    want = "goodreads_books" if suffix == "dedup" else f"goodreads_books_{suffix}"
    match = [f for f in books if _stem(f) == want] or (books if len(books) == 1 else [])
    if len(match) != 1:
        raise ConfigError(f"`prepare goodreads` needs {want}.json.gz beside {inter[0].name} (among {where})")
    return inter[0], match[0]


def load_goodreads(paths: list[Path] | Path, *, name: str = "goodreads", status=None) -> Dataset:
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    status = status or _Quiet()
    inter_path, books_path = find_files(paths)
    status.update(f"Reading {books_path}…")
    items = read_books(books_path, status)
    status.update(f"Reading {inter_path}…")
    rows = read_interactions(inter_path, status)
    first_bad(inter_path, rows, ~pl.col("item_id").is_in(items["item_id"].implode()), "book_id",
              lambda r: f"book {r['item_id']!r} is not in {books_path.name}")
    status.update(f"Sorting {rows.height:,} interactions…")
    interactions = finish_interactions(rows.drop(LINE), extra=["label"])
    users = interactions.select("user_id").unique(maintain_order=True)
    ds = Dataset(name=name, interactions=interactions, items=items, users=users)
    ds.meta.update(source="Goodreads / UCSD Book Graph (official layout)", files=[str(inter_path), str(books_path)],
                   labels="is_read", rating_zero="null (not rated)", timestamp_unit="seconds (source: date_added)")
    ds.validate()
    return ds

"""Strict text-table parsing shared by the loaders.

Every check reports the file, the 1-based line and the field, so a user can
fix a broken download by hand; loaders call these before anything is saved.
Parsing goes through polars so a million-line file takes about a second.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from recharness.core.errors import InputError

LINE = "__line"  # 1-based line number of each parsed row, dropped by the loaders

INTERACTION_COLUMNS = {"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64}

def read_bytes(path: Path) -> bytes:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    return path.read_bytes()


#: a well-formed UTF-8 multi-byte character (2, 3 or 4 bytes), rare by chance in latin-1 text
_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def decode(path: str | Path, data: bytes, *, latin1_fallback: bool = False) -> tuple[str, str]:
    """Decode as UTF-8, else (for MovieLens files, which GroupLens ships in
    latin-1 but redistributors often re-encode) as latin-1.

    Returns (text, encoding). Undecodable UTF-8 names the line and byte offset
    of the first bad byte.
    """
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    data = data[bom:]
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        # latin-1 only for a latin-1 file: one holding valid UTF-8 multi-byte characters is a UTF-8 file with a
        # bad byte, and reading all of it as latin-1 would garble every accented title ('MisÃ©rables')
        if latin1_fallback and not _UTF8_MULTIBYTE.search(data):
            return data.decode("latin-1"), "latin-1"
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(path, f"not valid UTF-8 (byte 0x{data[e.start]:02x} at offset {bom + e.start}: {e.reason})",
                         line=line) from None


def split_table(
    path: str | Path,
    text: str,
    sep: str,
    names: list[str],
    *,
    first_line: int = 1,
) -> pl.DataFrame:
    """Split `text` into Utf8 columns `names`, one row per non-blank line.

    Every line must have exactly len(names) fields; a short line names the
    first missing field. A file without rows, or whose last line has no
    newline (every published copy ends with one, so a cut download shows up
    here even when the cut falls inside the last field), is an error.
    Adds LINE (the 1-based line in the file).
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not any(line.strip() for line in lines):
        raise InputError(path, "file is empty" if first_line == 1 and not text.strip() else "no data rows")
    if not text.endswith("\n") and lines[-1].strip():
        n = len(lines[-1].split(sep))
        raise InputError(path, "file ends mid-line (truncated?): the last line has no newline",
                         line=first_line + len(lines) - 1, field=names[min(n, len(names)) - 1])
    df = pl.DataFrame({"raw": pl.Series(lines, dtype=pl.Utf8)}).with_columns(
        pl.col("raw").str.strip_suffix("\r"),
        pl.int_range(first_line, first_line + len(lines), dtype=pl.Int64).alias(LINE),
    )
    df = df.filter(pl.col("raw").str.strip_chars() != "")
    df = df.with_columns(pl.col("raw").str.split(sep).alias("parts")).with_columns(pl.col("parts").list.len().alias("n"))
    bad = df.filter(pl.col("n") != len(names)).head(1)
    if bad.height:
        n, line = bad["n"][0], bad[LINE][0]
        if n < len(names):
            raise InputError(
                path, f"truncated line: {n} of {len(names)} fields (separator {sep!r})", line=line, field=names[n]
            )
        raise InputError(path, f"{n} fields where {len(names)} were expected (separator {sep!r})", line=line)
    return df.select([pl.col("parts").list.get(i).alias(name) for i, name in enumerate(names)] + [pl.col(LINE)])


def first_bad(path: Path, df: pl.DataFrame, bad: pl.Expr, field: str, what) -> None:
    """Raise for the first row where `bad` holds; `what(row)` words the problem."""
    hit = df.filter(bad).head(1)
    if hit.height:
        row = hit.row(0, named=True)
        raise InputError(path, what(row), line=row[LINE], field=field)


def no_empty_ids(path: Path, df: pl.DataFrame, cols) -> None:
    """An empty id token (or a missing one) would become a user or item named '': an error naming its line.
    A column of another type (an id declared `:float`, say) is checked for nulls."""
    for col in cols:
        empty = pl.col(col).is_null()
        if df.schema[col] == pl.Utf8:
            empty = empty | (pl.col(col).str.strip_chars() == "")
        first_bad(path, df, empty, col, lambda r: "empty id")


def no_repeats(path: Path, df: pl.DataFrame, col: str, what: str) -> None:
    """Each `col` value once (a second row would be dropped or joined twice: an edited copy): the first repeat,
    in row order, is an error naming both lines. Rows of several files carry their file in `__file`."""
    d = df.with_row_index("__row").with_columns(pl.col("__row").min().over(col).alias("__first"))
    hit = d.filter(pl.col("__row") > pl.col("__first")).head(1)
    if not hit.height:
        return
    row, first = hit.row(0, named=True), d.row(hit["__first"][0], named=True)
    where = f"line {first[LINE]}"
    if "__file" in d.columns and first["__file"] != row["__file"]:
        where = f"{Path(first['__file']).name}, {where}"
    raise InputError(row.get("__file", path), f"{what} {row[col]!r} appears twice (first: {where})", line=row[LINE],
                     field=col)


def no_repeated_columns(path: Path, names, *, strip: bool = False) -> None:
    """A column named twice in a header: one of the two would be read, silently (empty names, of trailing
    commas, are not columns). `strip`: names are compared as the reader will use them, spaces trimmed."""
    seen: set[str] = set()
    for name in names:
        name = name.strip() if strip else name
        if name in seen:
            raise InputError(path, f"the header repeats column {name!r}", line=1, field=name)
        if name:
            seen.add(name)


def _fail_first(path, df: pl.DataFrame, bad: pl.Expr, field: str, what: str) -> None:
    hit = df.filter(bad).head(1)
    if hit.height:
        raise InputError(path, f"{hit['__raw'][0]!r} {what}", line=hit[LINE][0], field=field)


def parse_number(
    path: str | Path,
    df: pl.DataFrame,
    col: str,
    dtype: type[pl.DataType] = pl.Float64,
    *,
    nullable: bool = False,
    field: str | None = None,
) -> pl.DataFrame:
    """Cast a Utf8 column to Float64 or Int64, naming the first bad value.

    Int64 accepts "978300760.0" (RecBole writes timestamps as floats) but not
    fractional values. Empty strings are nulls only when `nullable`.
    """
    field = field or col
    if df.schema[col].is_numeric():
        raw, num = pl.col(col).cast(pl.Utf8), pl.col(col).cast(pl.Float64)
    else:
        raw = pl.col(col).str.strip_chars()
        num = raw.cast(pl.Float64, strict=False)
    parsed = df.select(raw.alias("__raw"), num.alias("__num"), pl.col(LINE))
    empty = pl.col("__raw").is_null() | (pl.col("__raw") == "")
    if not nullable:
        _fail_first(path, parsed.with_columns(pl.col("__raw").fill_null("")), empty, field, "is empty, a number is required")
    bad = ~empty & (pl.col("__num").is_null() | ~pl.col("__num").is_finite())
    _fail_first(path, parsed, bad, field, "is not a number")
    out = pl.when(empty).then(None).otherwise(pl.col("__num"))
    if dtype == pl.Int64:
        _fail_first(path, parsed, ~empty & (pl.col("__num") != pl.col("__num").round()), field, "is not a whole number")
        _fail_first(path, parsed, ~empty & (pl.col("__num").abs() >= 2.0**63), field, "is too large for a whole number")
        # an integer written as one is read exactly (through a float, 1700000000123456789 lost its last digits)
        if df.schema[col].is_float():
            exact = pl.Series("__int", [None] * df.height, dtype=pl.Int64)
        else:
            src = pl.col(col) if df.schema[col].is_numeric() else pl.col(col).str.strip_chars()
            exact = df.select(src.cast(pl.Int64, strict=False).alias("__int"))["__int"]
        parsed = parsed.with_columns(exact)
        out = pl.when(empty).then(None).when(pl.col("__int").is_not_null()).then(pl.col("__int")) \
            .otherwise(pl.col("__num").round().cast(pl.Int64))
    values = parsed.select(out.alias(col))[col]
    return df.with_columns(values)


def year_from_title(col: str = "title") -> pl.Expr:
    return pl.col(col).str.extract(r"\((\d{4})\)\s*$", 1).cast(pl.Int64, strict=False)


def finish_interactions(df: pl.DataFrame, extra: list[str] | tuple[str, ...] = ()) -> pl.DataFrame:
    """Canonical columns and order: stable sort by (user, timestamp, file order),
    which the leave-last-out splits rely on."""
    cols = []
    for col, dtype in INTERACTION_COLUMNS.items():
        cols.append(pl.col(col).cast(dtype) if col in df.columns else pl.lit(None, dtype=dtype).alias(col))
    df = df.select(cols + [pl.col(c) for c in extra])
    return (
        df.with_row_index("__order")
        .sort(["user_id", "timestamp", "__order"], nulls_last=True, maintain_order=True)
        .drop("__order")
    )


def split_list(col: str, sep: str) -> pl.Expr:
    """'a|b|' -> ['a', 'b']; null or empty -> []."""
    return (
        pl.col(col)
        .fill_null("")
        .str.split(sep)
        .list.eval(pl.element().str.strip_chars())
        .list.eval(pl.element().filter(pl.element() != ""))
        .alias(col)
    )


def read_json(path: str | Path):
    """(data, text) of a JSON file; bad encoding or syntax names the line."""
    text, _ = decode(path, read_bytes(Path(path)))
    try:
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg}, column {e.colno})", line=e.lineno) from None
    except ValueError as e:  # valid JSON, but an integer of more than 4300 digits (int's limit) in it
        raise InputError(path, f"a number of more digits than Python reads ({e})") from None


def json_line(text: str, where: tuple[str | int, ...]) -> int | None:
    """1-based line of the value at `where` (object keys, list indices) in the
    JSON `text`, or None if it is not there. Only called to word an error, so
    valid files are parsed once, by the C decoder; this walks to the value
    and skips siblings with raw_decode."""
    dec = json.JSONDecoder()

    def skip_ws(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    i = skip_ws(0)
    try:
        for step in where:
            opening = text[i]
            if opening not in "{[" or isinstance(step, int) != (opening == "["):
                return None
            i, n = skip_ws(i + 1), 0
            while text[i] not in "}]":
                if opening == "{":
                    key, i = json.decoder.scanstring(text, i + 1)
                    i = skip_ws(skip_ws(i) + 1)  # past the colon
                    hit = key == step
                else:
                    hit, n = n == step, n + 1
                if hit:
                    break
                _, i = dec.raw_decode(text, i)
                i = skip_ws(i)
                if text[i] == ",":
                    i = skip_ws(i + 1)
            else:
                return None
    except (IndexError, ValueError):
        return None
    return text.count("\n", 0, i) + 1

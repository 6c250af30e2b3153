"""What every loader's output goes through before it is saved, so real files are taken as they are
and no loader has its own rules: titles cleaned alike (surrounding spaces trimmed, HTML entities such
as `&#39;` decoded), timestamps in seconds whatever the source's unit (detected from their magnitude
unless the user says, the choice reported, implausible dates counted), and titles carried by more
than one item id reported (a title match then finds all of them)."""

from __future__ import annotations

import html
import time

import polars as pl

from recharness.core.errors import ConfigError

#: --timestamp-unit values and the divisor that turns each into seconds
UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000}
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
#: plausible interaction dates: from 1990 (the first rating data sets) to a year from now
EARLIEST_S = 631_152_000


def clean_title(text: str | None) -> str | None:
    if text is None:
        return None
    out = html.unescape(text).strip()
    return out or None


def clean_titles(items: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Items with cleaned titles, and how many titles changed."""
    if "title" not in items.columns or items.schema["title"] != pl.Utf8:
        return items, 0
    cleaned = items["title"].map_elements(clean_title, return_dtype=pl.Utf8, skip_nulls=True)
    changed = int((cleaned.fill_null("\x00") != items["title"].fill_null("\x00")).sum())
    return items.with_columns(cleaned.alias("title")), changed


def detect_unit(ts: pl.Series) -> str:
    """s, ms or us from the magnitude of the timestamps (their median): seconds of this era are
    about 1e9, milliseconds 1e12, microseconds 1e15."""
    vals = ts.drop_nulls()
    if vals.len() == 0:
        return "s"
    med = float(vals.abs().median())
    if med >= 1e14:
        return "us"
    if med >= 1e11:
        return "ms"
    return "s"


def check_unit(unit: str | None) -> None:
    """`--timestamp-unit` is one of UNITS, or None (detected)."""
    if unit is not None and unit not in UNITS:
        raise ConfigError(f"--timestamp-unit {unit!r}: one of {', '.join(UNITS)}")


def to_seconds(interactions: pl.DataFrame, unit: str | None) -> tuple[pl.DataFrame, dict]:
    """Timestamps in seconds; {"unit", "detected", "out_of_range"} says what was done."""
    if "timestamp" not in interactions.columns:
        return interactions, {}
    check_unit(unit)
    ts = interactions["timestamp"]
    chosen = unit or detect_unit(ts)
    if UNITS[chosen] != 1:
        interactions = interactions.with_columns((pl.col("timestamp") // UNITS[chosen]).alias("timestamp"))
    secs = interactions["timestamp"].drop_nulls()
    latest = time.time() + 365 * 86400
    out = int(((secs < EARLIEST_S) | (secs > latest)).sum()) if secs.len() else 0
    return interactions, {"unit": chosen, "detected": unit is None, "out_of_range": out}


def duplicate_titles(items: pl.DataFrame, show: int = 3) -> tuple[int, list[tuple[str, list[str]]]]:
    """(how many titles more than one item id carries, a few of them with their ids)."""
    if "title" not in items.columns:
        return 0, []
    dup = (items.filter(pl.col("title").is_not_null()).group_by("title", maintain_order=True)
           .agg(pl.col("item_id").cast(pl.Utf8)).filter(pl.col("item_id").list.len() > 1))
    return dup.height, [(t, ids) for t, ids in dup.head(show).iter_rows()]


def timestamp_note(info: dict) -> str:
    if not info:
        return ""
    how = "detected from their magnitude" if info["detected"] else "as given by --timestamp-unit"
    note = f"timestamps: {UNIT_NAMES[info['unit']]} ({how})" + (" → seconds" if info["unit"] != "s" else "")
    if info["out_of_range"]:
        note += f"; {info['out_of_range']:,} dated before 1990 or more than a year ahead (check the unit)"
    return note

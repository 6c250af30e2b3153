"""Real files as they are (issue: honest results, section 6): a RecBole item file whose title field is
`name:token`, timestamps in milliseconds, HTML entities and spaces in titles, token_seq titles, files
cut mid-row, duplicate titles. Through `recharness prepare` as a user runs it."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import polars as pl
import pytest

INTER = ("user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
         "1\t10\t5\t978300760000\n1\t20\t3\t978302109000\n2\t10\t4\t978298413000\n2\t30\t5\t978299000000\n")


def prepare(tmp_path, files: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    home = tmp_path / "home"
    return subprocess.run([sys.executable, "-m", "recharness", "prepare", "recbole", str(d), "--as", "x", *extra],
                          capture_output=True, text=True, timeout=120, env={"RECHARNESS_HOME": str(home),
                                                                           "PATH": "/usr/bin:/bin"})


def tables(tmp_path):
    d = tmp_path / "home" / "datasets" / "x"
    return pl.read_parquet(d / "interactions.parquet"), pl.read_parquet(d / "items.parquet")


def test_name_token_titles_millisecond_timestamps_and_entities(tmp_path):
    items = ("item_id:token\tname:token\tgenre:token_seq\n10\t Schindler&#39;s List (1993) \tDrama War\n"
             "20\tToy Story (1995)\tAnimation\n30\tAnd God Created Woman (Et Dieu&#8230;Créa la Femme) (1956)\tDrama\n")
    p = prepare(tmp_path, {"x.inter": INTER, "x.item": items})
    assert p.returncode == 0, p.stderr
    inter, it = tables(tmp_path)
    titles = dict(zip(it["item_id"], it["title"]))
    assert titles == {"10": "Schindler's List (1993)", "20": "Toy Story (1995)",
                      "30": "And God Created Woman (Et Dieu…Créa la Femme) (1956)"}
    assert it.filter(pl.col("item_id") == "10")["genres"][0].to_list() == ["Drama", "War"]
    years = {dt.datetime.fromtimestamp(t, dt.timezone.utc).year for t in inter["timestamp"]}
    assert years == {2000} and inter["timestamp"].max() == 978302109  # ms → s
    err = " ".join(p.stderr.split())
    assert "timestamps: milliseconds (detected from their magnitude) → seconds" in err
    assert "titles: 2 cleaned" in err


def test_token_seq_title_is_one_string_and_the_unit_can_be_given(tmp_path):
    items = "item_id:token\tbook_title:token_seq\n10\tThe Name of the Rose\n20\tDune\n30\tEmma\n"
    inter = INTER.replace("978300760000", "978300760").replace("978302109000", "978302109") \
        .replace("978298413000", "978298413").replace("978299000000", "978299000")
    p = prepare(tmp_path, {"x.inter": inter, "x.item": items}, "--timestamp-unit", "s")
    assert p.returncode == 0, p.stderr
    _, it = tables(tmp_path)
    assert it.schema["title"] == pl.Utf8 and dict(zip(it["item_id"], it["title"]))["10"] == "The Name of the Rose"
    assert "timestamps: seconds (as given by --timestamp-unit)" in " ".join(p.stderr.split())


def test_implausible_dates_are_counted(tmp_path):
    items = "item_id:token\ttitle:token\n10\tA\n20\tB\n30\tC\n"
    inter = INTER.replace("978300760000", "978300760000000")  # one in microseconds among milliseconds
    p = prepare(tmp_path, {"x.inter": inter, "x.item": items}, "--timestamp-unit", "ms")
    assert p.returncode == 0, p.stderr
    assert "1 dated before 1990 or more than a year ahead (check the unit)" in " ".join(p.stderr.split())


@pytest.mark.parametrize("cut, says", [
    (INTER[:-6], "file ends mid-line (truncated?)"),  # the last field cut, no newline
    (INTER.rstrip("\n").rsplit("\t", 2)[0] + "\n", "truncated line: 2 of 4 fields"),  # a row cut short
])
def test_a_file_cut_mid_row_is_refused_naming_file_and_line(tmp_path, cut, says):
    p = prepare(tmp_path, {"x.inter": cut, "x.item": "item_id:token\ttitle:token\n10\tA\n"})
    msg = " ".join(p.stderr.split())
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "x.inter, line 5" in msg and says in msg


def test_duplicate_titles_are_reported_at_prepare(tmp_path):
    items = "item_id:token\ttitle:token\n10\tChasing Amy (1997)\n20\tChasing Amy (1997)\n30\tHeat (1995)\n"
    p = prepare(tmp_path, {"x.inter": INTER, "x.item": items})
    assert p.returncode == 0, p.stderr
    assert "titles: 1 carried by more than one item id, e.g. 'Chasing Amy (1997)': 10, 20" in " ".join(p.stderr.split())

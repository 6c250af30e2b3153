"""Loader faults found in review, each on a tiny malformed copy of the real published format (the loaders'
fixtures, edited in tmp_path): the error names the file, the line and the field, where the old loaders
crashed with a traceback, named the wrong line, or silently stored wrong data."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import recharness.data.amazon2023 as amazon
from recharness.data.goodreads import load_goodreads
from recharness.data.hm import load_hm
from recharness.data.llmrank import load_llmrank
from recharness.data.microlens import load_microlens
from recharness.data.mind import load_mind
from recharness.data.recbole import load_recbole
from tests.loader_faults import copy_fixture, fails, get_line, set_line

# --- Amazon Reviews 2023 ------------------------------------------------------------------------------


@pytest.fixture
def streamed(monkeypatch):
    """What a real category file over 512 MB does: `load_amazon2023` picks the streaming path."""
    monkeypatch.setattr(amazon, "STREAM_BYTES", 0)
    monkeypatch.setattr(amazon, "BLOCK_BYTES", 4096)


def _review(line: str, **kw) -> str:
    obj = json.loads(line)
    obj.update(kw)
    return json.dumps(obj)


def _amazon(tmp_path: Path, line: int, new: bytes | str) -> Path:
    d = copy_fixture("amazon2023", tmp_path)
    set_line(d / "Tiny_Cat.jsonl", line, new)
    return d


def test_amazon_streaming_names_a_non_utf8_line_like_in_memory(tmp_path, streamed):
    """pyarrow passed the bad bytes through to a spill file and polars failed there (ComputeError)."""
    d = copy_fixture("amazon2023", tmp_path)
    src = d / "Tiny_Cat.jsonl"
    bad = get_line(src, 3).replace("Second same-second review", "caf\udce9")  # a latin-1 é
    set_line(src, 3, bad.encode("utf-8", "surrogateescape"))
    errs = []
    for streaming in (None, True, False):  # None: chosen by size, i.e. streamed here
        errs.append(str(fails(lambda s=streaming: amazon.load_amazon2023(d, streaming=s, spill_dir=tmp_path / "spill"),
                               file="Tiny_Cat.jsonl", line=3, field=None, says="not valid UTF-8")))
    assert errs[0] == errs[1] == errs[2]
    assert not list((tmp_path / "spill").glob("*"))  # no spill files left behind


@pytest.mark.parametrize("ts, what", [(1600000000, "before 1990"), (0, "before 1990"),
                                      (99999999999999999, "more than a year from now")])
@pytest.mark.parametrize("streaming", [False, True])
def test_amazon_timestamp_outside_1990_to_next_year_in_ms_is_an_error(tmp_path, ts, what, streaming):
    """Seconds where milliseconds belong became 1970 dates; 0 was accepted; the streaming path took a far
    future stamp that the in-memory path refused."""
    d = copy_fixture("amazon2023", tmp_path)
    src = d / "Tiny_Cat.jsonl"
    set_line(src, 2, _review(get_line(src, 2), timestamp=ts))
    err = fails(lambda: amazon.load_amazon2023(d, streaming=streaming, spill_dir=tmp_path / "spill"),
                 file="Tiny_Cat.jsonl", line=2, field="timestamp", says=what)
    assert "milliseconds" in str(err)


@pytest.mark.parametrize("streaming", [False, True])
def test_amazon_rating_between_stars_is_an_error(tmp_path, streaming):
    d = copy_fixture("amazon2023", tmp_path)
    src = d / "Tiny_Cat.jsonl"
    set_line(src, 3, _review(get_line(src, 3), rating=3.7))
    fails(lambda: amazon.load_amazon2023(d, streaming=streaming, spill_dir=tmp_path / "spill"),
           file="Tiny_Cat.jsonl", line=3, field="rating", says="whole number of stars from 1 to 5")


@pytest.mark.parametrize("streaming", [False, True])
def test_amazon_an_escaped_lone_surrogate_is_repaired_in_text_and_named_in_an_id(tmp_path, streaming):
    """`"\\ud83d"` (an emoji cut in half) is valid JSON; polars then failed with a UnicodeEncodeError naming no
    file or line."""
    d = copy_fixture("amazon2023", tmp_path)
    src = d / "Tiny_Cat.jsonl"
    line = get_line(src, 3)
    set_line(src, 3, line.replace('"text": "', '"text": "cut \\ud83d ', 1))
    assert '\\ud83d' in get_line(src, 3)
    ds = amazon.load_amazon2023(d, streaming=streaming, spill_dir=tmp_path / "spill")
    inter = ds.interactions.collect() if hasattr(ds.interactions, "collect") else ds.interactions
    assert inter["review_text"].str.contains("cut \ufffd").any()
    set_line(src, 3, line.replace('"user_id": "', '"user_id": "\\udc00', 1))
    fails(lambda: amazon.load_amazon2023(d, streaming=streaming, spill_dir=tmp_path / "spill"),
          file="Tiny_Cat.jsonl", line=3, field="user_id", says="lone surrogate")


def test_amazon_meta_repeat_with_another_title_is_an_error(tmp_path):
    d = copy_fixture("amazon2023", tmp_path)
    meta = d / "meta_Tiny_Cat.jsonl"
    first = get_line(meta, 1)
    with open(meta, "a") as f:
        f.write(first + "\n")  # the same row again (another category's file, say): harmless, kept once
    assert amazon.load_amazon2023(d).items.filter(pl.col("item_id") == "P001").height == 1
    with open(meta, "a") as f:
        f.write(_review(first, title="Kit One (new)") + "\n")
    fails(lambda: amazon.load_amazon2023(d), file="meta_Tiny_Cat.jsonl", line=4, field="title",
           says="'P001' listed twice with a different title (first: line 1)")


def test_amazon_price_nan_is_unknown_not_nan(tmp_path):
    d = copy_fixture("amazon2023", tmp_path)
    meta = d / "meta_Tiny_Cat.jsonl"
    set_line(meta, 1, _review(get_line(meta, 1), price="nan"))
    price = amazon.load_amazon2023(d).items.filter(pl.col("item_id") == "P001")["price"]
    assert price.null_count() == 1


# --- MicroLens ----------------------------------------------------------------------------------------


def test_microlens_non_utf8_title_near_the_start_is_an_error_not_a_traceback(tmp_path):
    """readline() of the first line decoded the first block, outside the try: UnicodeDecodeError."""
    d = copy_fixture("microlens", tmp_path)
    set_line(d / "MicroLens-100k_title_en.csv", 2, b"2, caf\xe9 # football")
    fails(lambda: load_microlens(d), file="MicroLens-100k_title_en.csv", line=2, field=None, says="not valid UTF-8")


def test_microlens_non_utf8_title_names_its_own_line(tmp_path):
    """Text mode decodes ahead in blocks: the error named a line about 8 KB before the bad one."""
    d = copy_fixture("microlens", tmp_path)
    titles = d / "MicroLens-100k_title_en.csv"
    extra = "".join(f"{i}, filler title number {i} # vlog\n" for i in range(100, 2100)).encode()
    titles.write_bytes(titles.read_bytes() + extra + b"2100, caf\xe9\n")
    n = titles.read_bytes().count(b"\n")
    fails(lambda: load_microlens(d), file="MicroLens-100k_title_en.csv", line=n, field=None, says="not valid UTF-8")
    # the 50k layout (a header, CSV quoting) alike
    (d / "MicroLens-100k_title_en.csv").unlink()
    body = "".join(f'{i},"title {i}, quoted"\n' for i in range(1, 400)).encode()
    (d / "MicroLens-100k_titles.csv").write_bytes(b"item,title\n" + body + b'400,"caf\xe9"\n')
    fails(lambda: load_microlens(d), file="MicroLens-100k_titles.csv", line=401, field=None, says="not valid UTF-8")


def test_microlens_mixed_timestamp_units_are_an_error(tmp_path):
    """One row in seconds among milliseconds was divided by 1000 too: a 1970 date, silently."""
    d = copy_fixture("microlens", tmp_path)
    pairs = d / "MicroLens-100k_pairs.csv"
    assert get_line(pairs, 4) == "37,18,1659282737500"
    set_line(pairs, 4, "37,18,1659282737")
    err = fails(lambda: load_microlens(d), file="MicroLens-100k_pairs.csv", line=4, field="timestamp",
                 says="looks like seconds")
    assert "line 2" in err.message and "milliseconds" in err.message


# --- H&M ----------------------------------------------------------------------------------------------


def test_hm_transactions_line_cut_after_three_fields_is_an_error(tmp_path):
    """price and sales_channel_id were read as nulls."""
    d = copy_fixture("hm", tmp_path)
    tr = d / "transactions_train.csv"
    set_line(tr, 7, ",".join(get_line(tr, 7).split(",")[:3]))
    fails(lambda: load_hm(d), file="transactions_train.csv", line=7, field="price",
           says="truncated line: 3 of 5 fields")


def test_hm_articles_non_utf8_names_its_own_line(tmp_path):
    d = copy_fixture("hm", tmp_path)
    art = d / "articles.csv"
    set_line(art, 20, get_line(art, 20).replace(",", ",caf\udce9", 1).encode("utf-8", "surrogateescape"))
    fails(lambda: load_hm(d), file="articles.csv", line=20, field=None, says="not valid UTF-8")


@pytest.mark.parametrize("name, line, col, value, what", [
    ("transactions_train.csv", 5, 3, "-0.01", "-0.01 is negative"),
    ("transactions_train.csv", 6, 4, "3", "3 is not a sales channel (1 or 2)"),
    ("customers.csv", 3, 5, "490", "'490' is above 120"),
    ("customers.csv", 4, 5, "0", "'0' is below 10"),
])
def test_hm_implausible_price_channel_and_age_are_errors(tmp_path, name, line, col, value, what):
    d = copy_fixture("hm", tmp_path)
    fields = get_line(d / name, line).split(",")
    fields[col] = value
    set_line(d / name, line, ",".join(fields))
    field = (["t_dat", "customer_id", "article_id", "price", "sales_channel_id"] if name.startswith("trans")
             else ["customer_id", "FN", "Active", "club_member_status", "fashion_news_frequency", "age"])[col]
    fails(lambda: load_hm(d), file=name, line=line, field=field, says=what)


# --- Goodreads ----------------------------------------------------------------------------------------

GR = "goodreads_interactions_poetry.json.gz"


def test_goodreads_repeated_user_book_is_an_error_naming_both_lines(tmp_path):
    """A second row for (user, book), here with the opposite is_read, was kept: two labels for one book."""
    d = copy_fixture("goodreads", tmp_path)
    first = json.loads(get_line(d / GR, 1))
    again = json.loads(get_line(d / GR, 5))
    again.update(user_id=first["user_id"], book_id=first["book_id"], is_read=not first["is_read"])
    set_line(d / GR, 5, json.dumps(again))
    fails(lambda: load_goodreads(d), file=GR, line=5, field="book_id", says="twice (first: line 1)")


# --- RecBole atomic files -----------------------------------------------------------------------------


def _atomic(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "x.inter"
    p.write_text(text)
    return p


def test_recbole_ids_declared_float_are_tokens_and_never_empty(tmp_path):
    p = _atomic(tmp_path, "user_id:float\titem_id:float\trating:float\n1\t10\t4\n2\t\t5\n")
    fails(lambda: load_recbole(p), file="x.inter", line=3, field="item_id", says="empty id")
    p = _atomic(tmp_path, "user_id:float\titem_id:float\trating:float\n1\t10\t4\n2\t11\t5\n")
    ds = load_recbole(p)
    assert ds.interactions["item_id"].to_list() == ["10", "11"] and ds.users["user_id"].to_list() == ["1", "2"]


def test_recbole_empty_timestamp_among_dated_rows_is_an_error(tmp_path):
    """It sorted last and became the user's held-out item."""
    p = _atomic(tmp_path, "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
                          "1\t10\t4\t\n1\t11\t4\t978300760\n")
    fails(lambda: load_recbole(p), file="x.inter", line=2, field="timestamp", says="empty timestamp")
    # a file whose timestamps are all empty dates nothing: its rows keep their file order
    p = _atomic(tmp_path, "user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t10\t4\t\n1\t11\t4\t\n")
    ds = load_recbole(p)
    assert ds.interactions["item_id"].to_list() == ["10", "11"] and ds.interactions["timestamp"].null_count() == 2


# --- LLMRank ------------------------------------------------------------------------------------------


def test_llmrank_empty_user_id_is_an_error(tmp_path):
    d = copy_fixture("llmrank", tmp_path)
    inter = d / "Toy-6k.test.inter"
    set_line(inter, 3, "\t" + get_line(inter, 3).split("\t", 1)[1])
    fails(lambda: load_llmrank(d), file="Toy-6k.test.inter", line=3, field="user_id", says="empty id")


@pytest.mark.parametrize("name, line, new, field", [
    ("Toy-6k.test.inter", 3, "1\t4 0 999\t5", "item_id_list"),
    ("Toy-6k.test.inter", 2, "0\t0 1 2\t999", "item_id"),
    ("Toy.pop", 2, "0\t3 999 1", "item_ids"),
])
def test_llmrank_item_missing_from_the_item_file_is_an_error(tmp_path, name, line, new, field):
    """Only counted in meta (interactions) or not checked at all (candidates)."""
    d = copy_fixture("llmrank", tmp_path)
    set_line(d / name, line, new)
    fails(lambda: load_llmrank(d), file=name, line=line, field=field, says="item '999' is not in Toy.item")


# --- MIND ---------------------------------------------------------------------------------------------


def test_mind_repeated_impression_id_is_an_error(tmp_path):
    """The repeated line's entries were counted twice."""
    d = copy_fixture("mind", tmp_path)
    beh = d / "behaviors.tsv"
    set_line(beh, 5, "2\t" + get_line(beh, 5).split("\t", 1)[1])
    fails(lambda: load_mind(d), file="behaviors.tsv", line=5, field="ImpressionID",
           says="impression id '2' appears twice (first: line 2)")


def test_mind_news_twice_in_one_impression_is_an_error(tmp_path):
    d = copy_fixture("mind", tmp_path)
    beh = d / "behaviors.tsv"
    assert get_line(beh, 1).endswith("\tN9-1 N2-0 N3-0")
    set_line(beh, 1, get_line(beh, 1).replace("N3-0", "N9-0"))
    fails(lambda: load_mind(d), file="behaviors.tsv", line=1, field="Impressions",
           says="news id 'N9' listed twice in one impression")

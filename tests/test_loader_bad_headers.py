"""Bad headers and bad values found in review, each on a tiny malformed copy of a real published format
(the loaders' fixtures, edited in tmp_path): the error is an InputError naming the file, the line and the
field, where the loaders crashed with a polars / Python traceback or silently stored wrong data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.loader_faults import copy_fixture, edit_text, fails

# --- 1. RecBole atomic headers: declared types ---------------------------------------------------------


@pytest.mark.parametrize("old, new, field, says", [
    ("item_id:token", "item_id:token_seq", "item_id", "declared :token_seq; one value a row"),
    ("rating:float", "rating:token_seq", "rating", "declared :token_seq; one value a row"),
    ("timestamp:float", "timestamp:float_seq", "timestamp", "declared :float_seq; one value a row"),
    ("user_id:token", "__line:token", "__line", "reserved"),
])
def test_recbole_field_declared_a_type_its_column_cannot_hold(tmp_path, old, new, field, says):
    from recharness.data.recbole import load_recbole

    d = copy_fixture("recbole", tmp_path)
    edit_text(d / "tiny.inter", old, new)
    fails(lambda: load_recbole(d), file="tiny.inter", line=1, field=field, says=says)


def test_recbole_mapped_field_is_checked_under_its_canonical_name(tmp_path):
    from recharness.data.recbole import load_recbole

    d = copy_fixture("recbole", tmp_path)
    edit_text(d / "tiny.inter", "item_id:token", "asin:token_seq")
    fails(lambda: load_recbole(d, mapping={"asin": "item_id"}), file="tiny.inter", line=1, field="asin",
           says="declared :token_seq")


def _ml1m(d: Path):
    from recharness.data.movielens import load_ml1m_atomic

    return load_ml1m_atomic(*(d / f"ml-1m.{k}" for k in ("inter", "user", "item")))


def test_ml1m_atomic_ids_declared_float_are_read_as_tokens(tmp_path):
    d = copy_fixture("ml1m_atomic", tmp_path)
    want = _ml1m(d)
    edit_text(d / "ml-1m.item", "item_id:token", "item_id:float")
    edit_text(d / "ml-1m.user", "user_id:token", "user_id:float")
    got = _ml1m(d)
    assert got.items.equals(want.items) and got.users.equals(want.users)


def test_ml1m_atomic_rating_is_a_number(tmp_path):
    d = copy_fixture("ml1m_atomic", tmp_path)
    edit_text(d / "ml-1m.inter", "rating:float", "rating:token")
    edit_text(d / "ml-1m.inter", "\t5\t978300760", "\tfive\t978300760")
    fails(lambda: _ml1m(d), file="ml-1m.inter", line=2, field="rating", says="'five' is not a number")


def test_ml1m_atomic_scalar_declared_a_list(tmp_path):
    d = copy_fixture("ml1m_atomic", tmp_path)
    edit_text(d / "ml-1m.user", "age:float", "age:token_seq")
    fails(lambda: _ml1m(d), file="ml-1m.user", line=1, field="age", says="declared :token_seq")


ML100K = {
    "inter": b"user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t10\t4\t881250949\n",
    "item": b"item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n10\tToy Story\t1995\tAnimation\n",
    "user": b"user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token\n1\t24\tM\ttechnician\t85711\n",
}


def test_ml100k_atomic_user_id_declared_float_and_a_bad_rating():
    from recharness.data.movielens import load_ml100k_atomic

    parts = dict(ML100K, user=ML100K["user"].replace(b"user_id:token", b"user_id:float"))
    ds = load_ml100k_atomic(parts["inter"], parts["user"], parts["item"])
    ds.validate()
    assert ds.users["user_id"].to_list() == ["1"]
    inter = ML100K["inter"].replace(b"\t4\t", b"\t\t")
    fails(lambda: load_ml100k_atomic(inter, ML100K["user"], ML100K["item"]), file="ml-100k.inter", line=2,
           field="rating", says="is empty, a number is required")


@pytest.mark.parametrize("file, old, new, field, says", [
    ("Toy-6k.test.inter", "item_id:token", "item_id:token_seq", "item_id", "one value a row"),
    ("Toy-6k.test.inter", "item_id_list:token_seq", "item_id_list:token", "item_id_list", "a sequence"),
    ("Toy.item", "title:token_seq", "title:float", "title", "a text"),
])
def test_llmrank_field_declared_a_type_its_column_cannot_hold(tmp_path, file, old, new, field, says):
    from recharness.data.llmrank import load_llmrank

    d = copy_fixture("llmrank", tmp_path)
    edit_text(d / file, old, new)
    fails(lambda: load_llmrank(d), file=file, line=1, field=field, says=says)


def test_llmrank_ids_declared_float_are_read_as_tokens(tmp_path):
    from recharness.data.llmrank import load_llmrank

    d = copy_fixture("llmrank", tmp_path)
    want = load_llmrank(d)
    edit_text(d / "Toy.item", "item_id:token", "item_id:float")
    edit_text(d / "Toy-6k.test.inter", "user_id:token\titem_id_list:token_seq", "user_id:float\titem_id_list:float_seq")
    got = load_llmrank(d)
    assert got.interactions.equals(want.interactions) and got.items.equals(want.items)


def test_dataset_validate_is_a_recharness_error():
    import polars as pl

    from recharness.core.errors import RecharnessError
    from recharness.data.store import Dataset

    ds = Dataset("x", pl.DataFrame({"user_id": ["u"]}), pl.DataFrame({"item_id": ["i"]}), pl.DataFrame({"user_id": [1]}))
    with pytest.raises(RecharnessError, match="missing column 'item_id'"):
        ds.validate()


# --- 2, 11. Amazon Reviews 2023: the author's name; a BOM -----------------------------------------------


def _set_json_line(path: Path, line: int, change: dict) -> None:
    """Update the JSON object on 1-based `line` with `change`; gz by name."""
    gz = path.name.endswith(".gz")
    lines = (gzip.decompress(path.read_bytes()) if gz else path.read_bytes()).decode("utf-8").split("\n")
    lines[line - 1] = json.dumps({**json.loads(lines[line - 1]), **change})
    data = "\n".join(lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.mark.parametrize("author, says", [({"name": ["x"]}, "not list"), ({"name": 5}, "not int"), (7, "not int")])
def test_amazon_author_name_must_be_a_string(tmp_path, author, says):
    from recharness.data.amazon2023 import load_amazon2023

    d = copy_fixture("amazon2023", tmp_path)
    _set_json_line(d / "meta_Tiny_Cat.jsonl", 2, {"author": author})
    fails(lambda: load_amazon2023(d, streaming=False), file="meta_Tiny_Cat.jsonl", line=2, field="author",
           says=f"the author's name must be a string, {says}")


@pytest.mark.parametrize("streaming", [False, True])
def test_amazon_files_opening_with_a_bom_read_as_without(tmp_path, streaming):
    from recharness.data.amazon2023 import load_amazon2023

    d = copy_fixture("amazon2023", tmp_path)
    want = load_amazon2023(d, streaming=False)
    for f in ("Tiny_Cat.jsonl", "meta_Tiny_Cat.jsonl"):
        (d / f).write_bytes(b"\xef\xbb\xbf" + (d / f).read_bytes())
    got = load_amazon2023(d, streaming=streaming)
    inter = got.interactions.collect() if streaming else got.interactions
    assert inter.equals(want.interactions) and got.items.equals(want.items)
    if streaming:
        got.interactions.cleanup()


# --- 3, 4. H&M and MicroLens: whole numbers, repeated header columns -----------------------------------


def test_hm_sales_channel_too_large_for_a_whole_number(tmp_path):
    from recharness.data.hm import load_hm

    d = copy_fixture("hm", tmp_path)
    edit_text(d / "transactions_train.csv", ",0.076078,2\n", ",0.076078,1e30\n")
    fails(lambda: load_hm(d), file="transactions_train.csv", line=2, field="sales_channel_id",
           says="'1e30' is too large for a whole number")


def test_microlens_timestamp_too_large_for_a_whole_number(tmp_path):
    from recharness.data.microlens import load_microlens

    d = copy_fixture("microlens", tmp_path)
    edit_text(d / "MicroLens-100k_pairs.csv", "37,8,1658813852305\n", "37,8,1e30\n")
    fails(lambda: load_microlens(d), file="MicroLens-100k_pairs.csv", line=2, field="timestamp",
           says="'1e30' is too large for a whole number")


def test_hm_whole_numbers_keep_every_digit():
    import polars as pl

    from recharness.data.hm import parse_int
    from recharness.data.parsing import LINE

    df = pl.DataFrame({"t": ["1700000000123456789", "25.0", None], LINE: [2, 3, 4]})
    assert parse_int(Path("f.csv"), df, "t")["t"].to_list() == [1700000000123456789, 25, None]


@pytest.mark.parametrize("file, old, new, field", [
    ("transactions_train.csv", "price,sales_channel_id", "price,price", "price"),
    ("customers.csv", "age,postal_code", "age,age", "age"),
    ("articles.csv", "garment_group_name,detail_desc", "garment_group_name,prod_name", "prod_name"),
])
def test_hm_header_repeating_a_column(tmp_path, file, old, new, field):
    from recharness.data.hm import load_hm

    d = copy_fixture("hm", tmp_path)
    edit_text(d / file, old, new)
    fails(lambda: load_hm(d), file=file, line=1, field=field, says=f"the header repeats column {field!r}")


# --- 5, 11. Goodreads: strings where the published files have strings; ratings; a BOM ---------------------

GR_I = "goodreads_interactions_poetry.json.gz"
GR_B = "goodreads_books_poetry.json.gz"


@pytest.mark.parametrize("file, line, change, field, says", [
    (GR_B, 2, {"book_id": ["x"]}, "book_id", "'book_id' must be a string, not list"),
    (GR_I, 2, {"user_id": 1.5}, "user_id", "'user_id' must be a string, not float"),
    (GR_I, 3, {"book_id": 30119}, "book_id", "'book_id' must be a string, not int"),
    (GR_I, 4, {"date_added": True}, "date_added", "'date_added' must be a string, not bool"),
    (GR_B, 3, {"title": ["T"]}, "title", "'title' must be a string, not list"),
    (GR_B, 4, {"authors": [{"author_id": {"id": "1"}, "role": ""}]}, "authors", "author_id must be a string"),
    (GR_B, 5, {"authors": [{"role": ""}]}, "authors", "an author without an author_id"),
    (GR_I, 5, {"rating": 99999999999999999999}, "rating", "is not a whole number 0-5"),
])
def test_goodreads_values_of_the_wrong_kind(tmp_path, file, line, change, field, says):
    from recharness.data.goodreads import load_goodreads

    d = copy_fixture("goodreads", tmp_path)
    _set_json_line(d / file, line, change)
    fails(lambda: load_goodreads(d), file=file, line=line, field=field, says=says)


def test_goodreads_files_opening_with_a_bom_read_as_without(tmp_path):
    from recharness.data.goodreads import load_goodreads

    d = copy_fixture("goodreads", tmp_path)
    want = load_goodreads(d)
    for f in (GR_I, GR_B):
        (d / f).write_bytes(gzip.compress(b"\xef\xbb\xbf" + gzip.decompress((d / f).read_bytes())))
    got = load_goodreads(d)
    assert got.interactions.equals(want.interactions) and got.items.equals(want.items)


# --- 6. RecBench+ official files ------------------------------------------------------------------------


CONDITION = {"source_user": 1, "movieSubsetId": [1], "movieSubset": ["Toy Story (1995)"],
             "sharedRelationships": [["genre", "Comedy"]], "situational_description_query": "a comedy"}
GROUP = {"group_type": "age", "group": "25-34", "query & ground true": [{"query": "q", "movie subset": ["T"]}]}


@pytest.mark.parametrize("kind, rec, field, says", [
    ("implicit", {**CONDITION, "implicitCondition": "Genre"}, "implicitCondition", "an object"),
    ("misinformed", {**CONDITION, "misinformedCondition": ["genre"]}, "misinformedCondition", "an object"),
    ("explicit", {**CONDITION, "movieSubset": 5}, "movieSubset", "a list of titles, not int"),
    ("demographics", {**GROUP, "group": 5}, "group", "a string or a list of strings, not int"),
    ("demographics", {**GROUP, "group": ["18-24", 5]}, "group", "strings, not a list holding int"),
])
def test_recbench_plus_official_keys_of_the_wrong_type(tmp_path, kind, rec, field, says):
    from recharness.tasks.recbench_plus.official import read_records

    path = tmp_path / "q.json"
    path.write_text(json.dumps([CONDITION if kind != "demographics" else GROUP, rec], indent=1))
    err = fails(lambda: read_records(path, kind), file="q.json", line=err_line(path, field), field=field, says=says)
    assert err.message.startswith("entry 1:")


def err_line(path: Path, key: str) -> int:
    """The line of the second entry's `key` in an indent=1 dump."""
    lines = path.read_text().split("\n")
    return [n for n, t in enumerate(lines, 1) if t.strip().startswith(f'"{key}"')][-1]


def test_recbench_plus_official_good_keys_still_read(tmp_path):
    from recharness.tasks.recbench_plus.official import read_records

    path = tmp_path / "q.json"
    implicit = {**CONDITION, "implicitCondition": {"relation": "genre", "value": "Comedy"}}
    path.write_text(json.dumps([implicit]))
    assert read_records(path, "implicit") == [{**implicit, "data_idx": 0}]  # every field as written, numbered
    groups = [GROUP, {**GROUP, "group": ["18-24", "Male"]}, {**GROUP, "group": None}]
    path.write_text(json.dumps(groups))
    assert read_records(path, "demographics") == [{**g, "data_idx": i} for i, g in enumerate(groups)]


# --- 7. PerRecBench label files -------------------------------------------------------------------------


@pytest.mark.parametrize("ts", ["--5", "²", "5" * 5000, "-", "1.5"])
def test_perrecbench_label_timestamp_not_a_whole_number(tmp_path, ts):
    from recharness.tasks.perrecbench.original import read_labels

    user = {"user_id": "u1", "relative_rating": 0.5, "avg_rating": 3.5, "history_len": 2}
    path = tmp_path / "item2group_avg_diff_sample-easy.json"
    path.write_text(json.dumps({"i1": [[{**user, "timestamp": " -17 "}, {**user, "user_id": "u2", "timestamp": ts}]]},
                               indent=1))
    line = [n for n, t in enumerate(path.read_text().split("\n"), 1) if '"timestamp"' in t][-1]
    fails(lambda: read_labels(path), file=path.name, line=line, field="i1[0][1].timestamp",
           says="expected a whole number")
    path.write_text(json.dumps({"i1": [[{**user, "timestamp": " -17 "}, {**user, "user_id": "u2", "timestamp": 9}]]}))
    assert [m.timestamp for m in read_labels(path)[0].members] == [-17, 9]


# --- 9, 10. Imported predictions --------------------------------------------------------------------------


def test_imported_line_with_a_task_that_is_no_string_is_one_problem():
    from recharness.runner.imported import _Resolver

    r = _Resolver([{"id": "rating-u1", "task": "rating", "user_id": "u1", "item_id": "i9"}])
    for d in ({"user_id": "u1", "task": ["rating"]}, {"user_id": "u1", "item_id": "i9", "task": {"t": 1}},
              {"id": "rating-u1", "task": ["rating"]}):
        s, why = r.find(d)
        assert s is None and why == '"task" must be a string, not ' + type(d["task"]).__name__
    assert r.find({"user_id": "u1", "task": "rating"})[0]["id"] == "rating-u1"


@pytest.mark.parametrize("text, line, field, says", [
    ('id,answer,answer\ns1,a,b\n', 1, "answer", "the header repeats column 'answer'"),
    ('id, answer,answer \ns1,a,b\n', 1, "answer", "the header repeats column 'answer'"),
    ('id,answer\ns1,a\ns2,"b\n', 3, None, "not readable as CSV"),
])
def test_imported_csv_repeated_column_or_open_quote(tmp_path, text, line, field, says):
    from recharness.runner.imported import _read_lines

    path = tmp_path / "p.csv"
    path.write_text(text)
    fails(lambda: list(_read_lines(path)), file="p.csv", line=line, field=field, says=says)


def test_imported_csv_trailing_empty_columns_are_no_repeat(tmp_path):
    from recharness.runner.imported import _read_lines

    path = tmp_path / "p.csv"
    path.write_text("id,answer,,\ns1,a,,\n")
    assert list(_read_lines(path)) == [(2, {"id": "s1", "answer": "a"})]

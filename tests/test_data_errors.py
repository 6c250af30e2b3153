"""Broken inputs: each must raise InputError naming the file, the 1-based
line and the field, and `prepare` must leave nothing behind."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from recharness.core.errors import ConfigError, InputError
from recharness.data.amazon2023 import load_amazon2023
from recharness.data.llmrank import load_llmrank
from recharness.data.movielens import load_ml100k_files, load_movielens_dat
from recharness.data.prepare import prepare_dataset
from recharness.data.recbole import load_recbole
from tests.loader_faults import FIX, copy_fixture, fails

# --- MovieLens .dat ------------------------------------------------------------------------------


def test_dat_truncated_line(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    with open(d / "ratings.dat", "a") as f:
        f.write("3::1::4\n")
    err = fails(lambda: load_movielens_dat(d), file="ratings.dat", line=6, field="timestamp")
    assert "truncated" in err.message


def test_dat_wrong_column_count(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    (d / "users.dat").write_text("1::F::1::10::48067\n2::M::56::16::70072::extra\n")
    err = fails(lambda: load_movielens_dat(d), file="users.dat", line=2, field=None)
    assert "6 fields where 5" in err.message


def test_dat_non_numeric_rating(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    lines = (d / "ratings.dat").read_text().splitlines()
    lines[2] = "1::9001::four::978300760"
    (d / "ratings.dat").write_text("\n".join(lines) + "\n")
    err = fails(lambda: load_movielens_dat(d), file="ratings.dat", line=3, field="rating")
    assert "'four' is not a number" in err.message


def test_dat_fractional_timestamp_and_empty_field(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    (d / "ratings.dat").write_text("1::1::5::978300760.5\n")
    fails(lambda: load_movielens_dat(d), file="ratings.dat", line=1, field="timestamp")
    (d / "ratings.dat").write_text("1::1::5::978300760\n\n1::1::::978300760\n")  # blank line 2 is skipped
    fails(lambda: load_movielens_dat(d), file="ratings.dat", line=3, field="rating")


def test_dat_bad_occupation_code(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    (d / "users.dat").write_text("1::F::1::10::48067\n2::M::56::21::70072\n")
    fails(lambda: load_movielens_dat(d), file="users.dat", line=2, field="occupation")


def test_dat_missing_file(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    (d / "movies.dat").unlink()
    err = fails(lambda: load_movielens_dat(d), file="movies.dat", line=None, field=None)
    assert "not found" in err.message


def test_ml100k_bad_genre_flag(tmp_path):
    d = copy_fixture("ml100k", tmp_path)
    lines = (d / "u.item").read_bytes().split(b"\n")
    lines[1] = lines[1][:-1] + b"x"
    (d / "u.item").write_bytes(b"\n".join(lines))
    fails(lambda: load_ml100k_files(d), file="u.item", line=2, field="Western")


# --- RecBole atomic ------------------------------------------------------------------------------


def test_recbole_bad_encoding(tmp_path):
    d = copy_fixture("recbole", tmp_path)
    with open(d / "tiny.item", "ab") as f:
        f.write("i3\tCaf\xe9\t2000\tDrama\n".encode("latin-1"))
    err = fails(lambda: load_recbole(d), file="tiny.item", line=4, field=None)
    assert "UTF-8" in err.message


def test_recbole_bad_header_and_rating(tmp_path):
    d = copy_fixture("recbole", tmp_path)
    (d / "tiny.inter").write_text("user_id:token\titem_id\trating:float\n1\ta\t5\n")
    fails(lambda: load_recbole(d), file="tiny.inter", line=1, field="item_id")
    (d / "tiny.inter").write_text("user_id:token\titem_id:token\trating:float\n1\ta\t5\n1\tb\tgood\n")
    fails(lambda: load_recbole(d), file="tiny.inter", line=3, field="rating")
    (d / "tiny.inter").write_text("user_id:token\titem_id:token\trating:float\n1\ta\n")
    fails(lambda: load_recbole(d), file="tiny.inter", line=2, field="rating")


# --- Amazon 2023 ---------------------------------------------------------------------------------


def amazon(tmp_path: Path, line: str, *, name="Tiny_Cat.jsonl") -> Path:
    d = copy_fixture("amazon2023", tmp_path)
    with open(d / name, "a") as f:
        f.write(line + "\n")
    return d


def test_amazon_truncated_json(tmp_path):
    d = amazon(tmp_path, '{"rating": 5.0, "title": "cut off", "parent_as')
    err = fails(lambda: load_amazon2023(d), file="Tiny_Cat.jsonl", line=5, field=None)
    assert "JSON" in err.message


def test_amazon_non_numeric_rating(tmp_path):
    rec = {"rating": "five", "title": "t", "text": "x", "parent_asin": "P1", "user_id": "U", "timestamp": 1}
    d = amazon(tmp_path, json.dumps(rec))
    fails(lambda: load_amazon2023(d), file="Tiny_Cat.jsonl", line=5, field="rating")


def test_amazon_missing_field(tmp_path):
    rec = {"rating": 5.0, "title": "t", "text": "x", "user_id": "U", "timestamp": 1}
    d = amazon(tmp_path, json.dumps(rec))
    fails(lambda: load_amazon2023(d), file="Tiny_Cat.jsonl", line=5, field="parent_asin")
    d2 = amazon(tmp_path / "b", json.dumps({"title": "no id"}), name="meta_Tiny_Cat.jsonl")
    fails(lambda: load_amazon2023(d2), file="meta_Tiny_Cat.jsonl", line=3, field="parent_asin")


def test_amazon_bad_encoding_and_broken_gzip(tmp_path):
    d = copy_fixture("amazon2023", tmp_path)
    with open(d / "Tiny_Cat.jsonl", "ab") as f:
        f.write(b'{"rating": 1.0, "title": "caf\xe9"}\n')
    fails(lambda: load_amazon2023(d), file="Tiny_Cat.jsonl", line=5, field=None)
    gz = tmp_path / "gz"
    gz.mkdir()
    data = gzip.compress((FIX / "amazon2023/Tiny_Cat.jsonl").read_bytes())
    (gz / "Tiny_Cat.jsonl.gz").write_bytes(data[: len(data) // 2])
    err = fails(lambda: load_amazon2023(gz), file="Tiny_Cat.jsonl.gz", line=1, field=None)
    assert "gzip" in err.message


def test_amazon_missing_file(tmp_path):
    fails(lambda: load_amazon2023([tmp_path / "Nope.jsonl"]), file="Nope.jsonl", line=None, field=None)
    with pytest.raises(ConfigError):
        load_amazon2023(tmp_path)  # a folder without review files


# --- LLMRank -------------------------------------------------------------------------------------


def test_llmrank_errors(tmp_path):
    d = copy_fixture("llmrank", tmp_path)
    (d / "Toy.random").write_text("2\t5 0 3\n7\t4 5 1\n")
    err = fails(lambda: load_llmrank(d), file="Toy.random", line=2, field="user_id")
    assert "not in Toy-6k.test.inter" in err.message
    (d / "Toy.random").write_text("2\t5 0 3\n0\n")
    fails(lambda: load_llmrank(d), file="Toy.random", line=2, field="item_ids")
    (d / "Toy.random").unlink()
    with open(d / "Toy-6k.test.inter", "a") as f:
        f.write("1\t3\t2\n")
    fails(lambda: load_llmrank(d), file="Toy-6k.test.inter", line=5, field="user_id")
    (d / "Toy-6k.test.inter").unlink()
    fails(lambda: load_llmrank(d), file="*.test.inter", line=None, field=None)


# --- nothing half-written ------------------------------------------------------------------------


def test_prepare_failure_leaves_nothing_behind(tmp_path):
    d = copy_fixture("movielens_dat", tmp_path)
    out_root = tmp_path / "store"
    out_root.mkdir()
    good = prepare_dataset("movielens-dat", [d], out=out_root / "ds", progress=False)
    before = {p.name: p.read_bytes() for p in good.iterdir()}
    with open(d / "ratings.dat", "a") as f:
        f.write("9::1::4::not-a-time\n")
    with pytest.raises(InputError):
        prepare_dataset("movielens-dat", [d], out=out_root / "ds", progress=False)
    with pytest.raises(InputError):
        prepare_dataset("movielens-dat", [d], out=out_root / "fresh", progress=False)
    assert sorted(p.name for p in out_root.iterdir()) == ["ds"]  # no temp dirs, no "fresh"
    assert {p.name: p.read_bytes() for p in good.iterdir()} == before  # old copy untouched


def test_ml1m_atomic_duplicate_item_and_missing_field(tmp_path):
    from recharness.data.movielens import load_ml1m_atomic

    d = copy_fixture("ml1m_atomic", tmp_path)
    parts = [d / f"ml-1m.{k}" for k in ("inter", "user", "item")]
    with open(d / "ml-1m.item", "a") as f:
        f.write("Toy Story (1995)\tToy Story\t1995\tComedy\r\n")
    fails(lambda: load_ml1m_atomic(*parts), file="ml-1m.item", line=5, field="item_id")
    shutil.copy(FIX / "ml1m_atomic/ml-1m.item", d / "ml-1m.item")
    (d / "ml-1m.user").write_text("user_id:token\tage:float\tgender:token\n1m_1\t1\tF\n")
    fails(lambda: load_ml1m_atomic(*parts), file="ml-1m.user", line=1, field="occupation")


def test_ml100k_atomic_files_missing_a_field_name_it(tmp_path):
    """RecBole's ml-100k files with a field left out: one error naming the file and the field (each was a polars
    ColumnNotFoundError or a KeyError traceback)."""
    from recharness.data.movielens import load_ml100k_atomic

    inter = b"user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t10\t4\t881250949\n"
    item = b"item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n10\tToy Story\t1995\tAnimation\n"
    user = b"user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token\n1\t24\tM\ttechnician\t85711\n"
    assert load_ml100k_atomic(inter, user, item).interactions.height == 1
    cases = [(inter.replace(b"\ttimestamp:float", b"").replace(b"\t881250949", b""), user, item, "inter", "timestamp"),
             (inter, user, item.replace(b"\trelease_year:token", b"").replace(b"\t1995", b""), "item", "release_year"),
             (inter, user.replace(b"\tzip_code:token", b"").replace(b"\t85711", b""), item, "user", "zip_code")]
    for i, u, it, kind, field in cases:
        with pytest.raises(InputError, match=f"missing field\\(s\\) {field} of RecBole's ml-100k.{kind}"):
            load_ml100k_atomic(i, u, it)


def test_whole_numbers_are_read_exactly_and_out_of_range_ones_refused():
    import polars as pl

    from recharness.data.parsing import LINE, parse_number

    df = pl.DataFrame({"t": ["1700000000123456789", "978300760.0", " 5 "], LINE: [2, 3, 4]})
    assert parse_number("f", df, "t", pl.Int64)["t"].to_list() == [1700000000123456789, 978300760, 5]
    with pytest.raises(InputError, match="'1e30' is too large for a whole number") as e:
        parse_number("f", pl.DataFrame({"t": ["1", "1e30"], LINE: [2, 3]}), "t", pl.Int64)
    assert e.value.line == 3


@pytest.mark.parametrize("file, old, new, line, field, says", [
    ("movies.dat", None, "1::Again (1995)::Drama\n", None, "item_id", "MovieID '1' appears twice"),
    ("ratings.dat", None, "1::4242::5::978300760\n", None, "item_id", "MovieID '4242' is not in movies.dat"),
    ("users.dat", "1::F::1::", "1::F::99::", 1, "age", "age 99 is not one of ML-1M's codes"),
    ("users.dat", "1::F::1::", "1::X::1::", 1, "gender", "gender 'X' is not one of"),
])
def test_movielens_dat_cross_file_checks(tmp_path, file, old, new, line, field, says):
    """A repeated id, a rating of a movie movies.dat lacks, an age or gender outside ML-1M's codes: each an
    error naming its line (they were accepted without a word)."""
    d = copy_fixture("movielens_dat", tmp_path)
    text = (d / file).read_text(encoding="latin-1")
    text = text.replace(old, new, 1) if old else text + new
    (d / file).write_text(text, encoding="latin-1")
    n = line or len(text.splitlines())
    err = fails(lambda: load_movielens_dat(d), file=file, line=n, field=field)
    assert says in err.message


def test_a_utf8_file_with_one_bad_byte_is_an_error_not_latin1():
    """Latin-1 is MovieLens's own encoding, read as such; a UTF-8 copy with one stray byte was read whole as
    latin-1, garbling every accented title ('MisÃ©rables') with only `encoding: latin-1` to say so."""
    from recharness.data.parsing import decode

    assert decode("movies.dat", "1::Misérables, Les (1995)::Drama\n".encode("latin-1"), latin1_fallback=True) == \
        ("1::Misérables, Les (1995)::Drama\n", "latin-1")
    data = "1::Misérables, Les (1995)::Drama\n".encode() + b"2::Caf\xe9 (1999)::Drama\n"
    with pytest.raises(InputError, match="not valid UTF-8") as e:
        decode("movies.dat", data, latin1_fallback=True)
    assert e.value.line == 2


def test_recbole_repeated_keys_and_empty_ids_are_errors(tmp_path):
    """A second .item row for one item was dropped without a word, and an empty id became the item ''."""
    d = copy_fixture("recbole", tmp_path)
    item = next(d.glob("*.item"))
    lines = item.read_text().splitlines(keepends=True)
    item.write_text("".join(lines) + lines[1])
    err = fails(lambda: load_recbole(d), file=item.name, line=len(lines) + 1, field="item_id")
    assert "appears twice (first: " in err.message and "line 2" in err.message
    item.write_text("".join(lines))
    inter = next(d.glob("*.inter"))
    rows = inter.read_text().splitlines(keepends=True)
    inter.write_text(rows[0] + "\t" + rows[1].split("\t", 1)[1] + "".join(rows[2:]))
    fails(lambda: load_recbole(d), file=inter.name, line=2, field="user_id")


def test_the_first_repeat_is_named_with_its_own_first_line(tmp_path):
    """Two ids repeated: the error names the first repeat in file order and where that id came first (taking the
    first two repeated rows mixed two ids: '1' with the line of '73')."""
    d = copy_fixture("movielens_dat", tmp_path)
    text = (d / "movies.dat").read_text(encoding="latin-1")
    n = len(text.splitlines())
    (d / "movies.dat").write_text(text + "73::Again (1995)::Drama\n1::Again (1995)::Drama\n", encoding="latin-1")
    err = fails(lambda: load_movielens_dat(d), file="movies.dat", line=n + 1, field="item_id")
    assert "MovieID '73' appears twice (first: line 2)" in err.message


def test_a_damaged_prepared_dataset_is_one_error_naming_its_file(ml1m, tmp_path):
    """A prepared dataset whose meta.json is not JSON, or whose parquet file is cut: an InputError naming the file
    (before: a JSONDecodeError or polars ComputeError traceback, or a message about the run directory)."""
    from recharness.core.paths import dataset_dir
    from recharness.data.store import load_dataset

    src = dataset_dir("ml-1m")
    bad = tmp_path / "meta-bad"
    shutil.copytree(src, bad)
    (bad / "meta.json").write_text("{bad")
    with pytest.raises(InputError, match=r"meta\.json.*damaged or unreadable"):
        load_dataset(str(bad))
    cut = tmp_path / "cut"
    shutil.copytree(src, cut)
    (cut / "items.parquet").write_bytes((src / "items.parquet").read_bytes()[:1000])
    with pytest.raises(InputError, match=r"items\.parquet.*damaged or unreadable"):
        load_dataset(str(cut))


def test_an_edited_prepared_dataset_with_a_repeated_id_or_bad_extras_is_named(ml1m, tmp_path):
    """An id on two rows of items.parquet loaded, the last row's title winning in prompts and matching; "extras":
    "ab" in meta.json read as tables 'a' and 'b' (the review of 2026-11-29)."""
    import json

    import polars as pl

    from recharness.core.errors import ConfigError
    from recharness.core.paths import dataset_dir
    from recharness.data.store import load_dataset

    src = dataset_dir("ml-1m")
    dup = tmp_path / "dup"
    shutil.copytree(src, dup)
    items = pl.read_parquet(src / "items.parquet")
    pl.concat([items, items.head(2).with_columns(pl.lit("Dup").alias("title"))]).write_parquet(dup / "items.parquet")
    first = sorted(items["item_id"].head(2).to_list())
    with pytest.raises(ConfigError, match=rf"items: item_id '{first[0]}', '{first[1]}' on more than one row"):
        load_dataset(str(dup))
    ex = tmp_path / "extras"
    shutil.copytree(src, ex)
    meta = json.loads((src / "meta.json").read_text())
    (ex / "meta.json").write_text(json.dumps({**meta, "extras": "ab"}))
    with pytest.raises(InputError, match=r'meta\.json.*"extras" is "ab", not a list of table names'):
        load_dataset(str(ex))

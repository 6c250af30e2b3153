"""Each loader on files in its exact published format: small hand-made
fixtures, plus the real samples in ../shared when that folder is present."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from recharness.data.amazon2023 import load_amazon2023
from recharness.data.llmrank import load_llmrank
from recharness.data.movielens import (
    ML1M_ITEM_SCHEMA,
    load_ml1m_atomic,
    load_ml100k_files,
    load_movielens_dat,
    ml1m_facts,
    title_key,
)
from recharness.data.recbole import load_recbole, read_atomic

FIX = Path(__file__).parent / "fixtures" / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (shared data ships beside the repo)")


def canonical(ds) -> None:
    ds.validate()
    inter = ds.interactions
    assert inter.columns[:4] == ["user_id", "item_id", "rating", "timestamp"]
    # sorted by (user, timestamp) — the leave-last-out splits rely on it
    assert inter.select("user_id", "timestamp").equals(inter.select("user_id", "timestamp").sort("user_id", "timestamp", nulls_last=True))


# --- MovieLens .dat -------------------------------------------------------------------------


def test_movielens_dat_fixture_latin1_and_enrichment():
    ds = load_movielens_dat(FIX / "movielens_dat", name="ml-1m")
    canonical(ds)
    assert ds.meta["encoding"]["movies.dat"] == "latin-1"
    assert dict(ds.items.schema) == ML1M_ITEM_SCHEMA
    items = {r["item_id"]: r for r in ds.items.iter_rows(named=True)}
    assert items["73"]["title"] == "Misérables, Les (1995)"
    assert items["73"]["directors"] == ["Claude Lelouch"]  # joined from the fact table
    assert items["1"]["genres"] == ["Animation", "Children's", "Comedy"] and items["1"]["runtime_min"] == 81
    assert items["9001"]["year"] == 1999 and items["9001"]["directors"] == [] and items["9001"]["plot"] is None
    assert ds.meta["items_with_attributes"] == 2
    # same user and second: file order kept; user 2's half-star rating parsed
    assert ds.interactions.filter(pl.col("user_id") == "1")["item_id"].to_list() == ["1", "9001", "73"]
    assert ds.interactions.filter(pl.col("user_id") == "2")["rating"].to_list() == [4.5]
    users = {r["user_id"]: r for r in ds.users.iter_rows(named=True)}
    assert users["1"] == {"user_id": "1", "gender": "F", "age": 1, "occupation": "10", "occupation_name": "K-12 student", "zip": "48067"}
    assert users["10"]["occupation_name"] == "other"



@pytest.mark.parametrize("rating", ["99999999999999999999999", "-7", "0", "5.5"])
def test_movielens_ratings_off_the_scale_name_their_line(tmp_path, rating):
    """A rating MovieLens never has (outside 0.5-5) is an error at its line; before, 1e23 prepared cleanly and the
    rating task scored every method against it (RMSE 707,104)."""
    from recharness.core.errors import InputError

    for f in ("movies.dat", "users.dat"):
        shutil.copy(FIX / "movielens_dat" / f, tmp_path / f)
    lines = (FIX / "movielens_dat/ratings.dat").read_text().splitlines(keepends=True)
    user, item, _, ts = lines[1].strip().split("::")
    lines[1] = f"{user}::{item}::{rating}::{ts}\n"
    (tmp_path / "ratings.dat").write_text("".join(lines))
    with pytest.raises(InputError, match=r"outside MovieLens's 0.5-5 scale") as e:
        load_movielens_dat(tmp_path, name="ml-1m")
    assert "line 2" in str(e.value) and "rating" in str(e.value)

@needs_shared
def test_movielens_dat_shared_movies_and_users(tmp_path):
    for f in ("movies.dat", "users.dat"):
        shutil.copy(SHARED / "recbench_plus/movie" / f, tmp_path / f)
    # the fixture's ratings without MovieID 9001 (its own movies.dat's, not ML-1M's: an unknown movie is an error)
    lines = (FIX / "movielens_dat/ratings.dat").read_text().splitlines(keepends=True)
    (tmp_path / "ratings.dat").write_text("".join(x for x in lines if "::9001::" not in x))
    ds = load_movielens_dat(tmp_path, name="ml-1m")
    canonical(ds)
    assert ds.items.height == 3883 and ds.users.height == 6040
    assert ds.users["occupation_name"].null_count() == 0
    # this copy turned accents into U+FFFD; the fact table restores them
    assert ds.meta["titles_repaired"] == 50
    assert not ds.items["title"].str.contains("\ufffd", literal=True).any()
    assert ds.meta["items_with_attributes"] == 3883
    assert ds.items.filter(pl.col("item_id").is_in(["1697", "2563", "3935"]))["plot"].null_count() == 3  # TML1M: other films
    assert ds.items.filter(pl.col("item_id") == "2628")["title"][0] == "Star Wars: Episode I - The Phantom Menace (1999)"


@needs_shared
def test_fact_table_agrees_with_movies_dat_line_by_line():
    facts = ml1m_facts()
    lines = (SHARED / "recbench_plus/movie/movies.dat").read_text("utf-8").splitlines()
    assert facts.height == len(lines) == 3883
    for row, line in zip(facts.iter_rows(named=True), lines):
        mid, title, genres = line.split("::")
        assert row["item_id"] == mid
        assert title_key(row["title"]) == title_key(title)
        assert row["genres"] == genres.split("|")


@needs_shared
def test_recbench_plus_top_movies_resolve_to_fact_titles():
    queries = json.loads((SHARED / "recbench_plus/movie/UserBasedQuery.json").read_text())
    titles = dict(zip(ml1m_facts()["item_id"], ml1m_facts()["title"]))
    for q in queries[:10]:
        for mid, _ in q["top_10_movies"]:
            assert titles[str(mid)] in q["summary"]


# --- MovieLens-100k ---------------------------------------------------------------------------


def test_ml100k_files():
    ds = load_ml100k_files(FIX / "ml100k")
    canonical(ds)
    assert ds.items.columns == ["item_id", "title", "year", "genres"]
    rows = {r["item_id"]: r for r in ds.items.iter_rows(named=True)}
    assert rows["1"] == {"item_id": "1", "title": "Toy Story (1995)", "year": 1995, "genres": ["Animation", "Children's", "Comedy"]}
    assert rows["2"]["title"] == "Café Made-Up (1996)" and rows["2"]["genres"] == ["Drama"]
    assert rows["3"]["year"] is None and rows["3"]["genres"] == ["unknown"]
    assert ds.users.columns == ["user_id", "gender", "age", "occupation", "zip"]
    assert ds.users["age"].to_list() == [24, 53]


# --- RecBole atomic -----------------------------------------------------------------------------


def test_recbole_atomic_types_and_mapping():
    df, fields = read_atomic(FIX / "recbole/tiny.item")
    assert fields == {"item_id": "token", "movie_title": "token_seq", "release_year": "token", "genre": "token_seq"}
    assert df["movie_title"][0] == "First  Thing"  # prose stays one string
    assert df["genre"][0].to_list() == ["Drama", "Comedy"]
    ds = load_recbole(FIX / "recbole")
    canonical(ds)
    assert ds.name == "recbole-tiny"
    assert ds.items.columns == ["item_id", "title", "year", "genres"]
    assert ds.items["year"].dtype == pl.Int64
    # user 10: i2 (ts 900, no rating) before i1 (ts 1000)
    assert ds.interactions.filter(pl.col("user_id") == "10")["item_id"].to_list() == ["i2", "i1"]
    assert ds.interactions["rating"].to_list() == [None, 4.0, 2.5]
    assert ds.users.columns == ["user_id", "age", "gender", "zip"] and ds.users["zip"][0] == "01234"


def test_recbole_custom_mapping(tmp_path):
    (tmp_path / "x.inter").write_text("uid:token\tasin:token\tstars:float\n1\tA\t5\n")
    ds = load_recbole([tmp_path / "x.inter"], mapping={"uid": "user_id", "asin": "item_id", "stars": "rating"}, name="x")
    assert ds.interactions.row(0) == ("1", "A", 5.0, None)
    assert ds.items["item_id"].to_list() == ["A"]


def test_ml1m_atomic_maps_titles_back_to_movielens_ids():
    parts = [(FIX / "ml1m_atomic" / f"ml-1m.{k}").read_bytes() for k in ("inter", "user", "item")]
    ds = load_ml1m_atomic(*parts)
    canonical(ds)
    assert ds.meta["items_mapped_to_movielens_ids"] == 3 and ds.meta["unmapped_items"] == []
    assert sorted(ds.items["item_id"]) == ["1", "1001", "73"]  # 1001 matched loosely
    assert ds.interactions.filter(pl.col("user_id") == "2")["item_id"].to_list() == ["1001"]
    assert ds.users["user_id"].to_list() == ["1", "2"]
    assert ds.users["occupation_name"].to_list() == ["K-12 student", "self-employed"]
    assert dict(ds.items.schema) == ML1M_ITEM_SCHEMA


def test_ml1m_atomic_keeps_unknown_titles(tmp_path):
    for k in ("inter", "user", "item"):
        shutil.copy(FIX / "ml1m_atomic" / f"ml-1m.{k}", tmp_path / f"ml-1m.{k}")
    with open(tmp_path / "ml-1m.item", "a") as f:
        f.write("Not A MovieLens Film (2001)\tNot A MovieLens Film\t2001\tDrama War\r\n")
    with open(tmp_path / "ml-1m.inter", "a") as f:
        f.write("1m_2\tNot A MovieLens Film (2001)\t1\t978300002\r\n")
    ds = load_ml1m_atomic(*(tmp_path / f"ml-1m.{k}" for k in ("inter", "user", "item")))
    assert ds.meta["unmapped_items"] == ["Not A MovieLens Film (2001)"]
    row = ds.items.filter(pl.col("item_id") == "Not A MovieLens Film (2001)").row(0, named=True)
    assert row["year"] == 2001 and row["genres"] == ["Drama", "War"] and row["directors"] == []
    assert ds.interactions.filter(pl.col("user_id") == "2")["item_id"].to_list() == ["1001", "Not A MovieLens Film (2001)"]


# --- Amazon Reviews 2023 ------------------------------------------------------------------------


def test_amazon2023_fixture_and_gzip(tmp_path):
    for f in (FIX / "amazon2023").iterdir():
        with open(f, "rb") as src, gzip.open(tmp_path / (f.name + ".gz"), "wb") as dst:
            dst.write(src.read())
    for source in (FIX / "amazon2023", tmp_path):
        ds = load_amazon2023(source)
        canonical(ds)
        inter = ds.interactions
        assert inter.columns == ["user_id", "item_id", "rating", "timestamp", "review_title", "review_text", "category"]
        ua = inter.filter(pl.col("user_id") == "U_A")
        assert ua["review_title"].to_list() == ["Second same-second review", "First same-second review", "Meh"]
        assert ua["timestamp"].to_list() == [1600000000, 1600000000, 1600000100]  # ms -> s
        assert set(inter["category"]) == {"Tiny_Cat"}
        items = {r["item_id"]: r for r in ds.items.iter_rows(named=True)}
        assert items["P001"]["store"] == "ACME" and items["P001"]["price"] == 12.5
        assert items["P001"]["categories"] == ["Tools", "Kits"]
        assert items["P002"]["price"] == 1299.0 and items["P002"]["author"] == "Jane Writer"
        assert items["P003"]["title"] is None  # reviewed but no metadata
        assert ds.meta["items_without_metadata"] == 1


@needs_shared
def test_amazon2023_shared_sample():
    ds = load_amazon2023(SHARED / "amazon2023_sample")
    canonical(ds)
    assert ds.interactions.height == 3455
    assert len(ds.meta["categories"]) == 24
    assert ds.items.columns[:5] == ["item_id", "title", "main_category", "store", "price"]
    assert ds.meta["items_without_metadata"] == 0
    assert ds.interactions["review_title"].null_count() == 0
    assert ds.interactions["timestamp"].min() > 10**9 and ds.interactions["timestamp"].max() < 2 * 10**9


# --- LLMRank ------------------------------------------------------------------------------------


def leave_last_out_targets(ds) -> dict[str, str]:
    return dict(ds.interactions.group_by("user_id", maintain_order=True).agg(pl.col("item_id").last()).iter_rows())


def test_llmrank_fixture():
    ds = load_llmrank(FIX / "llmrank")
    canonical(ds)
    assert ds.meta["split"] == "test"
    assert leave_last_out_targets(ds) == {"0": "3", "1": "5", "2": "4"}
    assert ds.interactions.filter(pl.col("user_id") == "0")["timestamp"].to_list() == [0, 1, 2, 3]
    assert ds.items.filter(pl.col("item_id") == "2")["title"][0] == "Gamma Pad &amp; Case"
    cand = ds.extras["candidates"]
    assert cand.schema == pl.Schema({"user_id": pl.Utf8, "retriever": pl.Utf8, "item_ids": pl.List(pl.Utf8)})
    assert sorted(set(cand["retriever"])) == ["pop", "random"]
    assert ds.meta["retrievers"]["random"] == {"users": 2, "candidates_per_user": 3, "target_in_candidates": 0}
    assert ds.meta["retrievers"]["pop"]["target_in_candidates"] == 2
    valid = load_llmrank(FIX / "llmrank", split="valid")
    assert leave_last_out_targets(valid) == {"0": "2", "1": "0", "2": "1"}


@needs_shared
def test_llmrank_games_shared():
    ds = load_llmrank(SHARED / "amazon_games")
    canonical(ds)
    assert ds.items.height == 16859 and ds.users.height == 50546
    cand = ds.extras["candidates"]
    assert sorted(set(cand["retriever"])) == ["bert", "bm25", "bpr", "gru4rec", "pop", "random", "sasrec"]
    assert cand.height == 7 * 200 and set(cand["item_ids"].list.len()) == {100}
    # the candidate users are test users: trained retrievers hit their test targets far above chance
    assert ds.meta["retrievers"]["sasrec"]["target_in_candidates"] > 20
    first = (SHARED / "amazon_games/Games-6k.test.inter").read_text().splitlines()[1].split("\t")
    assert leave_last_out_targets(ds)[first[0]] == first[2]
    hist = ds.interactions.filter(pl.col("user_id") == first[0])["item_id"].to_list()
    assert hist[:-1] == first[1].split()


def test_recbole_sequence_files_of_one_benchmark_expand_each_history_once(shared, tmp_path):
    """LLMRank's Games folder ships Games-6k.valid.inter and .test.inter, the test row's history the valid
    row's plus its target: read as RecBole atomic files, each user's history is expanded once (it was twice,
    interleaved: 70 70 71 71 …), its positions marked as positions, not seconds."""
    from recharness.core.errors import InputError
    from recharness.data.recbole import load_recbole

    games = shared("data", "amazon_games")
    ds = load_recbole(games)
    inter = ds.interactions
    assert inter.select("user_id", "item_id").is_duplicated().sum() == 0
    assert inter.filter(pl.col("user_id") == "4")["item_id"].to_list() == ["70", "71", "72", "73", "74"]
    assert "sequence_timestamps" in ds.meta
    # the same histories and targets as the LLMRank loader reads from the test file
    ref = load_llmrank(games).interactions
    assert inter.height == ref.height
    # two different histories for one user: an error naming the row, not a guess
    head = "user_id:token\titem_id_list:token_seq\titem_id:token\n"
    (tmp_path / "x.valid.inter").write_text(head + "u1\ta b\tc\n")
    (tmp_path / "x.test.inter").write_text(head + "u1\ta z c\td\n")
    with pytest.raises(InputError, match="not the start of the user's longest one") as e:
        load_recbole(tmp_path)
    assert e.value.line == 2 and e.value.field == "item_id_list"


def _split_files(d, dated=(True, True, True)):
    d.mkdir()
    head = "user_id:token\titem_id:token" + "\ttimestamp:float"
    rows = {"train": [("u1", "a", 978300000), ("u1", "b", 978300760)], "valid": [("u1", "c", 978300760)],
            "test": [("u1", "d", 978300760)]}
    for (part, rs), has in zip(rows.items(), dated):
        lines = [head if has else head.rsplit("\t", 1)[0]]
        lines += ["\t".join(map(str, r if has else r[:2])) for r in rs]
        (d / f"x.{part}.inter").write_text("\n".join(lines) + "\n")
    return d


def test_a_folders_split_files_are_read_in_the_order_of_time(tmp_path):
    """Alphabetically (test, train, valid) the official test item, tied in time with the valid one, was not the
    last: leave-last-out held out the valid item and showed the test item in the history."""
    from recharness.data.leave_last_out import leave_last_out

    ds = load_recbole(_split_files(tmp_path / "d"))
    (sp,) = leave_last_out(ds.interactions, min_history=1)
    assert sp.history == ["a", "b", "c"] and sp.target == "d"


def test_split_files_dated_and_undated_are_refused(tmp_path):
    """An undated file beside dated ones: its rows sorted after theirs and became the held-out items, unrefused."""
    from recharness.core.errors import InputError

    with pytest.raises(InputError, match="no timestamps where the other .inter files have them") as e:
        load_recbole(_split_files(tmp_path / "d", dated=(True, True, False)))
    assert e.value.path.endswith("x.test.inter") and e.value.field == "timestamp"

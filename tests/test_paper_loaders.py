"""RecBench's other three datasets in their official layouts (H&M, MicroLens, Goodreads): each loader on a
hand-made fixture (counts, one row checked by hand, timestamp conversion), a broken line of each kind
naming file, line and field, and RecBench CTR end to end (prepare → build → run with the fake model → score)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

import polars as pl
import pytest
from typer.testing import CliRunner

from recharness.baselines import pairs_path
from recharness.cli import app
from recharness.core.errors import ConfigError, InputError
from recharness.core.io import read_jsonl
from recharness.data.goodreads import load_goodreads
from recharness.data.hm import load_hm
from recharness.data.microlens import load_microlens
from recharness.data.prepare import DATASETS, domain_for, prepare_dataset
from recharness.models.fake import FakeBackend
from recharness.runner import pipeline
from tests.loader_faults import FIX, copy_fixture, fails, get_line, set_line


def _utc(*args) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp())


# --- H&M -------------------------------------------------------------------------------------------

C0 = "de3a5cac48ae80d03839654d115552e5e35cc4535e02d983ae6d7d9512c22099"  # transactions_train.csv line 2


def test_hm_reads_the_kaggle_layout():
    ds = load_hm(FIX / "hm")
    inter, items, users = ds.interactions, ds.items, ds.users
    assert (inter.height, items.height, users.height) == (98, 24, 11)  # 11 customers, one never buys
    assert inter["user_id"].n_unique() == 10 and inter["rating"].null_count() == 98
    assert inter.columns == ["user_id", "item_id", "rating", "timestamp", "price", "sales_channel_id"]
    assert items["item_id"].str.len_chars().unique().to_list() == [10]  # 0108775015, leading zero kept
    # transactions_train.csv lines 2-4: C0 bought three pieces on 2018-09-20; they keep their file order
    first = inter.filter(pl.col("user_id") == C0).head(3)
    assert first.select("item_id", "timestamp", "price", "sales_channel_id").rows() == [
        ("0329094008", _utc(2018, 9, 20), 0.076078, 2), ("0372860001", _utc(2018, 9, 20), 0.034751, 2),
        ("0189616006", _utc(2018, 9, 20), 0.010239, 1)]
    # articles.csv line 6: `0118458003,0118458,"Tilda ""Lace"" tank",253,Vest top,…,"Fitted tank top in lace, …"`
    tilda = items.filter(pl.col("item_id") == "0118458003").row(0, named=True)
    assert tilda["title"] == 'Tilda "Lace" tank' and tilda["colour_group_name"] == "Dark Blue"
    assert tilda["detail_desc"] == "Fitted tank top in lace, with a round neckline."
    assert items.filter(pl.col("item_id") == "0179950001").row(0, named=True)["title"] == "Ellie, 2-pack socks"
    assert items.filter(pl.col("item_id") == "0179950001")["detail_desc"][0] is None  # empty in the file
    assert items.filter(pl.col("item_id") == "0176209023")["title"][0] == "Åre beanie"
    # customers.csv line 3: `f9e6…,1.0,1.0,ACTIVE,Regularly,25,d4b0…`; line 2 has FN and Active empty
    u = users.row(1, named=True)
    assert (u["fn"], u["active"], u["club_member_status"], u["fashion_news_frequency"], u["age"]) == (
        True, True, "ACTIVE", "Regularly", 25)
    assert users.row(0, named=True)["fn"] is None and users["age"].null_count() == 1


def test_hm_article_ids_without_their_leading_zero_are_padded(tmp_path):
    d = copy_fixture("hm", tmp_path)
    for name in ("articles.csv", "transactions_train.csv"):
        p = d / name
        p.write_text(p.read_text(encoding="utf-8").replace(",0108775015,", ",108775015,")
                     .replace("\n0108775015,", "\n108775015,"), encoding="utf-8")
    ds = load_hm(d)
    assert "0108775015" in ds.items["item_id"].to_list() and ds.interactions.height == 98


HM_BAD = [
    ("transactions_train.csv", 5, "2018-09-31,{c},0448509014,0.008494,1", "t_dat", "is not a date like 2018-09-20"),
    ("transactions_train.csv", 6, "2018-09-26,{c},0999999001,0.01,1", "article_id",
     "'0999999001' is not in articles.csv"),
    ("transactions_train.csv", 7, "2018-09-26,{c},A448509014,0.01,1", "article_id", "is not an article id"),
    ("transactions_train.csv", 8, "2018-09-26,{c},0448509014,cheap,1", "price", "'cheap' is not a number"),
    ("transactions_train.csv", 9, "2018-09-26,{c}", "article_id", "missing"),
    ("transactions_train.csv", 10, "2018-09-26,ffff,0448509014,0.01,1", "customer_id",
     "'ffff' is not in customers.csv"),
    ("transactions_train.csv", 11, "2018-09-26,{c},0448509014,0.01,1,9", None, "6 fields where 5 were expected"),
    ("articles.csv", 4, "0110065001,0110065,OP T-shirt (Idro),306", "product_type_name", "truncated line: 4 of 25"),
    ("articles.csv", 9, "0108775015" + ",x" * 24, "article_id", "'0108775015' listed twice"),
    ("articles.csv", 12, '0212629031,0212629,"Mama Vanessa cardigan' + ",x" * 23, None, "bad CSV quoting"),
    ("customers.csv", 4, "{c},,,ACTIVE,NONE,forty,x", "age", "'forty' is not a whole number"),
]


@pytest.mark.parametrize("name, line, new, field, what", HM_BAD)
def test_hm_bad_lines_name_file_line_and_field(tmp_path, name, line, new, field, what):
    d = copy_fixture("hm", tmp_path)
    customer = get_line(d / name, line).split(",")[1 if name == "transactions_train.csv" else 0]
    set_line(d / name, line, new.format(c=customer))
    fails(lambda: load_hm(d), file=name, line=line, field=field, says=what)


def test_hm_truncated_download_and_missing_file(tmp_path):
    d = copy_fixture("hm", tmp_path)
    p = d / "transactions_train.csv"
    p.write_bytes(p.read_bytes()[:-30])  # cut inside the last line
    fails(lambda: load_hm(d), file="transactions_train.csv", line=99, field="customer_id", says="ends mid-line")
    (d / "articles.csv").unlink()
    fails(lambda: load_hm(d), file="articles.csv", line=None, field=None, says="file not found")


# --- MicroLens ---------------------------------------------------------------------------------------


def test_microlens_reads_the_official_layout():
    ds = load_microlens(FIX / "microlens")
    inter, items = ds.interactions, ds.items
    assert (inter.height, items.height, ds.users.height) == (90, 24, 12)
    assert inter["rating"].null_count() == 90 and ds.meta["timestamp_unit"] == "seconds (source: milliseconds)"
    # pairs lines 2-5: user 37 watched 8, 19, then 5 and 18 in one second, listed 18 (…737500) before 5 (…737100)
    u = inter.filter(pl.col("user_id") == "37").head(4)
    assert u.select("item_id", "timestamp").rows() == [
        ("8", 1658813852), ("19", 1659057871), ("5", 1659282737), ("18", 1659282737)]
    title = dict(items.iter_rows())
    assert title["3"] == "Hello, world! my first vlog from Hangzhou # vlog"  # only the first comma splits
    assert title["5"] == "西湖的早晨 🌅 # travel # Hangzhou"
    assert title["6"] == 'He said "no way" and then did it anyway # funny'
    assert title["13"] == "piano cover of a summer song # music" and title["20"] is None  # trailing spaces; empty


def test_microlens_50k_layout_with_a_quoted_title_file(tmp_path):
    d = tmp_path / "ml50k"
    d.mkdir()
    (d / "MicroLens-50k_pairs.csv").write_text("user,item,timestamp\n1,2,1658813852305\n1,1,1658813853000\n")
    (d / "MicroLens-50k_titles.csv").write_text('item,title\n1,"Gu long, song # comic"\n2,plain title\n')
    ds = load_microlens(d)
    assert dict(ds.items.iter_rows()) == {"1": "Gu long, song # comic", "2": "plain title"}
    assert ds.interactions["item_id"].to_list() == ["2", "1"]
    # the readme's column names, and times already in seconds
    (d / "MicroLens-50k_pairs.csv").write_text("userID,videoID,timestamp\n1,2,1658813852\n1,3,1658813853\n")
    with pytest.raises(InputError, match="line 3, field 'videoID': video '3' is not in the titles file"):
        load_microlens(d)
    (d / "MicroLens-50k_pairs.csv").write_text("userID,videoID,timestamp\n1,2,1658813852\n")
    ds = load_microlens(d)
    assert ds.interactions["timestamp"].to_list() == [1658813852] and ds.meta["timestamp_unit"] == "seconds"


MICROLENS_BAD = [
    ("MicroLens-100k_pairs.csv", 3, "37,19,yesterday", "timestamp", "'yesterday' is not a whole number"),
    ("MicroLens-100k_pairs.csv", 4, "37,99,1659282737500", "item", "video '99' is not in the titles file"),
    ("MicroLens-100k_pairs.csv", 5, "37,5", "timestamp", "missing"),
    ("MicroLens-100k_pairs.csv", 6, "u37,12,1659478436189", "user", "'u37' is not an id"),
    ("MicroLens-100k_title_en.csv", 7, "7 mobile game boss fight", "title", "no comma"),
    ("MicroLens-100k_title_en.csv", 9, "2, a second title for video 2", "item", "video '2' listed twice"),
    ("MicroLens-100k_title_en.csv", 9, "002, video 2 written with zeros", "item",
     "video '002' listed twice (ids are whole numbers: '002' is video '2')"),
    # digits of other scripts are no id upstream (polars' \d takes them; the loader must not)
    ("MicroLens-100k_title_en.csv", 9, "\u0663, Arabic-Indic three", "item", "'\u0663' is not a video id"),
    ("MicroLens-100k_pairs.csv", 6, "\uff13\uff17,12,1659478436189", "user", "'\uff13\uff17' is not an id"),
    # an id the titles file lacks is named as the line writes it
    ("MicroLens-100k_pairs.csv", 4, "37,0099,1659282737500", "item",
     "video '0099' is not in the titles file (ids are whole numbers: '0099' is video '99')"),
]


def test_microlens_ids_are_whole_numbers_as_upstream_reads_them(tmp_path):
    """RecBench reads the ids as integers (pandas): "01" and "1" are one video, "007" and "7" one user."""
    d = tmp_path / "ml50k"
    d.mkdir()
    (d / "MicroLens-50k_titles.csv").write_text("item,title\n01,first\n2,second\n0,zero\n")
    (d / "MicroLens-50k_pairs.csv").write_text(
        "user,item,timestamp\n7,1,1658813852000\n007,002,1658813853000\n8,00,1658813854000\n")
    ds = load_microlens(d)
    assert dict(ds.items.iter_rows()) == {"1": "first", "2": "second", "0": "zero"}
    assert ds.interactions.select("user_id", "item_id").rows() == [("7", "1"), ("7", "2"), ("8", "0")]
    assert ds.users["user_id"].to_list() == ["7", "8"]


@pytest.mark.parametrize("name, line, new, field, what", MICROLENS_BAD)
def test_microlens_bad_lines_name_file_line_and_field(tmp_path, name, line, new, field, what):
    d = copy_fixture("microlens", tmp_path)
    set_line(d / name, line, new)
    fails(lambda: load_microlens(d), file=name, line=line, field=field, says=what)


# --- Goodreads ---------------------------------------------------------------------------------------

GR_USER = "644a35e162b3ea1dda39816386a245bb"  # goodreads_interactions_poetry.json.gz lines 1-7


def test_goodreads_reads_the_book_graph_layout():
    ds = load_goodreads(FIX / "goodreads")
    inter, items = ds.interactions, ds.items
    assert (inter.height, items.height, ds.users.height) == (105, 26, 12)
    assert inter["label"].sum() == 68 and inter["rating"].null_count() == 43  # 37 unread + 6 read, not rated
    assert inter.filter(pl.col("label") == 0)["rating"].null_count() == 37  # unread books are never rated
    assert set(inter["rating"].drop_nulls().unique().to_list()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    # line 3: {"book_id": "30119", "is_read": true, "rating": 4, "date_added": "Wed Jan 18 09:37:29 -0800 2017"}
    # (the file lists a shelf newest first; the loader sorts by time)
    row = inter.filter((pl.col("user_id") == GR_USER) & (pl.col("item_id") == "30119")).row(0, named=True)
    assert (row["rating"], row["label"], row["timestamp"]) == (4.0, 1, _utc(2017, 1, 18, 17, 37, 29))
    u = inter.filter(pl.col("user_id") == GR_USER)
    assert u["timestamp"].is_sorted() and u.height == 7
    book = items.filter(pl.col("item_id") == "22549").row(0, named=True)
    assert book == {"item_id": "22549", "title": "Twenty Love Poems and a Song of Despair",
                    "author_ids": ["4026", "21311"], "work_id": "157846", "publication_year": 2006, "num_pages": 80,
                    "publisher": "Penguin Classics", "language_code": "eng", "format": "Paperback",
                    "description": "A collection of poems: Twenty Love Poems and a Song of Despair."}
    title = dict(items.select("item_id", "title").iter_rows())
    assert title["1381433"] == "Poèmes saturniens" and title["100934"] == "Selected Poems, 1923-1958"
    assert title["15808"].startswith('"Hope" Is the Thing with Feathers')


def test_goodreads_dst_offsets_are_applied():
    """-0700 (summer) and -0800 (winter) dates both land on the true UTC instant."""
    inter = load_goodreads(FIX / "goodreads").interactions
    raw = [json.loads(x) for x in gzip.decompress((FIX / "goodreads" / "goodreads_interactions_poetry.json.gz")
                                                  .read_bytes()).decode().splitlines()]
    summer = next(r for r in raw if "-0700" in r["date_added"])
    want = int(datetime.strptime(summer["date_added"], "%a %b %d %H:%M:%S %z %Y").timestamp())
    got = inter.filter((pl.col("user_id") == summer["user_id"]) & (pl.col("item_id") == summer["book_id"]))
    assert got["timestamp"].to_list() == [want]


def test_goodreads_takes_the_two_files_or_complains(tmp_path):
    d = FIX / "goodreads"
    ds = load_goodreads([d / "goodreads_books_poetry.json.gz", d / "goodreads_interactions_poetry.json.gz"])
    assert ds.interactions.height == 105
    with pytest.raises(ConfigError, match="needs goodreads_books_poetry.json.gz"):
        load_goodreads([d / "goodreads_interactions_poetry.json.gz"])
    plain = tmp_path / "plain"
    plain.mkdir()
    for f in d.iterdir():  # uncompressed copies read the same
        (plain / f.name.removesuffix(".gz")).write_bytes(gzip.decompress(f.read_bytes()))
    assert load_goodreads(plain).interactions.equals(ds.interactions)


GR_I = "goodreads_interactions_poetry.json.gz"
GR_B = "goodreads_books_poetry.json.gz"
GOODREADS_BAD = [
    (GR_I, 2, {"rating": 7}, "rating", "rating 7 is not 0 (not rated) to 5"),
    (GR_I, 3, {"rating": "4"}, "rating", "rating '4' is not a whole number"),
    (GR_I, 4, {"is_read": "yes"}, "is_read", "is_read 'yes' is not true or false"),
    (GR_I, 5, {"date_added": "2017-01-18 09:37:29"}, "date_added", "is not a date like 'Tue Oct 17"),
    (GR_I, 6, {"user_id": ""}, "user_id", "missing 'user_id'"),
    (GR_I, 7, {"book_id": "999"}, "book_id", "book '999' is not in goodreads_books_poetry.json.gz"),
    (GR_I, 8, None, None, "not valid JSON"),
    (GR_B, 3, {"publication_year": "MMIII"}, "publication_year", "'MMIII' is not a whole number"),
    (GR_B, 4, {"book_id": "30119"}, "book_id", "book '30119' listed twice"),
    (GR_B, 5, {"authors": "Sylvia Plath"}, "authors", "'authors' must be a list"),
]


@pytest.mark.parametrize("name, line, change, field, what", GOODREADS_BAD)
def test_goodreads_bad_lines_name_file_line_and_field(tmp_path, name, line, change, field, what):
    d = copy_fixture("goodreads", tmp_path)
    obj = json.loads(get_line(d / name, line))
    set_line(d / name, line, '{"user_id": "cut off' if change is None else json.dumps({**obj, **change}))
    fails(lambda: load_goodreads(d), file=name, line=line, field=field, says=what)


def test_goodreads_truncated_gzip(tmp_path):
    d = copy_fixture("goodreads", tmp_path)
    p = d / GR_I
    p.write_bytes(p.read_bytes()[:-200])
    with pytest.raises(InputError, match=f"{GR_I}.*truncated or corrupt gzip"):
        load_goodreads(d)


# --- registry and RecBench CTR end to end ------------------------------------------------------------


def test_registered_with_their_domains():
    assert {"hm", "microlens", "goodreads"} <= set(DATASETS)
    assert (domain_for("hm"), domain_for("microlens"), domain_for("goodreads")) == ("fashion", "video", "book")
    for name in ("hm", "microlens", "goodreads"):
        with pytest.raises(ConfigError, match=f"`prepare {name}` needs"):
            prepare_dataset(name, progress=False)


@pytest.mark.parametrize("name, negatives", [("hm", "sampled"), ("microlens", "sampled"), ("goodreads", "labels")])
def test_prepare_build_run_score(tmp_path, monkeypatch, name, negatives):
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    target = prepare_dataset(name, [FIX / name], progress=False)
    assert target.is_relative_to(tmp_path / "home")
    out = tmp_path / "run"
    opts = {"test_pairs_per_user": 2, "train_pairs": 1000}
    info = pipeline.build("recbench", name, out, tasks=["ctr"], seed=0, options=opts)
    samples = list(read_jsonl(out / "samples.jsonl"))
    split = json.loads(pairs_path(out, "recbench", "split").with_suffix(".json").read_text())
    assert split["negatives"] == negatives and info["counts"]["ctr"] == len(samples) > 0
    assert {s["label"] for s in samples} == {0, 1} and all(s["history"] for s in samples)
    assert not any("None" in m["content"] for s in samples for m in s["messages"])  # untitled items show their id
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    res = CliRunner().invoke(app, ["score", "recbench", "-d", name, "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "scores.json").read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    fake = [r for r in rows if r["method"] == "fake"]
    assert len(fake) == 1 and fake[0]["n"] == len(samples) and "AUC" in fake[0]["metrics"]


def test_two_pieces_of_one_article_on_one_day_are_one_purchase_when_loaded(tmp_path, monkeypatch):
    """H&M lists each piece: a customer's last row repeated the same day was the held-out target and a history
    (and training) item at once. Loaded, a repeated (user, item, time) row is kept once, and said so."""
    from recharness.baselines.base import training_rows
    from recharness.data.leave_last_out import leave_last_out
    from recharness.data.store import load_dataset

    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    d = copy_fixture("hm", tmp_path)
    tx = d / "transactions_train.csv"
    last = tx.read_text().splitlines()[-1]
    tx.write_text(tx.read_text() + last + "\n")  # a second piece of the customer's last article, same day
    raw = load_hm(d).interactions
    assert raw.height == 99  # the loader keeps the file's rows
    prepare_dataset("hm", [d], progress=False)
    ds = load_dataset("hm")
    assert ds.interactions.height == 98 and ds.meta["repeated_rows_merged"] == 1
    user, item = last.split(",")[1], last.split(",")[2]
    (split,) = leave_last_out(ds.interactions, min_history=1, users=[user])
    mine = raw.filter(pl.col("user_id") == user)
    before = mine.filter((pl.col("item_id") == item) & (pl.col("timestamp") < mine["timestamp"].max())).height
    assert split.target == item and len(split.history) == mine.height - 2
    assert split.history.count(item) == before  # an earlier day's purchase of it, not the same day's copy
    assert training_rows(ds.interactions).filter(pl.col("user_id") == user)["item_id"].to_list().count(item) == before

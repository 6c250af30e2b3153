"""Issue 8 §4: bad input gets one clear line naming the file, line and field
(or the option), never a traceback and never silence; good input still loads.

Files are cut from the real ones in ../shared/data (and the prepared ML-1M).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from recharness.core.errors import ConfigError, InputError
from recharness.data.llmrank import load_llmrank
from recharness.data.movielens import load_ml100k_files, load_movielens_dat
from recharness.data.recbole import load_recbole
from recharness.tasks.options import known_options, option_keys, suite_models, validate_options

FIX = Path(__file__).parent / "fixtures"


def raises(fn, *, file: str, line: int | None, field: str | None, says: str) -> InputError:
    """The error names exactly this file, line and field, in its one-line message too."""
    with pytest.raises(InputError) as info:
        fn()
    err = info.value
    assert Path(err.path).name == file, err
    assert (err.line, err.field) == (line, field), err
    text = str(err)
    assert "\n" not in text and file in text and says in err.message, text
    if line is not None:
        assert f"line {line}" in text
    if field is not None:
        assert f"field {field!r}" in text
    return err


# --- 1, 2: ratings files cut mid-line, or empty ------------------------------------------------


@pytest.fixture
def ml1m_dat(ml1m, shared, tmp_path) -> Path:
    """ratings.dat with ML-1M's first 300 ratings, and the real movies.dat and users.dat."""
    d = tmp_path / "ml1m-dat"
    d.mkdir()
    for name in ("movies.dat", "users.dat"):
        shutil.copy(shared("data", "recbench_plus", "movie", name), d / name)
    rows = ml1m.interactions.head(300).iter_rows(named=True)
    (d / "ratings.dat").write_text("".join(f"{r['user_id']}::{r['item_id']}::{r['rating']:g}::{r['timestamp']}\n" for r in rows))
    return d


def test_ratings_dat_cut_mid_line(ml1m_dat):
    good = load_movielens_dat(ml1m_dat)
    assert good.interactions.height == 300
    data = (ml1m_dat / "ratings.dat").read_bytes()
    (ml1m_dat / "ratings.dat").write_bytes(data[:-7])  # "…::978300760\n" -> "…::978": still a number
    err = raises(lambda: load_movielens_dat(ml1m_dat), file="ratings.dat", line=300, field="timestamp", says="mid-line")
    assert "truncated" in err.message


def test_ratings_cut_mid_line_other_loaders(tmp_path):
    d = shutil.copytree(FIX / "data" / "ml100k", tmp_path / "ml100k")
    assert load_ml100k_files(d).interactions.height == 4
    (d / "u.data").write_bytes((d / "u.data").read_bytes()[:-4])
    raises(lambda: load_ml100k_files(d), file="u.data", line=4, field="timestamp", says="mid-line")

    r = shutil.copytree(FIX / "data" / "recbole", tmp_path / "recbole")
    load_recbole(r)
    (r / "tiny.inter").write_bytes((r / "tiny.inter").read_bytes().rstrip(b"\n")[:-3])
    raises(lambda: load_recbole(r), file="tiny.inter", line=4, field="timestamp", says="mid-line")


def test_empty_ratings_files(ml1m_dat, tmp_path):
    (ml1m_dat / "ratings.dat").write_bytes(b"")
    raises(lambda: load_movielens_dat(ml1m_dat), file="ratings.dat", line=None, field=None, says="empty")
    (ml1m_dat / "ratings.dat").write_bytes(b"\n\n")
    raises(lambda: load_movielens_dat(ml1m_dat), file="ratings.dat", line=None, field=None, says="empty")
    r = shutil.copytree(FIX / "data" / "recbole", tmp_path / "recbole")
    header = (r / "tiny.inter").read_text().splitlines()[0]
    (r / "tiny.inter").write_text(header + "\n")
    raises(lambda: load_recbole(r), file="tiny.inter", line=None, field=None, says="no data rows")
    (r / "tiny.inter").write_bytes(b"")
    raises(lambda: load_recbole(r), file="tiny.inter", line=None, field=None, says="empty")

    from recharness.data.amazon2023 import load_amazon2023

    a = shutil.copytree(FIX / "data" / "amazon2023", tmp_path / "amazon")
    assert load_amazon2023(a).interactions.height > 0
    (a / "Tiny_Cat.jsonl").write_bytes(b"\n")
    raises(lambda: load_amazon2023(a), file="Tiny_Cat.jsonl", line=None, field=None, says="no reviews")


# --- 3: an LLMRank candidate file cut short ------------------------------------------------------


@pytest.fixture
def games(shared, tmp_path) -> Path:
    """The real LLMRank Amazon Games test split with two of its retrievers."""
    src = shared("data", "amazon_games")
    d = tmp_path / "games"
    d.mkdir()
    for name in ("Games-6k.test.inter", "Games.item", "Games.bm25", "Games.random"):
        (d / name).symlink_to(src / name)
    return d


def _replace(d: Path, name: str, data: bytes) -> None:
    (d / name).unlink()
    (d / name).write_bytes(data)


def test_llmrank_candidates_cut_in_half(games):
    good = load_llmrank(games)
    assert {r: s["users"] for r, s in good.meta["retrievers"].items()} == {"bm25": 200, "random": 200}
    data = (games / "Games.random").read_bytes()
    half = data[: len(data) // 2]
    _replace(games, "Games.random", half)
    line = half.count(b"\n") + 1
    raises(lambda: load_llmrank(games), file="Games.random", line=line, field="item_ids", says="truncated")


def test_llmrank_candidates_cut_at_a_line_end(games):
    lines = (games / "Games.random").read_bytes().splitlines(keepends=True)
    _replace(games, "Games.random", b"".join(lines[:101]))
    err = raises(lambda: load_llmrank(games), file="Games.random", line=101, field=None, says="truncated")
    assert "101 of the 200 users in Games.bm25" in err.message


def test_llmrank_candidate_line_short(games):
    lines = (games / "Games.bm25").read_bytes().splitlines(keepends=True)
    user, ids = lines[40].split(b"\t")
    lines[40] = user + b"\t" + b" ".join(ids.split()[:99]) + b"\n"
    _replace(games, "Games.bm25", b"".join(lines))
    err = raises(lambda: load_llmrank(games), file="Games.bm25", line=41, field="item_ids", says="99 candidate ids")
    assert "100" in err.message


# --- 4, 5: official RecBench+ files -------------------------------------------------------------


@pytest.fixture
def user_queries(shared) -> bytes:
    return shared("data", "recbench_plus", "movie", "UserBasedQuery.json").read_bytes()


def test_official_file_not_utf8(user_queries, tmp_path):
    from recharness.tasks.recbench_plus.official import read_records

    path = tmp_path / "UserBasedQuery.json"
    path.write_bytes(user_queries)
    assert len(read_records(path, "demographics")) == 59
    at = user_queries.index(b"Stand by Me (1986)\",")  # a ground-truth title, inside entry 0
    path.write_bytes(user_queries[:at] + "Caf\xe9 ".encode("latin-1") + user_queries[at:])
    line = user_queries.count(b"\n", 0, at) + 1
    err = raises(lambda: read_records(path, "demographics"), file="UserBasedQuery.json", line=line, field=None,
                 says="not valid UTF-8")
    assert f"offset {at + 3}" in err.message and "0xe9" in err.message


def test_official_top_movies_not_a_list(user_queries, tmp_path):
    from recharness.tasks.recbench_plus.official import read_records

    data = json.loads(user_queries)
    data[3]["top_10_movies"] = "oops"
    path = tmp_path / "UserBasedQuery.json"
    path.write_text(json.dumps(data, indent=4))
    err = raises(lambda: read_records(path, "demographics"), file="UserBasedQuery.json", line=None,
                 field="top_10_movies", says="entry 3")
    assert "'oops'" in err.message
    data[3]["top_10_movies"] = [[1259, "high"]]
    path.write_text(json.dumps(data))
    raises(lambda: read_records(path, "demographics"), file="UserBasedQuery.json", line=None, field="top_10_movies",
           says="entry 3")


# --- 6: a PerRecBench label file ----------------------------------------------------------------


def test_perrecbench_label_timestamp_not_a_number(tmp_path):
    from recharness.tasks.perrecbench.original import read_labels

    data = json.loads((FIX / "perrecbench" / "ml1m-labels" / "item2group_avg_diff_sample-easy.json").read_text())
    data["571"][0][0]["timestamp"] = 978300760
    data["571"][0][1]["timestamp"] = "yesterday"
    path = tmp_path / "item2group_avg_diff_sample-easy.json"
    text = json.dumps(data, indent=1)
    path.write_text(text)
    line = text[: text.index('"yesterday"')].count("\n") + 1
    assert line > 1
    err = raises(lambda: read_labels(path), file=path.name, line=line, field="571[0][1].timestamp", says="whole number")
    assert "'yesterday'" in err.message
    data["571"][0][1]["timestamp"] = 978300761
    path.write_text(json.dumps(data, indent=1))
    groups = read_labels(path)
    assert [m.timestamp for m in groups[0].members] == [978300760, 978300761]
    assert [m.timestamp for m in groups[1].members] == [0, 0]  # absent: 0, as before


# --- 7: options ---------------------------------------------------------------------------------


def test_option_out_of_range_names_option_and_task():
    with pytest.raises(ConfigError) as info:
        validate_options("llmrec", ["sequential", "direct"], {"history_len": -3})
    assert str(info.value) == "--option history_len=-3: must be >= 1 (llmrec/sequential)"
    with pytest.raises(ConfigError, match=r"^--option n_candidates=1: must be >= 2 \(llmrec/direct\)$"):
        validate_options("llmrec", ["sequential", "direct"], {"n_candidates": 1})
    with pytest.raises(ConfigError, match=r"^--option groups=many: expected an integer \(perrecbench\)$"):
        validate_options("perrecbench", ["point", "list"], {"groups": "many"})
    with pytest.raises(ConfigError, match=r"^--option max_gt: must be >= min_gt \(12\) \(recbench-plus\)$"):
        validate_options("recbench-plus", ["explicit", "implicit"], {"min_gt": 12})


def test_unknown_option_lists_known_keys():
    with pytest.raises(ConfigError) as info:
        validate_options("llmrec", ["sequential", "direct"], {"histroy_len": 20})
    msg = str(info.value)
    assert msg.startswith("unknown --option 'histroy_len' for llmrec (tasks: sequential, direct)"), msg
    assert "did you mean 'history_len'" in msg
    known = msg.split("known: ")[1].split(", ")
    assert {"history_len", "n_candidates", "n_recs", "retriever", "max_tokens"} <= set(known)
    assert "max_words" not in known  # explanation/summarization are not being built
    with pytest.raises(ConfigError, match="unknown --option 'max_words' for llmrec"):
        validate_options("llmrec", ["sequential"], {"max_words": 5})
    with pytest.raises(ConfigError, match="unknown --option 'gama' for perrecbench"):
        validate_options("perrecbench", None, {"gama": 3})


def test_valid_options_come_back_coerced_and_only_as_given():
    assert validate_options("llmrec", ["sequential", "direct"], {}) == {}
    got = validate_options("llmrec", ["direct"], {"history_len": "20", "retriever": "bm25", "behaviour": "false"})
    assert got == {"history_len": 20, "retriever": "bm25", "behaviour": False}
    assert validate_options("llmrec", ["summarization"], {"max_words": 12.0}) == {"max_words": 12}
    assert validate_options("perrecbench", ["list"], {"lambda": 1, "compat": "none"}) == {"lambda": 1.0, "compat": None}
    opts = {"k": "none", "demographics_file": "/x/UserBasedQuery.json", "history": "WITH"}
    assert validate_options("recbench-plus", ["demographics"], opts) == {
        "k": None, "demographics_file": "/x/UserBasedQuery.json", "history": "with"}
    with pytest.raises(ConfigError, match="no separate format_indicator part"):
        validate_options("perrecbench", None, {"format_indicator": False})  # --no-format: not silently ignored
    with pytest.raises(ConfigError, match="unknown suite"):
        validate_options("nope", None, {})


def test_llmrec_models_cover_the_keys_the_tasks_read():
    """A key a task reads but its model lacks would be rejected; one the model has but no task reads is dead."""
    import recharness.tasks.llmrec as pkg

    src = Path(pkg.__file__).parent
    # the keys each function of common.py reads: a task reads those of the functions it imports from there
    # (rating's `why_empty` reads split/cut only when a split is given, which rating never has)
    common_src = (src / "common.py").read_text()
    by_fn = {m.group(1): set(re.findall(r'opts\.get\("(\w+)"', m.group(2)))
             for m in re.finditer(r"^def (\w+)\((.*?)(?=^def |\Z)", common_src, re.M | re.S)}
    for task, model in suite_models("llmrec").items():
        text = (src / f"{task}.py").read_text()
        imported = set(re.findall(r"\b(\w+)\b", " ".join(re.findall(
            r"from recharness\.tasks\.llmrec\.common import \(?([^)]*?)\)?\n(?!\s)", text, re.S))))
        reads = set(re.findall(r'opts\.get\("(\w+)"', text)) | {k for fn in imported if fn != "why_empty"
                                                                 for k in by_fn.get(fn, ())}
        assert reads == set(option_keys(model)), task
    helps = known_options("llmrec", "direct")
    assert helps["n_candidates"].endswith("(default: 20)") and helps["retriever"].endswith("(default: none)")
    assert "(default: 4)" in known_options("perrecbench", "list")["k"]
    assert "format_indicator" not in known_options("perrecbench", "list")

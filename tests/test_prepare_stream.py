"""`prepare amazon2023` streaming (bounded memory): the same dataset as the in-memory loader, the same errors."""

from __future__ import annotations

import json

import polars as pl
import pytest

import recharness.data.amazon2023 as amazon
from recharness.core.errors import InputError


@pytest.fixture
def tiny_spills(monkeypatch):
    """Force many spill files and re-splits, and many blocks, on small inputs."""
    monkeypatch.setattr(amazon, "BUCKET_ROWS", 3)
    monkeypatch.setattr(amazon, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(amazon, "PY_CHUNK", 7)


def test_streaming_equals_in_memory_on_the_sample(shared, tiny_spills):
    src = shared("data", "amazon2023_sample")
    a = amazon.load_amazon2023(src, streaming=False)
    b = amazon.load_amazon2023(src, streaming=True)
    try:
        inter = b.interactions.collect()
        assert b.interactions.height == inter.height == a.interactions.height
        assert a.interactions.equals(inter) and a.interactions.schema == inter.schema
        assert a.users.equals(b.users) and a.items.equals(b.items)
        assert {k: v for k, v in b.meta.items() if k != "prepared_streaming"} == a.meta
    finally:
        b.interactions.cleanup()


def _review(i, **kw):
    r = {"rating": 4.0, "title": "t", "text": "" if i % 3 == 0 else f"text {i}", "images": [], "asin": f"V{i}",
         "parent_asin": f"P{i % 5}", "user_id": f"U{i % 4}", "timestamp": 1_600_000_000_000 + (i % 7) * 1000,
         "helpful_vote": 0, "verified_purchase": True}
    r.update(kw)
    return json.dumps(r)


def test_odd_lines_take_the_exact_path_and_still_match(tmp_path, tiny_spills):
    lines = [_review(i) for i in range(40)]
    lines[17] = _review(17, user_id=12345)  # a number where a string belongs: accepted, as "12345"
    lines[23] = ""  # a blank line
    lines[30] = _review(30, timestamp=1_600_000_000_000.0)  # a whole number written as a float
    (tmp_path / "Cat.jsonl").write_text("\n".join(lines) + "\n")
    a = amazon.load_amazon2023(tmp_path, streaming=False)
    b = amazon.load_amazon2023(tmp_path, streaming=True)
    try:
        assert a.interactions.equals(b.interactions.collect()) and a.users.equals(b.users)
        assert a.items.equals(b.items)
    finally:
        b.interactions.cleanup()


@pytest.mark.parametrize("bad, field", [({"rating": "five"}, "rating"), ({"parent_asin": None}, "parent_asin"),
                                        ({"timestamp": 1.5}, "timestamp")])
def test_bad_lines_are_named_as_in_memory(tmp_path, tiny_spills, bad, field):
    lines = [_review(i) for i in range(30)]
    lines[20] = _review(20, **bad)
    (tmp_path / "Cat.jsonl").write_text("\n".join(lines) + "\n")
    errs = []
    for streaming in (False, True):
        with pytest.raises(InputError) as e:
            amazon.load_amazon2023(tmp_path, streaming=streaming)
        errs.append(str(e.value))
    assert errs[0] == errs[1] and "line 21" in errs[0] and field in errs[0]
    assert not list(tmp_path.glob("recharness-amazon-spill-*"))


def test_prepare_streams_and_leaves_no_spill(tmp_path, monkeypatch, tiny_spills):
    from recharness.data.prepare import prepare_dataset
    from recharness.data.store import load_dataset

    monkeypatch.setattr(amazon, "STREAM_BYTES", 0)  # stream even this small file
    monkeypatch.setenv("RECHARNESS_HOME", str(tmp_path / "home"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Cat.jsonl").write_text("\n".join(_review(i) for i in range(50)) + "\n")
    target = prepare_dataset("amazon2023", [tmp_path / "src"], out=tmp_path / "home" / "datasets" / "amz",
                             progress=False)
    ds = load_dataset(target)
    assert ds.meta["prepared_streaming"] and ds.interactions.height == 50
    ref = amazon.load_amazon2023(tmp_path / "src", streaming=False)
    assert ds.interactions.equals(ref.interactions) and ds.users.equals(ref.users)
    leftovers = [p.name for p in (tmp_path / "home").iterdir() if p.name.startswith("recharness-amazon-spill-")]
    assert not leftovers and isinstance(ds.interactions, pl.DataFrame)


def test_reviews_of_one_second_keep_their_millisecond_order(tmp_path, tiny_spills):
    """Two reviews of one user in the same second, the later one (ms 900) written first: the held-out last
    review is the later one, in memory and streamed (the file's order decided it when ms were cut first)."""
    base = 1_600_000_000_000
    lines = [_review(i, user_id="U9", timestamp=base - 86_400_000 * (i + 1)) for i in range(5)]
    lines += [_review(90, user_id="U9", parent_asin="LATE", timestamp=base + 900),
              _review(91, user_id="U9", parent_asin="EARLY", timestamp=base + 100)]
    (tmp_path / "Cat.jsonl").write_text("\n".join(lines) + "\n")
    a = amazon.load_amazon2023(tmp_path, streaming=False)
    b = amazon.load_amazon2023(tmp_path, streaming=True)
    try:
        items = a.interactions.filter(pl.col("user_id") == "U9")["item_id"].to_list()
        assert items[-2:] == ["EARLY", "LATE"] and a.interactions["timestamp"].max() == base // 1000
        assert a.interactions.equals(b.interactions.collect())
    finally:
        b.interactions.cleanup()


@pytest.mark.parametrize("bad, what", [({"timestamp": None}, "missing 'timestamp'"), ({"rating": 7.0}, "from 1 to 5"),
                                       ({"rating": 0}, "from 1 to 5")])
@pytest.mark.parametrize("streaming", [False, True])
def test_an_undated_or_off_scale_review_is_an_error_naming_its_line(tmp_path, tiny_spills, bad, what, streaming):
    lines = [_review(i) for i in range(20)]
    lines[12] = _review(12, **bad)
    (tmp_path / "Cat.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=what) as e:
        amazon.load_amazon2023(tmp_path, streaming=streaming)
    assert e.value.line == 13


def test_non_finite_numbers_are_errors_not_tracebacks(tmp_path):
    (tmp_path / "Cat.jsonl").write_text(_review(0) + "\n" + _review(1).replace('"rating": 4.0', '"rating": NaN') + "\n")
    with pytest.raises(InputError, match="rating"):
        amazon.load_amazon2023(tmp_path, streaming=False)
    (tmp_path / "Cat.jsonl").write_text(_review(0) + "\n" + _review(1).replace('"timestamp": 1600000001000',
                                                                               '"timestamp": Infinity') + "\n")
    with pytest.raises(InputError, match="timestamp"):
        amazon.load_amazon2023(tmp_path, streaming=False)

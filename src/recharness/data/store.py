"""The canonical dataset: three Parquet tables every suite reads.

Schema (ids are always strings, so every source maps onto one type):
- interactions: user_id Utf8, item_id Utf8, rating Float64 (null if implicit),
  timestamp Int64 (Unix seconds, null if unknown); may carry extra columns
  (e.g. review_title, review_text for Amazon data).
- items: item_id Utf8, title Utf8, then attribute columns. Multi-valued
  attributes are List(Utf8) (genres, directors, cast, languages); scalars
  otherwise (year Int64, certificate Utf8, ...).
- users: user_id Utf8 and demographics where known (gender, age, occupation, zip).
- extras: optional named tables a source ships beside these (e.g. `candidates`:
  user_id Utf8, retriever Utf8, item_ids List(Utf8), for LLMRank candidate lists).

A source with real labels (MIND impressions: shown and not clicked; Goodreads: shelved and not read)
stores them in an interactions `label` column (1 / 0). Loaded, `Dataset.interactions` holds the label-1
rows only, since every suite but CTR reads it as what users chose (histories, held-out targets,
popularity, training rows), and `Dataset.labelled` the whole table, for the tasks that use the negatives.
A row repeating a (user, item, time) is read once (`one_row_per_event`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError
from recharness.core.paths import dataset_dir, datasets_dir, is_plain_name

TABLES = ("interactions", "items", "users")
#: folders inside a prepared dataset that a new version of it keeps: item embeddings and semantic IDs,
#: each file named by a hash of the texts / vectors it was made from
KEPT_CACHES = ("embeddings",)

#: The domains a dataset name can reveal; meta.json may name any other.
DOMAINS = ("movie", "game", "book", "product")


def domain_from_name(name: str) -> str:
    """What the items are, guessed from a dataset name when its meta.json does not say:
    MovieLens (``ml-*``) or a name with "movie" -> movie, then "game" -> game, "book" -> book,
    anything else -> product. The one place this is decided (suites only word it)."""
    n = name.lower()
    if n.startswith("ml-") or "movie" in n:
        return "movie"
    if "game" in n:
        return "game"
    if "book" in n:
        return "book"
    return "product"


def dataset_domain(name: str, meta: dict | None = None) -> str:
    """`Dataset.domain` from a name and a meta dict (for callers that hold only those)."""
    d = (meta or {}).get("domain")
    return str(d) if d else domain_from_name(name)


@dataclass
class Dataset:
    name: str
    interactions: pl.DataFrame
    items: pl.DataFrame
    users: pl.DataFrame
    meta: dict = field(default_factory=dict)
    extras: dict[str, pl.DataFrame] = field(default_factory=dict)
    #: every interaction with its `label` (0 = shown, not chosen) when the source has real labels, else None;
    #: `interactions` then holds the label-1 rows (`positives_only`)
    labelled: pl.DataFrame | None = None

    def positives_only(self) -> "Dataset":
        """This dataset with `interactions` the label-1 rows and `labelled` all of them (no label: itself)."""
        if self.labelled is not None or "label" not in self.interactions.columns:
            return self
        return replace(self, interactions=self.interactions.filter(pl.col("label") == 1), labelled=self.interactions)

    def one_row_per_event(self) -> "Dataset":
        """`interactions` with rows repeating a (user, item, time) once (H&M: one row per piece bought, two pieces
        of one article on one day are one purchase): a user's last row and an earlier copy of it would otherwise
        be the held-out target and a history / training item at once. Rows without a time are kept as they are;
        `labelled` (CTR's pairs label each (user, item) once already) is untouched."""
        i = self.interactions
        dated = i["timestamp"].is_not_null()
        repeat = dated & ~i.select(pl.struct("user_id", "item_id", "timestamp").is_first_distinct()).to_series()
        if not repeat.any():
            return self
        return replace(self, interactions=i.filter(~repeat), meta={**self.meta, "repeated_rows_merged": int(repeat.sum())})

    def events(self) -> pl.DataFrame:
        """Every interaction, labelled ones with their negatives (`labelled`), else `interactions`."""
        return self.labelled if self.labelled is not None else self.interactions

    def table(self, name: str) -> pl.DataFrame:
        """A stored table as the source gave it (interactions with their label-0 rows)."""
        return self.events() if name == "interactions" else getattr(self, name)

    @property
    def domain(self) -> str:
        """What the items are ("movie", "product", ...): meta.json's `domain` when it is set
        (`prepare` stores it), else guessed from the name (`domain_from_name`). Suites turn it
        into their own wording ("movies", "watched", "film") and never decide it themselves."""
        return dataset_domain(self.name, self.meta)

    def validate(self) -> None:
        """Fail early if a loader broke the schema the suites rely on: a ConfigError (the CLI's one-line message,
        not a traceback) naming the table and column."""
        for table, cols in (
            ("interactions", {"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64}),
            ("items", {"item_id": pl.Utf8, "title": pl.Utf8}),
            ("users", {"user_id": pl.Utf8}),
        ):
            df = getattr(self, table)
            for col, dtype in cols.items():
                if col not in df.columns:
                    raise ConfigError(f"{self.name}.{table}: missing column {col!r}")
                if df.schema[col] != dtype:
                    raise ConfigError(f"{self.name}.{table}.{col}: dtype {df.schema[col]} != {dtype}")
        for table, col in (("items", "item_id"), ("users", "user_id")):  # one row each: the last would win silently
            df = getattr(self, table)
            if df.height and df[col].n_unique() != df.height:
                twice = df.filter(df[col].is_duplicated())[col].unique().sort().head(3).to_list()
                raise ConfigError(f"{self.name}.{table}: {col} {', '.join(repr(x) for x in twice)} on more than one "
                                  "row (one row per id): fix the source, or prepare it again")

    def items_by_id(self) -> dict[str, dict]:
        return {row["item_id"]: row for row in self.items.iter_rows(named=True)}


# --- writing: temp dir, fsync, swap ----------------------------------------------------------------
#
# A prepared dataset is a directory that is never modified once it is published under its final
# name. A new version is written into `.recharness-tmp-<name>-XXXX` beside it, fsynced, then swapped
# in. On Linux the swap is one renameat2(RENAME_EXCHANGE), so the final name always points at a
# complete version; elsewhere it is two renames through `.recharness-old-<name>`, and a reader that
# finds the final dir missing reads the `.old` one. Whatever a killed prepare leaves behind carries
# the prefix, and the next prepare (holding a lock on the parent folder) removes it, restoring a
# `.old` whose final dir is missing.

TMP_PREFIX = ".recharness-tmp-"
OLD_PREFIX = ".recharness-old-"
# What the writer before this scheme left: `.<name>-XXXXXXXX` temp dirs and `<name>.old` dirs.
_LEGACY_TMP = re.compile(r"^\..+-[a-z0-9_]{8}$")


def old_path(target: Path) -> Path:
    """Where the previous version waits while the two-rename swap is under way."""
    return target.with_name(OLD_PREFIX + target.name)


def is_leftover(name: str) -> bool:
    """A name only an unfinished save uses: never a dataset to list or load by name."""
    return name.startswith(".") or name.endswith(".old")


def _fsync(path: Path, *, directory: bool = False) -> None:
    """Make file contents and directory entries durable before the swap publishes them."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:  # Windows cannot open a directory; its renames are journalled anyway
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(folder: Path):
    """Serialize saves and clean-ups in one folder, so a clean-up never removes a live save's
    temp dir. flock on the folder itself leaves no lock file behind, and the kernel releases it
    when a holder is killed. Without fcntl (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux renameat2); False where the OS or the file
    system cannot, so the caller falls back to two renames."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _discard(path: Path) -> None:
    """Delete a superseded version. It is first renamed to a temp name, so a kill in the middle
    of the rmtree leaves a dir that is plainly garbage, never a half-deleted `.old`."""
    if not path.name.startswith(TMP_PREFIX):
        doomed = path.with_name(f"{TMP_PREFIX}{path.name.lstrip('.')}-{secrets.token_hex(4)}")
        os.rename(path, doomed)
        path = doomed
    shutil.rmtree(path, ignore_errors=True)


def _recover(folder: Path) -> None:
    """Undo what a killed save left in `folder`: restore a previous version whose final dir is
    missing, then delete temp dirs and superseded versions. Call with `_locked(folder)` held."""
    if not folder.is_dir():
        return
    legacy = folder.resolve() == datasets_dir().resolve()
    for entry in sorted(folder.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            continue
        n = entry.name
        if n.startswith(OLD_PREFIX):
            final = folder / n[len(OLD_PREFIX):]
        elif legacy and n.endswith(".old") and not n.startswith(".") and (entry / "meta.json").exists():
            final = folder / n[: -len(".old")]
        else:
            continue
        if not final.exists() and (entry / "meta.json").exists():
            os.rename(entry, final)
        else:
            _discard(entry)
    for entry in sorted(folder.iterdir()):
        n = entry.name
        if entry.is_dir() and not entry.is_symlink() and (n.startswith(TMP_PREFIX) or (legacy and _LEGACY_TMP.match(n))):
            shutil.rmtree(entry, ignore_errors=True)
    _fsync(folder, directory=True)


def recover_leftovers(folder: Path | None = None) -> None:
    """Clean up after a prepare that was killed mid-save (default: the datasets folder)."""
    folder = Path(folder) if folder is not None else datasets_dir()
    if folder.is_dir():
        with _locked(folder):
            _recover(folder)


def _write_tables(ds: Dataset, tmp: Path) -> None:
    for table in TABLES:
        ds.table(table).write_parquet(tmp / f"{table}.parquet")
    for extra, df in ds.extras.items():
        df.write_parquet(tmp / f"extra_{extra}.parquet")
    meta = dict(ds.meta)
    meta.update(
        name=ds.name,
        counts={t: ds.table(t).height for t in TABLES},
        extras=sorted(ds.extras),
    )
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    for f in tmp.iterdir():
        _fsync(f)
    _fsync(tmp, directory=True)


def _swap_in(tmp: Path, target: Path) -> None:
    """Publish `tmp` as `target`; at every instant a reader finds one complete version, at
    `target` or (during the two-rename fallback) at its `.old` path."""
    if not target.exists():
        os.rename(tmp, target)
    elif _exchange(tmp, target):
        _fsync(target.parent, directory=True)
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous version
        return
    else:
        old = old_path(target)
        os.rename(target, old)  # no .old exists: _recover ran under the same lock
        os.rename(tmp, target)
        _fsync(target.parent, directory=True)
        _discard(old)
    _fsync(target.parent, directory=True)


def _preparer(target: Path) -> str | None:
    """The kind a prepared dataset was made from (meta.json's `preparer`), None when unknown."""
    try:
        meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("preparer") if isinstance(meta, dict) else None


def save_dataset(ds: Dataset, root: Path | None = None, *, replace_other: bool = False) -> Path:
    """Write atomically: a crash never leaves a half-written dataset behind, and the next save
    in the same folder removes whatever a killed one left. A dataset prepared from another kind (its
    meta.json's `preparer`) is replaced only with `replace_other` (`prepare --force`): a `--as` typo
    must not silently swap the data that run directories read."""
    ds.validate()
    target = Path(root) if root is not None else dataset_dir(ds.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent):
        _recover(target.parent)
        if (target.exists() and not (target / "meta.json").exists()
                and (not target.is_dir() or any(target.iterdir()))):  # a swap would delete what is there
            raise ConfigError(f"{target} exists and is not a prepared dataset (no meta.json): not replacing it; "
                              "choose another name (--as) or remove it yourself")
        had = _preparer(target)
        if had and ds.meta.get("preparer") and had != ds.meta["preparer"] and not replace_other:
            raise ConfigError(f"{target} holds a dataset prepared from {had}, not {ds.meta['preparer']}: give another "
                              "--as name, or add --force to replace it")
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{target.name}-", dir=target.parent))
        try:
            _write_tables(ds, tmp)
            for cache in KEPT_CACHES:  # keyed by content (a stale entry is never read): minutes of work, kept
                if (target / cache).is_dir():
                    shutil.copytree(target / cache, tmp / cache)
            _swap_in(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            with contextlib.suppress(Exception):  # put the previous version back at once
                _recover(target.parent)
            raise
    return target


# --- reading ---------------------------------------------------------------------------------------


def _read_dir(p: Path) -> Dataset:
    """Open every file of one version through a single directory handle before reading any, so
    a swap in the middle can never mix two versions (FileNotFoundError if it was deleted first)."""
    use_fd = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
    dfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY) if use_fd else None

    def open_(name: str):
        return os.fdopen(os.open(name, os.O_RDONLY, dir_fd=dfd), "rb") if use_fd else open(p / name, "rb")

    handles = []
    reading = "meta.json"
    try:
        with open_("meta.json") as f:
            meta = json.loads(f.read())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
        extras = meta.get("extras", [])
        if not isinstance(extras, list) or not all(isinstance(e, str) and e for e in extras):
            raise ValueError(f'"extras" is {json.dumps(extras)[:40]}, not a list of table names')
        names = [*TABLES, *(f"extra_{e}" for e in extras)]
        for n in names:
            reading = f"{n}.parquet"
            handles.append(open_(reading))
        frames = {}
        for n, h in zip(names, handles):
            reading = f"{n}.parquet"
            frames[n] = pl.read_parquet(h)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:  # a damaged prepared dataset: said, not a traceback
        from recharness.core.errors import InputError, one_line

        raise InputError(p / reading, f"the prepared dataset is damaged or unreadable ({type(e).__name__}: "
                                      f"{one_line(e, 160)}): prepare it again (`recharness prepare ... --force`)") from None
    finally:
        for h in handles:
            h.close()
        if dfd is not None:
            os.close(dfd)
    extras = {e: frames[f"extra_{e}"] for e in meta.get("extras", [])}
    return Dataset(name=meta.get("name", p.name), meta=meta, extras=extras,
                   **{t: frames[t] for t in TABLES}).positives_only().one_row_per_event()


def _locate(name_or_path: str | Path) -> Path | None:
    """The folder holding the dataset's current version (its `.old` one mid-swap), else None."""
    places = [Path(name_or_path)] + ([dataset_dir(str(name_or_path))] if is_plain_name(str(name_or_path)) else [])
    for p in places:
        for cand in (p, old_path(p)):
            if (cand / "meta.json").exists():
                return cand
    return None


def prepared_names() -> list[str]:
    """Datasets in the data home that load by name: leftovers of a killed prepare are not
    listed, except a previous version that is all there is while its final dir is missing."""
    d = datasets_dir()
    if not d.is_dir():
        return []
    names = {e.name for e in d.iterdir() if not is_leftover(e.name) and (e / "meta.json").exists()}
    names |= {
        e.name[len(OLD_PREFIX):]
        for e in d.iterdir()
        if e.name.startswith(OLD_PREFIX) and (e / "meta.json").exists() and not (d / e.name[len(OLD_PREFIX):]).exists()
    }
    return sorted(names)


def load_dataset(name_or_path: str | Path) -> Dataset:
    """Load a prepared dataset by name (under the data home) or by directory path."""
    for attempt in range(5):  # a version can vanish between locating and opening it: look again
        p = _locate(name_or_path)
        if p is None:
            break
        try:
            ds = _read_dir(p)
        except FileNotFoundError:
            if attempt == 4:
                raise
            continue
        ds.validate()  # a file edited since `prepare` checked it: named, not met later as a wrong title
        return ds
    p = dataset_dir(str(name_or_path)) if is_plain_name(str(name_or_path)) else Path(name_or_path)
    prepared = prepared_names()
    from recharness.core.registry import did_you_mean

    hint = did_you_mean(str(name_or_path), prepared)
    if hint:  # a typo of a prepared name: say which, not "prepare" a name no preparer knows
        raise ConfigError(f"dataset {str(name_or_path)!r} is not prepared (looked in {p}){hint}; prepared: "
                          f"{', '.join(prepared)}")
    raise ConfigError(
        f"dataset {str(name_or_path)!r} is not prepared (looked in {p}). "
        f"Run `recharness prepare {name_or_path}` first. Prepared: {', '.join(prepared) or 'none'}"
    )

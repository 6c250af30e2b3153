"""Prove a refactor changes no results: demo-size runs of every suite at two revisions, compared file by file.

    .venv/bin/python benchmarks/check_identical.py                      # base 6d16de2 vs the working tree
    .venv/bin/python benchmarks/check_identical.py --base REV --head-rev REV2
    .venv/bin/python benchmarks/check_identical.py --head-dir /path/to/other/checkout

Two sides, "base" and "head", each run the real CLI (`python -m recharness`) with the SAME
interpreter (/work/main/.venv/bin/python by default) but their own `PYTHONPATH=<tree>/src`, so
each imports its own revision's code (checked with `import recharness; recharness.__file__`
before anything runs):

* base: `git archive <rev> | tar -x` into <work>/base/tree (read-only use of the repo's
  objects; no worktree, no checkout in the repo).
* head: by default the current working tree of the repo (uncommitted and untracked files
  included), copied to <work>/head/tree at start so that edits made by others while the check
  runs cannot mix two states into one run (`--live` imports <repo>/src in place instead);
  or `--head-rev REV` (git archive, like base); or `--head-dir DIR` (any checkout).

Each side gets its own data home (<work>/<side>/home, with a copy of the prepared datasets from
<repo>/.pytest-home/datasets: ml-1m, amazon2023, llmrank-games) and its own empty response cache
(RECHARNESS_CACHE), so no cached answer can make the sides agree artificially.

Model: the fake OpenAI-compatible server of the repo (`python -m recharness.testing.fake_server`,
127.0.0.1 only, exits by itself; the base tree's copy is used for both sides), one server process
per fixed answer, shared by both sides. Every case is run with every answer (as separate
predictions files `fake-<answer>`, model name `fake-<answer>` so cache keys differ), which drives
valid, partial and invalid paths of every parser:

  list     "1. Toy Story (1995)\\n2. Heat (1995)\\n3. Fargo (1996)"  titles: sequential/RecBench+
           valid, matched to the catalog; rating invalid (a list); direct: no candidate named
  json     '{"predicted_rating": 4, "predicted_ranking": [1, 2]}\\n[User A]'  PerRecBench point
           and pair valid, list valid for easy groups only; LLMRec rating ambiguous (invalid)
  numbers  "3, 1, 2, 20, 7"  direct: a partial candidate ranking; rating ambiguous; PerRecBench
           invalid
  prose    "Rating: 4\\nI'm sorry, there are no movies that match these conditions."  rating
           valid; RecBench+ refusal (Fail-to-Recommend); free text for explanation/summarization

plus a judge server answering '{"faithfulness": 4, "personalization": 3}' for `recharness judge`
on the Amazon text tasks. Invalid answers also exercise the format-reminder retry.

Cases (each: build → run × 4 answers [→ judge] → score → report, same --seed, reference rows on;
`run --concurrency 1`, so each predictions file is written in sample order: report.html shows the
first answers of each file, and with concurrent requests which ones those are is chance):

  llmrec        ml-1m          sequential, direct, rating          -n 8
  llmrec        ml-1m          sequential, direct --no-history --no-format (prompt ablation) -n 5
  llmrec        amazon2023     rating, explanation, summarization  -n 8  (+ judge)
  llmrec        llmrank-games  direct --option retriever=sasrec    -n 8
  recbench-plus ml-1m          default tasks                       -n 5
  perrecbench   ml-1m          default tasks                       -n 3
  recbench      ml-1m          ctr (its demo run: test_pairs_per_user=2, train_pairs=2000) -n 4
  recbench      ml-1m          seqrec (its demo run)               -n 4

Compared: every file either side's run directory holds (build.json, samples.jsonl,
predictions/*.jsonl, judgments/*.jsonl, scores.json/.csv/.md, report.html, the suites' official
layout files recbench_plus/*.json and perrecbench/*.json, ...), plus every stage's exit code.
A file present on one side only is a difference.

Added fields: a JSON key only head has (at any depth: a new metric in scores.json, a new key of a
prediction record) and a table column only head has (scores.csv, Markdown and HTML tables, when
base's columns are head's minus some, in the same order) are reported as "added", listed by name,
not as a difference; every field and column base has must still be equal. A key or column only
base has, or any other extra line, is a difference.

* JSON / JSONL: parsed and compared as objects (key order ignored; types strict, so 4 vs 4.0 or
  1 vs true differ; NaN equals NaN). samples.jsonl and the official layout files are compared in
  order; predictions/ and judgments/ records are sorted by (task, id) first, because the runner
  commits answers in completion order (concurrent requests).
* CSV: parsed; cells of ignored columns masked. Markdown / HTML: text after normalisation, line
  by line; cells of ignored columns masked in every table; the embedded PNG charts are replaced
  by the sha256 of their bytes (compared, just readable).

Ignored ("documented fields"), everything else must be equal:

  created                        build.json timestamp
  fingerprint                    build.json hash of samples.jsonl (samples are compared instead)
  build                          top-level key of predictions/judgments records: that fingerprint
  *latency* keys and columns     latency_s, latency_uncached_s (JSON keys anywhere, CSV/Markdown/
                                 HTML table columns): wall-clock timings
  *elapsed*/*duration* keys      (none today; timings by name, should any appear)
  absolute paths                 the side's run dir → <RUN>, data home → <HOME>, cache → <CACHE>,
                                 source tree → <SRC>, side root → <SIDE> (samples' run_dir,
                                 report.html header)
  127.0.0.1:<port>               → 127.0.0.1:PORT (model/judge base_url; the fake servers' ports)
  " ↑" / " ↓" in table headers   Markdown/HTML/rich column headers mark higher/lower-is-better
                                 (from the metrics registry, added by the architecture change)
  record order                   predictions/ and judgments/ JSONL only (see above)
  stdout / stderr                not compared (progress bars, timings); kept in <work>/<side>/logs

Exit code 0 when every row is identical or added, 1 when something differs or a stage failed, 2 when the
check itself could not be set up. The table is printed and written to
benchmarks/results/identical.md (`--md`; `--md ''` to skip).
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures as cf
import csv
import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BASE = "6d16de2058364efaa49c87d5a5b792202b75aeb6"
DEFAULT_PY = REPO / ".venv" / "bin" / "python"
DEFAULT_DATASETS = REPO / ".pytest-home" / "datasets"
DEFAULT_MD = REPO / "benchmarks" / "results" / "identical.md"
SEED = 0

ANSWERS = {
    "list": "1. Toy Story (1995)\n2. Heat (1995)\n3. Fargo (1996)",
    "json": '{"predicted_rating": 4, "predicted_ranking": [1, 2]}\n[User A]',
    "numbers": "3, 1, 2, 20, 7",
    "prose": "Rating: 4\nI'm sorry, there are no movies that match these conditions.",
}
JUDGE_ANSWER = '{"faithfulness": 4, "personalization": 3}'

DOCUMENTED_FIELDS = [
    ("created", "build.json timestamp"),
    ("time", "timestamps of commands.jsonl lines and import reports; ISO timestamps in report.html"),
    ("samples_sha256, samples_count", "build.json's record of its samples file (samples.jsonl is compared itself)"),
    ("latency charts", "report.html's '<metric> against latency' images (they plot measured seconds)"),
    ("fingerprint", "build.json hash of samples.jsonl (samples.jsonl is compared instead)"),
    ("build", "top-level key of predictions/judgments records (that fingerprint)"),
    ("*latency* keys/columns", "latency_s, latency_uncached_s in JSON anywhere and in CSV/Markdown/HTML table columns"),
    ("*elapsed*, *duration* keys/columns", "timings by name (none present today)"),
    ("absolute paths", "side's run dir/home/cache/source tree/root → <RUN>/<HOME>/<CACHE>/<SRC>/<SIDE>"),
    ("127.0.0.1:<port>", "→ 127.0.0.1:PORT (fake servers' ports in model/judge base_url)"),
    ("' ↑' / ' ↓' in headers", "higher/lower-is-better markers in Markdown/HTML table headers (metrics registry)"),
    ("record order", "predictions/*.jsonl and judgments/*.jsonl sorted by (task, id): completion order"),
    ("stdout/stderr", "not compared (progress, timings); logs kept under <work>/<side>/logs"),
]

VOLATILE_NAME = re.compile(r"latency|elapsed|duration", re.IGNORECASE)
DROP_ANYWHERE = {"created", "fingerprint", "time", "samples_sha256", "samples_count"}
ISO_TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
BUILD_ROW_RE = re.compile(r"(<td>build</td><td>)[0-9a-f]{16}")
LATENCY_IMG_RE = re.compile(r"(data:image/png;sha256,)[0-9a-f]{16}('><figcaption>[^<]* against latency)")
DROP_TOP_OF_RECORD = {"build"}  # predictions/ and judgments/ records
PORT_RE = re.compile(r"127\.0\.0\.1:\d+")
IMG_RE = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")


@dataclass
class Case:
    suite: str
    dataset: str
    label: str
    build_args: list[str]
    limit: int
    judge: bool = False

    @property
    def key(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.suite}-{self.dataset}-{self.label}")


CASES = [
    Case("llmrec", "ml-1m", "sequential,direct,rating", ["-t", "sequential", "-t", "direct", "-t", "rating"], 8),
    Case("llmrec", "ml-1m", "sequential,direct (--no-history --no-format)",
         ["-t", "sequential", "-t", "direct", "--no-history", "--no-format"], 5),
    Case("llmrec", "amazon2023", "rating,explanation,summarization (+judge)",
         ["-t", "rating", "-t", "explanation", "-t", "summarization"], 8, judge=True),
    Case("llmrec", "llmrank-games", "direct retriever=sasrec", ["-t", "direct", "--option", "retriever=sasrec"], 8),
    Case("recbench-plus", "ml-1m", "default tasks", [], 5),
    Case("perrecbench", "ml-1m", "default tasks", [], 3),
    # the recbench suite's demo runs (`Suite.demo`): ctr with its demo options, seqrec
    Case("recbench", "ml-1m", "ctr (demo)", ["-t", "ctr", "--option", "test_pairs_per_user=2", "--option",
                                             "train_pairs=2000"], 4),
    Case("recbench", "ml-1m", "seqrec (demo)", ["-t", "seqrec"], 4),
]

#: a result row's status: identical, added (equal wherever base has the field; head adds fields, columns),
#: differs, error
PASSING = ("identical", "added")


@dataclass
class Side:
    role: str  # "base" | "head"
    desc: str  # what code it runs
    root: Path
    src: Path
    python: Path
    stages: dict[str, list[tuple[str, int, float]]] = field(default_factory=dict)  # case key -> [(stage, rc, s)]

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cache(self) -> Path:
        return self.root / "cache.sqlite"

    def run_dir(self, case: Case) -> Path:
        return self.root / "runs" / case.key

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RECHARNESS_", "OPENAI_", "PYTHONPATH", "VIRTUAL_ENV"))}
        env.update(PYTHONPATH=str(self.src), RECHARNESS_HOME=str(self.home), RECHARNESS_CACHE=str(self.cache),
                   PYTHONDONTWRITEBYTECODE="1")
        return env

    def normalise_text(self, text: str, case: Case | None = None) -> str:
        subs = []
        if case is not None:
            subs.append((str(self.run_dir(case)), "<RUN>"))
        subs += [(str(self.cache), "<CACHE>"), (str(self.home), "<HOME>"), (str(self.src), "<SRC>"),
                 (str(self.root), "<SIDE>")]
        for a, b in sorted(subs, key=lambda s: -len(s[0])):
            text = text.replace(a, b)
        return PORT_RE.sub("127.0.0.1:PORT", text).replace(" ↑", "").replace(" ↓", "")


class SetupError(Exception):
    pass


class _Compare(Exception):
    """--compare-only: skip to the comparison."""


def kept_side(role: str, root: Path, python: Path) -> Side:
    """A side a previous run left in --work (its stages.json), for --compare-only."""
    f = root / "stages.json"
    if not f.exists():
        raise SetupError(f"--compare-only: no {f} (run the check once without it)")
    info = json.loads(f.read_text())
    return Side(role, info["desc"], root, Path(info["src"]), python,
                {k: [tuple(x) for x in v] for k, v in info["stages"].items()})


# ------------------------------------------------------------------------------------------ setup

def git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    if r.returncode:
        raise SetupError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def extract_rev(rev: str, dest: Path) -> str:
    full = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "--format=tar", full], stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True, check=False)
    archive.stdout.close()
    if archive.wait() or tar.returncode:
        raise SetupError(f"git archive {full} | tar -x failed: {tar.stderr.decode(errors='replace')}")
    return full


def make_side(role: str, root: Path, python: Path, datasets: Path, *, rev: str | None = None,
              tree: Path | None = None, snapshot: bool = True) -> Side:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    if rev is not None:
        full = extract_rev(rev, root / "tree")
        src, desc = root / "tree" / "src", f"revision {full[:12]}"
    else:
        assert tree is not None
        tree = tree.resolve()
        if tree == REPO:
            head = git("rev-parse", "--short=12", "HEAD")
            changed = [ln for ln in git("status", "--porcelain", "--", "src").splitlines() if ln.strip()]
            desc = (f"working tree of {REPO} (HEAD {head} + {len(changed)} changed/untracked path(s) under src/"
                    + (", snapshot taken " + dt.datetime.now().strftime("%H:%M:%S") if snapshot else ", live") + ")")
        else:
            desc = f"directory {tree}"
        src = tree / "src" if (tree / "src" / "recharness").is_dir() else tree
        if not (src / "recharness").is_dir():
            raise SetupError(f"no recharness package under {src}")
        if snapshot:
            shutil.copytree(src, root / "tree" / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            src = root / "tree" / "src"
    (root / "home").mkdir()
    shutil.copytree(datasets, root / "home" / "datasets")
    (root / "runs").mkdir()
    (root / "logs").mkdir()
    side = Side(role, desc, root, src, python)
    r = subprocess.run([str(python), "-c", "import recharness; print(recharness.__file__)"],
                       env=side.env(), cwd=root, capture_output=True, text=True, check=False)
    got = Path(r.stdout.strip()).resolve() if r.returncode == 0 else None
    want = (src / "recharness" / "__init__.py").resolve()
    if got != want:
        raise SetupError(f"{role}: `import recharness` gives {got or r.stderr.strip()!r}, expected {want}")
    print(f"{role}: {desc}\n      imports {got}", flush=True)
    return side


class Servers:
    """One fake OpenAI-compatible server per fixed answer (started here, stopped here, by pid)."""

    def __init__(self, python: Path, src: Path, root: Path):
        self.python, self.src, self.root = python, src, root
        self.procs: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}

    def __enter__(self) -> Self:
        self.root.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
        env["PYTHONPATH"] = str(self.src)
        answers = {**ANSWERS, "judge": JUDGE_ANSWER}
        for name, answer in answers.items():
            pf = self.root / f"port-{name}"
            pf.unlink(missing_ok=True)
            self.procs[name] = subprocess.Popen(
                [str(self.python), "-m", "recharness.testing.fake_server", "--port", "0", "--port-file", str(pf),
                 "--answer", answer, "--max-seconds", "3600"],
                env=env, cwd=self.root, stdout=subprocess.DEVNULL, stderr=open(self.root / f"server-{name}.log", "w"))
        deadline = time.monotonic() + 30
        for name, proc in self.procs.items():
            pf = self.root / f"port-{name}"
            while not pf.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SetupError(f"fake server {name!r} did not start: {(self.root / f'server-{name}.log').read_text()}")
                time.sleep(0.02)
            self.urls[name] = f"http://127.0.0.1:{int(pf.read_text())}/v1"
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


# -------------------------------------------------------------------------------------------- run

def run_case(side: Side, case: Case, servers: Servers, timeout: float) -> None:
    rd = side.run_dir(case)
    common = ["-d", case.dataset, "-o", str(rd)]
    stages: list[tuple[str, list[str]]] = [
        ("build", ["build", case.suite, *common, "--seed", str(SEED), "-n", str(case.limit), *case.build_args])]
    for name in ANSWERS:
        stages.append((f"run:{name}", ["run", case.suite, *common, "-m", f"openai:fake-{name}@{servers.urls[name]}",
                                       "--name", f"fake-{name}", "--concurrency", "1"]))
    if case.judge:
        stages.append(("judge", ["judge", case.suite, *common, "-j", f"openai:fake-judge@{servers.urls['judge']}",
                                 "--seed", str(SEED)]))
    stages += [("score", ["score", case.suite, *common, "--seed", str(SEED)]),
               ("report", ["report", case.suite, *common])]
    done = side.stages.setdefault(case.key, [])
    for stage, args in stages:
        log = side.root / "logs" / f"{case.key}.{stage.replace(':', '-')}.log"
        t0 = time.monotonic()
        with open(log, "w") as fh:
            fh.write("$ " + " ".join([str(side.python), "-m", "recharness", *args]) + "\n")
            fh.flush()
            try:
                rc = subprocess.run([str(side.python), "-m", "recharness", *args], env=side.env(), cwd=side.root,
                                    stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False).returncode
            except subprocess.TimeoutExpired:
                rc = -9
        done.append((stage, rc, time.monotonic() - t0))
        if rc != 0 and stage == "build":
            break  # nothing to run on


# ---------------------------------------------------------------------------------------- compare

def clean_json(obj, top_record: bool = False):
    """Drop ignored keys (recursively), normalise strings via the caller's text normaliser (see `load_json`)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in DROP_ANYWHERE or VOLATILE_NAME.search(k) or (top_record and k in DROP_TOP_OF_RECORD):
                continue
            out[k] = clean_json(v)
        return out
    if isinstance(obj, list):
        return [clean_json(v) for v in obj]
    return obj


def norm_strings(obj, f):
    if isinstance(obj, dict):
        return {f(k): norm_strings(v, f) for k, v in obj.items()}
    if isinstance(obj, list):
        return [norm_strings(v, f) for v in obj]
    if isinstance(obj, str):
        return f(obj)
    return obj


def short(v, n: int = 90) -> str:
    s = json.dumps(v, ensure_ascii=False, sort_keys=True) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[: n - 1] + "…"


def first_diff(a, b, path: str = "", added: list[str] | None = None) -> str | None:
    """Key path and values of the first difference between two parsed JSON values, or None. With
    `added`, a key only in head is not a difference: its path is appended there (a field the head
    revision adds, e.g. a new metric); every key base has must still be equal."""
    if type(a) is not type(b):
        return f"{path or '.'}: {short(a)} ({type(a).__name__}) != {short(b)} ({type(b).__name__})"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                if added is not None:
                    added.append(f"{path}.{k}")
                    continue
                return f"{path}.{k}: only in head ({short(b[k])})"
            if k not in b:
                return f"{path}.{k}: only in base ({short(a[k])})"
            d = first_diff(a[k], b[k], f"{path}.{k}", added)
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f"{path}[{i}]", added)
            if d:
                return d
        if len(a) != len(b):
            return f"{path or '.'}: length {len(a)} != {len(b)}"
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if a == b else f"{path or '.'}: {short(a)} != {short(b)}"


def load_json_file(path: Path, side: Side, case: Case, rel: str):
    f = lambda s: side.normalise_text(s, case)
    text = path.read_text(encoding="utf-8")
    if rel.endswith(".jsonl"):
        recs = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                recs.append(norm_strings(clean_json(json.loads(line), top_record=True), f))
        return recs
    return norm_strings(clean_json(json.loads(text)), f)


def compare_jsonl(a: list, b: list, rel: str, added: list[str] | None = None) -> str | None:
    unordered = rel.startswith(("predictions/", "judgments/"))
    if unordered:
        key = lambda r: (str(r.get("task")), str(r.get("id")), json.dumps(r, sort_keys=True, default=str))
        a, b = sorted(a, key=key), sorted(b, key=key)
    diffs = [(i, d) for i, (x, y) in enumerate(zip(a, b)) if (d := first_diff(x, y, "", added))]
    extra = f"; {len(a)} records != {len(b)}" if len(a) != len(b) else ""
    if not diffs:
        return extra[2:] or None
    i, d = diffs[0]
    rid = a[i].get("id") if isinstance(a[i], dict) else None
    where = f"record {rid}" if unordered and rid else f"line {i + 1}" + (f" (id {rid})" if rid else "")
    return f"{len(diffs)} of {max(len(a), len(b))} records differ{extra}; first, {where}: {d}"


def mask_table_lines(lines: list[str]) -> list[str]:
    """Markdown tables: cells under a header whose name is volatile become '<masked>'."""
    out, masked_cols = [], None
    for ln in lines:
        s = ln.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in s[1:-1].split("|")]
            if masked_cols is None:  # header row
                masked_cols = {i for i, c in enumerate(cells) if VOLATILE_NAME.search(c)}
            elif masked_cols:
                cells = ["<masked>" if i in masked_cols else c for i, c in enumerate(cells)]
            out.append("| " + " | ".join(cells) + " |")
        else:
            masked_cols = None
            out.append(ln)
    return out


_TABLE_RE = re.compile(r"<table(?:\s[^>]*)?>.*?</table>", re.DOTALL)
#: a cell with or without attributes (report.html's method cells are <td class='method'>): every cell counts
_CELL_RE = re.compile(r"<(td|th)((?:\s[^>]*)?)>(.*?)</\1>", re.DOTALL)


def mask_html(text: str) -> str:
    text = IMG_RE.sub(lambda m: "data:image/png;sha256," + hashlib.sha256(base64.b64decode(m.group(1))).hexdigest()[:16],
                      text)
    text = LATENCY_IMG_RE.sub(r"\1<latency chart>\2", text)
    text = BUILD_ROW_RE.sub(r"\1<FINGERPRINT>", ISO_TIME_RE.sub("<TIME>", text))

    def table(m: re.Match) -> str:
        rows = m.group(0).split("</tr>")
        header = [c for _, _, c in _CELL_RE.findall(rows[0])]
        cols = {i for i, c in enumerate(header) if VOLATILE_NAME.search(c)}
        if not cols:
            return m.group(0)
        out = [rows[0]]
        for row in rows[1:]:
            i = -1

            def cell(cm: re.Match) -> str:
                nonlocal i
                i += 1
                return f"<{cm.group(1)}{cm.group(2)}><masked></{cm.group(1)}>" if i in cols else cm.group(0)

            out.append(_CELL_RE.sub(cell, row))
        return "</tr>".join(out)

    text = _TABLE_RE.sub(table, text)
    # <pre> blocks (paper-layout tables) are Markdown
    return re.sub(r"<pre>(.*?)</pre>", lambda m: "<pre>" + "\n".join(mask_table_lines(m.group(1).split("\n"))) + "</pre>",
                  text, flags=re.DOTALL)


def text_lines(path: Path, side: Side, case: Case, rel: str) -> list[str]:
    text = side.normalise_text(path.read_text(encoding="utf-8", errors="replace"), case)
    if rel.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        if rows:
            cols = {i for i, c in enumerate(rows[0]) if VOLATILE_NAME.search(c)}
            rows = [rows[0]] + [["<masked>" if i in cols else c for i, c in enumerate(r)] for r in rows[1:]]
        return ["| " + " | ".join(r) + " |" for r in rows]  # a table, as Markdown's (head-only columns: added)
    if rel.endswith(".html"):
        text = mask_html(text)
    return mask_table_lines(text.split("\n"))


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in line.strip()[1:-1].split("|")]


def _md_tables(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line ranges of the Markdown tables in `lines`."""
    out, start = [], None
    for i, ln in enumerate([*lines, ""]):
        is_row = ln.strip().startswith("|") and ln.strip().endswith("|")
        if is_row and start is None:
            start = i
        elif not is_row and start is not None:
            out.append((start, i))
            start = None
    return out


def drop_added_columns(a: list[str], b: list[str], added: list[str]) -> list[str]:
    """Head's lines with the table columns base does not have removed (Markdown tables, CSV header
    and rows, HTML <table>s), table by table in order, when base's columns are a subset of head's in
    the same order; each removed column is appended to `added`."""
    b = list(b)
    ta, tb = _md_tables(a), _md_tables(b)
    if len(ta) == len(tb):
        for (sa, _), (sb, eb) in zip(ta, tb):
            ha, hb = _split_row(a[sa]), _split_row(b[sb])
            keep = _kept_columns(ha, hb)
            if keep is None:
                continue
            added += [f"column {c!r}" for i, c in enumerate(hb) if i not in keep]
            for i in range(sb, eb):
                cells = _split_row(b[i])
                b[i] = "| " + " | ".join(c for j, c in enumerate(cells) if j in keep) + " |"
    if len(a) != len(b) or not (b and "<table" in "".join(b)):
        return b
    text_a, text_b = "\n".join(a), "\n".join(b)
    tables_a, tables_b = _TABLE_RE.findall(text_a), list(_TABLE_RE.finditer(text_b))
    if len(tables_a) != len(tables_b):
        return b
    out, pos = [], 0
    for ta_html, m in zip(tables_a, tables_b):
        ha = [c for _, _, c in _CELL_RE.findall(ta_html.split("</tr>")[0])]
        rows = m.group(0).split("</tr>")
        hb = [c for _, _, c in _CELL_RE.findall(rows[0])]
        keep = _kept_columns(ha, hb)
        out.append(text_b[pos:m.start()])
        if keep is None:
            out.append(m.group(0))
        else:
            added += [f"column {re.sub('<[^>]+>', '', c)!r}" for i, c in enumerate(hb) if i not in keep]
            new_rows = []
            for row in rows:
                i = -1

                def cell(cm: re.Match) -> str:
                    nonlocal i
                    i += 1
                    return cm.group(0) if i in keep else ""

                new_rows.append(_CELL_RE.sub(cell, row))
            out.append("</tr>".join(new_rows))
        pos = m.end()
    out.append(text_b[pos:])
    return "".join(out).split("\n")


def _kept_columns(ha: list[str], hb: list[str]) -> set[int] | None:
    """Indices of head's columns that base has, when base's header is head's minus some columns (same
    order); None when the headers are equal or base has a column head lacks (then: compared as they are)."""
    if ha == hb:
        return None
    keep, j = set(), 0
    for i, c in enumerate(hb):
        if j < len(ha) and c == ha[j]:
            keep.add(i)
            j += 1
    return keep if j == len(ha) else None


def compare_text(a: list[str], b: list[str]) -> str | None:
    """None when equal, else how the lines differ, aligned (difflib: a line added or removed shifts no
    other) and counted as changed / only in base / only in head, and the first difference."""
    import difflib

    if a == b:
        return None
    changed = removed = added = 0
    first = None
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        n, m = i2 - i1, j2 - j1
        changed += min(n, m)
        removed += max(0, n - m)
        added += max(0, m - n)
        if first is None:
            x, y = (a[i1] if n else ""), (b[j1] if m else "")
            j = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lo = max(0, j - 40)
            first = f"line {i1 + 1}: {x[lo:lo + 100]!r} != {y[lo:lo + 100]!r}"
    parts = [f"{k} {what}" for k, what in ((changed, "changed"), (removed, "only in base"), (added, "only in head")) if k]
    return f"{', '.join(parts)} of {max(len(a), len(b))} lines; first, {first}"


def files_of(d: Path) -> set[str]:
    if not d.exists():
        return set()
    return {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()
            and not p.name.endswith((".lock", ".tmp")) and "__pycache__" not in p.parts}


FILE_ORDER = ["build.json", "samples.jsonl", "predictions/", "judgments/", "scores.json", "scores.csv", "scores.md",
              "report.html"]


def file_rank(rel: str) -> tuple:
    for i, p in enumerate(FILE_ORDER):
        if rel == p or (p.endswith("/") and rel.startswith(p)):
            return (i, rel)
    return (len(FILE_ORDER), rel)


def compare_case(base: Side, head: Side, case: Case) -> list[tuple[str, str, str]]:
    """[(file, status, detail)] for one case; status: identical | differs | error."""
    rows = []
    sa, sb = base.stages.get(case.key, []), head.stages.get(case.key, [])
    bad = [f"{s}: base rc={rc}" for s, rc, _ in sa if rc] + [f"{s}: head rc={rc}" for s, rc, _ in sb if rc]
    if [(s, rc) for s, rc, _ in sa] != [(s, rc) for s, rc, _ in sb] or bad:
        rows.append(("(stages)", "differs" if not bad else "error",
                     ("; ".join(bad) or "stage lists differ") + f" (logs: {base.root / 'logs'}, {head.root / 'logs'})"))
    else:
        rows.append(("(stages)", "identical", f"{len(sa)} stages, all exit 0"))
    da, db = base.run_dir(case), head.run_dir(case)
    fa, fb = files_of(da), files_of(db)
    for rel in sorted(fa | fb, key=file_rank):
        if rel not in fb:
            rows.append((rel, "differs", "only in base"))
            continue
        if rel not in fa:
            rows.append((rel, "differs", "only in head"))
            continue
        try:
            added: list[str] = []
            if rel.endswith((".json", ".jsonl")):
                a = load_json_file(da / rel, base, case, rel)
                b = load_json_file(db / rel, head, case, rel)
                d = compare_jsonl(a, b, rel, added) if rel.endswith(".jsonl") else first_diff(a, b, "", added)
            elif rel.endswith((".md", ".csv", ".html", ".txt")):
                la, lb = text_lines(da / rel, base, case, rel), text_lines(db / rel, head, case, rel)
                d = compare_text(la, drop_added_columns(la, lb, added))
            else:
                d = None if (da / rel).read_bytes() == (db / rel).read_bytes() else "bytes differ"
        except (ValueError, UnicodeDecodeError) as e:
            rows.append((rel, "error", f"cannot read: {e}"))
            continue
        if d is not None:
            rows.append((rel, "differs", d))
        elif added:
            kinds = list(dict.fromkeys(re.sub(r"\[\d+\]", "[*]", x) for x in added))
            rows.append((rel, "added", f"{len(kinds)} field(s) only in head, every base field equal: "
                                       + ", ".join(kinds[:8]) + (" …" if len(kinds) > 8 else "")))
        else:
            rows.append((rel, "identical", ""))
    return rows


# ----------------------------------------------------------------------------------------- output

def md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", "\\n")


def render(results: list[tuple[Case, list[tuple[str, str, str]]]], base: Side, head: Side, cmdline: str,
           elapsed: float, ok: bool) -> str:
    n_rows = sum(len(r) for _, r in results)
    n_bad = sum(1 for _, r in results for _, st, _ in r if st not in PASSING)
    out = ["# Refactor check: identical results", "",
           f"`{cmdline}`", "",
           f"- base: {base.desc}",
           f"- head: {head.desc}",
           (f"- date: {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}, run time {elapsed:.0f} s, "
            f"interpreter {base.python}"),
           f"- model: fake OpenAI-compatible server, answers {', '.join(ANSWERS)} (+ judge); seed {SEED}",
           f"- **{'PASS' if ok else 'FAIL'}**: {n_rows - n_bad} of {n_rows} rows identical or only added to "
           f"({sum(1 for _, r in results for _, st, _ in r if st == 'added')} with fields only in head)", "",
           "| suite | task/dataset | file | result |", "|---|---|---|---|"]
    for case, rows in results:
        for rel, st, detail in rows:
            res = st if st == "identical" else f"**{st}**: {detail}"
            out.append(f"| {case.suite} | {md_cell(case.label)} / {case.dataset} | {md_cell(rel)} | {md_cell(res)} |")
    out += ["", "Documented (ignored) fields:", ""]
    out += [f"- `{k}`: {v}" for k, v in DOCUMENTED_FIELDS]
    return "\n".join(out) + "\n"


def print_table(results, ok: bool) -> None:
    hdr = ("suite", "task/dataset", "file", "result")
    lines = []
    for case, rows in results:
        for rel, st, detail in rows:
            res = st if st == "identical" else f"{st.upper()}: {detail}"
            lines.append((case.suite, f"{case.label} / {case.dataset}", rel, res))
    w = [max(len(hdr[i]), *(len(ln[i]) for ln in lines)) if i < 3 else 0 for i in range(4)]
    w = [min(x, 60) for x in w]
    fmt = lambda r: " | ".join(str(c)[: w[i]].ljust(w[i]) if i < 3 else str(c) for i, c in enumerate(r))
    print(fmt(hdr))
    print("-+-".join("-" * (x or 6) for x in w))
    for ln in lines:
        print(fmt(ln))
    print("\ndocumented (ignored) fields:")
    for k, v in DOCUMENTED_FIELDS:
        print(f"  {k:36} {v}")


# ------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=DEFAULT_BASE, help="base revision (default: %(default)s)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--head-rev", help="compare this revision instead of the working tree")
    g.add_argument("--head-dir", type=Path, help="compare this checkout (its src/) instead of the working tree")
    ap.add_argument("--live", action="store_true", help="import the working tree's src/ in place (no snapshot copy)")
    ap.add_argument("--python", type=Path, default=DEFAULT_PY, help="interpreter for both sides (default: %(default)s)")
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS, help="prepared datasets to copy (default: %(default)s)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/check-identical"), help="scratch dir (default: %(default)s)")
    ap.add_argument("--jobs", "-j", type=int, default=4, help="cases run in parallel (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per CLI stage (default: %(default)s)")
    ap.add_argument("--md", default=str(DEFAULT_MD), help="write the table here ('' = don't; default: %(default)s)")
    ap.add_argument("--clean", action="store_true", help="delete the scratch dir at the end (default: keep for inspection)")
    ap.add_argument("--only", action="append", default=[], help="run only cases whose suite/dataset/label contains this")
    ap.add_argument("--compare-only", action="store_true",
                    help="run nothing: compare the run dirs a previous run kept in --work (same --only)")
    args = ap.parse_args(argv)

    t0 = time.monotonic()
    work = args.work.resolve()
    if REPO == work or REPO in work.parents:
        print(f"error: --work {work} must be outside {REPO}", file=sys.stderr)
        return 2
    cases = [c for c in CASES if not args.only or any(o in f"{c.suite}/{c.dataset}/{c.label}" for o in args.only)]
    try:
        if not args.python.exists():
            raise SetupError(f"no interpreter {args.python}")
        if not args.datasets.is_dir():
            raise SetupError(f"no prepared datasets in {args.datasets}")
        work.mkdir(parents=True, exist_ok=True)
        if args.compare_only:
            base, head = (kept_side(role, work / role, args.python) for role in ("base", "head"))
            raise _Compare
        base = make_side("base", work / "base", args.python, args.datasets, rev=args.base)
        if args.head_rev:
            head = make_side("head", work / "head", args.python, args.datasets, rev=args.head_rev)
        else:
            head = make_side("head", work / "head", args.python, args.datasets,
                             tree=args.head_dir or REPO, snapshot=not (args.live and not args.head_dir))
        with Servers(args.python, base.src, work / "servers") as servers:
            print(f"fake servers: {', '.join(f'{k}={v}' for k, v in servers.urls.items())}", flush=True)
            jobs = [(side, case) for case in cases for side in (base, head)]
            with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
                futs = {ex.submit(run_case, side, case, servers, args.timeout): (side, case) for side, case in jobs}
                for fut in cf.as_completed(futs):
                    side, case = futs[fut]
                    fut.result()
                    took = sum(s for _, _, s in side.stages[case.key])
                    rcs = ",".join(str(rc) for _, rc, _ in side.stages[case.key])
                    print(f"  done {side.role:4} {case.suite} {case.dataset} {case.label}: {took:.1f} s, exit codes {rcs}",
                          flush=True)
        for side in (base, head):
            (side.root / "stages.json").write_text(json.dumps({"desc": side.desc, "src": str(side.src),
                                                               "stages": side.stages}, indent=1))
    except _Compare:
        pass
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    results = [(case, compare_case(base, head, case)) for case in cases]
    ok = all(st in PASSING for _, rows in results for _, st, _ in rows)
    elapsed = time.monotonic() - t0
    print()
    print_table(results, ok)
    n_rows = sum(len(r) for _, r in results)
    n_bad = sum(1 for _, r in results for _, st, _ in r if st not in PASSING)
    print(f"\n{'PASS' if ok else 'FAIL'}: {n_rows - n_bad}/{n_rows} rows identical; base = {base.desc}; "
          f"head = {head.desc}; {elapsed:.0f} s")
    cmdline = "python benchmarks/check_identical.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.md:
        md = Path(args.md)
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(render(results, base, head, cmdline.strip(), elapsed, ok))
        print(f"table → {md}")
    if args.clean:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"run dirs and logs kept in {work}/{{base,head}}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

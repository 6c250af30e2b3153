"""RunDir owns every path of a run directory: its methods name the layout, and no other module of
src/recharness composes a run-directory path itself (`out / "samples.jsonl"`, `f"predictions/{m}.jsonl"`)."""

from __future__ import annotations

import ast
from pathlib import Path

from recharness.core.rundir import RunDir, train_json_file, train_log_file

SRC = Path(__file__).resolve().parents[1] / "src" / "recharness"

#: the names of a run directory's own files and folders (a model's or a suite's inner files are theirs)
RUN_NAMES = {"build.json", "samples.jsonl", "predictions", "reference", "models", "judgments", "imports",
             "label_scores", "finetuned", "scores.json", "scores.md", "scores.csv", "report.html",
             "commands.jsonl", "train.json", "train_log.jsonl", "earlier-builds"}

#: modules another developer is changing now: their run-dir paths move to RunDir with that change
PENDING: set[str] = set()


def test_the_layout(tmp_path):
    rd = RunDir(tmp_path)
    assert rd.samples_jsonl == tmp_path / "samples.jsonl"
    assert rd.pairs("suite") == tmp_path / "suite" / "train.parquet"
    assert rd.pairs("suite", "split", "json") == tmp_path / "suite" / "split.json"
    assert rd.train_json("sasrec") == tmp_path / "models" / "sasrec" / "train.json"
    assert rd.tuning_json("ease") == tmp_path / "models" / "ease" / "tuning.json"
    assert rd.relative(rd.predictions("m")) == "predictions/m.jsonl"
    assert rd.train_log("sasrec") == tmp_path / "models" / "sasrec" / "train_log.jsonl"
    assert train_log_file(rd.finetuned("m-ctr")) == tmp_path / "finetuned" / "m-ctr" / "train_log.jsonl"
    assert train_json_file(tmp_path) == tmp_path / "train.json"
    assert rd.import_report("x") == tmp_path / "imports" / "x.json"
    assert rd.label_scores("released") == tmp_path / "label_scores" / "released.json"
    assert rd.model_dirs() == []
    rd.model_dir("b").mkdir(parents=True)
    rd.model_dir("a").mkdir(parents=True)
    (rd.models_dir / "note.txt").write_text("")
    assert rd.model_dirs() == [rd.model_dir("a"), rd.model_dir("b")]
    for name in ("m-ctr", "m-ctr.checkpoint", "m-ctr.tmp", "a-seqrec"):
        rd.finetuned(name).mkdir(parents=True)
    assert rd.finetuned_dirs() == [rd.finetuned("a-seqrec"), rd.finetuned("m-ctr")]  # no checkpoint, no copy
    assert rd.earlier_build("f00") == tmp_path / "earlier-builds" / "f00"
    assert rd.build_outputs("f00")[:2] == [(rd.predictions_dir, tmp_path / "earlier-builds" / "f00" / "predictions"),
                                           (rd.models_dir, tmp_path / "earlier-builds" / "f00" / "models")]


def composed_paths(path: Path) -> list[tuple[int, str]]:
    """`x / "name"` with a run directory's file name, and f-strings / constants of the form "name/…"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            for side in (n.left, n.right):
                if isinstance(side, ast.Constant) and side.value in RUN_NAMES:
                    out.append((n.lineno, side.value))
        elif isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant) \
                and isinstance(n.values[0].value, str) and n.values[0].value.split("/")[0] in RUN_NAMES \
                and "/" in n.values[0].value:
            out.append((n.lineno, n.values[0].value))
    return out


def test_the_scan_finds_a_planted_path(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('p = out / "samples.jsonl"\nq = f"predictions/{name}.jsonl"\nr = d / "model.pt"\n')
    assert composed_paths(f) == [(1, "samples.jsonl"), (2, "predictions/")]


def test_no_module_but_rundir_composes_run_paths():
    found = {}
    for f in sorted(SRC.rglob("*.py")):
        rel = str(f.relative_to(SRC))
        if rel in {"core/rundir.py", "core/paths.py", *PENDING}:  # paths.py: the data home's models/, not a run's
            continue
        if hits := composed_paths(f):
            found[rel] = hits
    assert not found, f"run-directory paths composed outside core/rundir.py: {found}"

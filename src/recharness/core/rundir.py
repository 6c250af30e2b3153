"""RunDir: the one owner of a run directory's layout; no other module composes its paths.

Layout (default `<data home>/runs/<suite>/<dataset>`):
  build.json                              what was built, with which seed and options, and its fingerprint
  samples.jsonl                           one task sample per line
  predictions/<method>.jsonl              one prediction per sample, appended as they finish
  predictions/reference/<baseline>.jsonl  reference models' predictions, written whole by `train`
  <suite>/<part>.parquet                  training rows a build writes beside its samples (`pairs`)
  <suite>/…                               other files a suite's build writes (`side_file`)
  models/<baseline>/                      trained reference models (`train`), with train.json and
                                          train_log.jsonl (`train_json`, `train_log`)
  finetuned/<name>/                       fine-tuned models (`finetune`), each with its train_log.jsonl
  imports/<method>.json                   what `score --predictions` imported and could not use
  label_scores/<name>.json                a released layout's predictions scored against its labels
  commands.jsonl                          the recharness commands run on this directory
  judgments/<stem>__<judge>.jsonl         LLM-judge verdicts (suites with a judge)
  scores.json / .md / .csv                metrics per method and task, written as one set
  report.html                             tables and plots
  earlier-builds/<build>/                 what `build` or `eval` set aside when it rebuilt the directory with
                                          other settings (predictions/, models/, judgments/, imports/ of that
                                          build), put back when that build is made again
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from recharness.core.errors import ConfigError, InputError
from recharness.core.io import read_jsonl
from recharness.core.paths import dataset_runs_name, plain_name, runs_dir
from recharness.core.types import is_whole

#: trained reference models' predictions live in predictions/reference/<baseline>.jsonl: a model's
#: name cannot hold '/', so its file can never be taken for a reference's (nor the other way round)
REFERENCE_DIR = "reference"

#: the files a trained model's directory (a run's models/<name>/, a fine-tune's output) keeps of its training
TRAIN_LOG = "train_log.jsonl"
TRAIN_JSON = "train.json"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_name(name: str) -> str:
    """A method name stays a plain file inside the run directory."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only (no '/', no leading '.')")
    return name


def fingerprint(samples_path: Path, settings: dict | None = None) -> str:
    """Identifies one build, stamped on every prediction: the hash of its samples file and of the
    settings that made it (seed, options: they also shape side files such as training pairs)."""
    h = hashlib.sha256()
    with open(samples_path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if settings:
        h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def train_log_file(model_dir: Path | str) -> Path:
    """A trained model's per-epoch (or per-step) log, in its own directory wherever that is."""
    return Path(model_dir) / TRAIN_LOG


def train_json_file(model_dir: Path | str) -> Path:
    """A trained model's configuration and how its training ended, in its own directory."""
    return Path(model_dir) / TRAIN_JSON


class RunDir:
    """A run directory: every path of a run, and reading its build."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @classmethod
    def default(cls, suite: str, dataset: str) -> RunDir:
        return cls(runs_dir() / plain_name(suite, "suite name") / dataset_runs_name(dataset))

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ---- the build
    @property
    def build_json(self) -> Path:
        return self.path / "build.json"

    @property
    def samples_jsonl(self) -> Path:
        return self.path / "samples.jsonl"

    def side_file(self, *parts: str) -> Path:
        """A file a suite's build writes beside its samples (labels of a published layout, …)."""
        return self.path.joinpath(*parts)

    def pairs(self, suite: str, part: str = "train", ext: str = "parquet") -> Path:
        """Training rows a build writes beside its samples, `<suite>/<part>.parquet` (labelled pairs,
        sequences), and with `ext="json"` the record of the split that made them."""
        return self.side_file(suite, f"{part}.{ext}")

    # ---- predictions
    @property
    def predictions_dir(self) -> Path:
        return self.path / "predictions"

    def predictions(self, method: str) -> Path:
        return self.predictions_dir / f"{check_name(method)}.jsonl"

    def redo_pending(self, method: str) -> Path:
        """The ids `run --redo-invalid` took out of `method`'s answers and has not answered again yet: a
        resumed run still asks them past the response cache (which holds their invalid answers)."""
        return self.predictions_dir / f"{check_name(method)}.redo.json"

    def relative(self, path: Path) -> str:
        """`path` as reports name it: relative to the run directory ("predictions/m.jsonl")."""
        return Path(path).relative_to(self.path).as_posix()

    def has_saved_model(self, name: str) -> bool:
        """Whether `train` saved `name`'s model (its config.json: every saved baseline writes one); the
        folder alone may hold only a killed fit's checkpoint or a search's trials."""
        return (self.model_dir(name) / "config.json").is_file()

    def fit_checkpoint(self, name: str) -> Path:
        """A reference fit's last whole epoch while it trains (`core.fit_checkpoint.EpochCheckpoint`): a
        killed `train` goes on from it; removed once the model is saved."""
        return self.model_dir(name) / "fit-checkpoint"

    def remove_fit_checkpoint(self, name: str) -> None:
        """Drop `fit_checkpoint(name)`: its model is saved, fitted elsewhere, kept as it was, or fitted afresh."""
        import shutil

        shutil.rmtree(self.fit_checkpoint(name), ignore_errors=True)

    def tuning_json(self, name: str) -> Path:
        """A tuned reference's search (`train --tune N`): its trials and the chosen configuration."""
        return self.model_dir(name) / "tuning.json"

    def tuning_trials(self, name: str) -> Path:
        """A search's finished trials while it runs (`train --tune N`): a killed search resumes from them;
        removed once the model is saved."""
        return self.model_dir(name) / "tuning_trials.jsonl"

    def prediction_files(self) -> list[Path]:
        d = self.predictions_dir
        return sorted(d.glob("*.jsonl")) if d.exists() else []

    def run_record(self, method: str) -> Path:
        """What the last `run` (or import) of `method` covered: its limit and tasks (see runner.coverage)."""
        return self.predictions_dir / f"{check_name(method)}.run.json"

    @property
    def reference_dir(self) -> Path:
        return self.predictions_dir / REFERENCE_DIR

    def reference(self, baseline: str) -> Path:
        return self.reference_dir / f"{baseline}.jsonl"

    def reference_partial(self, baseline: str) -> Path:
        """A reference file while `train` writes it (the executor's log, resumed after a kill); renamed to
        `reference(baseline)` once whole, so `score` never reads half of one."""
        return self.reference_dir / f"{baseline}.jsonl.partial"

    def reference_files(self) -> list[Path]:
        d = self.reference_dir
        return sorted(d.glob("*.jsonl")) if d.exists() else []

    # ---- trained models, judgments, results
    @property
    def models_dir(self) -> Path:
        return self.path / "models"

    def model_dir(self, name: str) -> Path:
        return self.models_dir / name

    def model_dirs(self) -> list[Path]:
        """Every trained reference model's directory, by name."""
        d = self.models_dir
        return sorted(p for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def train_log(self, name: str) -> Path:
        return train_log_file(self.model_dir(name))

    def train_json(self, name: str) -> Path:
        return train_json_file(self.model_dir(name))

    def finetuned(self, name: str) -> Path:
        """A fine-tuned model's directory (`recharness finetune`'s default output)."""
        return self.path / "finetuned" / name

    def finetuned_dirs(self) -> list[Path]:
        """Every fine-tuned model's directory in the run, by name (not a `<name>.checkpoint` beside it, nor the
        `.tmp` / `.old` copies of a directory being replaced)."""
        d = self.path / "finetuned"
        return sorted(p for p in d.iterdir() if p.is_dir() and not p.name.endswith((".checkpoint", ".tmp", ".old"))) \
            if d.is_dir() else []

    def earlier_build(self, build: str) -> Path:
        """Where `eval` keeps what was made for an earlier build of this directory (`build`: its fingerprint)
        while another build is in it: its answers, trained references, judgments, import reports."""
        return self.path / "earlier-builds" / build

    def build_outputs(self, build: str) -> list[tuple[Path, Path]]:
        """(folder, where it is kept while another build is in the directory) for each folder whose content
        answers one build (`build`): predictions/ (and references), models/, judgments/, imports/."""
        keep = self.earlier_build(build)
        return [(p, keep / p.name) for p in (self.predictions_dir, self.models_dir, self.judgments_dir,
                                             self.imports_dir)]

    def label_scores(self, name: str) -> Path:
        """A released layout's predictions scored against its labels (`score --labels`)."""
        return self.path / "label_scores" / f"{check_name(name)}.json"

    @property
    def judgments_dir(self) -> Path:
        return self.path / "judgments"

    def judgments(self, stem: str, judge: str) -> Path:
        return self.judgments_dir / f"{stem}__{judge}.jsonl"

    @property
    def imports_dir(self) -> Path:
        return self.path / "imports"

    def import_reports(self) -> list[Path]:
        d = self.imports_dir
        return sorted(d.glob("*.json")) if d.exists() else []

    def import_report(self, method: str) -> Path:
        """What `score --predictions` imported as `method`, and what it could not use."""
        return self.imports_dir / f"{method}.json"

    def scores(self, fmt: str = "json") -> Path:
        return self.path / f"scores.{fmt}"

    @property
    def commands_log(self) -> Path:
        """The recharness commands run on this directory, one JSON line each (shown in the report)."""
        return self.path / "commands.jsonl"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    # ---- reading
    def has_build(self) -> bool:
        return self.build_json.exists()

    def build_info(self) -> dict:
        """build.json, checked to be JSON with the keys every stage reads."""
        info_path = self.build_json
        if not info_path.exists():
            raise ConfigError(f"no build in {self.path}: run `recharness build` first (or pass the right --out)")
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of more digits than int reads
            raise InputError(info_path, f"not valid JSON ({e})") from None
        if not isinstance(info, dict):
            raise InputError(info_path, "expected a JSON object")
        for key in ("suite", "dataset", "tasks"):
            if key not in info:
                raise InputError(info_path, "missing key", field=key)
        # what every stage reads, of the type `build` wrote: an edited value is named here, not met as a traceback
        wrong = next((k for k, ok in _BUILD_TYPES.items() if k in info and not ok(info[k])), None)
        if wrong is not None:
            raise InputError(info_path, f"{json.dumps(info[wrong], default=str)[:60]} is not {_BUILD_WANT[wrong]}: "
                                        "run `recharness build` again", field=wrong)
        return info

    def load_build(self) -> tuple[dict, list[dict]]:
        """(build.json, samples): the samples file as `build` wrote it (its hash and count, where build.json
        records them: a truncated, emptied or edited file is refused), each sample with an `id` and a
        `task`, no id twice."""
        info = self.build_info()
        if not self.samples_jsonl.exists():
            raise InputError(self.samples_jsonl, "missing: run `recharness build` again")
        check_samples_file(self.samples_jsonl, info, self.build_json)
        samples = list(read_jsonl(self.samples_jsonl))
        # builds made before fingerprints existed get theirs from the file itself
        info.setdefault("fingerprint", fingerprint(self.samples_jsonl))
        seen: dict[str, int] = {}
        for i, smp in enumerate(samples, 1):
            if not isinstance(smp, dict):
                raise InputError(self.samples_jsonl, "a sample is a JSON object", line=i)
            for key in ("id", "task"):
                if key not in smp:
                    raise InputError(self.samples_jsonl, "missing key", line=i, field=key)
                if not isinstance(smp[key], str):
                    raise InputError(self.samples_jsonl, f"{json.dumps(smp[key], default=str)[:40]} is not text",
                                     line=i, field=key)
            if smp["id"] in seen:
                raise InputError(self.samples_jsonl, f"sample id {smp['id']!r} again (first on line {seen[smp['id']]})",
                                 line=i, field="id")
            seen[smp["id"]] = i
        return info, samples


#: build.json's keys as `build` writes them (a key left out is an older build's, checked where it is read)
_BUILD_TYPES = {
    "suite": lambda v: isinstance(v, str), "dataset": lambda v: isinstance(v, str),
    "tasks": lambda v: isinstance(v, list) and bool(v) and all(isinstance(t, str) for t in v),
    "options": lambda v: v is None or isinstance(v, dict),
    "seed": lambda v: is_whole(v) and v >= 0, "limit": lambda v: v is None or (is_whole(v) and v >= 1),
    "samples_sha256": lambda v: isinstance(v, str) and len(v) == 64,
    "samples_count": lambda v: is_whole(v) and v >= 0, "fingerprint": lambda v: isinstance(v, str),
}
_BUILD_WANT = {"suite": "a suite's name", "dataset": "a dataset's name or path", "tasks": "a list of task names",
               "options": "an object of options", "seed": "a whole number >= 0", "limit": "null or a whole number >= 1",
               "samples_sha256": "a sha256 in hex", "samples_count": "a whole number >= 0",
               "fingerprint": "a build fingerprint"}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def missing_side_files(run_dir: Path | str) -> list[str]:
    """The training files the run's build.json recorded that are gone (paths relative to the run): a
    reader that fell back to another split without them (leave-last-out over the whole dataset) would
    fit on the samples' targets."""
    rd = RunDir(run_dir)
    if not rd.build_json.exists():
        return []
    recorded = rd.build_info().get("side_files") or {}
    return sorted(rel for rel in recorded if not (rd.path / rel).exists())


def check_side_file(run_dir: Path | str, path: Path) -> Path:
    """`path`, a training file a build wrote beside its samples, if it is the one the run's build.json
    recorded (builds that recorded none are taken as they are); else an InputError: a rebuild killed or
    failed after writing it left the previous build's samples beside another split's training rows, and a
    model fitted on those could have seen the samples' targets."""
    rd = RunDir(run_dir)
    if not rd.build_json.exists():
        return path
    recorded = rd.build_info().get("side_files")
    if recorded is None:
        return path
    rel = Path(path).resolve().relative_to(rd.path.resolve()).as_posix()
    want = recorded.get(rel)
    if want is None or file_sha256(path) != want:
        raise InputError(path, f"not the training file {rd.build_json.name} recorded ("
                               + ("it recorded none here" if want is None else "its sha256 differs")
                               + "): an interrupted or failed rebuild left it; run `recharness build` again")
    return path


def samples_record(path: Path, n: int) -> dict:
    """What build.json records of the samples file it wrote, so later stages can tell it is unchanged."""
    return {"samples_sha256": file_sha256(path), "samples_count": n}


def check_samples_file(path: Path, info: dict, build_json: Path) -> None:
    """InputError when the samples file no longer is the one its build recorded (builds that recorded
    nothing are taken as they are)."""
    want = info.get("samples_sha256")
    if not want:
        return
    got = file_sha256(path)
    if got != want:
        with open(path, "rb") as f:
            lines = sum(1 for _ in f)
        raise InputError(path, f"changed since `build` wrote it ({lines} lines now, {info.get('samples_count', '?')} "
                               f"built; sha256 {got[:12]}… is not {want[:12]}… as {build_json.name} records): "
                               "run `recharness build` again")

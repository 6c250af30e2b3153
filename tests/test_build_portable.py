"""The llama.cpp engine is built portable: no AMX tile code that crashes VMs with AMX-advertising CPUs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from recharness.models.llama_build import LLAMA_CPP_VERSION, portable_cmake_args

REPO = Path(__file__).resolve().parents[1]
AMX = re.compile(rb"\b(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tdpb[su]{2}d|tdpbf16ps)\b")


def _ggml_libraries() -> list[Path]:
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    root = Path(llama_cpp.__file__).parent
    libs = sorted({p.resolve() for p in root.rglob("libggml*.so*")} | {p.resolve() for p in root.rglob("libllama*.so*")})
    assert libs, f"no ggml libraries under {root}"
    return libs


def test_installed_engine_has_no_amx_instructions():
    if shutil.which("objdump") is None:
        pytest.skip("objdump not installed (binutils)")
    found = {}
    for lib in _ggml_libraries():
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, check=True).stdout
        hits = AMX.findall(asm)
        if hits:
            found[lib.name] = len(hits)
    assert not found, f"AMX tile instructions in {found}: rebuild with `make clean install` (portable CMAKE_ARGS)"


def test_makefile_pyproject_and_hint_agree_on_the_build():
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    out = subprocess.run(["make", "-s", "-C", str(REPO), "llama-args"], capture_output=True, text=True, check=True)
    version, args = out.stdout.strip().split(" ", 1)
    assert version == LLAMA_CPP_VERSION
    assert f'"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"' in (REPO / "pyproject.toml").read_text()
    assert args.split() == portable_cmake_args().split()
    assert "-DGGML_NATIVE=OFF" in args.split() and "march=native" not in args

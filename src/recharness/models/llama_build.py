"""How llama-cpp-python is built: portable by default.

A `-march=native` build on a CPU that advertises AMX makes ggml route matrix
products through AMX tiles; VMs that do not grant tile state then crash at the
first generation (SIGSEGV in `ggml_backend_amx_mul_mat`). The portable flags
target AVX2/FMA (any x86-64 from the last decade) and contain no AMX code.
"""

from __future__ import annotations

import platform

LLAMA_CPP_VERSION = "0.3.36"
_COMMON = "-DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF -DGGML_NATIVE=OFF"
_X86 = "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"


def portable_cmake_args(machine: str | None = None) -> str:
    """CMAKE_ARGS for a build that runs on any host of this architecture (mirrors the Makefile)."""
    machine = (machine or platform.machine()).lower()
    return f"{_COMMON} {_X86}" if machine in ("x86_64", "amd64") else _COMMON


def install_hint() -> str:
    return (f"CMAKE_ARGS=\"{portable_cmake_args()}\" pip install --no-cache-dir "
            f"'llama-cpp-python[server]=={LLAMA_CPP_VERSION}' (compiles in about 5-8 minutes on 2 cores; "
            "the flags keep the build portable), or `make install` in a recharness checkout")

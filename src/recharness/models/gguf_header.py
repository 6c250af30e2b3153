"""What a GGUF file says it is, read from its header alone (no weights loaded, no dependency): the
model's `general.name` and its quantisation, for the model's identity and the report."""

from __future__ import annotations

import struct
from pathlib import Path

#: llama.cpp's `general.file_type` (LLAMA_FTYPE_MOSTLY_*) → the quantisation's usual name
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
              12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
              19: "IQ2_XXS", 20: "IQ2_XS", 24: "IQ1_S", 25: "IQ4_NL", 30: "IQ4_XS", 32: "BF16"}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_WANTED = ("general.name", "general.file_type")


#: longer strings / arrays than any real header holds mean a damaged file (read as "no header")
_MAX_STRING = 1 << 20
_MAX_ARRAY = 1 << 24


def _entries(f, max_kv: int):
    """The header's (key, value) pairs in file order (an array's value is None), read with every length
    bounded: a damaged field raises struct.error instead of allocating or recursing without end."""
    if f.read(4) != b"GGUF":
        return
    version, = struct.unpack("<I", f.read(4))
    if version < 2:
        return
    _tensors, n_kv = struct.unpack("<QQ", f.read(16))

    def text() -> str:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > _MAX_STRING:  # a damaged length field: never allocate it
            raise struct.error(f"string of {n} bytes")
        return f.read(n).decode("utf-8", "replace")

    def value(t: int, depth: int = 0) -> object:
        if t == 8:
            return text()
        if t == 9:
            (at,) = struct.unpack("<I", f.read(4))
            (n,) = struct.unpack("<Q", f.read(8))
            if n > _MAX_ARRAY or depth > 4:
                raise struct.error(f"array of {n} entries at depth {depth}")
            if at in _SCALAR:
                f.seek(n * struct.calcsize(_SCALAR[at]), 1)
            else:
                for _ in range(n):
                    value(at, depth + 1)
            return None
        fmt = _SCALAR[t]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

    for _ in range(min(n_kv, max_kv)):
        key = text()
        (t,) = struct.unpack("<I", f.read(4))
        yield key, value(t)


_DAMAGED = (OSError, struct.error, KeyError, UnicodeDecodeError, OverflowError, ValueError)


def read_header(path: Path | str, *, max_kv: int = 4096) -> dict[str, object]:
    """{"general_name": ..., "quantization": ...} where the header has them; {} for a file that is not
    GGUF (or is cut short): the identity then simply lacks them."""
    out: dict[str, object] = {}
    try:
        with open(path, "rb") as f:
            for key, value in _entries(f, max_kv):
                if key == "general.name":
                    out["general_name"] = value
                elif key == "general.file_type" and isinstance(value, int):
                    out["quantization"] = FILE_TYPES.get(value, f"file_type {value}")
                if len(out) == len(_WANTED):
                    break
    except _DAMAGED:
        return out
    return out


def read_general(path: Path | str, *, max_kv: int = 4096) -> dict[str, object]:
    """The `general.*` key-values of a GGUF file (strings and numbers; arrays skipped), read from its header
    without loading it. Writers put the general block first, so reading stops at the first other key: cheap
    even for a large vocabulary. {} for a file that is not GGUF; a damaged header gives what came before."""
    out: dict[str, object] = {}
    try:
        with open(path, "rb") as f:
            for key, value in _entries(f, max_kv):
                if not key.startswith("general."):
                    break
                if value is not None:
                    out[key] = value
    except _DAMAGED:
        return out
    return out

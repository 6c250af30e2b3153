"""A user's own GGUF carries its file hash in its identity: a file replaced under the same name is another
model (resume refused), and the hash is computed once per file version, not on every run."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from recharness.core.errors import ConfigError
from recharness.models import llamacpp
from recharness.models.llamacpp import LlamaCppBackend, file_sha256_cached
from recharness.runner import pipeline
from tests.test_finetune_gguf import _gguf


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("RECHARNESS_HOME", str(h))
    return h


def test_a_users_gguf_identity_has_its_sha256(tmp_path, home):
    path = _gguf(tmp_path / "mine.gguf", [("general.name", "m"), ("general.file_type", 7)])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert LlamaCppBackend(path).identity() == {
        "backend": "llamacpp", "model": "mine", "file": "mine.gguf", "n_ctx": 4096, "general_name": "m",
        "quantization": "Q8_0", "sha256": digest[:16]}


def test_a_gguf_replaced_under_the_same_name_is_another_model_and_resume_is_refused(tmp_path, home):
    path = _gguf(tmp_path / "model.gguf", [("general.name", "m"), ("general.description", "first")])
    first = LlamaCppBackend(path).identity()
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "s1", "model": first}) + "\n")
    pipeline.check_same_model(preds, LlamaCppBackend(path).identity())  # the same file: resumes
    st = path.stat()
    # same name, same header name, same size: only the bytes differ (e.g. re-quantised weights)
    _gguf(path, [("general.name", "m"), ("general.description", "other")])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = LlamaCppBackend(path).identity()
    assert {k: v for k, v in second.items() if k != "sha256"} == {k: v for k, v in first.items() if k != "sha256"}
    assert second["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16] != first["sha256"]
    with pytest.raises(ConfigError, match="holds the answers of another model"):
        pipeline.check_same_model(preds, second)


def test_the_hash_is_remembered_by_path_size_and_mtime(tmp_path, home, monkeypatch):
    path = tmp_path / "big.gguf"
    path.write_bytes(b"NOTG" + b"\x01" * 1000)  # not a GGUF header: the hash alone
    calls = []
    from recharness.core import rundir

    real = rundir.file_sha256
    monkeypatch.setattr(rundir, "file_sha256", lambda p: calls.append(p) or real(p))
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    assert file_sha256_cached(path) == want and len(calls) == 1
    assert file_sha256_cached(path) == want and len(calls) == 1  # remembered: not read again
    stored = json.loads((home / llamacpp.HASHES_FILE).read_text())
    st = path.stat()
    assert stored == {str(path.resolve()): {"size": 1004, "mtime_ns": st.st_mtime_ns, "sha256": want}}
    b = LlamaCppBackend(path)
    b.identity(), b.identity()
    assert len(calls) == 1  # a backend's identity (asked per request) never hashes again
    path.write_bytes(b"NOTG" + b"\x02" * 1000)  # same size, new bytes, new mtime
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert file_sha256_cached(path) == hashlib.sha256(path.read_bytes()).hexdigest() != want and len(calls) == 2
    (home / llamacpp.HASHES_FILE).write_text("{not json")  # a damaged store: hashed again, rewritten
    assert file_sha256_cached(path) == hashlib.sha256(path.read_bytes()).hexdigest() and len(calls) == 3
    assert json.loads((home / llamacpp.HASHES_FILE).read_text())[str(path.resolve())]["size"] == 1004


def test_a_builtin_keeps_its_published_hash_without_reading_the_file(tmp_path, home, monkeypatch):
    path = tmp_path / "builtin.gguf"
    path.write_bytes(b"GGUF")
    from recharness.core import rundir

    monkeypatch.setattr(rundir, "file_sha256", lambda p: pytest.fail("a built-in is not hashed again"))
    assert LlamaCppBackend(path, sha256="ab" * 32).identity()["sha256"] == "ab" * 8


def test_a_damaged_header_length_reads_as_no_header(tmp_path):
    import struct

    from recharness.models.gguf_header import read_header

    bad = tmp_path / "bad.gguf"
    # version 3, 0 tensors, 1 key whose length field claims 2**60 bytes
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**60) + b"general.name")
    assert read_header(bad) == {}
    # the general block reader (a fine-tune's identity) is bounded alike: before, MemoryError / OverflowError
    from recharness.models.gguf_header import read_general as gguf_general
    from recharness.models.llamacpp import finetune_identity

    assert gguf_general(bad) == {} and finetune_identity(bad) is None
    # arrays of arrays nested past any real header: not followed down
    nest = b"".join(struct.pack("<IQ", 9, 1) for _ in range(50_000))
    deep = tmp_path / "deep.gguf"
    deep.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 12) + b"general.tags"
                     + struct.pack("<I", 9) + nest)
    assert gguf_general(deep) == {} and read_header(deep) == {}

"""Runner pieces: durable JSONL, the response cache, resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recharness.core.errors import InputError
from recharness.core.io import JsonlAppender, read_jsonl, repair_torn_tail, write_jsonl_atomic
from recharness.core.types import GenerationParams
from recharness.execution.cache import ResponseCache, cache_key

REPO = Path(__file__).resolve().parents[1]


def test_torn_tail_is_cut_and_whole_lines_kept(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_bytes(b'{"id":"a"}\n{"id":"b"}\n{"id":"c","out')
    assert repair_torn_tail(p) == len(b'{"id":"c","out')
    assert [r["id"] for r in read_jsonl(p)] == ["a", "b"]
    with JsonlAppender(p) as w:
        w.write({"id": "c"})
    assert [r["id"] for r in read_jsonl(p)] == ["a", "b", "c"]


def test_a_torn_tail_cut_after_an_inner_brace_is_dropped_when_reading(tmp_path):
    """A kill can cut a record right after a nested object's `}`: the reader still takes it for a torn tail (no
    newline after it), so a run resumes; a bad line followed by a newline is an error as before."""
    from recharness.core.errors import InputError
    from recharness.execution.executor import answered

    p = tmp_path / "p.jsonl"
    p.write_bytes(b'{"id":"a","model":{"backend":"fake"}}\n{"id":"b","task":"t","model":{"backend":"fake"}')
    assert [r["id"] for r in read_jsonl(p, tolerate_torn_tail=True)] == ["a"]
    assert list(answered(p)) == ["a"]
    p.write_bytes(b'{"id":"a"}\n{"id":"b","model":{"backend":"fake"}\n{"id":"c"}\n')
    with pytest.raises(InputError, match="line 2"):
        list(read_jsonl(p, tolerate_torn_tail=True))
    p.write_bytes(b'{"id":"a"}\n{"task":"t"}\n')  # a record without an id: named, not a KeyError
    with pytest.raises(InputError, match=r"line 2.*without a sample id|without a sample id.*line 2"):
        answered(p)


def test_bad_line_names_file_and_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"id": 1}\n\n[1, 2]\n')
    with pytest.raises(InputError, match=r"s\.jsonl, line 3: expected a JSON object"):
        list(read_jsonl(p))
    p.write_text('{"id": 1}\n{"id": \n{"id": 3}\n')
    with pytest.raises(InputError, match=r"line 2: not valid JSON"):
        list(read_jsonl(p))


def test_atomic_write_leaves_no_temp(tmp_path):
    p = tmp_path / "x.jsonl"
    assert write_jsonl_atomic(p, [{"a": 1}, {"a": 2}]) == 2
    assert [r["a"] for r in read_jsonl(p)] == [1, 2]
    assert not list(tmp_path.glob("*.tmp"))


def test_cache_key_depends_on_every_part():
    ident = {"backend": "llamacpp", "model": "m"}
    msgs = [{"role": "user", "content": "hi"}]
    base = cache_key("generate", ident, GenerationParams().model_dump(mode="json"), msgs)
    assert base == cache_key("generate", dict(ident), GenerationParams().model_dump(mode="json"), list(msgs))
    assert base != cache_key("generate", {**ident, "model": "n"}, GenerationParams().model_dump(mode="json"), msgs)
    assert base != cache_key("generate", ident, GenerationParams(max_tokens=9).model_dump(mode="json"), msgs)
    assert base != cache_key("generate", ident, GenerationParams().model_dump(mode="json"), [{"role": "user", "content": "hi!"}])
    assert base != cache_key("options", ident, GenerationParams().model_dump(mode="json"), msgs)


def test_cache_roundtrip_and_persistence(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("k", {"text": "héllo", "n": 1})
    c.close()
    c2 = ResponseCache(tmp_path / "c.sqlite")
    assert c2.get("k") == {"text": "héllo", "n": 1}
    assert c2.get("missing") is None
    assert len(c2) == 1


@pytest.mark.llm
@pytest.mark.heavy  # a real model killed mid-run (minutes on 2 busy cores); test_faults_cli kills a fake-server run
def test_kill_9_then_resume_completes_every_sample_once(ml1m, smollm2_path, tmp_path):
    """A real `recharness run` subprocess is killed mid-run; the rerun finishes the rest."""
    env = {**os.environ, "RECHARNESS_HOME": os.environ["RECHARNESS_HOME"]}
    cli = [sys.executable, "-m", "recharness.cli"]
    out = tmp_path / "run"
    subprocess.run(cli + ["build", "llmrec", "-d", "ml-1m", "-t", "direct", "-n", "8", "-o", str(out),
                          "--option", "n_candidates=5", "--option", "history_len=3", "--option", "max_tokens=40"], check=True, env=env)
    samples = [r["id"] for r in read_jsonl(out / "samples.jsonl")]
    assert len(samples) == 8
    pred = out / "predictions" / "smollm2-135m.jsonl"
    run = cli + ["run", "llmrec", "-d", "ml-1m", "-m", "smollm2-135m", "-o", str(out), "--no-cache"]
    proc = subprocess.Popen(run, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if pred.exists() and pred.read_bytes().count(b"\n") >= 2:
            break
        if proc.poll() is not None:
            pytest.fail("run finished before it could be killed")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = [json.loads(line)["id"] for line in pred.read_bytes().split(b"\n") if line.strip().endswith(b"}")]
    assert 2 <= len(before) < 8, "the kill should land mid-run"
    subprocess.run(run, check=True, env=env, stdout=subprocess.DEVNULL)
    after = [r["id"] for r in read_jsonl(pred)]
    assert sorted(after) == sorted(samples)  # every sample, none twice
    assert after[: len(before)] == before  # finished lines were kept as they were

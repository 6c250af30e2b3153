"""`recharness finetune`: training examples from the build's training split only, LoRA that learns,
resume after a kill to the same adapter, and an exported `hf:DIR` model the hf backend scores with.

The model tests load the built-in SmolLM2 GGUF through transformers once (~15-25 s) and train on
a handful of short examples (history_len=2), a few steps each.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from recharness.core.errors import ConfigError
from recharness.runner import pipeline

# fine-tuning trains real models for minutes: `make test-heavy`, not `make test` (README)
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def ctr_run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "ctr"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=20,
                   options={"history_len": 2, "train_pairs": 400})
    return out


@pytest.fixture(scope="module")
def seqrec_run(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "seqrec"
    pipeline.build("recbench", "ml-1m", out, tasks=["seqrec"], seed=0, limit=20, options={"train_sequences": 300})
    return out


def test_ctr_examples_come_from_the_training_pairs_never_a_test_sample(ml1m, ctr_run):
    import polars as pl

    from recharness.tasks.recbench.finetune import ctr_examples

    _, samples = pipeline.load_build(ctr_run)
    exs = ctr_examples(ctr_run, ml1m)
    train = pl.read_parquet(ctr_run / "recbench" / "train.parquet")
    assert len(exs) == train.height > 100
    test_pairs = {(s["user_id"], s["item_id"]) for s in samples}
    test_prompts = {json.dumps(s["messages"]) for s in samples}
    assert not {e.key for e in exs} & test_pairs
    assert not {json.dumps(e.messages) for e in exs} & test_prompts
    assert {e.answer for e in exs} == {"Yes", "No"}
    assert all((e.answer == "Yes") == (e.label == 1) for e in exs)
    # the same prompt layout as the test samples: system instruction, then history and candidate
    assert exs[0].messages[0] == samples[0]["messages"][0]
    assert exs[0].messages[1]["content"].startswith("User behavior sequence:")
    # a sample of them is seeded
    assert [e.id for e in ctr_examples(ctr_run, ml1m, limit=10, seed=1)] == \
           [e.id for e in ctr_examples(ctr_run, ml1m, limit=10, seed=1)]


def test_an_example_that_is_a_test_sample_is_refused(ml1m, ctr_run):
    from recharness.finetune.examples import Example, check_disjoint

    _, samples = pipeline.load_build(ctr_run)
    s = samples[0]
    leaked = Example("x", s["messages"], "Yes", 1, key=(s["user_id"], s["item_id"]))
    with pytest.raises(ConfigError, match="coincides with a test sample"):
        check_disjoint([leaked], samples, lambda t: (t["user_id"], t["item_id"]))


def test_seqrec_examples_in_item_tokens_never_a_test_target(ml1m, seqrec_run):
    from recharness.finetune.items import id_vocab
    from recharness.tasks.recbench.finetune import seqrec_examples

    _, samples = pipeline.load_build(seqrec_run)
    vocab = id_vocab(ml1m.items["item_id"].to_list())
    exs = seqrec_examples(seqrec_run, vocab)
    assert len(exs) > 100
    assert not {e.key for e in exs} & {(s["user_id"], s["target"]) for s in samples}
    e = exs[0]
    assert e.answer.startswith("<item_") and e.answer.endswith(">")
    assert "<item_" in e.messages[1]["content"]


def test_ctr_examples_with_item_ids_write_every_item_as_its_token(ml1m, ctr_run):
    """Group D's examples: the same training pairs and labels as the text ones, items as <item_ID>."""
    import polars as pl

    from recharness.finetune.items import UNKNOWN, id_vocab
    from recharness.tasks.recbench.finetune import ctr_examples

    vocab = id_vocab(ml1m.items["item_id"].to_list())
    text, ids = ctr_examples(ctr_run, ml1m, limit=30, seed=2), ctr_examples(ctr_run, ml1m, limit=30, seed=2, vocab=vocab)
    assert [(e.key, e.answer) for e in ids] == [(e.key, e.answer) for e in text]
    pair = pl.read_parquet(ctr_run / "recbench" / "train.parquet").filter(
        (pl.col("user_id") == ids[0].key[0]) & (pl.col("item_id") == ids[0].key[1])).row(0, named=True)
    want = " ".join(f"<item_{i}>" for i in pair["history"])
    assert ids[0].messages[1]["content"] == (f"User behavior sequence: {want}\nCandidate item: <item_{pair['item_id']}>"
                                             "\nAnswer (Yes/No):")
    assert vocab.ctr_messages([], "no-such-item")[1]["content"].endswith(f"Candidate item: {UNKNOWN}\nAnswer (Yes/No):")


# --- with the model --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(smollm2_path):
    pytest.importorskip("peft", reason="the train extra is not installed")
    pytest.importorskip("transformers", reason="the train extra is not installed")
    from recharness.finetune.api import load_base

    return load_base(str(smollm2_path))


def _encoded(tok, exs):
    from recharness.finetune.lora import encode

    return [encode(tok, e.messages, e.answer) for e in exs]


@pytest.mark.llm
def test_a_few_steps_raise_the_probability_of_the_right_answers(base, ml1m, ctr_run, tmp_path):
    from recharness.finetune.export import export_merged
    from recharness.finetune.lora import LoraSettings, answer_logprobs, attach_lora, train
    from recharness.models.hf import HFBackend
    from recharness.tasks.recbench.finetune import ctr_examples

    tok, model = base
    exs = ctr_examples(ctr_run, ml1m, limit=6, seed=3)
    assert {e.answer for e in exs} == {"Yes", "No"}
    data = _encoded(tok, exs)
    settings = LoraSettings(rank=8, alpha=32, lr=2e-3, batch=6, micro_batch=6, max_steps=4, dropout=0.0)
    pm = attach_lora(copy.deepcopy(model), settings)
    before = answer_logprobs(pm, tok, data)
    res = train(pm, tok, data, settings, tmp_path / "ckpt")
    after = answer_logprobs(pm, tok, data)
    assert sum(after) > sum(before) + 0.5, (before, after)
    assert res.steps == 4 and res.tokens > 0 and res.tokens_per_s > 0

    # exported as hf:DIR: the hf backend loads it, its P(Yes) is the adapter's, and a run scores
    p_peft = [math.exp(x) for x in answer_logprobs(pm, tok, data[:2])]
    out = export_merged(pm, tok, tmp_path / "model", {"base": "smollm2-135m", "steps": res.steps})
    assert (out / "config.json").exists() and "quantization_config" not in json.loads((out / "config.json").read_text())
    hf = HFBackend(str(out))
    assert hf.identity()["finetune"]["weights"]
    for e, p in zip(exs[:2], p_peft):
        probs = hf.score_options_sync(e.messages, ["Yes", "No"])
        got = math.exp(probs.logprobs[e.answer])
        assert abs(got - p) < 1e-3, (got, p)  # the first token of "Yes" / " Yes" vs "Yes" alone: ~equal
    path, _ = pipeline.run(ctr_run, hf, "ft-smollm2", limit=2, use_cache=False)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 2 and all(r["valid"] and 0 < r["parsed"]["p_yes"] < 1 for r in recs)
    assert recs[0]["model"]["finetune"]["steps"] == 4


@pytest.mark.llm
def test_resume_after_a_kill_reaches_the_same_adapter(base, tmp_path):
    import torch

    from recharness.finetune.lora import Encoded, LoraSettings, attach_lora, train, trainable_state

    tok, model = base
    ids = tok("The quick brown fox jumps over the lazy dog and then", add_special_tokens=False)["input_ids"]
    data = [Encoded(ids[k:] + ids[:k], 8) for k in range(6)]  # 6 short examples, answer = last tokens
    settings = LoraSettings(rank=4, alpha=16, lr=1e-3, batch=2, micro_batch=1, max_steps=5, dropout=0.1,
                            checkpoint_every=1)

    straight = attach_lora(copy.deepcopy(model), settings)
    train(straight, tok, data, settings, tmp_path / "a")
    want = trainable_state(straight)

    class Killed(Exception):
        pass

    def kill_at_3(info):
        if info["step"] == 3:
            raise Killed

    first = attach_lora(copy.deepcopy(model), settings)
    with pytest.raises(Killed):
        train(first, tok, data, settings, tmp_path / "b", on_step=kill_at_3)
    del first
    again = attach_lora(copy.deepcopy(model), settings)  # a fresh process: new model, same settings
    res = train(again, tok, data, settings, tmp_path / "b")
    assert res.resumed_from == 3 and len(res.losses) == 2
    got = trainable_state(again)
    assert got.keys() == want.keys()
    for k in want:
        assert torch.allclose(got[k], want[k], atol=1e-7, rtol=0), k
    # other settings never resume from that checkpoint
    other = LoraSettings(rank=4, alpha=16, lr=5e-4, batch=2, micro_batch=1, max_steps=5, checkpoint_every=1)
    with pytest.raises(ConfigError, match="other settings"):
        train(attach_lora(copy.deepcopy(model), other), tok, data, other, tmp_path / "b")
    # nothing in a checkpoint needs unpickling: every .pt loads with weights_only=True, the rest is JSON
    for f in (tmp_path / "b").glob("*.pt"):
        torch.load(f, weights_only=True)
    json.loads((tmp_path / "b" / "rng.json").read_text())


@pytest.mark.llm
def test_a_checkpoint_is_never_resumed_on_another_base_model(base, tmp_path):
    import torch

    from recharness.finetune.lora import Encoded, LoraSettings, attach_lora, base_fingerprint, train

    tok, model = base
    ids = tok("The quick brown fox jumps over the lazy dog and then", add_special_tokens=False)["input_ids"]
    data = [Encoded(ids[k:] + ids[:k], 8) for k in range(4)]
    settings = LoraSettings(rank=4, alpha=16, lr=1e-3, batch=2, micro_batch=2, max_steps=3, dropout=0.0,
                            checkpoint_every=1)

    def kill_at_1(info):
        if info["step"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(attach_lora(copy.deepcopy(model), settings), tok, data, settings, tmp_path / "c",
              meta={"base_model": "smollm2-135m"}, on_step=kill_at_1)
    state = json.loads((tmp_path / "c" / "state.json").read_text())
    assert state["step"] == 1 and state["base_model"] == "smollm2-135m" and state["base_weights"]

    other = copy.deepcopy(model)  # another base: the same architecture, one weight changed
    with torch.no_grad():
        other.model.norm.weight.mul_(1.5)
    pm = attach_lora(other, settings)
    assert base_fingerprint(pm) != state["base_weights"]
    with pytest.raises(ConfigError, match="another base model"):
        train(pm, tok, data, settings, tmp_path / "c", meta={"base_model": "other.gguf"})
    assert json.loads((tmp_path / "c" / "state.json").read_text())["step"] == 1  # left as it was

    # the same base under another spelling (a path to the same GGUF) still resumes
    res = train(attach_lora(copy.deepcopy(model), settings), tok, data, settings, tmp_path / "c",
                meta={"base_model": "/models/smollm2-135m.gguf"})
    assert res.resumed_from == 1 and len(res.losses) == 2


@pytest.mark.llm
def test_id_tokens_train_and_cbs_answers_only_catalog_items(base, tmp_path):
    from recharness.finetune.examples import Example
    from recharness.finetune.export import export_merged
    from recharness.finetune.items import id_vocab, recommend
    from recharness.finetune.lora import LoraSettings, attach_lora, encode, train
    from recharness.models.hf import HFBackend

    tok0, model = base
    tok, m = copy.deepcopy(tok0), copy.deepcopy(model)
    vocab = id_vocab([str(i) for i in range(1, 31)])
    new = vocab.add_to(tok, m)
    assert len(new) == 30 and m.get_input_embeddings().weight.shape[0] == len(tok)
    assert m.get_input_embeddings().weight.data_ptr() == m.get_output_embeddings().weight.data_ptr()  # still tied
    end = [tok.convert_tokens_to_ids("<|im_end|>")]
    exs = [Example(f"e{k}", vocab.messages([str(k), str(k + 1)]), vocab.text(str(k + 2))) for k in range(1, 9)]
    data = [encode(tok, e.messages, e.answer, end) for e in exs]
    settings = LoraSettings(rank=4, alpha=16, lr=3e-3, batch=8, micro_batch=8, max_steps=3, dropout=0.0)
    pm = attach_lora(m, settings, new)
    assert any("trainable_tokens" in n for n, p in pm.named_parameters() if p.requires_grad)
    res = train(pm, tok, data, settings, None)
    assert res.losses[-1] < res.losses[0]
    d = export_merged(pm, tok, tmp_path / "id", {"base": "smollm2-135m", "suite": "recbench", "task": "seqrec",
                                                  "items": "id"})
    items, invalid, _ = recommend(HFBackend(str(d)), vocab, ["1", "2"], beams=5)
    assert invalid == 0 and 1 <= len(items) <= 5 and set(items) <= set(vocab.items) - {"1", "2"}


@pytest.mark.llm
def test_an_id_ctr_model_is_scored_resumably_and_lands_in_table_4_group_d(base, ml1m, ctr_run, tmp_path):
    """Group D end to end: train on identifier prompts, `answer_build` (= `run -m ft:DIR`) scores P(Yes) from the logits
    (killed after two answers, it resumes without redoing or losing one), `score` reads it, and
    Table 4 shows it under D, not among the zero-shot LLMs of Table 3."""
    from recharness.finetune.api import answer_build
    from recharness.finetune.export import export_merged
    from recharness.finetune.items import id_vocab
    from recharness.finetune.lora import LoraSettings, attach_lora, encode, train
    from recharness.models.hf import HFBackend
    from recharness.tasks.recbench.finetune import ctr_examples
    from recharness.tasks.recbench.tables import paper_tables

    tok0, model = base
    tok, m = copy.deepcopy(tok0), copy.deepcopy(model)
    vocab = id_vocab(ml1m.items["item_id"].to_list())
    new = vocab.add_to(tok, m)
    exs = ctr_examples(ctr_run, ml1m, limit=4, seed=0, vocab=vocab)
    settings = LoraSettings(rank=4, alpha=16, lr=1e-3, batch=4, micro_batch=4, max_steps=1, dropout=0.0)
    pm = attach_lora(m, settings, new)
    train(pm, tok, [encode(tok, e.messages, e.answer) for e in exs], settings, None)
    d = export_merged(pm, tok, tmp_path / "id-ctr", {"base": "smollm2-135m", "suite": "recbench", "task": "ctr",
                                                        "items": "id", "steps": 1})
    vocab.save(d)

    class Killed(Exception):
        pass

    seen = []

    def kill_after_2(n):
        seen.append(n)
        if len(seen) == 2:
            raise Killed

    with pytest.raises(Killed):
        answer_build(ctr_run, d, "smollm2-ctr-id", limit=3, on_progress=kill_after_2)
    pred = ctr_run / "predictions" / "smollm2-ctr-id.jsonl"
    first = [json.loads(x) for x in pred.read_text().splitlines()]
    assert len(first) == 2
    counted = []
    path = answer_build(ctr_run, d, "smollm2-ctr-id", limit=3, on_progress=counted.append)
    assert counted == [2, 1] and path == pred  # two resumed, one answered
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    _, samples = pipeline.load_build(ctr_run)
    assert [r["id"] for r in recs] == [s["id"] for s in samples[:3]]
    assert recs[:2] == first
    hf = HFBackend(str(d))
    s = samples[2]
    lp = hf.score_options_sync(vocab.ctr_messages(s["history"], s["item_id"]), ["Yes", "No"]).logprobs
    assert recs[2]["parsed"]["p_yes"] == pytest.approx(math.exp(lp["Yes"]) / (math.exp(lp["Yes"]) + math.exp(lp["No"])))
    assert recs[2]["model"]["finetune"]["items"] == "id" and recs[2]["valid"]

    rows = [r for r in pipeline.score(ctr_run, resamples=0) if r.method in ("smollm2-ctr-id", "random")]
    md = paper_tables(rows, "ml-1m")
    assert "Table 3" not in md  # a fine-tune is not a zero-shot row
    lines = md.splitlines()
    d_head = lines.index("| **D: LLMs, item IDs (fine-tuned)** | | | |")
    assert lines[d_head + 1].startswith("| smollm2-ctr-id | ")
    assert lines.index("| **conventional models trained here** | | | |") < lines.index(
        next(x for x in lines if x.startswith("| random |")))


@pytest.fixture(scope="module")
def sid_dir(base, ml1m, tmp_path_factory):
    """An SID seqrec fine-tune (untrained LoRA over made-up 2-level codes) written as `recharness finetune` does."""
    from recharness.finetune.export import export_merged
    from recharness.finetune.items import ItemVocab
    from recharness.finetune.lora import LoraSettings, attach_lora

    tok0, model = base
    tok, m = copy.deepcopy(tok0), copy.deepcopy(model)
    items = ml1m.items["item_id"].to_list()
    # a made-up 2-level code per item (the real ones come from data.semantic_ids; the decoder is the same)
    codes = {i: (f"<sid_0_{k % 64}>", f"<sid_1_{k // 64}>") for k, i in enumerate(items)}
    vocab = ItemVocab("sid", codes, sorted({t for c in codes.values() for t in c}), {"n_items": len(items)})
    pm = attach_lora(m, LoraSettings(rank=4, alpha=16, dropout=0.0), vocab.add_to(tok, m))
    d = export_merged(pm, tok, tmp_path_factory.mktemp("ft") / "sid",
                      {"base": "smollm2-135m", "suite": "recbench", "task": "seqrec", "items": "sid"})
    vocab.save(d)
    return d


@pytest.mark.llm
def test_an_sid_seqrec_model_answers_a_capped_sample_and_lands_in_table_5_group_j(ml1m, seqrec_run, sid_dir):
    """Group J end to end: `answer_build` (= `run -m ft:DIR --limit 2`) declares the cap, `score` judges the model on
    the samples it answered (n_scored), every beam is a catalog item, and Table 5 places it under J."""
    from recharness.finetune.api import answer_build
    from recharness.tasks.recbench.tables import table5

    items = ml1m.items["item_id"].to_list()
    path = answer_build(seqrec_run, sid_dir, "smollm2-seqrec-sid", beams=3, limit=2)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 2 and all(r["parsed"]["sample_cap"] == 2 and r["parsed"]["invalid"] == 0 for r in recs)
    assert all(set(r["parsed"]["top"]) <= set(items) and r["parsed"]["top"] for r in recs)
    row = next(r for r in pipeline.score(seqrec_run, resamples=0) if r.method == "smollm2-seqrec-sid")
    assert row.metrics["n_scored"] == 2 and row.metrics["invalid_share"] == 0.0
    lines = table5({"ML-1M": [row]}).splitlines()
    j = lines.index(next(x for x in lines if x.startswith("| **J: LLMs, semantic IDs")))
    assert lines[j + 1].startswith("| smollm2-seqrec-sid | ") and " | 2 | 0.0% / 0.0% |" in lines[j + 1]


@pytest.mark.llm
def test_an_sid_model_is_an_ordinary_run_row_that_survives_kill9(seqrec_run, sid_dir):
    """`recharness run -m ft:DIR`: killed with SIGKILL after its first answer, the rerun answers the rest;
    every sample exactly once, the first answers kept as they were."""
    import signal
    import subprocess
    import sys
    import time
    from collections import Counter

    from recharness.core.io import read_jsonl

    args = [sys.executable, "-m", "recharness", "run", "recbench", "-o", str(seqrec_run), "-m", f"ft:{sid_dir}",
            "--name", "sid-k9", "--limit", "3", "--no-cache"]
    pred = seqrec_run / "predictions" / "sid-k9.jsonl"
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (pred.exists() and pred.read_text().count("\n") >= 1):
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = {r["id"]: r for r in read_jsonl(pred, tolerate_torn_tail=True)}
    assert 1 <= len(first) < 3
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    recs = list(read_jsonl(pred))
    _, samples = pipeline.load_build(seqrec_run)
    want = [s["id"] for s in samples if s["task"] == "seqrec"][:3]
    assert Counter(r["id"] for r in recs) == Counter(want)  # 0 lost, 0 duplicated
    assert all(recs[k] == first[recs[k]["id"]] for k in range(len(first)))
    assert all(r["parsed"]["sample_cap"] == 3 and r["parsed"]["invalid"] == 0 and r["model"]["finetune"]["items"] == "sid"
               for r in recs)


def test_epochs_seen_counts_a_short_last_batch_once():
    from recharness.finetune.api import epochs_seen

    assert epochs_seen(2, 4, 6) == 1.0  # batches of 4 and 2: one pass, not 8/6
    assert epochs_seen(3, 4, 6) == pytest.approx(10 / 6, abs=1e-3)  # then 4 of the second pass
    assert epochs_seen(128, 16, 2048) == 1.0 and epochs_seen(0, 8, 5) == 0.0


def test_recommend_masks_the_history_items_paths():
    """Every other seqrec method ranks items outside the history; an ID/SID model's beams must not be spent there."""
    from recharness.core.types import RankedSequences
    from recharness.finetune.items import id_vocab, recommend
    from recharness.models.cbs import Trie

    vocab = id_vocab(["1", "2", "3", "4"])
    to_item = {(11,): "1", (12,): "2", (13,): "3", (14,): "4"}
    asked = []

    class Fake:
        def rank_constrained_sync(self, request):
            asked.append(request)
            banned = set(request.forbid)
            paths = [p for p in request.trie.paths() if tuple(p) not in banned][: request.beams]
            return RankedSequences([tuple(p) for p in paths], [-1.0] * len(paths), 0.01)

    items, invalid, _ = recommend(Fake(), vocab, ["2", "4", "2"], beams=3, trie=Trie(to_item), to_item=to_item)
    assert sorted(asked[0].forbid) == [(12,), (14,)] and asked[0].ends_turn
    assert items == ["1", "3"] and invalid == 0

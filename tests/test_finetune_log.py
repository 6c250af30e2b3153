"""`recharness finetune` keeps a training log you can watch and resume: one row per optimizer step (epoch,
step, loss, validation: null, seconds), kept in each checkpoint so a killed run that resumes appends to it
(no step twice, none lost), one printed line per epoch and the stop reason. The training loop runs here on
a tiny torch model (no LLM): seconds, not minutes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from recharness.finetune import lora
from recharness.finetune.lora import LoraSettings, continue_log, epoch_line, epoch_rows, log_row, stop_reason


def test_rows_epochs_and_lines_from_a_step_log():
    rows = [log_row(k, loss, 0.5 * k, batch=4, n=6) for k, loss in enumerate([0.9, 0.7, 0.6, 0.4, 0.5], 1)]
    # batches of 4 and 2 make one pass: epoch as passes over the examples so far
    assert [r["epoch"] for r in rows] == [0.667, 1.0, 1.667, 2.0, 2.667]
    assert rows[0] == {"epoch": 0.667, "step": 1, "loss": 0.9, "metric": None, "valid": None, "seconds": 0.5}
    eps = epoch_rows(rows, per_epoch=2)
    assert [(e["epoch"], e["step"]) for e in eps] == [(1.0, 2), (2.0, 4), (2.667, 5)]
    assert [e["loss"] for e in eps] == pytest.approx([0.8, 0.5, 0.5])
    assert [e["best"] for e in eps] == pytest.approx([0.8, 0.5, 0.5])  # no validation: the lowest epoch loss
    assert epoch_line("m-ctr", eps[0]) == "m-ctr epoch 1: loss 0.8000 (best loss 0.8000; no validation) 1.0 s"
    assert epoch_line("m-ctr", eps[2]).startswith("m-ctr epoch 2.667: loss 0.5000")
    # a validation value, where one is logged, is shown and is what "best" follows
    valid = [{**r, "metric": "auc", "valid": v} for r, v in zip(rows, [0.5, 0.6, 0.7, 0.65, 0.66])]
    eps = epoch_rows(valid, per_epoch=2)
    assert [e["valid"] for e in eps] == [0.6, 0.65, 0.66] and [e["best"] for e in eps] == [0.6, 0.65, 0.66]
    assert "valid auc 0.6500 (best 0.6500)" in epoch_line("m", eps[1])
    s = LoraSettings(epochs=2)
    assert stop_reason(s, 6, 0) == "reached epochs=2 (6 steps)"
    assert stop_reason(LoraSettings(max_steps=4), 4, 2) == "reached max_steps=4"
    assert stop_reason(s, 6, 6).startswith("already trained to step 6")


def test_a_resumed_log_keeps_each_step_once():
    prior = [log_row(k, 1.0 / k, k, batch=2, n=6) for k in range(1, 5)]  # steps 1-4 logged, checkpoint at 2
    new = [log_row(k, 0.1, 10 + k, batch=2, n=6) for k in range(3, 6)]
    got = continue_log(prior, 2, new)
    assert [r["step"] for r in got] == [1, 2, 3, 4, 5]
    assert got[:2] == prior[:2] and got[2:] == new  # steps 3-4 as run again, not as lost with the kill


def test_an_old_model_log_is_continued_when_its_checkpoint_kept_none():
    from recharness.finetune.api import final_log

    result = SimpleNamespace(log=[log_row(k, 0.2, 5.0 + k, batch=2, n=6) for k in (3, 4)], resumed_from=2)
    previous = [{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.8}, {"step": 3, "loss": 0.7}]
    rows = final_log(result, previous, batch=2, n=6)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[0] == {"epoch": 0.333, "metric": None, "valid": None, "seconds": None, "step": 1, "loss": 0.9}
    assert rows[2]["loss"] == 0.2  # step 3 as this session ran it
    result.log = [log_row(k, 0.2, k, batch=2, n=6) for k in (1, 2, 3, 4)]  # the checkpoint's rows win
    assert final_log(result, previous, batch=2, n=6) == result.log


# ------------------------------------------------------------------ the real loop on a tiny model

torch = pytest.importorskip("torch")

V, D = 12, 8


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.proj = torch.nn.Linear(D, D)

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(last_hidden_state=self.proj(self.emb(input_ids)))


class _Tiny(torch.nn.Module):
    """What the loop needs of a causal LM: `.model(...)` hidden states and the output embeddings."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = _Inner()
        self.head = torch.nn.Linear(D, V, bias=False)
        self.model.emb.weight.requires_grad_(False)  # frozen: the "base weights" a checkpoint is tied to

    def get_output_embeddings(self):
        return self.head


TOK = SimpleNamespace(pad_token_id=0, eos_token_id=0)
DATA = [lora.Encoded([1 + k % 5, 2 + k % 3, 3, 4 + k % 7], 2) for k in range(6)]


class _Killed(Exception):
    pass


def _train(ckpt, *, epochs=2, kill_at=None, on_epoch=None):
    def on_step(i):
        if i["step"] == kill_at:
            raise _Killed

    s = LoraSettings(rank=1, alpha=1, lr=0.05, batch=2, micro_batch=2, epochs=epochs, checkpoint_every=2)
    return lora.train(_Tiny(), TOK, DATA, s, ckpt, on_step=on_step, on_epoch=on_epoch)


def test_a_killed_training_resumes_and_appends_to_its_log(tmp_path):
    whole = _train(tmp_path / "whole.checkpoint")
    assert [r["step"] for r in whole.log] == [1, 2, 3, 4, 5, 6] and whole.steps_per_epoch == 3
    assert [r["epoch"] for r in whole.log] == [0.333, 0.667, 1.0, 1.333, 1.667, 2.0]
    assert [r["loss"] for r in whole.log] == [round(x, 6) for x in whole.losses]
    assert all(r["valid"] is None and r["metric"] is None for r in whole.log)  # no validation pass
    secs = [r["seconds"] for r in whole.log]
    assert secs == sorted(secs) and secs[-1] > 0

    ckpt = tmp_path / "m.checkpoint"
    with pytest.raises(_Killed):  # killed after step 3: the checkpoint holds steps 1-2
        _train(ckpt, kill_at=3)
    kept = [json.loads(x) for x in (ckpt / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in kept] == [1, 2]
    epochs = []
    res = _train(ckpt, on_epoch=epochs.append)
    assert res.resumed_from == 2
    assert [r["step"] for r in res.log] == [1, 2, 3, 4, 5, 6]  # appended: steps 1-2 not again, 3 not lost
    assert res.log[:2] == kept
    assert [r["loss"] for r in res.log] == pytest.approx([r["loss"] for r in whole.log], abs=1e-6)
    assert [r["seconds"] for r in res.log] == sorted(r["seconds"] for r in res.log)  # elapsed over both sessions
    # one summary per epoch, as the epoch ends, over all its steps (the first session's too)
    assert [(e["epoch"], e["step"]) for e in epochs] == [(1.0, 3), (2.0, 6)]
    assert epochs[0]["loss"] == pytest.approx(sum(r["loss"] for r in res.log[:3]) / 3)
    assert epochs[1]["best"] == pytest.approx(min(epochs[0]["loss"], epochs[1]["loss"]))

    again = _train(ckpt)  # the same command once more: nothing to train, the log is whole, nothing twice
    assert again.resumed_from == 6 and again.losses == [] and again.log == res.log
    more = _train(ckpt, epochs=3)  # a longer run continues from the finished checkpoint
    assert [r["step"] for r in more.log] == list(range(1, 10)) and more.log[:6] == res.log


def test_finetune_prints_a_line_per_epoch_and_why_it_stopped(tmp_path, monkeypatch):
    """The command's output (the training itself stubbed: its callbacks as the loop calls them)."""
    from typer.testing import CliRunner

    from recharness.cli import app
    from recharness.finetune import api

    out = tmp_path / "run"
    rows = [log_row(k, 1.0 - 0.1 * k, float(k), batch=2, n=4) for k in range(1, 5)]

    def fake(suite, task, run_dir, model, save, *, on_epoch=None, **kw):
        for e in epoch_rows(rows, 2):
            on_epoch(e)
        res = SimpleNamespace(out=run_dir / "finetuned" / "smollm2-135m-ctr-text", stopped="reached epochs=2 (4 steps)",
                              notes=[], items="text", summary=lambda: "4 steps")
        return res

    monkeypatch.setattr(api, "finetune", fake)
    res = CliRunner().invoke(app, ["finetune", "recbench", "-t", "ctr", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "smollm2-135m-ctr-text epoch 1: loss 0.8500 (best loss 0.8500; no validation) 2.0 s" in text
    assert "smollm2-135m-ctr-text epoch 2: loss 0.6500 (best loss 0.6500; no validation) 4.0 s" in text
    assert "smollm2-135m-ctr-text: stopped: reached epochs=2 (4 steps)" in text


def test_finetune_writes_the_log_beside_the_model_and_appends_on_resume(ml1m, tmp_path, monkeypatch):
    """`finetune` itself on a real build (the LLM and its export stubbed by the tiny model): a longer run from the
    same checkpoint appends to <out>/train_log.jsonl; the same command again leaves it whole (before, a run with
    nothing left to train wrote an empty log)."""
    from recharness.core.rundir import train_log_file
    from recharness.finetune import api, export
    from recharness.finetune._fs import atomic_dir
    from recharness.runner import pipeline

    run = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", run, tasks=["ctr"], seed=0, limit=4, options={"history_len": 2,
                                                                                      "train_pairs": 200})
    monkeypatch.setattr(api, "load_base", lambda model: (TOK, _Tiny()))
    monkeypatch.setattr(api, "attach_lora", lambda base, settings, new_ids: base)
    monkeypatch.setattr(api, "encode", lambda tok, messages, answer, suffix: lora.Encoded(
        [1, 2 + len(messages[-1]["content"]) % 5, 3, 4 if answer == "Yes" else 5], 3))

    def export_merged(model, tok, out, info):  # the real one merges LoRA into an LLM: the directory alone here
        with atomic_dir(out) as tmp:
            (tmp / export.FINETUNE_INFO).write_text(json.dumps(info, default=str))
        return out

    monkeypatch.setattr(export, "export_merged", export_merged)
    out = tmp_path / "ft"
    kw = {"examples": 6, "batch": 2, "micro_batch": 2, "checkpoint_every": 1}

    def log():
        return [json.loads(x) for x in train_log_file(out).read_text().splitlines()]

    first = api.finetune("recbench", "ctr", run, "smollm2-135m", out, max_steps=2, **kw)
    assert first.stopped == "reached max_steps=2" and [r["step"] for r in log()] == [1, 2]
    assert [r["epoch"] for r in log()] == [0.333, 0.667] and all(r["valid"] is None for r in log())
    two = log()
    lines = []
    longer = api.finetune("recbench", "ctr", run, "smollm2-135m", out, max_steps=4, on_epoch=lines.append, **kw)
    assert longer.train.resumed_from == 2 and [r["step"] for r in log()] == [1, 2, 3, 4] and log()[:2] == two
    assert [r["step"] for r in lines] == [3, 4]  # the epoch ended at step 3, then the last, partial one
    assert json.loads((out / export.FINETUNE_INFO).read_text())["stopped"] == "reached max_steps=4"
    four = log()
    again = api.finetune("recbench", "ctr", run, "smollm2-135m", out, max_steps=4, **kw)
    assert again.stopped.startswith("already trained to step 4") and log() == four


def test_a_checkpoint_past_the_asked_steps_is_refused_not_returned_as_fewer(tmp_path, monkeypatch):
    """A finished 2-epoch fine-tune rerun with epochs=1: its checkpoint (past this run's steps) was returned as a
    model of the smaller count, labelled so, with the longer training's weights."""
    import torch

    from recharness.core.errors import ConfigError
    from recharness.finetune import lora

    model = torch.nn.Linear(2, 2)
    monkeypatch.setattr(lora, "_load", lambda *a, **k: (3, {"step": 3}))  # a checkpoint at step 3
    settings = lora.LoraSettings(max_steps=2, batch=1, micro_batch=1)
    data = [lora.Encoded(ids=[1, 2, 3], n_prompt=2)] * 2
    with pytest.raises(ConfigError, match=r"at step 3, past this run's 2 steps.*ask for at least 3"):
        lora.train(model, type("Tok", (), {"pad_token_id": 0, "eos_token_id": 0})(), data, settings, tmp_path / "ck")


def test_an_example_with_a_test_samples_prompt_but_another_key_is_left_out_not_fatal():
    """The same history and candidate of another user (sparse data, popular items): the fine-tune refused to run
    at all, and a rebuild with the same seed failed alike. Left out; the same key (a split that overlaps its
    test samples) is still refused."""
    from recharness.core.errors import ConfigError
    from recharness.finetune.examples import Example, check_disjoint

    msgs = [{"role": "user", "content": "history: a, b; candidate: c"}]
    samples = [{"user_id": "u1", "item_id": "c", "messages": msgs}]
    key = lambda t: (t["user_id"], t["item_id"])  # noqa: E731
    other = Example("o", msgs, "No", 0, key=("u2", "c"))
    fine = Example("f", [{"role": "user", "content": "history: d; candidate: c"}], "Yes", 1, key=("u3", "c"))
    assert check_disjoint([other, fine], samples, key) == [fine]
    with pytest.raises(ConfigError, match="coincides with a test sample"):
        check_disjoint([Example("x", [], "Yes", 1, key=("u1", "c"))], samples, key)


def test_an_item_answer_ends_with_the_tokenizers_own_end_of_turn():
    """Training appended <|im_end|> whatever the tokenizer (a Llama-3 tokenizer has none: its unknown token or
    None), while decoding stopped at EOS: one rule now, ChatML's token where it exists, else EOS."""
    from recharness.models.hf import end_of_turn_id

    class ChatML:
        eos_token_id = 2

        def get_vocab(self):
            return {"<|im_end|>": 7, "a": 1}

        def convert_tokens_to_ids(self, t):
            return self.get_vocab()[t]

    class Llama3(ChatML):
        eos_token_id = 128009

        def get_vocab(self):
            return {"<|eot_id|>": 128009, "a": 1}

    assert end_of_turn_id(ChatML()) == 7 and end_of_turn_id(Llama3()) == 128009


def test_a_merge_of_fine_tunes_of_different_base_models_is_refused_even_with_a_base(tmp_path):
    """The refusal used to say "give the base with --base", which then merged deltas trained on other weights."""
    from recharness.core.errors import ConfigError
    from recharness.finetune.merge import merge

    dirs = []
    for name, base in (("a", "smollm2-135m"), ("b", "qwen2.5-coder-0.5b-instruct")):
        d = tmp_path / name
        d.mkdir()
        (d / "finetune.json").write_text(json.dumps({"base": base, "task": "pairwise", "items": "text"}))
        dirs.append(d)
    for base in (None, "smollm2-135m"):
        with pytest.raises(ConfigError, match="fine-tuned from different base models"):
            merge(dirs, tmp_path / "out", base=base)


def test_a_fine_tuned_seqrec_answer_reports_the_beams_it_got_and_whether_the_first_is_an_item(monkeypatch):
    """It reported the beams asked for (invalid_share divided by them) and top1_invalid as "no item at all": a
    junk first path before valid ones read as valid, an empty valid answer as a top-1 invalid."""
    from recharness.core.types import RankedSequences
    from recharness.finetune import items as items_mod
    from recharness.models.cbs import Trie
    from recharness.tasks.recbench.finetune import seqrec_answerer

    to_item = {(11,): "1", (12,): "2", (13,): "3"}

    class Fake:
        def load(self):
            return None, None

        def rank_constrained_sync(self, request):
            return RankedSequences([(99,), (11,)], [-0.5, -1.0], 0.01)  # a junk path first, then item 1

    class Vocab:
        def paths(self, tok):
            return to_item

        def messages(self, history):
            return [{"role": "user", "content": " ".join(history)}]

    got: dict = {}
    ranked, invalid, _ = items_mod.recommend(Fake(), Vocab(), ["3"], beams=20, trie=Trie(to_item), to_item=to_item,
                                             stats=got)
    assert ranked == ["1"] and invalid == 1 and got == {"paths": 2, "top1_invalid": True}
    parsed, _ = seqrec_answerer(Fake(), Vocab(), beams=20)({"history": ["3"], "target": "1"})
    assert parsed.value["beams"] == 2 and parsed.value["top1_invalid"] is True and parsed.value["rank"] == 1

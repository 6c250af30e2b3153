"""RecBench fine-tuning (§4.3, Groups D-F and I-J): training examples from the build's own training split.

* ctr: `<run>/recbench/train.parquet`, labelled pairs strictly before each test user's test window;
  the prompt is the test prompt (text items) or the same with item identifiers; the answer Yes / No;
* seqrec: `<run>/recbench/seqrec_train.parquet`, windows of each user's positives before their
  validation and test targets; history and answer in item identifiers (id or semantic-ID tokens).

No example is a test sample (checked: same key, or the same prompt and answer).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from recharness.baselines.base import SEQUENCE_PARTS
from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir, check_side_file
from recharness.core.types import Parsed
from recharness.finetune.examples import Example, build_info, check_disjoint, seeded_rows, test_samples
from recharness.finetune.recipe import Recipe
from recharness.tasks.options import check
from recharness.tasks.recbench.ctr import CtrTask, ctr_messages
from recharness.tasks.recbench.options import CtrOptions
from recharness.tasks.recbench.seqrec import list_rank

SUITE = "recbench"


def ctr_examples(run_dir: Path, dataset, *, limit: int | None = None, seed: int = 0, vocab=None) -> list[Example]:
    """Yes/No examples from the build's training pairs, prompted exactly like its test samples (text
    items), or with `vocab`'s item identifiers."""
    info = build_info(run_dir)
    path = RunDir(run_dir).pairs(SUITE)
    if not path.exists():
        raise ConfigError(f"no training pairs in {path}: build the run with `recharness build recbench -t ctr`")
    opts = check(CtrOptions, info.get("options") or {}, f"{SUITE}/ctr")
    prompt = {"task_description": opts.task_description, "behaviour": opts.behaviour,
              "format_indicator": opts.format_indicator}
    titles = {i: t or i for i, t in zip(dataset.items["item_id"].to_list(), dataset.items["title"].to_list())}
    pairs = seeded_rows(pl.read_parquet(check_side_file(run_dir, path)), limit, seed)
    def messages(h: list[str], i: str) -> list[dict]:
        if vocab is not None:
            return vocab.ctr_messages(h, i)
        return ctr_messages([titles.get(x, x) for x in h], titles.get(i, i), **prompt)

    out = [Example(id=f"train-ctr-{u}-{i}", messages=messages(h, i), answer="Yes" if y == 1 else "No", label=int(y),
                   key=(u, i))
           for u, i, y, h in pairs.select("user_id", "item_id", "label", "history").iter_rows()]
    return check_disjoint(out, test_samples(run_dir, "ctr"), lambda s: (s["user_id"], s["item_id"]))


def seqrec_examples(run_dir: Path, vocab, *, limit: int | None = None, seed: int = 0) -> list[Example]:
    """Next-item examples from the build's training windows, history and target in `vocab`'s item tokens."""
    path = RunDir(run_dir).pairs(SUITE, SEQUENCE_PARTS["train"])
    if not path.exists():
        raise ConfigError(f"no training sequences in {path}: build the run with `recharness build recbench -t seqrec`")
    rows = seeded_rows(pl.read_parquet(check_side_file(run_dir, path)), limit, seed)
    out = [Example(id=f"train-seqrec-{k}", messages=vocab.messages(h), answer=vocab.text(t), key=(u, t))
           for k, (u, h, t) in enumerate(rows.select("user_id", "history", "target").iter_rows())
           if t in vocab.items]
    tests = test_samples(run_dir, "seqrec")
    return check_disjoint(out, tests, lambda s: (s["user_id"], s["target"]))


def _ctr(run_dir: Path, dataset, *, items: str, limit: int | None, seed: int, vocab=None, groups=None) -> list[Example]:
    return ctr_examples(run_dir, dataset, limit=limit, seed=seed, vocab=vocab)


def _seqrec(run_dir: Path, dataset, *, items: str, limit: int | None, seed: int, vocab=None, groups=None) -> list[Example]:
    return seqrec_examples(run_dir, vocab, limit=limit, seed=seed)


def seqrec_answerer(hf, vocab, *, beams: int = 20, sample_cap: int | None = None):
    """An ID/SID seqrec model's answer to a sample by CBS over the catalog's item trie: the target's rank
    among the beams (`beams`, `invalid` = 0). With `sample_cap` (the run answers the first N samples on
    purpose, as `title-cbs`) the answer declares it: `score` judges the model on the samples it answered
    and Table 5 shows that n."""
    from recharness.finetune.items import recommend
    from recharness.models.cbs import Trie

    tok, _ = hf.load()
    to_item = vocab.paths(tok)
    trie = Trie(to_item)  # once: every sample's beam search walks the same trie

    def answer(s: dict) -> tuple[Parsed, float]:
        got: dict = {}
        ranked, invalid, sec = recommend(hf, vocab, s["history"], beams=beams, trie=trie, to_item=to_item, stats=got)
        r = list_rank(ranked, s["target"], set(s["history"]))
        # the beams returned (invalid_share divides by them) and whether the first is no item: as title-cbs reports
        parsed = {"rank": None if math.isinf(r) else int(r), "top": ranked[:10], "beams": got["paths"],
                  "invalid": invalid, "top1_invalid": got["top1_invalid"], "latency_s": round(sec, 4)}
        if sample_cap is not None:
            parsed["sample_cap"] = sample_cap
        return Parsed(parsed), sec

    return answer


def ctr_answerer(hf, vocab, *, beams: int = 20, sample_cap: int | None = None):
    """An ID/SID ctr model's answer (Groups D/F): P(Yes) from the logits of "Yes" and "No" after the
    identifier prompt, as the text models are scored."""
    task = CtrTask()

    def answer(s: dict) -> tuple[Parsed, float]:
        sc = hf.score_options_sync(vocab.ctr_messages(s["history"], s["item_id"]), task.answer_options(s))
        return task.parse_options(s, sc), sc.latency_s

    return answer


#: §4.3: pair-wise LoRA 32/128, list-wise 128/128; lr 1e-4, 1 epoch, batch 64
_TRAIN = {"lr": 1e-4, "epochs": 1, "batch": 64, "max_len": 1024}
RECIPES: dict[str, Recipe] = {
    "ctr": Recipe("ctr", _ctr, items=("text", "id", "sid"), lora=(32, 128), train=_TRAIN, default=True,
                  answerer=ctr_answerer),
    "seqrec": Recipe("seqrec", _seqrec, items=("id", "sid"), lora=(128, 128), train=_TRAIN, answer_ends_turn=True,
                     answerer=seqrec_answerer),
}

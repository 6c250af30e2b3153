"""Item vocabularies for ID / semantic-ID fine-tuning (RecBench §4.3, Groups D/F/I/J), and CBS decoding.

Groups D/F (ctr) write the pair-wise prompt with identifiers (`ctr_messages`) and answer Yes/No;
Groups I/J (seqrec) answer the next item's identifier (`messages`, decoded by `recommend`).

* ``id``: one new token per catalog item, ``<item_ID>`` (P5's unique identifiers).
* ``sid``: one new token per (level, code), ``<sid_L_C>``: `levels` x 256 for the residual levels
  plus the disambiguation level's codes (`data.semantic_ids`); an item is its code tuple.

`ItemVocab.add_to(tok, model)` adds the tokens (`add_tokens` + `resize_token_embeddings`; the
embedding stays tied to `lm_head`) and returns their ids, which LoRA then trains through peft's
`trainable_token_indices`. The vocabulary is saved beside an exported model (`item_vocab.json`),
so `recommend` can rebuild the trie of valid items from the model directory alone.

`recommend` ranks that trie's paths as the answer, ending the turn, through the hf backend's
constrained request (`HFBackend.rank_constrained_sync`): every returned path is a real item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recharness.core.errors import ConfigError
from recharness.core.types import ConstrainedRequest

if TYPE_CHECKING:
    from recharness.models.cbs import Trie
    from recharness.models.hf import HFBackend

VOCAB_FILE = "item_vocab.json"
KINDS = ("id", "sid")
SYSTEM = ("You are a recommender. I will provide a user behavior sequence: the items the user interacted with, "
          "oldest first, each written as its item identifier. Answer with the identifier of the item this user "
          "will interact with next, and nothing else.")
#: ctr (Groups D/F): the text prompt's instruction, items written as identifiers; the answer is Yes or No
CTR_SYSTEM = ("You are a recommender. I will provide a user behavior sequence and a candidate item, each item "
              "written as its item identifier. Please response \"Yes\" or \"No\" to represent whether this user "
              "is interested in the candidate item.")
UNKNOWN = "(unknown item)"


@dataclass
class ItemVocab:
    kind: str
    #: item id -> its token strings, in order
    items: dict[str, tuple[str, ...]]
    #: every added token, in the order they are added to the tokenizer
    tokens: list[str]
    info: dict

    def text(self, item_id: str) -> str:
        return "".join(self.items[item_id])

    def sequence(self, history: list[str]) -> str:
        """The history as identifiers (items outside the vocabulary left out), "(none)" when empty."""
        return " ".join(self.text(i) for i in history if i in self.items) or "(none)"

    def messages(self, history: list[str]) -> list[dict]:
        user = f"User behavior sequence: {self.sequence(history)}\nNext item:"
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]

    def ctr_messages(self, history: list[str], candidate: str) -> list[dict]:
        """RecBench's pair-wise prompt with every item as its identifier tokens (P5 / semantic IDs)."""
        cand = self.text(candidate) if candidate in self.items else UNKNOWN
        user = f"User behavior sequence: {self.sequence(history)}\nCandidate item: {cand}\nAnswer (Yes/No):"
        return [{"role": "system", "content": CTR_SYSTEM}, {"role": "user", "content": user}]

    def add_to(self, tok, model, seed: int = 0) -> list[int]:
        """Add the tokens (those not already there) and resize the embedding; returns all item token ids."""
        import torch

        missing = [t for t in self.tokens if tok.convert_tokens_to_ids(t) in (None, tok.unk_token_id)]
        if missing:
            tok.add_tokens(missing)
        if model.get_input_embeddings().weight.shape[0] < len(tok):
            torch.manual_seed(seed)  # the new rows are drawn at random (mean-resizing)
            model.resize_token_embeddings(len(tok))
        ids = tok.convert_tokens_to_ids(self.tokens)
        if len(set(ids)) != len(self.tokens):
            raise ConfigError("item tokens collide in the tokenizer")
        return ids

    def paths(self, tok) -> dict[tuple[int, ...], str]:
        return {tuple(tok.convert_tokens_to_ids(list(toks))): i for i, toks in self.items.items()}

    def save(self, directory: Path) -> None:
        Path(directory, VOCAB_FILE).write_text(json.dumps(
            {"kind": self.kind, "info": self.info, "tokens": self.tokens,
             "items": {i: list(t) for i, t in self.items.items()}}))

    @classmethod
    def load(cls, directory: Path) -> ItemVocab:
        p = Path(directory, VOCAB_FILE)
        if not p.exists():
            raise ConfigError(f"{directory} has no {VOCAB_FILE}: not an ID/SID fine-tuned model")
        d = json.loads(p.read_text())
        return cls(d["kind"], {i: tuple(t) for i, t in d["items"].items()}, d["tokens"], d.get("info", {}))


def id_vocab(item_ids: list[str]) -> ItemVocab:
    items = {i: (f"<item_{i}>",) for i in item_ids}
    return ItemVocab("id", items, [t for (t,) in items.values()], {"n_items": len(items)})


def sid_vocab(dataset, *, method: str = "rqvae", levels: int = 4, codebook_size: int = 256, seed: int = 0) -> ItemVocab:
    from recharness.data.semantic_ids import semantic_ids

    sid = semantic_ids(dataset.name, dataset.items, method=method, levels=levels, codebook_size=codebook_size,
                       seed=seed, progress=False)
    width = sid.codes.shape[1]
    sizes = [codebook_size] * levels + [max(sid.max_duplicates, 1)] * (width - levels)
    tokens = [f"<sid_{lv}_{c}>" for lv in range(width) for c in range(sizes[lv])]
    items = {i: tuple(f"<sid_{lv}_{int(c)}>" for lv, c in enumerate(row)) for i, row in zip(sid.item_ids, sid.codes)}
    return ItemVocab("sid", items, tokens, {"method": method, "levels": levels, "codebook_size": codebook_size,
                                            "seed": seed, "collision_rate": sid.collision_rate, "n_items": len(items),
                                            "train_log": sid.log_file})


def make_vocab(kind: str, dataset, **sid_opts) -> ItemVocab:
    if kind == "id":
        return id_vocab(dataset.items["item_id"].to_list())
    if kind == "sid":
        return sid_vocab(dataset, **sid_opts)
    raise ConfigError(f"unknown item representation {kind!r}; known: text, {', '.join(KINDS)}")


def recommend(hf: HFBackend, vocab: ItemVocab, history: list[str], *, beams: int = 20, trie: Trie | None = None,
              to_item: dict | None = None, stats: dict | None = None) -> tuple[list[str], int, float]:
    """The model's next items for `history`, best first (up to `beams`), the number of returned paths that are
    not catalog items (0 with CBS, by construction: counted, not assumed), and seconds. The history's items
    are masked (`ConstrainedRequest.forbid`), as every other method's ranking excludes them: a beam spent on
    one would leave fewer than `beams` items to rank. `stats` (a dict) gets the paths returned (`paths`) and
    whether the first of them is no catalog item (`top1_invalid`)."""
    from recharness.models.cbs import Trie

    if trie is None or to_item is None:
        to_item = vocab.paths(hf.load()[0])
        trie = Trie(to_item)
    seen = set(history)
    forbid = tuple(path for path, item in to_item.items() if item in seen)
    ranked = hf.rank_constrained_sync(ConstrainedRequest(vocab.messages(history), trie, beams, forbid=forbid,
                                                         ends_turn=True))
    items: list[str] = []
    invalid = 0
    for path in ranked.paths:
        item = to_item.get(path)
        if item is None:
            invalid += 1
        elif item not in items:
            items.append(item)
    if stats is not None:
        stats.update(paths=len(ranked.paths),
                     top1_invalid=bool(ranked.paths) and to_item.get(ranked.paths[0]) is None)
    return items, invalid, ranked.latency_s

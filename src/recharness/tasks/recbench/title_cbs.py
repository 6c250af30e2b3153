"""Zero-shot LLM over titles, decoded by conditional beam search over the catalog (RecBench seqrec).

The paper's LLM rows of Table 5 are fine-tuned (LLMs know no item IDs zero-shot); this is the
zero-shot *text* row: a llama.cpp model (default the built-in SmolLM2-135M) reads the very prompt
the LLM rows get (`sample["messages"]`: `seqrec.seqrec_messages`, the history as titles, a
numbered list asked for), its answer is started as "1." and the first list entry is decoded by
beam search constrained to a trie of every catalog title (`models.cbs.title_trie`, each title as
" Title" + the newline token that ends a list line), so every beam is a real item. The beams, best
cumulative log-prob first, are the ranking; the user's history titles are masked at their last
token (`cbs.forbid_paths`), as every method's ranking excludes them. A target no beam reaches is
not ranked (``rank: None``: 0 for NDCG@10, HR@k, MRR). The list can be shorter than `beams`
(beam search does not replace a finished beam, and inside a title there is one continuation:
~14 titles from 20 beams on ML-1M). Decoding: a `LlamaCppBackend`'s constrained request
(`rank_constrained_sync`: one llama.cpp KV sequence per beam, one batched decode per step).

Slow (seconds per sample on CPU), so it answers a sample of the test set: the first `max_samples`
distinct samples it is asked about (the build's order under `recharness train`), remembered by id,
and no record for the rest. Each record carries ``parsed["sample_cap"]``, so `seqrec`'s scorer
judges it only on the samples it answered (`n_scored`), and ``parsed["latency_s"]``, the seconds of
that sample's prompt + search (Table 5's latency). `recharness train`'s own single-sample timing
would time the remembered answers: run it with ``--latency-runs 0``; Table 5 reads
``parsed["latency_s"]`` either way.

Nothing is learned: `fit` makes the model's backend and builds the trie from `TrainData.item_table`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Self

from recharness.baselines.base import Baseline, TrainData
from recharness.core.errors import ConfigError, SampleError
from recharness.core.types import ConstrainedRequest, reference_record

#: n_ctx: KV cells of the beam search (prompt + the beams' title tokens); 4,096 x SmolLM2-135M: ~95 MB
DEFAULTS: dict[str, Any] = {"model": "smollm2-135m", "beams": 20, "max_samples": 100, "n_ctx": 4096, "threads": 1}
#: what the assistant's answer is started with: the numbered list the prompt asks for, its first entry next
ANSWER_START = "1."


class TitleCBS(Baseline):
    """A zero-shot llama.cpp model ranking catalog titles by CBS; answers the first `max_samples` samples."""

    name = "title-cbs"

    def __init__(self, seed: int = 0, **params):
        unknown = set(params) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"{self.name} takes no parameters {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        self.seed = seed
        self.params = {**DEFAULTS, **params}
        for k in ("beams", "max_samples", "n_ctx", "threads"):
            if int(self.params[k]) < 1:
                raise ConfigError(f"{self.name}: {k} must be at least 1, got {self.params[k]}")
        self.backend = None
        self.trie = None
        self.to_item: dict[tuple[int, ...], str] = {}
        self.item_paths: dict[str, list[tuple[int, ...]]] = {}
        self.titles: dict[str, str] = {}
        self._answered: dict[str, dict] = {}

    @classmethod
    def create(cls, seed: int = 0) -> Self:
        return cls(seed=seed)

    def settings(self) -> dict:
        return {**self.params, "answer_start": ANSWER_START, "seed": self.seed}

    def _model_path(self) -> Path:
        from recharness.models.builtin import BUILTIN_MODELS, fetch_model

        spec = str(self.params["model"])
        if spec in BUILTIN_MODELS:
            return fetch_model(spec)
        path = Path(spec.removeprefix("llamacpp:")).expanduser()
        if not path.exists():
            raise ConfigError(f"{self.name}: model {spec!r} is neither a built-in model "
                              f"({', '.join(BUILTIN_MODELS)}) nor an existing GGUF file")
        return path

    def fit(self, train: TrainData) -> Self:
        table = train.item_table
        if table is None or "title" not in table.columns:
            raise ConfigError(f"{self.name} needs the dataset's item table with a 'title' column (the trie's "
                              "titles); this training data has none: fit it on `TrainData.of_build(dataset, run, 'recbench')`")
        from recharness.models.cbs import title_trie
        from recharness.models.llamacpp import LlamaCppBackend

        p = self.params
        # the search decodes in a context of its own (n_ctx cells); the model's context only has to exist
        self.backend = LlamaCppBackend(self._model_path(), n_ctx=256, n_threads=int(p["threads"]), seed=self.seed,
                                       beam_n_ctx=int(p["n_ctx"]))
        newline = self.backend.tokenize("\n")
        if len(newline) != 1:
            raise ConfigError(f"{self.name}: the model's tokenizer spells a newline as {len(newline)} tokens; "
                              "the title trie needs one end-of-line token")
        self.titles = {str(i): t for i, t in zip(table["item_id"].to_list(), table["title"].to_list()) if t}
        # each title with its newline spelled as the model writes them together (`title_trie`'s suffix_text)
        self.trie, self.to_item = title_trie(self.backend.tokenize, self.titles, variants=(" {}",), suffix_text="\n")
        self.path_items, self.item_paths = shared_title_paths(self.titles, self.to_item)
        self._answered = {}
        return self

    def _request(self, sample: dict) -> ConstrainedRequest:
        from recharness.tasks.recbench.seqrec import seqrec_messages

        messages = sample.get("messages") or seqrec_messages([self.titles.get(i, i) for i in sample["history"]],
                                                             int(sample.get("n_recs", 10)))
        # a title path is masked when every item carrying it is in the history: a title a history item shares
        # with another item stays open, as a free-text answer naming it counts for that other item (`with_twins`)
        history = set(sample["history"])
        forbid = tuple(dict.fromkeys(p for i in sample["history"] for p in self.item_paths.get(i, ())  # history's
                                     if all(j in history for j in self.path_items.get(p, [i]))))  # order: stable
        return ConstrainedRequest(messages, self.trie, int(self.params["beams"]), answer_start=ANSWER_START,
                                  forbid=forbid)

    def _answer(self, sample: dict) -> dict:
        t0 = time.perf_counter()
        history = set(sample["history"])
        try:
            found = self.backend.rank_constrained_sync(self._request(sample))
        except SampleError as e:
            raise ConfigError(f"{self.name}: sample {sample['id']}: {e}: raise the baseline's n_ctx") from None
        items: list[str] = []
        target = sample.get("target")
        for path in found.paths:
            named = [i for i in self.path_items[tuple(path)] if i not in history]
            if not named:
                continue
            item = target if target in named else named[0]  # a title carried by several ids: the target when one is
            if item not in items:
                items.append(item)
        return {"rank": items.index(target) + 1 if target in items else None, "items": items,
                "top_titles": [self.titles[i] for i in items[:3]], "beams": len(found.paths),
                "latency_s": round(time.perf_counter() - t0, 6), "sample_cap": int(self.params["max_samples"])}

    def predict(self, samples: list[dict], task=None) -> dict[str, dict]:
        if self.backend is None:
            raise ValueError(f"{self.name} predicts only once fitted")
        bad = next((s for s in samples if s.get("task") != "seqrec"), None)
        if bad is not None:
            raise ValueError(f"{self.name} does not answer {bad.get('task')!r} samples")
        out = {}
        for s in samples:
            parsed = self._answered.get(s["id"])
            if parsed is None:
                if len(self._answered) >= int(self.params["max_samples"]):
                    continue  # beyond the sample: no record (scored on the answered samples only)
                parsed = self._answered[s["id"]] = self._answer(s)
            rec = reference_record(s["id"], parsed)
            rec["latency_s"] = parsed["latency_s"]
            out[s["id"]] = rec
        return out


def shared_title_paths(titles: dict[str, str], to_item: dict[tuple, str]) -> tuple[dict[tuple, list[str]], dict[str, list[tuple]]]:
    """Items sharing a title share its path (the trie keeps the first id): each path names all of them
    (`path_items`), and each item has its title's paths (`item_paths`), so a target twin is a hit, as `with_twins`
    reads a free-text answer, and the path is masked only when all of its items are in the history."""
    by_title: dict[str, list[str]] = {}
    for i, t in titles.items():
        by_title.setdefault(" ".join(str(t).split()), []).append(i)
    path_items = {path: by_title.get(" ".join(str(titles[item]).split()), [item]) for path, item in to_item.items()}
    item_paths: dict[str, list[tuple]] = {}
    for path, items in path_items.items():
        for item in items:
            item_paths.setdefault(item, []).append(path)
    return path_items, item_paths

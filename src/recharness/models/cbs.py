"""Conditional beam search (CBS): decode only valid token paths (RecBench §4.3, TIGER).

A `Trie` holds the valid paths (semantic-ID code tuples, or the tokenised titles of a catalog);
`beam_search` expands beams with the model's next-token log-probabilities, keeping only tokens
that extend a valid prefix, so every returned path is a real item:

    trie = Trie(sid.tokens().tolist())
    best = beam_search(step_logprobs, trie, beams=20, max_len=trie.max_len)   # [(path, logprob)]

`step_logprobs(prefixes) -> np.ndarray [len(prefixes), vocab]` is all the search needs. Adapters:

- `torch_step_logprobs(model, context)`: any torch model mapping token ids [B, T] to logits
  ([B, T, V] or [B, V]), e.g. SID-SASRec over code tokens.
- `llama_cbs(llm, prompt_tokens, trie, beams, max_len)`: llama-cpp-python in process, reusing the
  KV cache of the prompt (each prefix is evaluated after rewinding to the longest cached prefix).
- `hf_prefix_allowed_tokens_fn(trie, prompt_len, eos_token_id)`: for transformers'
  ``model.generate(num_beams=..., prefix_allowed_tokens_fn=...)``.

`title_trie(tokenize, titles)` builds the trie of a catalog's titles (as the answer starts:
"Title" and " Title") with a map from each path back to its item id.

Without a trie the search is unconstrained (top paths of length ``max_len``); the caller can
count how many are not valid items with `Trie.is_complete`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

StepLogprobs = Callable[[list[list[int]]], np.ndarray]


class Trie:
    """Valid token paths. A path may be a prefix of another (both stay valid)."""

    __slots__ = ("_root", "max_len", "n_paths")

    def __init__(self, paths: Iterable[Sequence[int]] = ()):
        self._root: dict = {}
        self.n_paths = 0
        self.max_len = 0
        for p in paths:
            self.add(p)

    def add(self, path: Sequence[int]) -> None:
        node = self._root
        for t in path:
            node = node.setdefault(int(t), {})
        if None not in node:  # None marks "a path ends here"
            node[None] = True
            self.n_paths += 1
            self.max_len = max(self.max_len, len(path))

    def _node(self, prefix: Sequence[int]) -> dict | None:
        node = self._root
        for t in prefix:
            node = node.get(int(t))
            if node is None:
                return None
        return node

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        """Tokens that extend `prefix` towards a valid path (empty for an invalid prefix)."""
        node = self._node(prefix)
        return [] if node is None else sorted(k for k in node if k is not None)

    def is_complete(self, prefix: Sequence[int]) -> bool:
        node = self._node(prefix)
        return node is not None and None in node

    def is_prefix(self, prefix: Sequence[int]) -> bool:
        return self._node(prefix) is not None

    def paths(self) -> list[list[int]]:
        out: list[list[int]] = []
        stack: list[tuple[dict, list[int]]] = [(self._root, [])]
        while stack:
            node, prefix = stack.pop()
            for k, child in node.items():
                if k is None:
                    out.append(prefix)
                else:
                    stack.append((child, prefix + [k]))
        return sorted(out)

    def __len__(self) -> int:
        return self.n_paths


def _top_k(row: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(row))
    idx = np.argpartition(-row, k - 1)[:k]
    return idx[np.argsort(-row[idx], kind="stable")]


def beam_search(step_logprobs: StepLogprobs, trie: Trie | None, beams: int,
                max_len: int) -> list[tuple[list[int], float]]:
    """Beam search over next-token log-probs; with a trie, only complete valid paths, best first.

    With a trie: tokens that do not extend a valid prefix are masked (never expanded), a beam
    that reaches a complete path is finished (and, if the path can be extended, also kept
    expanding), and the search stops when no live beam can beat the `beams`-th finished one
    (log-probs only go down). Returns at most `beams` (path, total log-prob), best first; with
    `beams` >= the number of valid paths no prefix is ever pruned, so this is exact.

    Without a trie: plain beam search for `max_len` steps; returns the top `beams` paths of
    length `max_len` (which may be anything).
    """
    beams = int(beams)
    if beams < 1 or max_len < 1:
        return []
    live: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    for _step in range(int(max_len)):
        if not live:
            break
        if trie is not None and len(finished) >= beams:
            kth = heapq.nlargest(beams, (s for _, s in finished))[-1]
            if max(s for _, s in live) <= kth:
                break
        prefixes = [p for p, _ in live]
        logp = np.asarray(step_logprobs(prefixes), dtype=np.float64)
        if logp.ndim != 2 or logp.shape[0] != len(prefixes):
            raise ValueError(f"step_logprobs returned shape {logp.shape} for {len(prefixes)} prefixes")
        candidates: list[tuple[float, list[int]]] = []
        for (prefix, score), row in zip(live, logp):
            if trie is None:
                tokens = _top_k(row, beams)
            else:
                tokens = [t for t in trie.allowed(prefix) if t < len(row)]
            for t in tokens:
                s = score + float(row[t])
                if s > -np.inf:
                    candidates.append((s, prefix + [int(t)]))
        best = heapq.nlargest(beams, candidates, key=lambda c: c[0])
        live = []
        for s, path in best:
            if trie is None:
                live.append((path, s))
                continue
            if trie.is_complete(path):
                finished.append((path, s))
            if trie.allowed(path):
                live.append((path, s))
    if trie is None:
        finished = [(p, s) for p, s in live if len(p) == max_len]
    finished.sort(key=lambda ps: -ps[1])
    return finished[:beams]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


# --- adapters -------------------------------------------------------------------------------------


def torch_step_logprobs(model: Callable, context: Sequence[int] = (), device: str = "cpu") -> StepLogprobs:
    """`step_logprobs` for a torch model mapping token ids [B, T] to logits [B, T, V] or [B, V].

    Each prefix is appended to the same `context` (e.g. a user's history in code tokens); the
    log-softmax of the last position is the next-token distribution.
    """
    import torch

    ctx = [int(t) for t in context]

    def step(prefixes: list[list[int]]) -> np.ndarray:
        seqs = [ctx + list(p) for p in prefixes]
        width = len(seqs[0])
        if any(len(s) != width for s in seqs):
            raise ValueError("prefixes of one step must have the same length")
        x = torch.tensor(seqs, dtype=torch.long, device=device)
        with torch.no_grad():
            out = model(x)
        if out.dim() == 3:
            out = out[:, -1, :]
        return torch.log_softmax(out.float(), dim=-1).cpu().numpy()

    return step


def _llama_logits(llm, tokens: list[int], prompt_len: int) -> np.ndarray:
    """Next-token logits after `tokens`, re-evaluating from the longest prefix already in the KV cache.

    The prompt part is evaluated in one batch; every token after it one at a time, so a path's
    logits do not depend on which beams were evaluated before it (multi-token batches use other
    kernels whose rounding differs by ~0.01 per token in quantised models, and on this CPU are
    slower per token than single-token decodes).
    """
    cached = llm.n_tokens
    ids = llm.input_ids
    common = 0
    limit = min(cached, len(tokens) - 1)  # evaluate at least one token to get fresh logits
    while common < limit and ids[common] == tokens[common]:
        common += 1
    llm.n_tokens = common  # eval() drops the KV cache from n_tokens on
    if common < prompt_len:
        llm.eval(tokens[common:prompt_len])
        common = prompt_len
    for t in tokens[common:]:
        llm.eval([t])
    n_vocab = llm.n_vocab()
    return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,)).astype(np.float32).copy()


def llama_step_logprobs(llm, prompt_tokens: Sequence[int]) -> StepLogprobs:
    """`step_logprobs` for a llama_cpp.Llama: the prompt is evaluated once and its KV cache reused."""
    prompt = [int(t) for t in prompt_tokens]
    if not prompt:
        raise ValueError("llama_cbs needs a non-empty prompt")

    def step(prefixes: list[list[int]]) -> np.ndarray:
        rows = [log_softmax(_llama_logits(llm, prompt + list(p), len(prompt))) for p in prefixes]
        return np.stack(rows)

    return step


def llama_cbs(llm, prompt_tokens: Sequence[int], trie: Trie | None, beams: int,
              max_len: int) -> list[tuple[list[int], float]]:
    """Conditional beam search with a llama_cpp.Llama in process (next-token logits, KV cache reuse)."""
    return beam_search(llama_step_logprobs(llm, prompt_tokens), trie, beams, max_len)


def hf_prefix_allowed_tokens_fn(trie: Trie, prompt_len: int, eos_token_id: int | Sequence[int]
                                ) -> Callable[[int, object], list[int]]:
    """`prefix_allowed_tokens_fn` for transformers' generate: only trie paths, then EOS.

    The generated part of `input_ids` (after `prompt_len`, the padded prompt width) must be a
    trie prefix; EOS is allowed once it is a complete path, and is the only choice after a
    complete path with no extension or after anything invalid (so finished beams stay put).
    """
    eos = [int(eos_token_id)] if isinstance(eos_token_id, (int, np.integer)) else [int(e) for e in eos_token_id]

    def allowed(batch_id: int, input_ids) -> list[int]:
        gen = input_ids[prompt_len:]
        gen = gen.tolist() if hasattr(gen, "tolist") else list(gen)
        if gen and gen[-1] in eos:
            return eos[:1]
        ok = trie.allowed(gen)
        if trie.is_complete(gen):
            ok = ok + eos
        return ok or eos[:1]

    return allowed


def title_trie(tokenize: Callable[[str], Sequence[int]], titles: Mapping[str, str] | Iterable[tuple[str, str]],
               *, variants: Sequence[str] = ("{}", " {}"), suffix: Sequence[int] = ()
               ) -> tuple[Trie, dict[tuple[int, ...], str]]:
    """Trie of catalog titles as an answer would start, and token path -> item id.

    `titles` maps item id -> title (or yields (item id, title)). Each title is tokenised in
    every `variants` form ("Title" and " Title" by default: tokenizers split a leading space
    differently), then `suffix` (e.g. [eos]) is appended so the model's wish to stop counts.
    Two items with the same title share a path; it maps to the first.
    """
    pairs = titles.items() if isinstance(titles, Mapping) else titles
    trie = Trie()
    to_item: dict[tuple[int, ...], str] = {}
    for item_id, title in pairs:
        title = " ".join(str(title).split())
        if not title:
            continue
        for v in variants:
            path = tuple(int(t) for t in tokenize(v.format(title))) + tuple(int(t) for t in suffix)
            if not path:
                continue
            trie.add(path)
            to_item.setdefault(path, str(item_id))
    return trie, to_item

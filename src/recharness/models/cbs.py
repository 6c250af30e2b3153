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
- `LlamaBeams(llm, beams)`: the same search over llama.cpp with every live beam in its own KV
  sequence and one decode call per step for all of them (a title search ~8x faster than
  `llama_cbs` on 2 CPU cores; scores differ from one-token-at-a-time decoding by float rounding).
- `hf_prefix_allowed_tokens_fn(trie, prompt_len, eos_token_id)`: for transformers'
  ``model.generate(num_beams=..., prefix_allowed_tokens_fn=...)``.

`forbid_paths(step, paths)` masks the last token of given complete paths (a user's history
items), so the search spends no beam on an item the ranking would drop anyway.

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

    __slots__ = ("_root", "max_len", "n_paths", "_under")

    def __init__(self, paths: Iterable[Sequence[int]] = ()):
        self._root: dict = {}
        self.n_paths = 0
        self.max_len = 0
        self._under: dict[tuple[int, ...], int] = {}  # `count_under`'s answers (a trie is not changed once searched)
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

    def count_under(self, prefix: Sequence[int]) -> int:
        """How many paths start with `prefix` (itself included when complete); remembered per prefix."""
        key = tuple(int(t) for t in prefix)
        if key not in self._under:
            node, n = self._node(key), 0
            stack = [node] if node is not None else []
            while stack:
                for k, child in stack.pop().items():
                    if k is None:
                        n += 1
                    else:
                        stack.append(child)
            self._under[key] = n
        return self._under[key]

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
    `beams` >= the number of valid paths no prefix is ever pruned, so this is exact. It can return
    fewer: a finished beam is not replaced, and once every beam is inside a title with a single
    continuation nothing can take its place (a 20-beam title search returns ~14 titles).

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
    from recharness.models.llama_native import llama_native

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
    return np.ctypeslib.as_array(llama_native(llm).context.get_logits_ith(-1), shape=(n_vocab,)).astype(np.float32).copy()


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


def hf_prefix_allowed_tokens_fn(trie: Trie, prompt_len: int, eos_token_id: int | Sequence[int],
                                forbid: Iterable[Sequence[int]] = ()) -> Callable[[int, object], list[int]]:
    """`prefix_allowed_tokens_fn` for transformers' generate: only trie paths, then EOS.

    The generated part of `input_ids` (after `prompt_len`, the padded prompt width) must be a
    trie prefix; EOS is allowed once it is a complete path, and is the only choice after a
    complete path with no extension or after anything invalid (so finished beams stay put).
    `forbid` paths (a user's history) are never finished (no EOS after them), and a token is not
    offered where every path through it is forbidden (a beam of generate cannot die at a masked token):
    the trie is left as it is, not rebuilt per request.
    """
    eos = [int(eos_token_id)] if isinstance(eos_token_id, (int, np.integer)) else [int(e) for e in eos_token_id]
    banned = {tuple(int(t) for t in p) for p in forbid}
    lost: dict[tuple[int, ...], int] = {}  # prefix -> forbidden paths under it
    for p in banned:
        if trie.is_complete(p):
            for k in range(len(p) + 1):
                lost[p[:k]] = lost.get(p[:k], 0) + 1

    def open_(prefix: tuple[int, ...]) -> bool:
        return prefix not in lost or trie.count_under(prefix) > lost[prefix]

    def allowed(batch_id: int, input_ids) -> list[int]:
        gen = input_ids[prompt_len:]
        gen = gen.tolist() if hasattr(gen, "tolist") else list(gen)
        if gen and gen[-1] in eos:
            return eos[:1]
        ok = trie.allowed(gen)
        if lost:
            here = tuple(gen)
            ok = [t for t in ok if open_(here + (t,))]
        if trie.is_complete(gen) and tuple(gen) not in banned:
            ok = ok + eos
        return ok or eos[:1]

    return allowed


def title_trie(tokenize: Callable[[str], Sequence[int]], titles: Mapping[str, str] | Iterable[tuple[str, str]],
               *, variants: Sequence[str] = ("{}", " {}"), suffix: Sequence[int] = (), suffix_text: str = ""
               ) -> tuple[Trie, dict[tuple[int, ...], str]]:
    """Trie of catalog titles as an answer would start, and token path -> item id.

    `titles` maps item id -> title (or yields (item id, title)). Each title is tokenised in
    every `variants` form ("Title" and " Title" by default: tokenizers split a leading space
    differently), then `suffix` (e.g. [eos]) is appended so the model's wish to stop counts.
    `suffix_text` (e.g. "\n") is spelled with the title instead, as the model writes it: a tokenizer
    that merges ")\n" into one token gets that token, not ")" then "\n", a sequence it never writes.
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
            path = tuple(int(t) for t in tokenize(v.format(title) + suffix_text)) + tuple(int(t) for t in suffix)
            if not path:
                continue
            trie.add(path)
            to_item.setdefault(path, str(item_id))
    return trie, to_item


def forbid_paths(step_logprobs: StepLogprobs, paths: Iterable[Sequence[int]]) -> StepLogprobs:
    """`step_logprobs` with the last token of each of `paths` masked (-inf) after that path's prefix.

    Used to take a user's history items out of a search (as every method's ranking excludes them).
    Only for tries where no path is a proper prefix of another (fixed-length semantic IDs, titles
    with an end token): masking the last token of a path also blocks anything that extends it.
    """
    banned: dict[tuple[int, ...], list[int]] = {}
    for p in paths:
        p = tuple(int(t) for t in p)
        if p:
            banned.setdefault(p[:-1], []).append(p[-1])
    if not banned:
        return step_logprobs

    def step(prefixes: list[list[int]]) -> np.ndarray:
        rows = np.asarray(step_logprobs(prefixes), dtype=np.float64)
        for r, prefix in enumerate(prefixes):
            tokens = banned.get(tuple(prefix))
            if tokens:
                rows[r, [t for t in tokens if t < rows.shape[1]]] = -np.inf
        return rows

    return step


class LlamaBeams:
    """Beam search over a llama.cpp model with one KV-cache sequence per live beam.

    `beam_search` asks for the next-token log-probs of all live beams at once; here they are
    decoded in ONE batch: beam j's KV sequence is its parent's, copied (llama.cpp shares the cells,
    nothing is recomputed), plus its newest token. The prompt lives in sequence 0 and its shared
    prefix with the previous prompt is kept (one system prompt for every sample). Live beams of
    step s use sequences 1..beams (s odd) or beams+1..2*beams (s even), so a parent is never
    overwritten by a child of the same step. `llama_cbs` instead re-evaluates every beam's tokens
    one at a time through a single sequence: ~8x slower for titles. Scores differ from its by the
    rounding of batched kernels (a few tenths of a nat over a title in SmolLM2's Q4_1); they do not
    depend on the order prompts come in.

        beams = LlamaBeams(llm, beams=20)
        best = beams.search(prompt_tokens, trie, max_len=trie.max_len, forbid=history_paths)
    """

    #: reuse a cached prompt prefix only when at least this many tokens follow it (see `_load_prompt`)
    MIN_FRESH = 16

    def __init__(self, llm, beams: int, *, n_ctx: int = 2048, n_threads: int | None = None):
        import llama_cpp

        from recharness.models.llama_native import llama_native

        native = llama_native(llm)
        _internals = native.internals

        if not 1 <= int(beams) <= (llama_cpp.llama_max_parallel_sequences() - 1) // 2:
            raise ValueError(f"beams must be between 1 and {(llama_cpp.llama_max_parallel_sequences() - 1) // 2}, "
                             f"got {beams}")
        self._lib = llama_cpp
        self.beams, self.n_ctx = int(beams), int(n_ctx)
        params = llama_cpp.llama_context_default_params()
        for field in ("flash_attn_type", "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow", "type_k", "type_v"):
            setattr(params, field, getattr(llm.context_params, field))  # the numerics of `llm`'s own context
        params.n_ctx = self.n_ctx
        params.n_batch = params.n_ubatch = max(512, self.beams)
        params.n_seq_max = 2 * self.beams + 1
        params.kv_unified = True  # one cell pool shared by all sequences (else n_ctx is split per sequence)
        threads = int(n_threads or getattr(llm, "n_threads", None) or 1)
        params.n_threads = params.n_threads_batch = threads
        self._ctx = _internals.LlamaContext(model=native.model, params=params, verbose=False)
        self._batch = _internals.LlamaBatch(n_tokens=params.n_batch, embd=0, n_seq_max=1, verbose=False)
        self._n_batch = params.n_batch
        self._n_vocab = llm.n_vocab()
        self._prompt: list[int] = []
        self._root: np.ndarray | None = None

    def _logprobs(self, i: int) -> np.ndarray:
        ptr = self._lib.llama_get_logits_ith(self._ctx.ctx, i)
        return log_softmax(np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)))

    def _decode(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[int], logits: Sequence[bool]):
        b = self._batch.batch
        b.n_tokens = len(tokens)
        for i, (t, pos, sq, lg) in enumerate(zip(tokens, positions, seqs, logits)):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = int(t), int(pos), 1, bool(lg)
            b.seq_id[i][0] = int(sq)
        rc = self._lib.llama_decode(self._ctx.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} (KV cache full? n_ctx={self.n_ctx})")

    def _load_prompt(self, prompt: list[int]) -> np.ndarray:
        """Sequence 0 := `prompt`, keeping the prefix it shares with the last one when at least
        `MIN_FRESH` tokens remain to evaluate (a batch that short would use other matmul kernels and
        round differently: the answer would depend on the previous sample); beams cleared. The same
        prompt again reuses its logits."""
        mem = self._ctx.memory
        for sq in range(1, 2 * self.beams + 1):
            self._lib.llama_memory_seq_rm(mem, sq, -1, -1)
        if prompt == self._prompt and self._root is not None:
            return self._root
        keep = 0
        limit = min(len(self._prompt), len(prompt))
        while keep < limit and self._prompt[keep] == prompt[keep]:
            keep += 1
        if len(prompt) > self._n_batch:
            # a fresh evaluation cuts the prompt every n_batch tokens: a kept prefix ending on such a cut leaves
            # the rest cut where a fresh evaluation cuts it, so the last batch (and its rounding) is the same
            keep -= keep % self._n_batch
        elif len(prompt) - keep < self.MIN_FRESH:
            keep = 0
        self._lib.llama_memory_seq_rm(mem, 0, keep, -1)
        self._root = None
        self._prompt = prompt[:keep]
        last = 0
        for a in range(keep, len(prompt), self._n_batch):
            chunk = prompt[a:a + self._n_batch]
            self._decode(chunk, range(a, a + len(chunk)), [0] * len(chunk),
                         [a + i == len(prompt) - 1 for i in range(len(chunk))])
            self._prompt = prompt[:a + len(chunk)]
            last = len(chunk) - 1
        self._root = self._logprobs(last)
        return self._root

    def step_logprobs(self, prompt_tokens: Sequence[int]) -> StepLogprobs:
        """`step_logprobs` for `beam_search` after `prompt_tokens` (valid until the next call)."""
        prompt = [int(t) for t in prompt_tokens]
        if not prompt:
            raise ValueError("LlamaBeams needs a non-empty prompt")
        root = self._load_prompt(prompt)
        n = len(prompt)
        where: dict[tuple[int, ...], int] = {(): 0}
        mem = self._ctx.memory

        def step(prefixes: list[list[int]]) -> np.ndarray:
            if len(prefixes) > self.beams:
                raise ValueError(f"{len(prefixes)} prefixes for {self.beams} beams")
            if all(len(p) == 0 for p in prefixes):
                return np.stack([root] * len(prefixes))
            length = len(prefixes[0])
            if any(len(p) != length for p in prefixes):
                raise ValueError("prefixes of one step must have the same length")
            base = 1 + (length % 2) * self.beams
            new: dict[tuple[int, ...], int] = {}
            for j, p in enumerate(prefixes):
                parent = where.get(tuple(p[:-1]))
                if parent is None:
                    raise ValueError(f"prefix {p[:-1]} was not evaluated in the previous step")
                child = base + j
                self._lib.llama_memory_seq_rm(mem, child, -1, -1)
                self._lib.llama_memory_seq_cp(mem, parent, child, -1, -1)
                new[tuple(p)] = child
            if n + length > self.n_ctx:
                raise RuntimeError(f"prompt of {n} tokens + {length} decoded exceed n_ctx={self.n_ctx}")
            self._decode([p[-1] for p in prefixes], [n + length - 1] * len(prefixes), list(new.values()),
                         [True] * len(prefixes))
            where.clear()
            where.update(new)
            return np.stack([self._logprobs(j) for j in range(len(prefixes))])

        return step

    def search(self, prompt_tokens: Sequence[int], trie: Trie | None, max_len: int, *,
               forbid: Iterable[Sequence[int]] = ()) -> list[tuple[list[int], float]]:
        """`beam_search` with `self.beams` beams after `prompt_tokens`, `forbid` paths masked."""
        step = forbid_paths(self.step_logprobs(prompt_tokens), forbid)
        return beam_search(step, trie, self.beams, max_len)

    def close(self) -> None:
        self._batch.close()
        self._ctx.close()

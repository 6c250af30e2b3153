"""From a dataset (or the original label files) to group samples for the three methods.

The three tasks share the same groups, so they are selected once per build
and each task renders its samples from them: the pipeline makes one
`SuiteContext` per build (`make_context`, the suite's context factory) and
passes it to every task as `BuildConfig.context`; a build without one (a
test calling `build_samples` directly) makes its own, and nothing outlives it.  The run directory also gets the groups in the original label
layout (``perrecbench/item2group_avg_diff_sample-<level>.json``).

Options (``--option key=value``, checked by options.PerRecBenchOptions), with defaults:
  groups=200 (per level; --limit overrides)  levels=easy,medium,hard
  gamma=20  lambda=0.6  window_days=7  mean_over=history|all  tries=20
  k=4 (history items shown)  bm25=catalog|user
  profile=true (LLM-written profiles)  profile_items=20  profiles=PATH ({user_id: text})
  shots=0  heldout=50 when shots>0  cot=false  sc=1  sc_temperature=0.7
  temperature=0 (greedy and cacheable; the paper used 0.1)
  max_retries=1  max_tokens=(per method)
  compat=perrecbench (headline tau as the original code computes it)  invalid=zero|drop
  labels=DIR|FILE (groups from original label files, in file order, up to groups= per level)
  predictions=DIR + predictions_name=NAME (import released <mode>-<level>.json files)
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recharness.core.errors import ConfigError, InputError
from recharness.core.rundir import RunDir
from recharness.core.types import BuildConfig
from recharness.tasks.options import check
from recharness.tasks.perrecbench.groups import LEVELS, Group, GroupConfig, select_groups
from recharness.tasks.perrecbench.history import HistoryIndex, rating_stats
from recharness.tasks.perrecbench.methods import shot_answer
from recharness.tasks.perrecbench.options import PerRecBenchOptions
from recharness.tasks.perrecbench.original import (
    HELDOUT_FILE,
    LABEL_FILE,
    MODES,
    read_labels,
    read_predictions,
    sample_id,
    truth_of,
    write_labels,
)

SIDE_DIR = "perrecbench"


@dataclass(frozen=True)
class SuiteOptions:
    groups: GroupConfig = field(default_factory=GroupConfig)
    k: int = 4
    bm25: str = "catalog"
    profile: bool = True
    profile_items: int = 20
    profiles: str | None = None
    shots: int = 0
    cot: bool = False
    sc: int = 1
    sc_temperature: float = 0.7
    temperature: float = 0.0
    max_retries: int = 1
    max_tokens: int | None = None
    compat: bool = False
    invalid: str = "zero"
    labels: str | None = None
    predictions: str | None = None
    predictions_name: str = "imported"
    orders: int = 1

    def method(self) -> dict:
        return {"profile": self.profile, "cot": self.cot, "sc": self.sc, "sc_temperature": self.sc_temperature,
                "temperature": self.temperature, "max_retries": self.max_retries, "max_tokens": self.max_tokens,
                "shots": self.shots, "k": self.k}

    def scoring(self) -> dict:
        return {"compat": "perrecbench" if self.compat else None, "invalid": self.invalid}


def parse_options(options: dict, seed: int = 0, limit: int | None = None) -> SuiteOptions:
    """Validated suite options (PerRecBenchOptions); a bad or unknown key is one ConfigError naming it."""
    o = check(PerRecBenchOptions, dict(options or {}), "perrecbench")
    try:
        gcfg = GroupConfig(
            gamma=o.gamma, lam=o.lam, window_days=o.window_days,
            n_groups=limit if limit is not None else o.groups,
            levels=tuple(x.strip() for x in o.levels.split(",") if x.strip()),
            heldout=o.heldout if o.heldout is not None else 50 if o.shots else 0,
            mean_over=o.mean_over, tries=o.tries, seed=seed, items=o.items,
        )
    except ValueError as e:
        raise ConfigError(f"perrecbench: {e}") from None
    return SuiteOptions(
        groups=gcfg, k=o.k if o.behaviour else 0,  # --no-history: no retrieved items in the prompt
        bm25=o.bm25, profile=o.profile, profile_items=o.profile_items, profiles=o.profiles or None,
        shots=o.shots, cot=o.cot, sc=o.sc, sc_temperature=o.sc_temperature, temperature=o.temperature,
        max_retries=o.max_retries, max_tokens=o.max_tokens, compat=o.compat == "perrecbench", invalid=o.invalid,
        labels=o.labels or None, predictions=o.predictions or None, predictions_name=o.predictions_name,
        orders=o.orders,
    )


def _label_files(spec: str, levels: tuple[str, ...]) -> dict[str, Path]:
    p = Path(spec)
    if p.is_dir():
        files = {lv: p / LABEL_FILE.format(level=lv) for lv in levels}
        found = {lv: f for lv, f in files.items() if f.exists()}
        if not found:
            raise ConfigError(f"no label files in {p} (looked for {', '.join(f.name for f in files.values())})")
        return found
    if not p.exists():
        raise ConfigError(f"--option labels={spec}: no such file or directory")
    return {"": p}


@dataclass
class Context:
    """Everything the three tasks share for one build."""

    opts: SuiteOptions
    groups: dict[str, list[Group]]
    heldout: dict[str, list[Group]]
    hist: HistoryIndex
    domain: str
    sources: dict[str, str]  # level -> label file the groups came from (imported labels)
    profiles: dict[str, str] | None
    dataset: object = None
    written: set = field(default_factory=set)  # run dirs that have the label files
    blocks: dict = field(default_factory=dict)  # (item, user, history_len) -> user block


class SuiteContext:
    """What one build of the suite shares across its tasks: the dataset's BM25 history indexes,
    the group-selection tables, and the groups (a `Context`) selected for the build's options.

    Made once per build by the pipeline (`make_context`) and handed to each task as
    `BuildConfig.context`; lazy, so a run or score that never builds costs nothing.
    """

    def __init__(self, dataset, options: dict | None = None):
        self.dataset = dataset
        self.options = dict(options or {})  # the build's options (informative: `context(opts)` is keyed by its own)
        self.tables: dict = {}  # select_groups' per-dataset tables
        self._hist: dict[str, HistoryIndex] = {}
        self._contexts: dict[SuiteOptions, Context] = {}

    def history_index(self, corpus: str) -> HistoryIndex:
        if corpus not in self._hist:
            self._hist[corpus] = HistoryIndex(self.dataset, corpus=corpus)
        return self._hist[corpus]

    def context(self, opts: SuiteOptions) -> Context:
        """The groups, profiles and history index for these options (selected on first use)."""
        if opts not in self._contexts:
            self._contexts[opts] = _make_build_context(self, opts)
        return self._contexts[opts]


def make_context(dataset, config=None) -> SuiteContext:
    """The suite's context factory: one per build (run, score), shared by the three tasks.

    `config`: the build's BuildConfig, or just its options dict (or None).
    """
    options = config.options if isinstance(config, BuildConfig) else config
    return SuiteContext(dataset, options)


def _make_build_context(suite: SuiteContext, opts: SuiteOptions) -> Context:
    dataset = suite.dataset
    sources: dict[str, str] = {}
    if opts.labels:
        groups: dict[str, list[Group]] = {}
        for lv, path in _label_files(opts.labels, opts.groups.levels).items():
            for g in read_labels(path, lv or None):
                if len(groups.get(g.level, [])) < opts.groups.n_groups:  # --limit / groups= cap each level
                    groups.setdefault(g.level, []).append(g)
                sources[g.level] = str(path)
        heldout: dict[str, list[Group]] = {}
        if opts.shots:
            raise ConfigError("few-shot prompts are not available with labels= (no held-out groups); use shots=0")
    else:
        sel = select_groups(dataset.interactions, opts.groups, tables=suite.tables)
        groups = {k: v for k, v in sel.items() if "/" not in k}
        heldout = {k.split("/")[0]: v for k, v in sel.items() if k.endswith("/heldout")}
    profiles = None
    if opts.profiles:
        p = Path(opts.profiles)
        try:
            profiles = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(p, "file not found") from None
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of more digits than int reads
            raise InputError(p, f"not valid UTF-8 JSON ({e})") from None
        if not isinstance(profiles, dict):
            raise InputError(p, "expected a JSON object {user_id: profile}")
        for uid, text in profiles.items():  # each value goes into prompts as it is: text, or the build stops here
            if not isinstance(text, str) or not text.strip():
                got = "empty text" if isinstance(text, str) else "null" if text is None else type(text).__name__
                raise InputError(p, f"expected the user's profile as text, got {got}", field=uid)
    ctx = Context(opts, groups, heldout, suite.history_index(opts.bm25), dataset.domain, sources, profiles)
    ctx.dataset = dataset
    return ctx


def get_context(dataset, opts: SuiteOptions, suite: SuiteContext | None = None) -> Context:
    """The build's Context from the suite context passed by the pipeline, else a fresh one."""
    if suite is None:
        suite = make_context(dataset)
    elif suite.dataset is not dataset:
        raise ValueError("BuildConfig.context was made for another dataset")
    return suite.context(opts)


def _behaviours(hist: HistoryIndex, items, ratings, positions) -> list[dict]:
    return [{"card": [list(x) for x in hist.cards.get(items[p], [("Item Title", str(items[p]))])],
             "rating": float(ratings[p])} for p in positions]


def user_block(ctx: Context, g: Group, i: int) -> dict:
    """What the prompt shows of member i: profile source, rating statistics and top-k history."""
    m = g.members[i]
    key = (g.item_id, m.user_id, m.history_len)
    if key not in ctx.blocks:
        ctx.blocks[key] = _user_block(ctx, g, i)
    return ctx.blocks[key]


def _user_block(ctx: Context, g: Group, i: int) -> dict:
    m = g.members[i]
    where = ctx.sources.get(g.level)
    if m.user_id not in ctx.hist.users:
        if where:
            raise InputError(where, f"user {m.user_id!r} is not in the dataset", field=f"{g.item_id}[0][{i}].user_id")
        raise KeyError(m.user_id)
    full = ctx.hist.users[m.user_id]
    if m.history_len > full.items.size:
        raise InputError(where or "groups", f"history_len {m.history_len} but the user has {full.items.size} ratings",
                         field=f"{g.item_id}[0][{i}].history_len")
    earlier = ctx.hist.earlier(m.user_id, m.history_len)
    # the query's time: the group's (a label file may leave it out: 0), else this user's rating of the item here
    asked = m.timestamp or next((int(t) for j, t in zip(full.items, full.timestamps) if j == g.item_id), 0)
    if asked and earlier.timestamps.size and earlier.timestamps[-1] > asked:
        # a label file's count of earlier ratings reaching past the query (its authors' data held fewer of this
        # user's ratings): the prompt would show ratings made after it
        raise InputError(where or "groups", f"history_len {m.history_len} reaches past the query: this user's rating "
                                            f"{m.history_len} in time order was made at {int(earlier.timestamps[-1])}, "
                                            f"after the query's {asked}", field=f"{g.item_id}[0][{i}].history_len")
    pos = ctx.hist.top_k(m.user_id, m.history_len, g.item_id, ctx.opts.k)
    stats_from = full.ratings if ctx.opts.groups.mean_over == "all" else earlier.ratings
    common, _ = rating_stats(stats_from)
    block = {"user_id": m.user_id, "avg_rating": m.avg_rating, "common_rating": common,
             "history": _behaviours(ctx.hist, earlier.items, earlier.ratings, pos)}
    if ctx.opts.profile:
        if ctx.profiles is not None:
            if m.user_id not in ctx.profiles:
                raise InputError(ctx.opts.profiles, "no profile for this user", field=m.user_id)
            block["profile"] = ctx.profiles[m.user_id]
        else:
            n = earlier.items.size  # the query item rated before is not among them (`top_k` says why)
            recent = [j for j in range(n) if earlier.items[j] != g.item_id][-ctx.opts.profile_items:]
            block["profile_history"] = _behaviours(ctx.hist, earlier.items, earlier.ratings, recent)
    return block


def query_card(ctx: Context, g: Group) -> list[list[str]]:
    if g.item_id not in ctx.hist.cards:
        where = ctx.sources.get(g.level)
        raise InputError(where or "groups", "query item is not in the dataset's items", field=g.item_id)
    return [list(x) for x in ctx.hist.cards[g.item_id]]


def _shots(ctx: Context, task: str, g: Group, seed: int) -> list[dict]:
    pool = ctx.heldout.get(g.level, [])
    if not ctx.opts.shots or not pool:
        return []
    rng = np.random.default_rng([seed, zlib.crc32(f"{task}/{g.level}/{g.item_id}".encode())])
    picks = rng.choice(len(pool), size=min(ctx.opts.shots, len(pool)), replace=False)
    out = []
    for j in picks:
        h = pool[int(j)]
        rel = [m.relative_rating for m in h.members]
        if task == "point":
            i = int(rng.integers(len(h.members)))
            users, answer = [user_block(ctx, h, i)], shot_answer("point", rel, rating=h.members[i].rating)
        elif task == "pair":
            a, b = (int(x) for x in rng.choice(len(h.members), size=2, replace=False))
            users, answer = [user_block(ctx, h, a), user_block(ctx, h, b)], shot_answer("pair", [rel[a], rel[b]], pair=(0, 1))
        else:
            users, answer = [user_block(ctx, h, i) for i in range(len(h.members))], shot_answer("list", rel)
        out.append({"item_id": h.item_id, "query_card": query_card(ctx, h), "users": users, "answer": answer})
    return out


def write_side_files(ctx: Context, out: Path | None) -> None:
    if out is None or str(out) in ctx.written:
        return
    d = RunDir(out).side_file(SIDE_DIR)
    for lv, gs in ctx.groups.items():
        write_labels(gs, d / LABEL_FILE.format(level=lv))
    for lv, gs in ctx.heldout.items():
        write_labels(gs, d / HELDOUT_FILE.format(level=lv))
    ctx.written.add(str(out))


def build_samples(task: str, dataset, config) -> list[dict]:
    opts = parse_options(config.options, config.seed, config.limit)
    ctx = get_context(dataset, opts, config.context)
    write_side_files(ctx, config.out)
    method, scoring = opts.method(), opts.scoring()
    if opts.orders > 1 and opts.predictions:
        raise ConfigError(f"--option orders={opts.orders}: released predictions (predictions=) answer each group in "
                          "its published order only: build them without orders")
    if opts.orders > 1 and task != "list":
        raise ConfigError(f"--option orders={opts.orders}: only the listwise task shows a group's users in one order "
                          "(pointwise asks one user at a time, pairwise asks both orders of every pair): build -t list")
    samples = []
    for lv in [x for x in LEVELS if x in ctx.groups] + [x for x in ctx.groups if x not in LEVELS]:
        for g in ctx.groups[lv]:
            samples.append({
                "id": sample_id(task, g.level, g.item_id),
                "task": task,
                "level": g.level,
                # the label file of the group: the original evaluation averages over one file's groups
                "source": Path(ctx.sources[lv]).name if lv in ctx.sources else LABEL_FILE.format(level=lv),
                "size": len(g.members),
                "item_id": g.item_id,
                "domain": ctx.domain,
                "query_card": query_card(ctx, g),
                "users": [user_block(ctx, g, i) for i in range(len(g.members))],
                "truth": truth_of(g),
                "shots": _shots(ctx, task, g, config.seed),
                "method": method,
                "scoring": scoring,
            })
    if opts.predictions and config.out is not None:
        _import_task_predictions(Path(config.out), opts, task, samples, ctx)
    if opts.orders > 1:
        samples = [o for s in samples for o in user_orders(s, opts.orders, config.seed)]
    return samples


def user_orders(sample: dict, k: int, seed: int) -> list[dict]:
    """`sample` under `k` orders of its users (`tasks.orders.candidate_orders`: order 0 as built, the most-liked
    user's position balanced, the others reshuffled, seeded per group): the users and every per-user truth list
    permuted alike, ids `<id>@o<j>`; `order_of` ties the group's orders together (one unit of resampling). A
    group of fewer users than `k` is shown in as many orders as it has users (`unit_orders`): more would repeat
    positions unevenly, and a pair's third order would be its first again, the same prompt twice."""
    from recharness.tasks.orders import candidate_orders

    truth = sample["truth"]
    n = len(sample["users"])
    best = int(np.argmax(truth["relative_ratings"]))
    rng = np.random.default_rng([seed, zlib.crc32(sample["id"].encode())])
    out = []
    fewer = {"unit_orders": n} if n < k else {}
    for j, order in enumerate(candidate_orders(list(range(n)), best, min(k, n), rng)):
        out.append({**sample, **fewer, "id": f"{sample['id']}@o{j}", "order": j, "order_of": sample["id"],
                    "shown_order": order, "target_position": order.index(best) + 1,
                    "users": [sample["users"][i] for i in order],
                    "truth": {key: [v[i] for i in order] if isinstance(v, list) and len(v) == n else v
                              for key, v in truth.items()}})
    return out


def _import_task_predictions(out: Path, opts: SuiteOptions, task: str, samples: list[dict], ctx: Context) -> None:
    """Released <mode>-<level>.json files become this task's records in predictions/<name>.jsonl."""
    from recharness.core.io import read_jsonl, write_jsonl_atomic

    d = Path(opts.predictions)
    if not d.is_dir():
        raise ConfigError(f"--option predictions={d}: not a directory")
    keep = []
    path = RunDir(out).predictions(opts.predictions_name)
    if path.exists():
        keep = [r for r in read_jsonl(path) if r.get("task") != task]
    by_item = {(s["level"], s["item_id"]): s for s in samples}
    for lv, gs in ctx.groups.items():
        f = d / f"{MODES[task]}-{lv}.json"
        if not f.exists():
            continue
        # without labels= the groups are this build's own: no label file to name when an item has none
        against = None if opts.labels else (f"this build's {task}/{lv} samples ({len(gs)} groups; a build from "
                                            "the authors' label files, --option labels=DIR, has their groups)")
        for item, rec in read_predictions(f, MODES[task], gs, against=against).items():
            s = by_item[(lv, item)]
            keep.append({"id": s["id"], "task": task, "output": None,
                         "model": {"backend": "imported", "model": opts.predictions_name, "file": str(f)}, **rec})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(path, keep)

"""PerRecBench training examples from held-out user groups (arXiv 2501.13391 §6: SFT "using held-out
user groups"), never from the build's test groups.

Training groups are selected from the same dataset by the same criteria as the test groups
(`groups.select_groups`: one query item, raters inside one window, more than `gamma` earlier ratings,
pairwise relative-rating gaps above `lambda`; sizes 2 / 3 / 4 for easy / medium / hard), but from a
disjoint pool: no query item of the build (test groups, the few-shot held-out groups and their
shots) and no user of the build is ever in a training group. The random stream differs from the
test (0) and held-out (1) streams (`default_rng([build seed, size, 2])`), so the groups do not
depend on the finetune seed: the three single-format fine-tunes (and the joint one) see the same
groups, as weight merging assumes.

A training example is rendered with the suite's own prompt functions and build options (`k`, `bm25`,
`mean_over`, `cot`), and its answer is the suite's own true-answer function (`methods.shot_answer`,
the answer of a worked example), so the model is trained on exactly the format `parsing` reads:

* pointwise (`point`): one example per group member, answer ``{"predicted_rating": <rating>}``; the
  suite ranks by predicted rating minus the user's mean, which for the true rating is the true
  relative rating, i.e. the true order;
* pairwise (`pair`): one example per ordered pair of members (both orders, as the suite asks),
  answer ``[User A]`` or ``[User B]``, the member with the higher relative rating;
* listwise (`list`): one example per group, members in the group's (shuffled) order, answer
  ``{"predicted_ranking": [...]}`` with the true order;
* joint (the paper's multi-task training): the union of the three.

User profiles: a build with `profile=false` has none (prompts identical to the test prompts); a
build with `profiles=PATH` uses that file, and only users who have a profile there are eligible
for training groups; a build whose profiles are written at run time by the model under test
(`profile=true`, the default) cannot have them at training time, so training prompts omit the
profile section (`profile_mode` says which; `finetune.json` records it). Few-shot turns are never
part of a training prompt.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from recharness.core.errors import ConfigError
from recharness.core.rundir import RunDir
from recharness.finetune.examples import Example, build_info
from recharness.finetune.recipe import Recipe
from recharness.tasks.perrecbench.groups import LEVELS, Group, Member, eligible_rows, find_group

SUITE = "perrecbench"
#: our fine-tuning task names -> the suite's task(s) whose format is trained
FORMATS: dict[str, tuple[str, ...]] = {
    "pointwise": ("point",), "pairwise": ("pair",), "listwise": ("list",),
    "point": ("point",), "pair": ("pair",), "list": ("list",),
    "joint": ("point", "pair", "list"), "multitask": ("point", "pair", "list"),
}
#: the canonical name of each spelling (output names, finetune.json)
CANONICAL = {"point": "pointwise", "pair": "pairwise", "list": "listwise", "multitask": "joint"}
#: training groups per level unless told (the size of the paper's test split per level)
DEFAULT_TRAIN_GROUPS = 200
_TRAIN_STREAM = 2  # select_groups uses 0 (test) and 1 (held-out)


def canonical(task: str) -> str:
    if task not in FORMATS:
        raise ConfigError(f"perrecbench fine-tunes pointwise, pairwise, listwise or joint; not {task!r}")
    return CANONICAL.get(task, task)


def _opts(info: dict):
    from recharness.tasks.perrecbench.build import parse_options

    return parse_options(info.get("options") or {}, int(info.get("seed") or 0), info.get("limit"))


def profile_mode(info: dict) -> str:
    """How training prompts show user profiles for this build: none, file, or omitted (see module doc)."""
    o = _opts(info)
    if not o.profile:
        return "none"
    return "file" if o.profiles else "omitted"


def build_groups(run_dir: Path) -> tuple[set[str], set[str]]:
    """(users, query items) of every group the build in `run_dir` uses: its test samples, their
    few-shot examples and the held-out label files."""
    from recharness.core.io import read_jsonl
    from recharness.tasks.perrecbench.build import SIDE_DIR
    from recharness.tasks.perrecbench.original import read_labels

    users: set[str] = set()
    items: set[str] = set()
    path = RunDir(run_dir).samples_jsonl
    for s in (read_jsonl(path) if path.exists() else []):
        if s.get("task") not in ("point", "pair", "list"):
            continue
        items.add(str(s["item_id"]))
        users.update(str(u) for u in s["truth"]["user_ids"])
        for shot in s.get("shots") or []:
            items.add(str(shot["item_id"]))
            users.update(str(u["user_id"]) for u in shot["users"])
    for f in sorted(RunDir(run_dir).side_file(SIDE_DIR).glob("held_out-*.json")):
        for g in read_labels(f):
            items.add(str(g.item_id))
            users.update(str(m.user_id) for m in g.members)
    return users, items


def training_groups(interactions, cfg, *, per_level: int, exclude_users: set[str], exclude_items: set[str],
                    allowed_users: set[str] | None = None, tables: dict | None = None) -> dict[str, list[Group]]:
    """Groups per level by the test groups' criteria (`cfg`: the build's GroupConfig) among ratings by
    users not in `exclude_users` (and in `allowed_users` when given) of items not in `exclude_items`."""
    el = eligible_rows(interactions, cfg.mean_over, cfg.gamma, tables)
    bad = np.array([str(u) in exclude_users or (allowed_users is not None and str(u) not in allowed_users)
                    for u in el.user_ids], dtype=bool)
    window = cfg.window_days * 86400.0
    used = set(exclude_items)
    out: dict[str, list[Group]] = {}
    for lv in ("hard", "medium", "easy"):  # as select_groups: the hardest level claims items first
        if lv not in cfg.levels:
            continue
        n = LEVELS[lv]
        rng = np.random.default_rng([cfg.seed, n, _TRAIN_STREAM])
        found: list[Group] = []
        for j in rng.permutation(len(el.item_ids)) if per_level else ():
            item = str(el.item_ids[j])
            if item in used or el.ends[j] - el.starts[j] < n:
                continue
            rows = el.starts[j] + np.flatnonzero(~bad[el.users[el.starts[j]:el.ends[j]]])
            if rows.size < n or np.ptp(el.rr[rows]) <= cfg.lam * (n - 1):
                continue
            idx = find_group(el.ts[rows], el.rr[rows], el.users[rows], n, cfg.lam, window, rng, cfg.tries)
            if idx is None:
                continue
            members = [Member(user_id=str(el.user_ids[el.users[r]]), rating=float(el.ratings[r]), timestamp=int(el.ts[r]),
                              relative_rating=float(el.rr[r]), avg_rating=float(el.avgs[r]), history_len=int(el.hlen[r]))
                       for r in (rows[i] for i in rng.permutation(idx))]
            found.append(Group(level=lv, item_id=item, members=members, split="train"))
            used.add(item)
            if len(found) == per_level:
                break
        out[lv] = found
    return {lv: out[lv] for lv in LEVELS if lv in out}


def _specs(groups: dict[str, list[Group]], fmts: tuple[str, ...]) -> list[tuple]:
    """(format, group, member indices) of every example, before rendering."""
    out = []
    for fmt in fmts:
        for lv in groups:
            for g in groups[lv]:
                n = len(g.members)
                if fmt == "point":
                    out += [(fmt, g, (i,)) for i in range(n)]
                elif fmt == "pair":
                    out += [(fmt, g, (a, b)) for a in range(n) for b in range(n) if a != b]
                else:
                    out.append((fmt, g, tuple(range(n))))
    return out


def _render(ctx, fmt: str, g: Group, idx: tuple[int, ...], cot: bool) -> Example:
    from recharness.tasks.perrecbench import prompts
    from recharness.tasks.perrecbench.build import query_card, user_block
    from recharness.tasks.perrecbench.methods import shot_answer

    card = query_card(ctx, g)
    rel = [m.relative_rating for m in g.members]
    prof = (lambda u: u.get("profile"))
    users = [user_block(ctx, g, i) for i in idx]
    if fmt == "point":
        msgs = prompts.point_messages(users[0], card, ctx.domain, profile=prof(users[0]), cot=cot)
        answer = shot_answer("point", rel, rating=g.members[idx[0]].rating)
    elif fmt == "pair":
        msgs = prompts.pair_messages(users[0], users[1], card, ctx.domain, profiles=(prof(users[0]), prof(users[1])),
                                     cot=cot)
        answer = shot_answer("pair", [rel[idx[0]], rel[idx[1]]], pair=(0, 1))
    else:
        msgs = prompts.list_messages(users, card, ctx.domain, profiles=[prof(u) for u in users], cot=cot)
        answer = shot_answer("list", rel)
    tag = "-".join(str(i + 1) for i in idx)
    return Example(id=f"train-{fmt}-{g.level}-{g.item_id}-{tag}", messages=msgs, answer=answer,
                   key=(g.item_id, g.level), users=tuple(m.user_id for m in g.members))


def perrecbench_examples(run_dir: Path, dataset, task: str, *, limit: int | None = None, seed: int = 0,
                         groups: int | None = None) -> list[Example]:
    """Training examples of `task` (pointwise, pairwise, listwise or joint) for the PerRecBench build in
    `run_dir`, from `groups` training groups per level (default 200) disjoint from the build's groups;
    `limit`: a seeded sample of that many examples (`seed`). Checked disjoint (`check_groups_disjoint`)."""
    from recharness.tasks.perrecbench.build import Context
    from recharness.tasks.perrecbench.history import HistoryIndex

    canonical(task)  # a ConfigError for an unknown format
    fmts = FORMATS[task]
    info = build_info(run_dir)
    if info.get("suite") != SUITE:
        raise ConfigError(f"{run_dir} holds a {info.get('suite')} build, not {SUITE}")
    opts = _opts(info)
    mode = profile_mode(info)
    profiles = None
    if mode == "file":
        p = Path(opts.profiles)
        try:
            profiles = {str(k): str(v) for k, v in json.loads(p.read_text()).items()}
        except (OSError, ValueError, AttributeError) as e:
            raise ConfigError(f"perrecbench build option profiles={p}: cannot read it ({e})") from None
    render_opts = dataclasses.replace(opts, profile=mode == "file", shots=0)
    test_users, test_items = build_groups(run_dir)
    gs = training_groups(dataset.interactions, opts.groups, per_level=DEFAULT_TRAIN_GROUPS if groups is None else groups,
                         exclude_users=test_users, exclude_items=test_items,
                         allowed_users=set(profiles) if profiles is not None else None)
    if not any(gs.values()):
        raise ConfigError(f"no training groups left in {info.get('dataset')} outside the build's groups "
                          "(every eligible item or user is in the build): build fewer groups")
    specs = _specs(gs, fmts)
    if limit is not None and limit < len(specs):
        specs = [specs[i] for i in np.sort(np.random.default_rng(seed).choice(len(specs), size=limit, replace=False))]
    ctx = Context(render_opts, {}, {}, HistoryIndex(dataset, corpus=opts.bm25), dataset.domain, {}, profiles)
    ctx.dataset = dataset
    out = [_render(ctx, fmt, g, idx, opts.cot) for fmt, g, idx in specs]
    check_groups_disjoint(out, test_users, test_items)
    return out


def check_groups_disjoint(examples: list[Example], users: set[str], items: set[str]) -> None:
    """ConfigError if an example comes from a group that shares its query item or a user with the build."""
    for e in examples:
        shared = set(e.users) & users
        if (e.key and e.key[0] in items) or shared:
            what = f"query item {e.key[0]}" if e.key and e.key[0] in items else f"user {sorted(shared)[0]}"
            raise ConfigError(f"training example {e.id} shares its {what} with the build's groups; "
                              "training groups must be disjoint from the test groups")


def _examples(task: str):
    def make(run_dir_: Path, dataset_, *, items: str, limit: int | None, seed: int, vocab=None,
             groups: int | None = None) -> list[Example]:
        return perrecbench_examples(run_dir_, dataset_, task, limit=limit, seed=seed, groups=groups)
    return make


def _describe(task: str):
    def describe(info: dict, exs: list[Example], groups: int | None) -> tuple[dict, list[str]]:
        notes = []
        if profile_mode(info) == "omitted":
            notes.append("the build writes user profiles with the model at run time (profile=true); training "
                         "prompts have no profile section. Build with profile=false (or profiles=FILE) for "
                         "training prompts identical to the test prompts.")
        meta = {"formats": list(FORMATS[task]), "profile": profile_mode(info),
                "train_groups_per_level": DEFAULT_TRAIN_GROUPS if groups is None else groups,
                "train_groups": len({(e.key or ("", ""))[0] for e in exs})}
        return meta, notes
    return describe


def _recipe(name: str) -> Recipe:
    task = CANONICAL.get(name, name)
    # §3: LoRA rank 16 (alpha not stated: 32), 2 epochs, batch 32, lr 1e-5; prompts of ~400-1,000 tokens at 4 per
    # pass already peaked at 12 GB (listwise), so one example per forward pass unless told
    return Recipe(task=task, examples=_examples(task), lora=(16, 32),
                  train={"lr": 1e-5, "epochs": 2, "batch": 32, "max_len": 2048}, micro_batch=1,
                  needs_test_task=False, default=task == "joint", describe=_describe(task))


#: `recharness finetune perrecbench -t TASK`: every spelling (pointwise / point, ..., joint / multitask)
RECIPES: dict[str, Recipe] = {name: _recipe(name) for name in FORMATS}

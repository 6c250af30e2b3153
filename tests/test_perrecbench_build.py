"""PerRecBench build on real data: the written label files meet every group criterion.

The checker below recomputes everything from the raw interactions with its
own plain code (dicts and numpy), independently of the builder.
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pytest

from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.core.types import BuildConfig
from recharness.runner.pipeline import build
from recharness.tasks.perrecbench.build import build_samples
from recharness.tasks.perrecbench.history import HistoryIndex, rating_stats

LEVEL_SIZE = {"easy": 2, "medium": 3, "hard": 4}


_INDEX: dict = {}


def _by_user(interactions):
    """user -> (timestamps, ratings, items) in file order; (user, item) -> (rating, timestamp)."""
    key = id(interactions)
    if key not in _INDEX or _INDEX[key][0] is not interactions:
        _INDEX[key] = (interactions, _index(interactions))
    return _INDEX[key][1]


def _index(interactions):
    users: dict[str, list] = {}
    pairs = {}
    for u, i, r, t in interactions.select("user_id", "item_id", "rating", "timestamp").iter_rows():
        users.setdefault(u, []).append((t, r, i))
        pairs[(u, i)] = (r, t)
    arrays = {u: (np.array([x[0] for x in v]), np.array([x[1] for x in v]), [x[2] for x in v]) for u, v in users.items()}
    return arrays, pairs


def check_groups(run_dir, interactions, *, n_groups, gamma=20, lam=0.6, window_days=7.0, levels=LEVEL_SIZE,
                 shared=False):
    """Every written group meets the criteria; query items are distinct across levels, or (`shared`) the same
    items at every level, each level's members a subset of the largest level's group on that item."""
    arrays, pairs = _by_user(interactions)
    seen_items = set()
    by_level = {}
    for lv in levels:
        data = json.loads((run_dir / "perrecbench" / f"item2group_avg_diff_sample-{lv}.json").read_text())
        by_level[lv] = {item: {m["user_id"] for m in value[0]} for item, value in data.items()}
        assert len(data) == n_groups, f"{lv}: {len(data)} groups"
        for item, value in data.items():
            if not shared:
                assert item not in seen_items, f"query item {item} used twice"
            seen_items.add(item)
            group = value[0]
            assert len(group) == LEVEL_SIZE[lv]
            assert len({m["user_id"] for m in group}) == len(group)
            rel, times = [], []
            for m in group:
                rating, ts = pairs[(m["user_id"], item)]  # the user did rate the query item
                assert (m["rating"], m["timestamp"]) == (rating, ts)
                t_all, r_all, _ = arrays[m["user_id"]]
                earlier = r_all[t_all < ts]  # strictly before the query rating
                assert m["history_len"] == earlier.size > gamma  # active user
                assert m["avg_rating"] == pytest.approx(earlier.mean(), abs=1e-9)
                r = rating - earlier.mean()
                assert m["relative_rating"] == pytest.approx(r, abs=1e-9)
                rel.append(r)
                times.append(ts)
            assert max(times) - min(times) <= window_days * 86400  # one window
            for a, b in combinations(rel, 2):
                assert abs(a - b) > lam  # distinct preferences
    if shared:
        top = max(levels, key=LEVEL_SIZE.get)
        for lv in levels:
            assert by_level[lv].keys() == by_level[top].keys()
            assert all(users <= by_level[top][item] for item, users in by_level[lv].items())
    return seen_items


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("prb")
    info = build("perrecbench", "ml-1m", out, seed=0, options={"profile": False})
    return out, info


def test_ml1m_default_build_meets_every_criterion(built, ml1m):
    out, info = built
    assert info["counts"] == {"point": 600, "pair": 600, "list": 600}
    check_groups(out, ml1m.interactions, n_groups=200)


def test_samples_show_only_earlier_history(built, ml1m):
    out, _ = built
    arrays, pairs = _by_user(ml1m.interactions)
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    samples = [s for s in read_jsonl(out / "samples.jsonl") if s["task"] == "list"]
    assert len(samples) == 600
    for s in samples[::37]:
        assert s["query_card"][0] == ["Item Title", titles[s["item_id"]]]
        for u, truth_avg in zip(s["users"], s["truth"]["avg_ratings"]):
            t_all, r_all, items = arrays[u["user_id"]]
            _, ts = pairs[(u["user_id"], s["item_id"])]
            earlier_titles = {titles[i] for i, t in zip(items, t_all) if t < ts}
            assert len(u["history"]) == 4
            assert all(h["card"][0][1] in earlier_titles for h in u["history"])
            assert u["avg_rating"] == truth_avg  # the mean shown is the one the label subtracts
            assert truth_avg == pytest.approx(r_all[t_all < ts].mean(), abs=0.005)  # the earlier ratings' mean
            vals, counts = np.unique(r_all[t_all < ts], return_counts=True)
            assert u["common_rating"] == vals[counts == counts.max()].max()
            assert "profile_history" not in u  # profile=false


def _build(ds, out, tasks, seed=0, limit=None, **opts):
    """The suite's build on an already loaded dataset (pipeline.build reloads it each time)."""
    cfg = BuildConfig(seed=seed, limit=limit, options=opts, out=out)
    return [s for t in tasks for s in build_samples(t, ds, cfg)]


def test_same_seed_same_groups_other_seed_other_groups(ml1m, tmp_path):
    opts = {"profile": False, "levels": "easy,hard", "groups": 15}
    a = _build(ml1m, tmp_path / "a", ["list"], seed=3, **opts)
    b = _build(ml1m, tmp_path / "b", ["list"], seed=3, **opts)
    _build(ml1m, tmp_path / "c", ["list"], seed=4, **opts)
    assert len(a) == 30
    f = "perrecbench/item2group_avg_diff_sample-hard.json"
    assert (tmp_path / "a" / f).read_text() == (tmp_path / "b" / f).read_text()
    assert json.dumps(a) == json.dumps(b)
    assert (tmp_path / "a" / f).read_text() != (tmp_path / "c" / f).read_text()


def test_thresholds_are_options(ml1m, tmp_path):
    opts = {"profile": False, "levels": "hard", "gamma": 60, "lambda": 1.0, "window_days": 2, "heldout": 5}
    _build(ml1m, tmp_path, ["point"], seed=1, limit=12, **opts)
    items = check_groups(tmp_path, ml1m.interactions, n_groups=12, gamma=60, lam=1.0, window_days=2,
                         levels={"hard": 4})
    held = json.loads((tmp_path / "perrecbench" / "held_out-hard.json").read_text())
    assert len(held) == 5 and not set(held) & items  # held-out groups use other query items


def test_few_shot_and_profile_history_in_samples(ml1m, tmp_path):
    opts = {"levels": "medium", "groups": 3, "shots": 2, "heldout": 4, "profile_items": 5, "k": 2}
    samples = _build(ml1m, tmp_path, ["point", "pair", "list"], **opts)
    arrays, pairs = _by_user(ml1m.interactions)
    titles = dict(zip(ml1m.items["item_id"].to_list(), ml1m.items["title"].to_list()))
    held = set(json.loads((tmp_path / "perrecbench" / "held_out-medium.json").read_text()))
    for s in samples:
        assert len(s["shots"]) == 2 and {x["item_id"] for x in s["shots"]} <= held
        assert len(s["shots"][0]["users"]) == {"point": 1, "pair": 2, "list": 3}[s["task"]]
        assert all(len(u["history"]) == 2 and len(u["profile_history"]) == 5 for u in s["users"])
        for u in s["users"]:  # the profile's input: ratings made before the query, never the query item
            t_all, _, items = arrays[u["user_id"]]
            _, ts = pairs[(u["user_id"], s["item_id"])]
            earlier = {titles[i] for i, t in zip(items, t_all) if t < ts and i != s["item_id"]}
            assert {h["card"][0][1] for h in u["profile_history"]} <= earlier
    # no user of a test group is shown in a few-shot example (its history could hold the test label)
    tested = {u["user_id"] for s in samples for u in s["users"]}
    shown = {u["user_id"] for s in samples for x in s["shots"] for u in x["users"]}
    assert shown and not tested & shown


def test_shared_items_every_level_on_the_same_items(ml1m, tmp_path):
    """items=shared: every level asks the same query items, its members a subset of one group of four (the
    authors' design); the criteria hold at every level, held-out groups keep other items and no test user."""
    opts = {"profile": False, "items": "shared", "groups": 12, "shots": 1, "heldout": 3, "k": 1}
    samples = _build(ml1m, tmp_path, ["list"], seed=2, **opts)
    items = check_groups(tmp_path, ml1m.interactions, n_groups=12, shared=True)
    assert len(items) == 12 and len(samples) == 36
    by_item = {}
    for s in samples:
        by_item.setdefault(s["item_id"], {})[s["level"]] = [u["user_id"] for u in s["users"]]
    assert all(sorted(levels) == ["easy", "hard", "medium"] for levels in by_item.values())
    # the smaller levels are not all the same leading members of the group
    assert any(lv["easy"] != lv["hard"][:2] for lv in by_item.values())
    held = {lv: json.loads((tmp_path / "perrecbench" / f"held_out-{lv}.json").read_text()) for lv in LEVEL_SIZE}
    assert held["easy"].keys() == held["hard"].keys() and not set(held["hard"]) & items
    tested = {u for lv in by_item.values() for u in lv["hard"]}
    shown = {u["user_id"] for s in samples for x in s["shots"] for u in x["users"]}
    assert shown and not tested & shown
    # the default build is unchanged by the option's existence: distinct items per level
    distinct = _build(ml1m, tmp_path / "d", ["list"], seed=2, **{**opts, "items": "distinct"})
    assert len({s["item_id"] for s in distinct}) == 36


def test_amazon_build_with_relaxed_thresholds(tmp_path, amazon2023):
    ds = amazon2023
    build("perrecbench", "amazon2023", tmp_path, tasks=["list"], limit=3,
          options={"profile": False, "levels": "easy", "gamma": 3, "window_days": 3650})
    check_groups(tmp_path, ds.interactions, n_groups=3, gamma=3, window_days=3650, levels={"easy": 2})
    s = next(read_jsonl(tmp_path / "samples.jsonl"))
    assert s["domain"] == "product"


@pytest.mark.parametrize("opts, match", [
    ({"gama": 3}, "unknown --option 'gama'"), ({"levels": "extreme"}, "unknown level"), ({"invalid": "nan"}, "invalid="),
    ({"compat": "yes"}, "compat="), ({"groups": "many"}, "groups=many: expected an integer"), ({"shots": 2, "heldout": 0}, "held-out"),
    ({"profile": "maybe"}, "true or false"), ({"bm25": "dense"}, "bm25="), ({"items": "same"}, "items="),
    ({"items": "shared", "labels": "x"}, "labels= reads the groups"),
])
def test_bad_options_are_config_errors(ml1m, tmp_path, opts, match):
    with pytest.raises(ConfigError, match=match):
        _build(ml1m, tmp_path, ["list"], **opts)


def test_bm25_top_k_and_rating_stats():
    import polars as pl

    from recharness.data.store import Dataset

    items = pl.DataFrame({"item_id": ["q", "a", "b", "c", "d", "e"],
                          "title": ["Star Wars Saga", "Cooking Show", "Star Wars Return", "Wars of the Roses",
                                    "Garden Show", "Late Star Wars"]})
    inter = pl.DataFrame({"user_id": ["u"] * 6, "item_id": ["a", "b", "c", "d", "q", "e"],
                          "rating": [5.0, 4.0, 4.0, 3.0, 2.0, 1.0], "timestamp": [1, 2, 3, 4, 5, 6]})
    ds = Dataset("toy", inter, items, pl.DataFrame({"user_id": ["u"]}))
    for corpus in ("catalog", "user"):
        h = HistoryIndex(ds, corpus=corpus)
        top = [h.users["u"].items[p] for p in h.top_k("u", 4, "q", 2)]
        # "Star Wars Return" shares two query words; "Wars of the Roses" one; "e" is after the query
        assert top == ["b", "c"]
        assert [h.users["u"].items[p] for p in h.top_k("u", 4, "q", 4)][2:] == ["d", "a"]  # ties: recent first
    # the query item rated before (a second review of it) is never shown: it would give the rating away;
    # a card with no ASCII word (Cyrillic) matches nothing, so recency orders the history (before: IndexError)
    items2 = pl.DataFrame({"item_id": ["q", "a", "b", "r"], "title": ["Star Wars Saga", "Star Wars Return",
                                                                      "Cooking Show", "Война и мир"]})
    inter2 = pl.DataFrame({"user_id": ["u"] * 5, "item_id": ["q", "a", "b", "q", "r"],
                           "rating": [5.0, 4.0, 3.0, 5.0, 2.0], "timestamp": [1, 2, 3, 4, 5]})
    ds2 = Dataset("toy2", inter2, items2, pl.DataFrame({"user_id": ["u"]}))
    for corpus in ("catalog", "user"):
        h = HistoryIndex(ds2, corpus=corpus)
        assert [h.users["u"].items[p] for p in h.top_k("u", 3, "q", 3)] == ["a", "b"]  # not q (rated at t=1)
        assert [h.users["u"].items[p] for p in h.top_k("u", 3, "r", 2)] == ["b", "a"]  # no query words: recent first
    assert rating_stats([4, 4, 5, 5, 1]) == (5.0, pytest.approx(3.8))
    assert rating_stats([3, 3, 1]) == (3.0, pytest.approx(7 / 3))


def test_a_gap_of_exactly_lambda_is_not_more_than_lambda():
    """4 - 68/20 computes as 0.6000000000000001: with lambda 0.6 the paper's strict "more than" must not admit it."""
    import numpy as np

    from recharness.tasks.perrecbench.groups import find_group

    rr = np.array([4 - 68 / 20, 0.0])
    assert rr[0] - rr[1] > 0.6  # the float rounding the rule guards against
    ts, users = np.array([0, 1]), np.array(["a", "b"], dtype=object)
    assert find_group(ts, rr, users, 2, 0.6, 10.0, np.random.default_rng(0), 5) is None
    assert find_group(ts, np.array([0.61, 0.0]), users, 2, 0.6, 10.0, np.random.default_rng(0), 5) == [0, 1]


def test_a_profiles_file_gives_text_or_a_clear_error(ml1m, tmp_path):
    """profiles=PATH: each value is the user's profile text as it goes into prompts; null, a list, a number or
    empty text is an error naming the file and the user (before, str() put "None" or "['a', 'b']" in prompts)."""
    from recharness.core.errors import InputError

    opts = {"levels": "medium", "groups": 2}
    users = {u["user_id"] for s in _build(ml1m, tmp_path / "probe", ["list"], profile=False, **opts) for u in s["users"]}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({u: f"likes films, user {u}" for u in users}))
    samples = _build(ml1m, tmp_path / "ok", ["list"], profiles=str(good), **opts)
    assert all(u["profile"] == f"likes films, user {u['user_id']}" for s in samples for u in s["users"])
    first = sorted(users)[0]
    for bad in (None, ["a", "b"], 3, "  "):
        f = tmp_path / "bad.json"
        f.write_text(json.dumps({**{u: "text" for u in users}, first: bad}))
        with pytest.raises(InputError, match="expected the user's profile as text") as e:
            _build(ml1m, tmp_path / "bad", ["list"], profiles=str(f), **opts)
        assert "bad.json" in str(e.value) and first in str(e.value)

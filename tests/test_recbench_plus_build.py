"""RecBench+ query construction on ML-1M, checked against the raw item table.

The checks re-derive every fact from the dataset's item columns (directors,
cast, genres, languages, certificate, year) with their own code, so a bug in
the knowledge graph or the builder cannot hide behind itself.
"""

from __future__ import annotations

import pytest

from recharness.core.io import read_jsonl
from recharness.kg.schema import LANGUAGE_NAMES
from recharness.runner.pipeline import build
from recharness.tasks.recbench_plus.official import FILES, read_records

LIMIT = 120


def _raw_facts(ml1m) -> dict[str, dict[str, set[str]]]:
    """item -> relation -> values, straight from the item table."""
    out = {}
    for row in ml1m.items.iter_rows(named=True):
        langs = {LANGUAGE_NAMES.get(x, x) for x in (row["languages"] or []) if x not in ("No Language", "Silent", "")}
        cert = row["certificate"]
        out[row["item_id"]] = {
            "Directed_by": {" ".join(x.split()) for x in row["directors"] or []},
            "Starring": {" ".join(x.split()) for x in row["cast"] or []},
            "Genre": set(row["genres"] or []),
            "Language": langs,
            "Certificate": {cert} if cert and cert != "NR" else set(),
            "Release_decade": {f"{row['year'] // 10 * 10}s"} if row["year"] else set(),
        }
    return out


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("rbp")
    info = build("recbench-plus", "ml-1m", out, seed=0, limit=LIMIT)
    samples = list(read_jsonl(out / "samples.jsonl"))
    return out, info, samples


@pytest.fixture(scope="module")
def raw(ml1m):
    return _raw_facts(ml1m)


@pytest.fixture(scope="module")
def histories(ml1m):
    g = ml1m.interactions.group_by("user_id", maintain_order=True).agg("item_id")
    return dict(zip(g["user_id"].to_list(), g["item_id"].to_list()))


def _cond(samples, kinds=("explicit", "implicit", "misinformed")):
    return [s for s in samples if s["task"] in kinds]


def _ok(raw, item, conds) -> bool:
    return all(v in raw[item][r] for r, v in conds)


def test_all_five_types_built(built):
    out, info, samples = built
    assert set(info["counts"]) == {"explicit", "implicit", "misinformed", "interest", "demographics"}
    for t in ("explicit", "implicit", "misinformed", "interest"):
        assert info["counts"][t] == 2 * LIMIT  # with and without history
    assert info["counts"]["demographics"] == 59  # 7 age + 2 gender + 10 x 5 larger groups, as the official file
    for kind, name in FILES.items():
        assert (out / "recbench_plus" / name).exists(), name
    for s in samples:
        assert s["query_phrasing"] == "template"
        assert s["messages"][0]["role"] == "system" and "recommender system" in s["messages"][0]["content"]
        assert s["query"] in s["messages"][-1]["content"]


def _unique_queries(samples):
    return list({(s["task"], s["data_idx"]): s for s in samples}.values())


def test_ground_truth_satisfies_conditions_and_is_complete(built, raw, histories):
    inverted: dict[tuple[str, str], set[str]] = {}
    for item, facts in raw.items():
        for r, vals in facts.items():
            for v in vals:
                inverted.setdefault((r, v), set()).add(item)
    queries = _unique_queries(_cond(built[2]))
    assert len(queries) >= 10  # the checks below run on real queries
    for s in queries:
        conds = [tuple(c) for c in s["conditions"]]
        assert 1 <= len(conds) <= 4 and s["condition_num"] == len(conds)
        assert 2 <= len(s["gt"]) <= 10
        hist = histories[s["source_user"]]
        assert set(s["gt"]) <= set(hist)
        for g in s["gt"]:
            assert _ok(raw, g, conds), (s["id"], g, conds)
        # every history item that satisfies the conditions is ground truth (the official movieSubset)
        assert {i for i in hist if _ok(raw, i, conds)} == set(s["gt"])
        # the catalog set for CMR, from an inverted index of the item table
        assert set(s["satisfying"]) == set.intersection(*(inverted.get(c, set()) for c in conds))
        # anchored on a director or actor
        assert any(r in ("Directed_by", "Starring") for r, _ in conds)


def test_history_shown_excludes_ground_truth(built, histories):
    checked = _cond(built[2]) + [x for x in built[2] if x["task"] == "interest"]
    assert any(s["with_history"] for s in checked) and any(not s["with_history"] for s in checked)
    for s in checked:
        shown = s["history"]
        if not s["with_history"]:
            assert shown == [] and "watched movies" not in s["messages"][0]["content"]
            continue
        assert not set(shown) & set(s["gt"]), s["id"]
        hist = histories[s["source_user"]]
        pos = [hist.index(i) for i in shown]
        assert pos == sorted(pos)  # chronological
        assert 0 < len(shown) <= 20
    for s in _cond(built[2]):
        if s["with_history"]:
            hist = histories[s["source_user"]]
            assert s["history"] == [i for i in hist if i not in set(s["gt"])][-20:]


def test_misinformed_claims_are_false(built, raw):
    mis = [s for s in built[2] if s["task"] == "misinformed"]
    assert mis
    for s in mis:
        m = s["misinformed"]
        r, v = m["relation"], m["value"]
        assert [r, v] in s["conditions"]
        ids = [str(i) for i in m["errorInfo"]["movieIds"]]
        assert ids
        for i in ids:
            assert v not in raw[i][r], (s["id"], i, r, v)  # the claim is false ...
            assert raw[i][r], (s["id"], i, r)  # ... and not merely unknown
            assert i not in s["gt"]
        assert v in s["query"]


def test_implicit_references_resolve_to_hidden_value(built, raw):
    imp = [s for s in built[2] if s["task"] == "implicit"]
    assert imp
    for s in imp:
        m = s["implicit"]
        r, v = m["relation"], m["value"]
        assert [r, v] in s["conditions"]
        refs = [str(i) for i in m["referenceMovieIds"]]
        assert 1 <= len(refs) <= 3
        common = set.intersection(*(raw[i][r] for i in refs))
        assert common == {v}, (s["id"], refs, common)
        assert not set(refs) & set(s["gt"])
        # the hidden value is not written in the query (outside the referenced titles)
        text = s["query"]
        for t in m["referenceMovies"]:
            from recharness.tasks.recbench_plus.context import display_title

            text = text.replace(display_title(t), "")
        assert v.lower() not in text.lower(), (s["id"], v, s["query"])
        assert [r, v] not in s["stated_conditions"] and len(s["stated_conditions"]) == len(s["conditions"]) - 1


def test_interest_ground_truth_is_a_shared_consecutive_set(built, histories):
    inter = _unique_queries([s for s in built[2] if s["task"] == "interest"])[:30]
    assert inter
    wanted = {frozenset(s["gt"]) for s in inter}
    support = dict.fromkeys(wanted, 0)
    for h in histories.values():
        for j in range(len(h) - 2):
            w = frozenset(h[j : j + 3])
            if w in support:
                support[w] += 1
    for s in inter:
        assert len(s["gt"]) == 3 and s["support"] >= 5 and 1 <= s["popularity_quintile"] <= 5
        assert support[frozenset(s["gt"])] == s["support"], s["id"]


def test_official_layout_round_trip(built, ml1m):
    out, _, samples = built
    recs = read_records(out / "recbench_plus" / "ExplicitQuery.json", "explicit")
    assert len(recs) == LIMIT
    r0 = recs[0]
    for key in ("source_user", "condition_num", "movieCount", "movieSubset", "movieSubsetId", "sharedRelationships",
                "direct_description_query", "situational_description_query", "data_idx"):
        assert key in r0
    assert isinstance(r0["movieSubsetId"][0], int) and r0["movieCount"] == len(r0["movieSubset"])
    again = out / "again"
    build("recbench-plus", "ml-1m", again, seed=0, tasks=["explicit", "implicit", "misinformed", "demographics"],
          options={"official_dir": str(out / "recbench_plus")})
    reloaded = {s["id"]: s for s in read_jsonl(again / "samples.jsonl")}
    orig = {s["id"]: s for s in samples if s["task"] != "interest"}
    assert set(reloaded) == set(orig)
    for k, s in orig.items():
        for f in ("gt", "conditions", "stated_conditions", "satisfying", "history", "messages"):
            assert reloaded[k].get(f) == s.get(f), (k, f)
    assert not (again / "recbench_plus").exists()  # loading official files writes no new ones


def _task_build(ds, task, **kw):
    from recharness.core.types import BuildConfig
    from recharness.tasks.registry import get_task

    opts = kw.pop("options", {})
    return list(get_task("recbench-plus", task).build(ds, BuildConfig(options=opts, **kw)))


def test_deterministic_and_limit_is_a_prefix(built, ml1m):
    a = _task_build(ml1m, "misinformed", seed=0, limit=10)
    assert a == _task_build(ml1m, "misinformed", seed=0, limit=10)
    big = {s["id"]: s for s in built[2]}
    for s in a:
        assert s["gt"] == big[s["id"]]["gt"] and s["query"] == big[s["id"]]["query"]
    assert [s["gt"] for s in _task_build(ml1m, "misinformed", seed=1, limit=10)] != [s["gt"] for s in a]


def test_options_select_variants(ml1m):
    s = _task_build(ml1m, "explicit", limit=5, options={"history": "with", "k": 5, "query_field": "direct"})
    assert len(s) == 5 and all(x["with_history"] and x["k"] == 5 for x in s)
    assert "Please output 5 recommended movies directly" in s[0]["messages"][0]["content"]
    assert s[0]["query"].startswith("Can you recommend")
    assert len(_task_build(ml1m, "explicit", limit=3, options={"behaviour": False})) == 3  # --no-history
    from recharness.core.errors import ConfigError
    from recharness.tasks.recbench_plus.options import parse_options

    for bad, msg in (({"history": "sometimes"}, "history"), ({"k": "five"}, "k="), ({"mix": "1,2"}, "mix"),
                     ({"max_gt": 1}, "max_gt"), ({"specific": "maybe"}, "specific")):
        with pytest.raises(ConfigError, match=msg):
            parse_options(bad)
    assert parse_options({"mix": "1,1,2"}).mix == (0.25, 0.25, 0.5)


def test_official_queries_of_unknown_users_are_noted(built, ml1m, tmp_path):
    """An official query whose user the dataset lacks has no with-history sample: the build says how many,
    in build.json and on the console, rather than leaving the with-history rows silently smaller."""
    import json

    out, _, _ = built
    recs = json.loads((out / "recbench_plus" / "ExplicitQuery.json").read_text())[:6]
    for r in recs[:2]:
        r["source_user"] = 999999999  # no such ML-1M user
    (tmp_path / "ExplicitQuery.json").write_text(json.dumps(recs))
    info = build("recbench-plus", "ml-1m", tmp_path / "run", seed=0, tasks=["explicit"],
                 options={"explicit_file": str(tmp_path / "ExplicitQuery.json")})
    samples = list(read_jsonl(tmp_path / "run" / "samples.jsonl"))
    assert sum(s["with_history"] for s in samples) == 4 and sum(not s["with_history"] for s in samples) == 6
    assert len(info["notes"]) == 1
    note = info["notes"][0]
    assert "2 of the 6 records" in note and "'999999999'" in note and "asked without history only" in note
    assert json.loads((tmp_path / "run" / "build.json").read_text())["notes"] == info["notes"]
    # every user known: no note at all
    clean = build("recbench-plus", "ml-1m", tmp_path / "clean", seed=0, tasks=["explicit"],
                  options={"explicit_file": str(out / "recbench_plus" / "ExplicitQuery.json")})
    assert "notes" not in clean
    # with-history only: those queries are left out of the build, and the note says so
    only = build("recbench-plus", "ml-1m", tmp_path / "only", seed=0, tasks=["explicit"],
                 options={"explicit_file": str(tmp_path / "ExplicitQuery.json"), "history": "with"})
    assert only["counts"] == {"explicit": 4} and "left out of the build" in only["notes"][0]


def _more_popular(pool: set[str], item: str, counts: dict[str, int]) -> int:
    """How many items of `pool` have strictly more interactions than `item`: whatever the tie order, an item
    drawn from the pool's N most popular has fewer than N of these."""
    return sum(counts.get(i, 0) > counts.get(item, 0) for i in pool)


def test_ref_top_and_misinfo_top_set_how_popular_the_named_films_are(built, ml1m, raw):
    """Defaults: an implicit query's first reference film is among the 5 most popular items with the hidden
    value (the query's own ground truth left out), a misinformed query's false claim among the 100 most popular
    items that have the relation but not the value. 0 lifts the cut (the paper's draw from the whole KG), and
    films outside it appear; re-derived from the raw item table and interaction counts."""
    cnt = ml1m.interactions.group_by("item_id").len("n")
    counts = dict(zip(cnt["item_id"].to_list(), cnt["n"].to_list()))

    def ranks(samples):
        imp, mis = [], []
        for s in _unique_queries(samples):
            gt = set(s["gt"])
            if s["task"] == "implicit":
                r, v = s["implicit"]["relation"], s["implicit"]["value"]
                pool = {i for i, f in raw.items() if v in f[r]} - gt
                imp.append(_more_popular(pool, str(s["implicit"]["referenceMovieIds"][0]), counts))
            elif s["task"] == "misinformed":
                r, v = s["misinformed"]["relation"], s["misinformed"]["value"]
                pool = {i for i, f in raw.items() if f[r] and v not in f[r]} - gt
                mis += [_more_popular(pool, str(i), counts) for i in s["misinformed"]["errorInfo"]["movieIds"]]
        return imp, mis

    imp, mis = ranks(built[2])
    assert len(imp) == len(mis) == LIMIT
    assert max(imp) < 5 and max(mis) < 100
    whole = _task_build(ml1m, "implicit", seed=0, limit=60, options={"ref_top": 0, "history": "without"}) \
        + _task_build(ml1m, "misinformed", seed=0, limit=60, options={"misinfo_top": 0, "history": "without"})
    imp0, mis0 = ranks(whole)
    assert len(imp0) == len(mis0) == 60
    assert sum(r >= 5 for r in imp0) >= 15, sorted(imp0)
    assert sum(r >= 100 for r in mis0) >= 50, sorted(mis0)


def test_official_conditions_the_kg_cannot_check_have_no_cmr(built, ml1m, tmp_path):
    """A condition value spelt otherwise than in our KG, or a ground truth our KG says does not meet the
    conditions, gave every recommendation CMR 0 while CMR_checkable counted the query as checkable."""
    import json

    out, _, samples = built
    recs = read_records(out / "recbench_plus" / "ExplicitQuery.json", "explicit")[:3]
    raw = json.loads((out / "recbench_plus" / "ExplicitQuery.json").read_text())[:3]
    r, v = raw[0]["sharedRelationships"][0]
    raw[0]["sharedRelationships"][0] = [r, v + "\u0301x"]  # a value our KG does not hold
    others = [int(s["gt"][0]) for s in samples if s["task"] == "explicit" and s["gt"]
              and str(s["gt"][0]) not in set(map(str, recs[1]["movieSubsetId"]))]
    sat = {str(i) for i in next(s for s in samples if s.get("data_idx") == recs[1]["data_idx"])["satisfying"]}
    outsider = next(i for i in others if str(i) not in sat)
    raw[1]["movieSubsetId"] = [*raw[1]["movieSubsetId"], outsider]  # a ground truth our KG says fails
    raw[1]["movieSubset"] = [*raw[1]["movieSubset"], "x"]
    raw[1]["movieCount"] += 1
    d = tmp_path / "official"
    d.mkdir()
    (d / "ExplicitQuery.json").write_text(json.dumps(raw))
    got = {s["data_idx"]: s for s in _task_build(ml1m, "explicit", options={"official_dir": str(d), "history": "without"})}
    assert got[raw[0]["data_idx"]]["satisfying"] is None and got[raw[1]["data_idx"]]["satisfying"] is None
    # the untouched query keeps what the default build found satisfies it (its ground truth among them)
    kept = next(s for s in samples if s["task"] == "explicit" and s.get("data_idx") == raw[2]["data_idx"])
    assert set(map(str, raw[2]["movieSubsetId"])) <= set(map(str, kept["satisfying"]))
    assert sorted(map(str, got[raw[2]["data_idx"]]["satisfying"])) == sorted(map(str, kept["satisfying"]))


def test_another_edition_of_a_ground_truth_item_is_not_shown(ml1m):
    """The history shown beside a query dropped the ground-truth ids only: an item of the same title (another
    edition) stayed, and an answer copying its title scored a hit."""
    from recharness.tasks.recbench_plus.context import make_context

    ctx = make_context(ml1m)
    ids = list(ctx.titles)[:3]
    ctx.titles[ids[1]] = ctx.titles[ids[0]]  # two items of one title
    ctx._same_title = None
    assert ctx.hidden_with({ids[0]}) == {ids[0], ids[1]} and ctx.hidden_with({ids[2]}) == {ids[2]}


def test_the_kg_baseline_does_not_decline_a_query_whose_condition_the_kg_lacks(built, ml1m, tmp_path):
    """A stated condition our KG does not hold: the KG baseline has no answer (invalid), where it recommended
    nothing, a valid decline (FTR 1: the best a misinformed query scores)."""
    import json

    from recharness.tasks.recbench_plus.condition_tasks import ExplicitTask

    out, _, _ = built
    raw = json.loads((out / "recbench_plus" / "ExplicitQuery.json").read_text())[:2]
    r, v = raw[0]["sharedRelationships"][0]
    raw[0]["sharedRelationships"][0] = ["Cinematography", "Owen Roizman"]  # a relation our KG does not have
    d = tmp_path / "official"
    d.mkdir()
    (d / "ExplicitQuery.json").write_text(json.dumps(raw))
    samples = _task_build(ml1m, "explicit", options={"official_dir": str(d), "history": "without"})
    t = ExplicitTask()
    t.setup(ml1m)
    kg = t.references(ml1m, samples)["kg-conditions"]
    bad = next(s for s in samples if s["data_idx"] == raw[0]["data_idx"])
    good = next(s for s in samples if s["data_idx"] == raw[1]["data_idx"])
    assert not kg[bad["id"]]["valid"] and "Cinematography" in kg[bad["id"]]["error"]
    assert kg[good["id"]]["valid"] and kg[good["id"]]["parsed"]["item_ids"]

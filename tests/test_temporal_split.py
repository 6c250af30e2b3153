"""Global temporal split (`data.temporal_split`, `--option split=global_time`) on a hand-worked data set.

Four users, ten items, 15 interactions; sorted, the timestamps are 1..13, 14, 14. With cut=0.6 the
cut time is the stamp at position ⌊0.6·15⌋ = 9 (0-based): T = 10. Before it (ts < 10): u1 i0 i1 i2,
u2 i1 i5, u3 i2 i7 i8 i9; u4 has nothing before it and its i3 is stamped exactly 10 (after the cut).
First at or after T: u1 → i3 (11; its i4 at 12 is never used), u2 → i6 (13), u3 → none, u4 → i3.
"""

from __future__ import annotations

import polars as pl
import pytest

from recharness.baselines import TrainData, fit
from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig
from recharness.data.leave_last_out import leave_last_out
from recharness.data.store import Dataset
from recharness.data.temporal_split import cut_time, global_time, training_part
from recharness.tasks.llmrec.common import training_data, why_empty
from recharness.tasks.llmrec.direct import DirectTask
from recharness.tasks.llmrec.sequential import SequentialTask
from recharness.tasks.options import validate_options

ROWS = [("u1", "i0", 1), ("u1", "i1", 2), ("u1", "i2", 3), ("u1", "i3", 11), ("u1", "i4", 12),
        ("u2", "i1", 4), ("u2", "i5", 5), ("u2", "i6", 13),
        ("u3", "i2", 6), ("u3", "i7", 7), ("u3", "i8", 8), ("u3", "i9", 9),
        ("u4", "i3", 10), ("u4", "i0", 14), ("u4", "i5", 14)]


def frame(rows=ROWS) -> pl.DataFrame:
    return pl.DataFrame({"user_id": [r[0] for r in rows], "item_id": [r[1] for r in rows],
                         "rating": [4.0] * len(rows), "timestamp": [r[2] for r in rows]},
                        schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64, "timestamp": pl.Int64})


def dataset(rows=ROWS) -> Dataset:
    items = pl.DataFrame({"item_id": [f"i{k}" for k in range(10)], "title": [f"Film {k} (1990)" for k in range(10)]})
    return Dataset("tiny", frame(rows), items, pl.DataFrame({"user_id": ["u1", "u2", "u3", "u4"]}))


def test_cut_time_is_the_stamp_at_the_quantile_position():
    assert cut_time(frame(), 0.6) == 10  # position 9 of 15
    assert cut_time(frame(), 0.9) == 14  # position 13
    assert cut_time(frame(), 0.01) == 1  # position 0
    with pytest.raises(ConfigError, match=r"--option cut=1.0"):
        cut_time(frame(), 1.0)


def test_global_cut_picks_exactly_these_targets_and_histories():
    splits, t = global_time(frame(), cut=0.6, min_history=2)
    assert t == 10
    got = {s.user_id: (s.history, s.target) for s in splits}
    # u3 has nothing after the cut, u4 nothing before it (fewer than min_history=2)
    assert got == {"u1": (["i0", "i1", "i2"], "i3"), "u2": (["i1", "i5"], "i6")}
    splits0, _ = global_time(frame(), cut=0.6, min_history=0)
    assert {s.user_id: (s.history, s.target) for s in splits0}["u4"] == ([], "i3")  # stamped T: after the cut
    # leave-last-out on the same data holds out each user's own last item instead
    assert {s.user_id: s.target for s in leave_last_out(frame(), min_history=2)} == {
        "u1": "i4", "u2": "i6", "u3": "i9", "u4": "i5"}


def test_ties_in_time_follow_the_file_order():
    splits, t = global_time(frame(), cut=0.9, min_history=1)  # T = 14: u4's i0 and i5 are both stamped 14
    assert t == 14 and {s.user_id: s.target for s in splits}["u4"] == "i0"  # first in the file
    swapped = ROWS[:-2] + [ROWS[-1], ROWS[-2]]  # i5 now comes first in the file
    assert {s.user_id: s.target for s in global_time(frame(swapped), cut=0.9, min_history=1)[0]}["u4"] == "i5"
    shuffled = list(reversed(ROWS))  # rows out of time order: the split sorts by (user, time, file order)
    assert ({s.user_id: (s.history, s.target) for s in global_time(frame(shuffled), cut=0.6, min_history=2)[0]}
            == {"u1": (["i0", "i1", "i2"], "i3"), "u2": (["i1", "i5"], "i6")})


def test_training_part_is_everything_before_the_cut_for_every_user():
    rows = training_part(frame(), 10)
    assert sorted(rows.select("user_id", "item_id").iter_rows()) == [
        ("u1", "i0"), ("u1", "i1"), ("u1", "i2"), ("u2", "i1"), ("u2", "i5"),
        ("u3", "i2"), ("u3", "i7"), ("u3", "i8"), ("u3", "i9")]


def test_sequential_build_records_the_split_and_references_learn_before_the_cut(tmp_path):
    ds = dataset()
    opts = {"split": "global_time", "cut": 0.6, "min_history": 2, "n_recs": 4}
    samples = list(SequentialTask().build(ds, BuildConfig(seed=0, options=opts, out=tmp_path)))
    assert [(s["user_id"], s["seen"], s["target"]) for s in samples] == [
        ("u1", ["i0", "i1", "i2"], "i3"), ("u2", ["i1", "i5"], "i6")]
    assert samples[0]["split"] == {"split": "global_time", "cut": 0.6, "cut_time": 10}
    refs = SequentialTask().references(ds, samples, seed=0)
    # training counts before the cut: i1 2, i2 2, i0 1, i5 1, i7 1, i8 1, i9 1 (ties by id). Fitted on
    # leave-last-out rows instead, i3 (u1 at 11, u4 at 10) would count 2 and come first for u1.
    assert refs["popularity"]["sequential-u1"]["parsed"]["items"] == ["i5", "i7", "i8", "i9"]
    assert refs["popularity"]["sequential-u2"]["parsed"]["items"] == ["i2", "i0", "i7", "i8"]
    # the train stage reads the build's training part from the run directory: the same rows
    of_build = TrainData.of_build(ds, tmp_path, "llmrec").interactions
    on_the_fly = training_data(ds, samples[0]["split"]).interactions
    assert of_build.select("user_id", "item_id", "timestamp").equals(on_the_fly)
    trained = fit("popularity", TrainData.of_build(ds, tmp_path, "llmrec"))[0].predict(samples, SequentialTask())
    assert trained == refs["popularity"]
    # a leave-last-out build in the same directory removes it: `train` then fits on leave-last-out rows
    list(SequentialTask().build(ds, BuildConfig(seed=0, options={"min_history": 2, "n_recs": 4}, out=tmp_path)))
    assert TrainData.of_build(ds, tmp_path, "llmrec").interactions.height == len(ROWS) - 4


def test_direct_negatives_are_never_items_the_user_had_after_the_target():
    ds = dataset()
    opts = {"split": "global_time", "cut": 0.6, "min_history": 2, "n_candidates": 6}
    for seed in range(5):
        s = next(x for x in DirectTask().build(ds, BuildConfig(seed=seed, options=opts)) if x["user_id"] == "u1")
        # u1 had i0..i4 (i4 after its target i3): the only unseen items are i5..i9, so these six
        assert s["target"] == "i3" and sorted(s["candidates"]) == ["i3", "i5", "i6", "i7", "i8", "i9"]
        assert s["seen"] == ["i0", "i1", "i2"] and s["split"]["cut_time"] == 10


def test_options_and_errors_name_the_option_and_value():
    assert validate_options("llmrec", ["sequential", "direct"], {"split": "global_time", "cut": 0.8}) == {
        "split": "global_time", "cut": 0.8}
    with pytest.raises(ConfigError, match=r"--option cut=0.8: a cut time applies to split=global_time only"):
        validate_options("llmrec", ["sequential"], {"cut": 0.8})
    with pytest.raises(ConfigError, match=r"--option split=weekly: expected 'leave_last_out' or 'global_time'"):
        validate_options("llmrec", ["direct"], {"split": "weekly"})
    with pytest.raises(ConfigError, match=r"--option cut=1.5: must be < 1"):
        validate_options("llmrec", ["direct"], {"split": "global_time", "cut": 1.5})
    no_time = dataset()
    no_time.interactions = no_time.interactions.with_columns(
        pl.when(pl.col("user_id") == "u2").then(None).otherwise(pl.col("timestamp")).alias("timestamp"))
    with pytest.raises(ConfigError, match=r"--option split=global_time cut=0.6: 3 of 15 interactions have no timestamp"):
        list(SequentialTask().build(no_time, BuildConfig(options={"split": "global_time", "cut": 0.6, "n_recs": 4})))
    why = why_empty("sequential", dataset(), 4, {"split": "global_time", "cut": 0.6})
    assert why == ("sequential: split=global_time cut=0.6: none of the 3 users with an interaction after the cut has "
                   "min_history=4 before it (the most: 3); lower --option min_history or raise --option cut")


def test_every_split_task_takes_split_and_cut_from_one_definition():
    """llmrec sequential/direct and recbench ctr/seqrec: the same two options, the same checks, each refusal
    naming what that task's leave_last_out holds out; the default cut is 0.9 wherever it is read."""
    from recharness.tasks.options import DEFAULT_CUT, TemporalSplitOptions, suite_models

    models = {**{f"llmrec.{k}": v for k, v in suite_models("llmrec").items()},
              **{f"recbench.{k}": v for k, v in suite_models("recbench").items()}}
    split_tasks = {k for k, m in models.items() if issubclass(m, TemporalSplitOptions)}
    assert split_tasks == {"llmrec.sequential", "llmrec.direct", "recbench.ctr", "recbench.seqrec"}
    held = {"recbench.seqrec": "each user's last positive", "recbench.ctr": "each test user's last pairs",
            "llmrec.direct": "each user's last item"}
    for key, what in held.items():
        suite, task = key.split(".")
        with pytest.raises(ConfigError, match=f"--option cut=0.7: .*holds out {what}\\): add --option split=global_time"):
            validate_options(suite, [task], {"cut": 0.7})  # seqrec ignored such a cut before
        assert models[key](split="global_time").cut_quantile == DEFAULT_CUT == 0.9
        assert models[key](split="global_time", cut=0.7).cut_quantile == 0.7
    from recharness.tasks.options import option_table

    for key in split_tasks:  # listed after the task's own options, `split` in the task's words
        table = {k: text for k, _, text in option_table(*key.split("."))}
        assert list(table)[-2:] == ["split", "cut"]
        assert ("test_pairs_per_user" in table["split"]) == (key == "recbench.ctr")
        assert ("last positive is the test target" in table["split"]) == (key == "recbench.seqrec")


def test_a_global_cut_over_sequence_positions_is_refused(llmrank_games):
    """LLMRank's (and RecBole's split files') timestamps are each item's position in its user's sequence: one cut
    at "position 15" mixed users and moved the official targets (526 of 4,330 users kept theirs)."""
    from recharness.tasks.llmrec.sequential import SequentialTask

    assert llmrank_games.meta.get("sequence_timestamps")
    with pytest.raises(ConfigError, match="positions in each user's sequence"):
        global_time(llmrank_games.interactions, cut=0.9, meta=llmrank_games.meta)
    with pytest.raises(ConfigError, match="use split=leave_last_out"):
        list(SequentialTask().build(llmrank_games, BuildConfig(seed=0, limit=5, options={"split": "global_time"})))
    with pytest.raises(ConfigError, match="positions in each user's sequence"):
        cut_time(llmrank_games.events(), 0.9, llmrank_games.meta)  # RecBench's seqrec and CTR builds call this


def test_a_global_cut_leaves_the_users_later_items_out_of_the_full_rank_as_out_of_the_negatives():
    """Under a global cut the negatives are never an item the user had after the cut; the full-catalog rank leaves
    them out too, else the two metrics differ in what they hide (the review: popularity's full NDCG@10 on ML-1M
    0.0304 against 0.0436). Hand: 15 stamps, cut 0.75: position 11, T = 20. Before it: c 3, y 3, t 2, a b d 1
    (e and f only after it: popularity ranks neither). u1 had a, b, then t (its target, 20) and y (21, later).
    Popularity's order without a, b: c, y, t, d; y is later, so t's full rank is 2, not 3. Its candidates
    (retriever:popularity, n 3): t and the top unseen items c, d, ranked c, t, d: t 2nd, min(full rank, n), as
    for a retriever ranking its own candidates (with y counted it read 3 against 2)."""
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "t", 20), ("u1", "y", 21),
            ("u2", "y", 3), ("u2", "c", 4), ("u2", "d", 5), ("u2", "e", 23),
            ("u3", "y", 6), ("u3", "c", 7), ("u3", "t", 8), ("u3", "f", 24),
            ("u4", "c", 9), ("u4", "y", 10), ("u4", "t", 11)]
    items = pl.DataFrame({"item_id": list("abcdefty"), "title": [f"Film {c} (1990)" for c in "abcdefty"]})
    ds = Dataset("later", frame(rows), items, pl.DataFrame({"user_id": ["u1", "u2", "u3", "u4"]}))
    opts = {"split": "global_time", "cut": 0.75, "min_history": 2, "n_candidates": 3,
            "negatives": "retriever:popularity"}
    samples = list(DirectTask().build(ds, BuildConfig(seed=0, options=opts)))
    by = {s["user_id"]: s for s in samples}
    assert sorted(by) == ["u1", "u2", "u3"] and by["u1"]["split"]["cut_time"] == 20
    assert by["u1"]["target"] == "t" and by["u1"]["seen"] == ["a", "b"] and by["u1"]["later"] == ["y"]
    assert sorted(by["u1"]["candidates"]) == ["c", "d", "t"]
    model = fit("popularity", training_data(ds, by["u1"]["split"]))[0]
    recs = model.predict(samples, DirectTask())
    got = {s["user_id"]: (recs[s["id"]]["parsed"]["ranking"].index(s["target"]) + 1,
                          recs[s["id"]]["parsed"]["full_rank"]) for s in samples}
    # u2's e and u3's f have no training interaction: popularity never ranks them (last among the candidates)
    assert got == {"u1": (2, 2), "u2": (3, None), "u3": (3, None)}
    # the later item is left out of the rank, not given to the model: with the history alone t is 3rd
    assert model.target_ranks([("t", ["a", "b"], "u1")])[0]["rank"] == 3


@pytest.mark.parametrize("name", ["markov", "itemknn", "ease"])
def test_under_a_global_cut_every_retriever_ranks_its_own_candidates_at_min_full_rank_n(name):
    """The identity of a retriever ranking its own candidates (sampled rank = min(full rank, n)) holds under a
    global cut for the history scorers too, whose full rank now leaves the user's later items out."""
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "t", 20), ("u1", "y", 21), ("u1", "c", 22),
            ("u2", "y", 3), ("u2", "c", 4), ("u2", "d", 5), ("u2", "e", 23),
            ("u3", "y", 6), ("u3", "c", 7), ("u3", "t", 8), ("u3", "f", 24),
            ("u4", "c", 9), ("u4", "y", 10), ("u4", "t", 11), ("u4", "a", 12), ("u4", "b", 13)]
    items = pl.DataFrame({"item_id": list("abcdefty"), "title": [f"Film {c} (1990)" for c in "abcdefty"]})
    ds = Dataset("later", frame(rows), items, pl.DataFrame({"user_id": ["u1", "u2", "u3", "u4"]}))
    opts = {"split": "global_time", "cut": 0.75, "min_history": 2, "n_candidates": 3, "negatives": f"retriever:{name}"}
    samples = list(DirectTask().build(ds, BuildConfig(seed=0, options=opts)))
    assert any(s.get("later") for s in samples)  # the adjustment has something to leave out
    model = fit(name, training_data(ds, samples[0]["split"]))[0]
    recs = model.predict(samples, DirectTask())
    for s in samples:
        sampled = recs[s["id"]]["parsed"]["ranking"].index(s["target"]) + 1
        full = recs[s["id"]]["parsed"]["full_rank"]
        assert sampled == min(full if full is not None else 3, 3), (name, s["user_id"], sampled, full)

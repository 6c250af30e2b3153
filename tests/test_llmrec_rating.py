"""LLMRec rating prediction: split, prompts, scoring rules, leak-free reference rows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recharness.core.errors import ConfigError
from recharness.core.types import BuildConfig
from recharness.data.store import Dataset
from recharness.tasks.llmrec.rating import RatingTask, fit_biases, review_splits, training_part


def tiny_dataset(target_u1: float = 2.0) -> Dataset:
    """u1 rates a,b,c then (target) d; u2 rates a,d then (target) b; u3 rates a then (target) c."""
    rows = [
        ("u1", "a", 5.0, 1, "Loved it"), ("u1", "b", 3.0, 2, "Okay"), ("u1", "c", 4.0, 3, "Nice"), ("u1", "d", target_u1, 4, "Bad"),
        ("u2", "a", 4.0, 1, "Good"), ("u2", "d", 2.0, 2, "Poor"), ("u2", "b", 1.0, 3, "Awful"),
        ("u3", "a", 3.0, 1, "Fine"), ("u3", "c", 5.0, 2, "Great"),
    ]
    inter = pl.DataFrame(rows, schema=["user_id", "item_id", "rating", "timestamp", "review_title"], orient="row")
    inter = inter.with_columns(pl.col("timestamp").cast(pl.Int64), pl.lit("text").alias("review_text"))
    items = pl.DataFrame({"item_id": ["a", "b", "c", "d"], "title": ["Alpha", "Beta", None, "Delta"],
                          "main_category": ["Toys"] * 4})
    users = pl.DataFrame({"user_id": ["u1", "u2", "u3"]})
    return Dataset("tiny-amazon", inter, items, users, meta={"domain": "product"})


def test_review_splits_and_training_part():
    ds = tiny_dataset()
    sp = review_splits(ds.interactions, min_history=2)
    assert [s.user_id for s in sp] == ["u1", "u2"]  # u3 has only one earlier interaction
    assert [h["item_id"] for h in sp[0].history] == ["a", "b", "c"] and sp[0].target["item_id"] == "d"
    assert sp[1].target == {"item_id": "b", "rating": 1.0, "review_title": "Awful", "review_text": "text"}
    assert [s.user_id for s in review_splits(ds.interactions, min_history=1)] == ["u1", "u2", "u3"]
    a = review_splits(ds.interactions, min_history=0, limit=2, seed=3)
    assert [s.user_id for s in a] == [s.user_id for s in review_splits(ds.interactions, min_history=0, limit=2, seed=3)]
    assert len(a) == 2
    train = training_part(ds.interactions)
    assert train.height == 6  # each user's last interaction removed
    assert set(zip(train["user_id"], train["item_id"])) == {("u1", "a"), ("u1", "b"), ("u1", "c"), ("u2", "a"), ("u2", "d"), ("u3", "a")}
    with pytest.raises(ConfigError, match="no 'review_text' column"):
        review_splits(ds.interactions.drop("review_text"), require=("review_text",))
    # a held-out review of only HTML ("<br />", tags, spaces) is empty as the metrics read it: no reference to
    # score against (every row got BLEU/ROUGE 0 on it), so the user is not eligible
    tags = ds.interactions.with_columns(
        pl.when((pl.col("user_id") == "u1") & (pl.col("item_id") == "d")).then(pl.lit("<br /> <p> </p>"))
        .otherwise(pl.col("review_text")).alias("review_text"))
    assert [s.user_id for s in review_splits(tags, min_history=1, require=("review_text",))] == ["u2", "u3"]
    # an unrated held-out interaction is not eligible before sampling: --limit 2 gives 2 rated targets (before,
    # the sample of 2 could hold u1's unrated one, dropped afterwards: 1 sample)
    unrated = tiny_dataset(target_u1=None)
    for seed in range(6):
        got = review_splits(unrated.interactions, min_history=1, limit=2, seed=seed, rated=True)
        assert len(got) == 2 and "u1" not in {s.user_id for s in got}


def build(ds, **opts):
    return list(RatingTask().build(ds, BuildConfig(seed=0, options=opts)))


def test_build_prompt_modules_switch():
    ds = tiny_dataset()
    s = build(ds, min_history=2)
    assert [x["id"] for x in s] == ["rating-u1", "rating-u2"]
    u1 = s[0]
    assert u1["target_rating"] == 2.0 and u1["user_mean"] == 4.0 and u1["item_id"] == "d"
    text = u1["messages"][0]["content"]
    assert "Predict how the user will rate" in text
    assert '1. Alpha (rated 5/5; review: "Loved it")' in text
    assert "3. item c (rated 4/5" in text  # an untitled item is named by its id
    assert 'Product to rate: "Delta" (Toys)' in text
    assert "single number from 1 to 5" in text
    assert "Bad" not in text  # the target's own review never reaches the prompt
    bare = build(ds, min_history=1, behaviour=False, format_indicator=False, task_description=False)[0]["messages"][0]["content"]
    assert bare == 'Product to rate: "Delta" (Toys)'
    assert build(ds, min_history=1, history_len=1)[0]["messages"][0]["content"].count("(rated") == 1


def test_parse_uses_number_validator():
    t = RatingTask()
    assert t.parse({}, "I think 4 stars").value["value"] == 4.0
    p = t.parse({}, "")
    assert not p.valid and p.error == "empty answer"


@pytest.mark.parametrize("text,title", [
    ('I would rate "Toy Story 2" a 4.', "Toy Story 2 (1999)"),
    ("I predict the user will rate Toy Story 2 (1999) a 4.", "Toy Story 2 (1999)"),
    ('Rating for "Home Alone 2": 4', "Home Alone 2: Lost in New York (1992)"),
    ("My rating for Matrix Reloaded 2, The is 4", "Matrix Reloaded 2, The (2003)"),
])
def test_a_digit_in_the_rated_items_title_is_no_rating(text, title):
    """The title's 2, closest to "rate", was read as the rating (valid, not clipped: RMSE 2 for an answer of 4)."""
    p = RatingTask().parse({"item_title": title}, text)
    assert p.valid and p.value["value"] == 4.0, p
    # a title that is a number is not masked: "3 (2010)" rated 3 stays 3
    assert RatingTask().parse({"item_title": "3 (2010)"}, "I would rate it 3.").value["value"] == 3.0


def test_a_rating_written_while_thinking_is_no_answer():
    """<think> reasoning is dropped before the answer is read, however long it is (a number in it was read)."""
    t = RatingTask()
    assert t.parse({}, "<think>Most items got 5. I would rate it 5? Maybe lower.</think>\n3").value["value"] == 3.0
    assert t.parse({}, "<think>" + "hmm, 5? " * 4000 + "</think>\nRating: 2").value["value"] == 2.0
    p = t.parse({}, "<think>I would rate it 5, but")  # reasoning cut off: no answer
    assert not p.valid and p.error == "empty answer"


def test_score_hand_worked():
    """y = 4, 2, 5, 3; answers 5 (valid), invalid, 7→… invalid (off the slack), 0→clipped to 1; one missing."""
    samples = [{"id": str(k), "target_rating": y, "user_mean": m} for k, (y, m) in enumerate([(4, 3.5), (2, 3.0), (5, 4.0), (3, 2.0), (1, 1.5)])]
    t = RatingTask()
    preds = {"0": t.parse({}, "5"), "1": t.parse({}, "no idea"), "2": t.parse({}, "7"), "3": t.parse({}, "0")}
    recs = {k: {"parsed": p.value, "valid": p.valid} for k, p in preds.items()}
    m = t.score(samples, recs)
    # valid: sample 0 (5 vs 4) and sample 3 (clipped 1 vs 3): errors 1, 2
    assert m["RMSE"] == pytest.approx(np.sqrt((1 + 4) / 2))
    assert m["MAE"] == pytest.approx(1.5)
    # samples 1, 2, 4 failed (invalid, invalid, missing): each at the worst rating, 5 vs 2, 1 vs 5, 5 vs 1 → errors
    # 3, 4, 4 (not the user's mean, the user_mean reference's own answer: errors 1, 1, 0.5 before 2026-11-30)
    assert m["RMSE_fb"] == pytest.approx(np.sqrt((1 + 9 + 16 + 4 + 16) / 5), abs=1e-12)
    assert m["MAE_fb"] == pytest.approx((1 + 3 + 4 + 2 + 4) / 5, abs=1e-12)
    assert m["invalid_rate"] == pytest.approx(3 / 5) and m["missing"] == 1.0
    assert m["clipped_rate"] == pytest.approx(1 / 5)
    # equal to numpy on the same inputs
    y = np.array([4, 3.0])
    assert m["RMSE"] == pytest.approx(float(np.sqrt(np.mean((np.clip([5, 0], 1, 5) - y) ** 2))), abs=1e-12)
    none = t.score(samples, {})
    assert np.isnan(none["RMSE"]) and none["invalid_rate"] == 1.0
    # no valid answer at all: the worst values the scale allows (y 4, 2, 5, 3, 1 against 1, 5, 1, 1, 5)
    dead = {k: {"parsed": None, "valid": False} for k in "01234"}
    for got in (none, t.score(samples, dead)):
        assert got["RMSE_fb"] == pytest.approx(np.sqrt((9 + 9 + 16 + 4 + 16) / 5), abs=1e-12)
        assert got["MAE_fb"] == pytest.approx((3 + 3 + 4 + 2 + 4) / 5, abs=1e-12)
    units = t.units(samples, dead)
    assert "RMSE" not in units and "RMSE_fb" in units and "invalid_rate" in units


def test_a_model_that_mostly_fails_does_not_beat_the_user_mean_reference():
    """The review of 2026-11-30: with a failure scored as the user's mean (the user_mean reference's own answer), a
    model failing 285 of 300 samples and answering 15 exactly was marked best and 'beat' that reference."""
    from recharness.core.types import ScoreRow
    from recharness.runner.intervals import add_confidence_intervals

    rng = np.random.default_rng(0)
    samples = []
    for i in range(300):
        um = float(rng.uniform(2.5, 4.5))
        y = float(np.clip(np.round(um + rng.normal(0, 1)), 1, 5))
        samples.append({"id": f"rating-u{i}", "user_id": f"u{i}", "target_rating": y, "user_mean": um})
    t = RatingTask()
    ref = {s["id"]: {"id": s["id"], "valid": True, "parsed": {"value": s["user_mean"]}} for s in samples}
    flaky = {s["id"]: ({"id": s["id"], "valid": True, "parsed": {"value": s["target_rating"]}} if k < 15 else
                       {"id": s["id"], "valid": False, "parsed": None, "error": "HTTP 500"})
             for k, s in enumerate(samples)}
    rows = [(ScoreRow(method=name, task="rating", metrics=t.score(samples, recs), n=300, kind=kind), recs)
            for name, kind, recs in (("flaky", "model", flaky), ("user_mean", "reference", ref))]
    add_confidence_intervals(t, samples, rows, resamples=500, seed=0)
    (model, _), (reference, _) = rows
    y = np.array([s["target_rating"] for s in samples])
    worst = np.abs(np.where(y - 1 >= 5 - y, 1.0, 5.0) - y)
    assert model.metrics["RMSE_fb"] == pytest.approx(np.sqrt(np.mean(np.r_[np.zeros(15), worst[15:] ** 2])))
    assert model.metrics["RMSE_fb"] > 2 * reference.metrics["RMSE_fb"]
    assert reference.ci["RMSE_fb"].get("top") and not model.ci["RMSE_fb"].get("top")
    assert model.extra["vs_strongest_reference"]["verdict"] != "beats"


def test_a_dataset_off_the_1_to_5_scale_is_refused():
    """The prompt shows 'rated x/5', the parser reads 1-5 and references are clipped there: a 1-10 dataset (or
    ML-10M's half stars from 0.5) would be shown as 'rated 9/5' and its right answers read as invalid."""
    for low, high in ((1.0, 9.0), (0.5, 5.0)):
        ds = tiny_dataset()
        ds.interactions = ds.interactions.with_columns(
            pl.when(pl.col("rating") == 5.0).then(high).when(pl.col("rating") == 1.0).then(low)
            .otherwise(pl.col("rating")).alias("rating"))
        with pytest.raises(ConfigError, match=rf"ratings run from {low:g} to {high:g}: the rating task .* 1-5 scale"):
            build(ds, min_history=2)
    assert build(tiny_dataset(), min_history=2)  # 1-5: built


def test_references_are_fitted_on_training_part_only():
    ds = tiny_dataset(target_u1=2.0)
    samples = build(ds, min_history=2)
    t = RatingTask()
    refs = t.references(ds, samples)
    val = {m: {i: r["parsed"]["value"] for i, r in recs.items()} for m, recs in refs.items()}
    # training ratings: u1 5,3,4; u2 4,2; u3 3 → global mean 21/6
    assert val["global_mean"]["rating-u1"] == pytest.approx(21 / 6)
    assert val["user_mean"]["rating-u1"] == pytest.approx(4.0)
    assert val["user_mean"]["rating-u2"] == pytest.approx(3.0)
    assert val["item_mean"]["rating-u1"] == pytest.approx(2.0)  # item d: only u2's 2.0 (u1's target excluded)
    assert val["item_mean"]["rating-u2"] == pytest.approx(3.0)  # item b: only u1's 3.0 (u2's target excluded)
    # changing a target rating changes no reference prediction
    refs2 = t.references(tiny_dataset(target_u1=5.0), samples)
    assert all(refs2[m][i]["parsed"] == refs[m][i]["parsed"] for m in refs for i in refs[m])
    # references score with the same scorer, never invalid
    m = t.score(samples, refs["user_mean"])
    assert m["invalid_rate"] == 0.0 and m["RMSE"] == pytest.approx(np.sqrt(((4 - 2) ** 2 + (3 - 1) ** 2) / 2))


def test_biases_equal_the_ridge_least_squares_solution():
    rng = np.random.default_rng(0)
    n_u, n_i, n = 7, 5, 30
    u = rng.integers(0, n_u, n)
    i = rng.integers(0, n_i, n)
    r = rng.integers(1, 6, n).astype(float)
    lu, li = 2.0, 3.0
    mu, bu, bi = fit_biases([f"u{x}" for x in u], [f"i{x}" for x in i], r, reg_user=lu, reg_item=li)
    assert mu == pytest.approx(r.mean())
    # numpy: min ||A x - (r - mu)||^2 + lu ||b_u||^2 + li ||b_i||^2 as one augmented least-squares problem
    users, ui = np.unique(u, return_inverse=True)
    items, ii = np.unique(i, return_inverse=True)
    A = np.zeros((n, len(users) + len(items)))
    A[np.arange(n), ui] = 1
    A[np.arange(n), len(users) + ii] = 1
    reg = np.diag([np.sqrt(lu)] * len(users) + [np.sqrt(li)] * len(items))
    x, *_ = np.linalg.lstsq(np.vstack([A, reg]), np.concatenate([r - mu, np.zeros(len(users) + len(items))]), rcond=None)
    assert [bu[f"u{k}"] for k in users] == pytest.approx(x[: len(users)], abs=1e-7)
    assert [bi[f"i{k}"] for k in items] == pytest.approx(x[len(users):], abs=1e-7)


def test_ml1m_build_and_references(ml1m):
    samples = list(RatingTask().build(ml1m, BuildConfig(seed=1, limit=4, options={"history_len": 3})))
    assert len(samples) == 4
    s = samples[0]
    content = s["messages"][0]["content"]
    assert content.count("(rated") == 3 and "review:" not in content  # ML-1M has no review titles
    assert "movie" in content and s["target_rating"] in {1.0, 2.0, 3.0, 4.0, 5.0}
    hist = ml1m.interactions.filter(pl.col("user_id") == s["user_id"])["rating"].to_list()
    assert s["user_mean"] == pytest.approx(np.mean(hist[:-1])) and s["target_rating"] == hist[-1]
    refs = RatingTask().references(ml1m, samples)
    assert set(refs) == {"global_mean", "user_mean", "item_mean", "user_item_bias"}
    assert refs["user_mean"][s["id"]]["parsed"]["value"] == pytest.approx(s["user_mean"])
    for recs in refs.values():
        m = RatingTask().score(samples, recs)
        assert 0 <= m["RMSE"] <= 4 and m["RMSE"] == m["RMSE_fb"]


def test_max_tokens_option_reaches_generation_params():
    ds = tiny_dataset()
    t = RatingTask()
    assert t.generation_params(build(ds, min_history=2)[0]).max_tokens == t.params.max_tokens
    assert t.generation_params(build(ds, min_history=2, max_tokens=8)[0]).max_tokens == 8


def test_a_digit_in_a_history_title_is_no_rating():
    """A title the prompt's history shows, holding a digit, was read as the rating: "The user would likely rate Toy
    Story 2 a 4" gave 2 and "4 (for reference, the rating for Toy Story 3 was 5)" gave 3 (valid answers, off by
    two); the history's titles are now read as "another item", as the rated one's is read as "the item"."""
    ds = tiny_dataset()
    ds.items = ds.items.with_columns(pl.Series("title", ["Toy Story 2 (1999)", "Toy Story 3 (2010)",
                                                          "Godfather: Part II, The (1974)", "Heat (1995)"]))
    s = next(x for x in build(ds, min_history=1) if x["user_id"] == "u1")
    assert s["item_title"] == "Heat (1995)"
    t = RatingTask()
    assert t.parse(s, "The user would likely rate Toy Story 2 a 4").value["value"] == 4.0
    # the 3 of the title no longer answers; 5 is the history's and 4 follows no answer word: not read, not 3
    p = t.parse(s, "4 (for reference, the rating for Toy Story 3 was 5)")
    assert not p.valid and "ambiguous" in p.error
    # a sample without the history in its prompt masks nothing of it (the model never saw those titles)
    bare = next(x for x in build(ds, min_history=1, behaviour=False) if x["user_id"] == "u1")
    assert t.parse(bare, "The user would likely rate Toy Story 2 a 4").value["value"] == 2.0

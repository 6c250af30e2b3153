"""ItemKNN, EASE, ALS and Markov: each checked against a hand computation or the library it wraps,
through the one `HistoryScorer` contract (rank / top_k / target_rank / p_click), saved and loaded
without pickle, and tuned on validation data only with the same budget."""

import json

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

pytest.importorskip("implicit")
pytest.importorskip("optuna")

from recharness.baselines import BASELINES, TrainData, fit  # noqa: E402
from recharness.baselines.ease import EASE  # noqa: E402
from recharness.baselines.history_scorer import user_sequences, validation_split  # noqa: E402
from recharness.baselines.item_knn import ItemKNN  # noqa: E402
from recharness.baselines.markov import Markov  # noqa: E402
from recharness.baselines.matrix_factorisation import ALS  # noqa: E402
from recharness.baselines.tuning import tune, validation_ndcg  # noqa: E402

ITEMS = ["a", "b", "c", "d", "e"]


def _train() -> TrainData:
    # u1: a b c ; u2: a b ; u3: b c d ; u4: c d  (in time order)
    rows = [("u1", "a", 1), ("u1", "b", 2), ("u1", "c", 3), ("u2", "a", 1), ("u2", "b", 2),
            ("u3", "b", 1), ("u3", "c", 2), ("u3", "d", 3), ("u4", "d", 2), ("u4", "c", 1)]
    df = pl.DataFrame(rows, schema=["user_id", "item_id", "timestamp"], orient="row")
    return TrainData(df, ITEMS)


def _x() -> np.ndarray:
    # binary user x item matrix of _train(), users u1..u4, items a..e
    return np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 0]], dtype=float)


def test_sequences_follow_time_not_file_order():
    assert user_sequences(_train())["u4"] == ["c", "d"]


def test_markov_scores_are_the_transition_counts_after_the_last_item():
    m = Markov(order=1).fit(_train())
    # transitions: a->b (u1, u2), b->c (u1, u3), c->d (u3, u4)
    assert m.scores(["x", "a"]).tolist() == [0, 2, 0, 0, 0]
    assert m.scores(["b"]).tolist() == [0, 0, 2, 0, 0]
    # ties (everything but c) by training popularity: b 3, c 3, a 2, d 2 (a before d by id), e 0
    assert m.top_k(3, history=["b"]) == ["c", "b", "a"]
    assert m.top_k(3, exclude={"b"}, history=["b"]) == ["c", "a", "d"]
    assert m.target_rank("d", ["b"]) == 3  # c, then a (popularity tie with d, id first), then d
    two = Markov(order=2, decay=0.5).fit(_train())
    assert two.scores(["a", "b"]).tolist() == [0, 1.0, 2, 0, 0]  # b->c: 2; a->b: 0.5 * 2


def test_markov_order_reaches_beyond_five_items():
    # transitions of _train(): a->b 2, b->c 2, c->d 2; e has none. History a, then five e's:
    hist = ["a", "e", "e", "e", "e", "e"]
    assert Markov(order=5, decay=0.5).fit(_train()).scores(hist).tolist() == [0, 0, 0, 0, 0]
    assert Markov(order=6, decay=0.5).fit(_train()).scores(hist).tolist() == [0, 0.5 ** 5 * 2, 0, 0, 0]
    assert Markov(order=20, decay=0.5).fit(_train()).scores(hist).tolist() == [0, 0.5 ** 5 * 2, 0, 0, 0]
    assert Markov.space["order"] == ("int", 1, 20)  # the whole of a RecBench seqrec history (≤ 20 items)


def test_ease_equals_its_closed_form():
    lam = 3.0
    x = _x()[:, :4]  # item e has no interaction: solved over the active items only
    p = np.linalg.inv(x.T @ x + lam * np.eye(4))
    b = np.eye(4) - p / np.diag(p)
    np.fill_diagonal(b, 0.0)
    m = EASE(l2=lam).fit(_train())
    hist = ["a", "c"]
    expected = b[[0, 2]].sum(axis=0)
    np.testing.assert_allclose(m.scores(hist)[:4], expected, rtol=1e-5, atol=1e-6)
    assert m.scores(hist)[4] == 0.0
    full = {**dict(zip("abcd", expected)), "e": 0.0}
    popularity_order = "bcade"  # the tie rule: training popularity (b 3, c 3, a 2, d 2, e 0), then id
    assert m.rank(["e", "d", "b", "zz"], history=hist) == sorted(
        ["e", "d", "b"], key=lambda i: (-round(full[i], 5), popularity_order.index(i))) + ["zz"]


def test_itemknn_equals_cosine_similarity_summed_over_the_history():
    from sklearn.metrics.pairwise import cosine_similarity

    sim = cosine_similarity(_x().T)  # every neighbour kept: K larger than the catalog
    m = ItemKNN(neighbours=10).fit(_train())
    np.testing.assert_allclose(m.scores(["a", "d"])[:4], (sim[0] + sim[3])[:4], rtol=1e-5)
    one = ItemKNN(neighbours=1).fit(_train())  # each item's single nearest neighbour (itself)
    np.testing.assert_allclose(one.similarity.toarray(), np.diag([1.0, 1, 1, 1, 0]), atol=1e-6)


def test_itemknn_recency_decay_weights_the_history_by_position():
    # cosines of _x (hand): a·b 2/√6, a·c 1/√6, a·d 0, d·b 1/√6, d·c 2/√6, each item with itself 1
    r6 = np.sqrt(6)
    plain = ItemKNN(neighbours=10).fit(_train())
    assert plain.params == {"neighbours": 10, "shrink": 0, "decay": 1.0}  # the default: the plain sum
    half = ItemKNN(neighbours=10, decay=0.5).fit(_train())
    # history a (older), d (newest): 0.5 · sim(a, ·) + 1 · sim(d, ·)
    np.testing.assert_allclose(half.scores(["a", "d"]), [0.5, 2 / r6, 2.5 / r6, 1.0, 0.0], rtol=1e-5)
    newest = ItemKNN(neighbours=10, decay=0.0).fit(_train())  # 0^0 = 1: the newest item alone
    np.testing.assert_allclose(newest.scores(["a", "d"]), [0.0, 1 / r6, 2 / r6, 1.0, 0.0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ItemKNN(neighbours=10, decay=1.0).fit(_train()).scores(["a", "d"]),
                               plain.scores(["a", "d"]))
    assert half.top_k(2, exclude={"a", "d"}, history=["a", "d"]) == ["c", "b"]


def test_itemknn_counts_an_item_seen_twice_once_at_its_latest_place():
    """Fitted on a 0/1 matrix, ItemKNN reads a history's distinct items, as EASE and ALS do: a repeat weighed
    twice before. With decay the item keeps its newest place (recency 0 for a, 1 for d below)."""
    r6 = np.sqrt(6)
    plain = ItemKNN(neighbours=10).fit(_train())
    np.testing.assert_allclose(plain.scores(["a", "a"]), plain.scores(["a"]))
    np.testing.assert_allclose(plain.scores(["a", "d", "a"]), plain.scores(["d", "a"]))
    ease = EASE().fit(_train())
    np.testing.assert_allclose(ease.scores(["a", "a"]), ease.scores(["a"]))  # the behaviour matched
    half = ItemKNN(neighbours=10, decay=0.5).fit(_train())
    # a (newest, 1) + 0.5 · d: [1, 2/√6 + 0.5/√6, 1/√6 + 0.5 · 2/√6, 0.5, 0]
    np.testing.assert_allclose(half.scores(["a", "d", "a"]), [1.0, 2.5 / r6, 2 / r6, 0.5, 0.0], rtol=1e-5)
    np.testing.assert_allclose(half.scores(["a", "d", "a"]), half.scores(["d", "a"]), rtol=1e-6)


def test_itemknn_all_neighbours_and_shrinkage():
    from sklearn.metrics.pairwise import cosine_similarity

    every = ItemKNN(neighbours="all").fit(_train())
    np.testing.assert_allclose(every.similarity.toarray(), cosine_similarity(_x().T), rtol=1e-5, atol=1e-7)
    # shrink 1: co-count / (√|U_i|·√|U_j| + 1); supports a 2, b 3, c 3, d 2
    r6 = np.sqrt(6)
    shrunk = ItemKNN(neighbours="all", shrink=1).fit(_train())
    np.testing.assert_allclose(shrunk.similarity.toarray()[0], [2 / 3, 2 / (r6 + 1), 1 / (r6 + 1), 0, 0],
                               rtol=1e-5)
    np.testing.assert_allclose(shrunk.similarity.toarray()[2], [1 / (r6 + 1), 2 / 4, 3 / 4, 2 / (r6 + 1), 0],
                               rtol=1e-5)
    # K after shrinking: c keeps itself (0.75) and d (2/(√6+1) = 0.58 > b's 0.5)
    two = ItemKNN(neighbours=2, shrink=1).fit(_train())
    assert np.flatnonzero(two.similarity.toarray()[2]).tolist() == [2, 3]


def test_shrinkage_can_change_which_neighbours_are_kept():
    from recharness.baselines.item_knn import _shrunk_top_k

    # item 0's cosines: 0.9 to item 1 (support √1·√1 = 1), 0.5 to item 2 (support 10·10 = 100)
    cosine = sp.csr_matrix(np.array([[0, 0.9, 0.5], [0.9, 0, 0], [0.5, 0, 0]], dtype=np.float32))
    norms = np.array([1.0, 1.0, 100.0])
    assert np.flatnonzero(_shrunk_top_k(cosine, norms, 0.0, 1).toarray()[0]).tolist() == [1]
    shrunk = _shrunk_top_k(cosine, norms, 10.0, 1).toarray()
    # 0.9 · 1/(1 + 10) = 0.0818 < 0.5 · 100/(100 + 10) = 0.4545: item 2 is now the nearest
    np.testing.assert_allclose(shrunk[0], [0, 0, 0.5 * 100 / 110], rtol=1e-6)
    np.testing.assert_allclose(shrunk[1], [0.9 / 11, 0, 0], rtol=1e-6)


def test_als_scores_equal_implicits_own_recalculated_user():
    m = ALS(factors=3, iterations=5, regularization=0.1, alpha=1.0).fit(_train())
    row = sp.csr_matrix(np.array([[1, 0, 1, 0, 0]], dtype=np.float32))
    ids, scores = m.model.recommend(0, row, N=5, recalculate_user=True, filter_already_liked_items=False)
    mine = m.scores(["a", "c"])
    np.testing.assert_allclose(mine[ids], scores, rtol=1e-4, atol=1e-5)


def test_the_user_history_is_used_when_the_sample_shows_none():
    m = Markov().fit(_train())
    assert m.rank(["b", "c", "d"], user="u2") == m.rank(["b", "c", "d"], history=["a", "b"]) == ["c", "b", "d"]


def test_p_click_is_the_items_place_in_the_users_order():
    m = Markov().fit(_train())
    # after b: c first (1.0), then (b: the history, never recommended) a, d, e → d is 3rd of 4: 1 - 2/3
    assert m.p_click({"user_id": "zz", "item_id": "c", "history": ["b"]}) == 1.0
    assert m.p_click({"user_id": "zz", "item_id": "d", "history": ["b"]}) == pytest.approx(1 / 3)
    assert m.p_click({"user_id": "zz", "item_id": "e", "history": ["b"]}) == 0.0
    # the best item outside the history scores 1 however long the history (it fell by |history| / n)
    for history in (["a"], ["a", "b", "c"]):
        best = m.top_k(1, exclude=set(history), history=history)[0]
        assert m.p_click({"user_id": "zz", "item_id": best, "history": history}) == 1.0
    assert m.p_click({"user_id": "zz", "item_id": "unknown", "history": ["b"]}) == 0.0


@pytest.mark.parametrize("name", ["itemknn", "ease", "als", "markov"])
def test_saved_and_loaded_without_pickle_answers_alike(tmp_path, name):
    model, _ = fit(name, _train(), seed=0)
    model.save(tmp_path / name)
    back = BASELINES.get(name).load(tmp_path / name)
    for hist in (["a"], ["b", "c"], []):
        np.testing.assert_allclose(back.scores(hist), model.scores(hist), rtol=1e-5, atol=1e-6)
    assert json.loads((tmp_path / name / "config.json").read_text())["baseline"] == name
    with np.load(tmp_path / name / "model.npz", allow_pickle=False) as z:  # every array readable without pickle
        assert z.files and all(z[k].dtype != object for k in z.files)


def test_validation_never_contains_a_test_target_and_holds_out_each_users_last_training_item():
    train = _train()
    fit_on, pairs = validation_split(train, 100, seed=0)
    assert sorted(pairs) == sorted([(["a", "b"], "c"), (["a"], "b"), (["b", "c"], "d"), (["c"], "d")])
    assert sorted(fit_on.interactions.select("user_id", "item_id").rows()) == sorted(
        [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u3", "b"), ("u3", "c"), ("u4", "c")])


def test_tuning_tries_the_default_first_and_keeps_the_best_on_validation():
    search = tune(Markov, _train(), trials=4, seed=0)
    assert search["budget"]["trials"] == 4 and len(search["trials"]) == 4
    assert search["trials"][0]["params"] == {"order": 1, "decay": 0.5}
    best = max(t["valid"] for t in search["trials"])
    assert search["best"]["valid"] == best
    fit_on, pairs = validation_split(_train(), 2000, 0)
    again = validation_ndcg(Markov(**search["best"]["params"]).fit(fit_on), pairs)
    assert again == pytest.approx(best)
    # hand-worked, the default (order 1): fit_on is u1 a b, u2 a, u3 b c, u4 c → transitions a->b, b->c;
    # popularity a 2, b 2, c 2, d 0. (a b | c): c first → 1; (a | b): b first → 1; (b c | d): nothing after c,
    # b and c excluded → a, d: rank 2; (c | d): c excluded → a, b, d: rank 3
    default = search["trials"][0]["valid"]
    assert default == pytest.approx((1 + 1 + 1 / np.log2(3) + 1 / np.log2(4)) / 4)


def test_progress_and_summary_number_trials_alike():
    """The progress lines, the summary line and tuning.json number trials one way (trial 0 is the default)."""
    from recharness.runner.train_log import tuned_line

    said: list[str] = []
    search = tune(Markov, _train(), trials=4, seed=0, progress=said.append)
    best = search["best"]["trial"]
    line = next(x for x in said if f"{search['best']['valid']:.4f} (best" in x and f"trial {best} " in x)
    assert f"({best + 1} of 4)" in line
    assert f"(trial {best})" in tuned_line("markov", {**search, "seconds": 0.0}, "refitted")


def test_itemknn_search_starts_from_the_plain_model_and_spans_the_new_parameters():
    assert ItemKNN.space["neighbours"][0] == "choice" and "all" in ItemKNN.space["neighbours"]
    assert ItemKNN.space["shrink"] == ("int", 0, 1000) and ItemKNN.space["decay"] == ("float", 0.0, 1.0)
    search = tune(ItemKNN, _train(), trials=4, seed=0)
    assert search["trials"][0]["params"] == {"neighbours": 100, "shrink": 0, "decay": 1.0}
    for t in search["trials"]:
        assert t["params"]["neighbours"] in ItemKNN.space["neighbours"][1:]
        assert 0 <= t["params"]["shrink"] <= 1000 and 0.0 <= t["params"]["decay"] <= 1.0


def test_list_wise_windows_count_each_transition_once_and_each_user_once():
    # one user's positives a b c d e cut into windows sharing one item: (a b c) and (c d e)
    seqs = pl.DataFrame({"user_id": ["u", "u", "v"], "history": [["a", "b"], ["c", "d"], ["b"]],
                         "target": ["c", "e", "c"], "part": ["train", "train", "valid"]})
    train = TrainData(pl.DataFrame({"user_id": ["u"], "item_id": ["a"]}), ITEMS, sequences=seqs)
    assert user_sequences(train) == {"u": ["a", "b", "c", "d", "e"]}
    m = Markov().fit(train)
    assert m.transitions.toarray().sum() == 4  # a->b, b->c, c->d, d->e
    assert m.scores(["c"]).tolist() == [0, 0, 0, 1, 0]
    knn = ItemKNN(neighbours=10).fit(train)
    assert knn.similarity.shape == (5, 5)
    _, pairs = validation_split(train, 10, 0)
    assert pairs == [(["b"], "c")]  # the build's own validation rows


def test_a_killed_search_resumes_with_its_finished_trials(tmp_path, monkeypatch):
    """Each finished trial is logged; a search killed during trial 3 of 4 replays trials 1-2 (not run
    again) and runs the other 2, with the same budget and the same first trials."""
    from recharness.baselines import tuning

    log = tmp_path / "tuning_trials.jsonl"
    whole = tune(Markov, _train(), trials=4, seed=0)
    fits = []
    real_create = Markov.create

    def counting(**kw):
        fits.append(kw)
        if len(fits) == 3 and not log.with_suffix(".killed").exists():
            log.with_suffix(".killed").touch()
            raise KeyboardInterrupt  # the kill, during trial 3
        return real_create(**kw)

    monkeypatch.setattr(Markov, "create", staticmethod(counting))
    with pytest.raises(KeyboardInterrupt):
        tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b1"})
    assert len(log.read_text().splitlines()) == 2
    fits.clear()
    resumed = tuning.tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b1"})
    assert len(fits) == 2 and len(resumed["trials"]) == 4  # two replayed, two run
    same = lambda rows: [(t["trial"], t["params"], t["valid"]) for t in rows[:2]]  # noqa: E731 (not the seconds)
    assert same(resumed["trials"]) == same(whole["trials"])
    # another build's log is not this search's: it starts afresh
    fits.clear()
    tuning.tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b2"})
    assert len(fits) == 4


def test_a_torn_last_trial_line_is_cut_before_the_search_goes_on(tmp_path, monkeypatch):
    """A kill inside a trial's write leaves a last line without its newline: the resumed search cuts it before it
    appends, so the trials it runs are in the log for the next resume (glued onto the torn line, they were
    unreadable and every later resume ran them again)."""
    log = tmp_path / "tuning_trials.jsonl"
    whole = tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b1"})
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + lines[2][:25])  # two whole trials, the third torn
    fits = []
    real_create = Markov.create
    monkeypatch.setattr(Markov, "create", staticmethod(lambda **kw: fits.append(kw) or real_create(**kw)))
    tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b1"})
    assert len(fits) == 2  # trials 3 and 4 run
    assert [json.loads(x)["trial"] for x in log.read_text().splitlines()] == [0, 1, 2, 3]
    fits.clear()
    again = tune(Markov, _train(), trials=4, seed=0, log=log, stamp={"build": "b1"})
    assert fits == []  # all four replayed from the log
    same = lambda s: [(t["trial"], t["params"], t["valid"]) for t in s["trials"]]  # noqa: E731 (not the seconds)
    assert same(again) == same(whole)


def test_a_search_under_another_space_starts_afresh(tmp_path, monkeypatch):
    """Trials logged under one search space are not replayed into another (a widened range): the stamp holds the
    space and the defaults, and the progress line names the log it set aside."""
    log = tmp_path / "tuning_trials.jsonl"
    tune(Markov, _train(), trials=2, seed=0, log=log, stamp={"build": "b1"})
    assert len(log.read_text().splitlines()) == 2
    monkeypatch.setattr(Markov, "space", {**Markov.space, "order": ("int", 1, 40)})
    said: list[str] = []
    fits = []
    real_create = Markov.create
    monkeypatch.setattr(Markov, "create", staticmethod(lambda **kw: fits.append(kw) or real_create(**kw)))
    tune(Markov, _train(), trials=2, seed=0, log=log, stamp={"build": "b1"}, progress=said.append)
    assert len(fits) == 2  # both trials run again
    assert any(str(log) in x and "another search" in x for x in said)


def test_log_spaces_are_floats_and_logint_whole_numbers():
    """"log" searches a float on a log scale, "logint" a whole number, as the recorded space says."""
    import optuna

    from recharness.baselines.ease import EASE
    from recharness.baselines.tuning import _distribution, _suggest

    assert EASE.space["l2"][0] == "logint"
    assert _distribution(("log", 1, 10_000)) == optuna.distributions.FloatDistribution(1.0, 10_000.0, log=True)
    assert _distribution(("logint", 1, 10_000)) == optuna.distributions.IntDistribution(1, 10_000, log=True)
    for kind in ("log", "logint"):
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
        values = []
        for _ in range(5):
            t = study.ask()
            values.append(_suggest(t, "x", (kind, 1, 10_000)))
            study.tell(t, 0.0)
        assert all(1 <= v <= 10_000 for v in values)
        if kind == "log":
            assert all(isinstance(v, float) for v in values) and any(not float(v).is_integer() for v in values)
        else:
            assert all(type(v) is int for v in values) and len(set(values)) > 1
            assert study.trials[0].distributions["x"] == optuna.distributions.IntDistribution(1, 10_000, log=True)


def test_als_never_trusts_an_observed_item_less_than_an_unobserved_one():
    """`implicit` weighs an observed item by alpha - 1 (its confidence is alpha·r): the search stays at alpha >= 1,
    Hu et al.'s c = 1 + a·r with a >= 0."""
    from recharness.baselines.matrix_factorisation import ALS

    kind, low, high = ALS.space["alpha"]
    assert kind == "log" and low >= 1.0 and ALS.defaults()["alpha"] >= 1.0


def test_a_resumed_search_runs_the_trials_an_uninterrupted_one_would(tmp_path, monkeypatch):
    """Killed during trial 3 of 6 and resumed, the search asks the same six configurations as one never
    killed: the replay advances the sampler's seeded draws, so trials 3-6 are not repeats of trials 1-4."""
    log = tmp_path / "tuning_trials.jsonl"
    whole = tune(Markov, _train(), trials=6, seed=0)
    real_create, fits = Markov.create, []

    def killing(**kw):
        fits.append(kw)
        if len(fits) == 3:
            raise KeyboardInterrupt
        return real_create(**kw)

    monkeypatch.setattr(Markov, "create", staticmethod(killing))
    with pytest.raises(KeyboardInterrupt):
        tune(Markov, _train(), trials=6, seed=0, log=log, stamp={"build": "b1"})
    monkeypatch.setattr(Markov, "create", staticmethod(real_create))
    resumed = tune(Markov, _train(), trials=6, seed=0, log=log, stamp={"build": "b1"})
    assert [t["params"] for t in resumed["trials"]] == [t["params"] for t in whole["trials"]]
    assert [t["trial"] for t in resumed["trials"]] == list(range(6))
    assert resumed["best"] == whole["best"]


def test_positives_alone_are_tuned_by_ranking_and_an_undefined_auc_stops_the_search():
    """Pairs that are all clicks (an llmrec global-time build's training part) are a ranking task's data: the
    HistoryScorers are tuned on NDCG@10, not on an AUC that is NaN for every trial. Labelled pairs whose
    validation slice holds one label leave AUC undefined: the search stops with a ConfigError, it does not
    report the default as tuned."""
    from recharness.baselines.tuning import objective_for
    from recharness.core.errors import ConfigError

    base = _train()
    positives = base.interactions.with_columns(pl.lit(1, dtype=pl.Int8).alias("label"))
    ranked = TrainData(base.interactions, ITEMS, positives)
    assert objective_for(Markov, ranked, 0).metric == "ndcg@10"
    search = tune(Markov, ranked, trials=2, seed=0)
    assert all(np.isfinite(t["valid"]) for t in search["trials"])
    labelled = positives.with_columns(pl.when(pl.col("item_id") == "a").then(0).otherwise(1).cast(pl.Int8).alias("label"))
    one_label = labelled.filter(pl.col("label") == 1).head(2)
    clicks = TrainData(base.interactions, ITEMS, labelled, valid=one_label)
    assert objective_for(Markov, clicks, 0).metric == "auc"
    with pytest.raises(ConfigError, match="undefined"):
        tune(Markov, clicks, trials=2, seed=0)

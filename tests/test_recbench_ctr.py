"""RecBench CTR: labels, histories and the split checked from the raw ratings (never through the
builder's own code), scoring against scikit-learn, invalid answers counted, references, end to end."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import log_loss, roc_auc_score
from typer.testing import CliRunner

from recharness.baselines import TrainData, fit, pairs_path
from recharness.cli import app
from recharness.core.errors import ConfigError
from recharness.core.io import read_jsonl
from recharness.core.types import BuildConfig, OptionScores
from recharness.data.store import Dataset
from recharness.runner import pipeline
from recharness.runner.train import train
from recharness.tasks.recbench.ctr import NO_OPTION, CtrTask
from recharness.tasks.recbench.data import labelled_events
from recharness.tasks.references import serving
from recharness.tasks.registry import get_task

N_USERS = 150
OPTS = {"train_pairs": 20_000}


@pytest.fixture(scope="module")
def built(ml1m, tmp_path_factory):
    out = tmp_path_factory.mktemp("recbench") / "run"
    info = pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=N_USERS, options=OPTS)
    samples = list(read_jsonl(out / "samples.jsonl"))
    train_df = pl.read_parquet(pairs_path(out, "recbench", "train"))
    valid_df = pl.read_parquet(pairs_path(out, "recbench", "valid"))
    return out, info, samples, train_df, valid_df


@pytest.fixture(scope="module")
def raw(ml1m):
    """The user's ratings in stored order (user, time, file order): (item, rating, timestamp)."""
    by_user = defaultdict(list)
    for u, i, r, t in ml1m.interactions.select("user_id", "item_id", "rating", "timestamp").iter_rows():
        by_user[u].append((i, r, t))
    return by_user


def _pairs(df: pl.DataFrame) -> list[dict]:
    return df.to_dicts()


# ---------------------------------------------------------------- (a) labels


def test_labels_follow_the_rating_rule(built, raw):
    _, info, samples, train_df, valid_df = built
    assert info["counts"]["ctr"] == len(samples) == 4 * N_USERS
    rating = {(u, i): r for u, rows in raw.items() for i, r, _ in rows}
    for p in samples + _pairs(train_df) + _pairs(valid_df):
        r = rating[(p["user_id"], p["item_id"])]  # every pair is a real rating (MovieLens has real negatives)
        assert r != 3
        assert p["label"] == (1 if r > 3 else 0)
    assert {s["label"] for s in samples} == {0, 1}


def test_sampled_negatives_are_unseen_distinct_and_stamped_with_a_positives_time():
    rng = np.random.default_rng(3)
    sizes = {f"u{u}": 8 + u // 2 for u in range(20)} | {"heavy": 30}  # heavy: 30 unseen of 60, 60 wanted
    rows = [(u, f"i{i}", None, int(t)) for u, n in sizes.items() for t, i in enumerate(rng.choice(60, size=n, replace=False))]
    inter = pl.DataFrame(rows, schema={"user_id": pl.Utf8, "item_id": pl.Utf8, "rating": pl.Float64,
                                       "timestamp": pl.Int64}, orient="row")
    catalog = [f"i{i}" for i in range(60)]
    ev, mode = labelled_events(inter, catalog, seed=1)
    assert mode == "sampled"
    seen = defaultdict(set)
    times = defaultdict(list)
    for u, i, _, t in rows:
        seen[u].add(i)
        times[u].append(t)
    for (u,), g in ev.group_by("user_id"):
        pos, neg = g.filter(pl.col("label") == 1), g.filter(pl.col("label") == 0)
        assert sorted(pos["item_id"]) == sorted(seen[u])  # every interaction is a click
        assert not set(neg["item_id"]) & seen[u] and neg["item_id"].n_unique() == neg.height
        # two per positive, at its time; a user short of unseen items loses their earliest positives' negatives
        want = sorted(times[u]) if u != "heavy" else sorted(times[u])[15:]
        assert sorted(neg["timestamp"].to_list()) == sorted(2 * want)
    again, _ = labelled_events(inter, catalog, seed=1)
    assert again.equals(ev) and not labelled_events(inter, catalog, seed=2)[0].equals(ev)


# ---------------------------------------------------------------- (b) history


def _history(rows, before: int, n: int = 20) -> list[str]:
    return [i for i, r, t in rows if r > 3 and t < before][-n:]


def test_history_is_the_last_20_positives_before_the_candidate(built, raw):
    _, _, samples, train_df, valid_df = built
    for p in samples + _pairs(train_df)[:3000] + _pairs(valid_df)[:1000]:
        assert p["history"] == _history(raw[p["user_id"]], p["timestamp"]), p
        assert 1 <= len(p["history"]) <= 20
    assert max(len(s["history"]) for s in samples) == 20
    s = samples[0]
    user_turn = s["messages"][-1]["content"]
    assert user_turn.startswith("User behavior sequence:\n(1) ") and user_turn.endswith("Answer (Yes/No):")
    assert user_turn.count("\n(") == len(s["history"]) and "\nCandidate item: " in user_turn


# ---------------------------------------------------------------- (c) no leakage


def test_no_training_pair_of_a_test_user_is_at_or_after_their_test_pairs(built, raw):
    _, _, samples, train_df, valid_df = built
    first_test = defaultdict(lambda: math.inf)
    for s in samples:
        first_test[s["user_id"]] = min(first_test[s["user_id"]], s["timestamp"])
    fitted = pl.concat([train_df, valid_df])
    late = fitted.filter(pl.col("user_id").is_in(list(first_test)))
    for u, t in late.select("user_id", "timestamp").iter_rows():
        assert t < first_test[u]
    test_pairs = {(s["user_id"], s["item_id"]) for s in samples}
    assert not test_pairs & set(fitted.select("user_id", "item_id").iter_rows())
    assert len(test_pairs) == len(samples)
    assert train_df.height + valid_df.height == OPTS["train_pairs"]
    assert 0.05 < valid_df.height / OPTS["train_pairs"] < 0.15
    # each test user's pairs are their last 4 labelled ratings in time
    for u in list(first_test)[:40]:
        labelled = [(i, t) for i, r, t in raw[u] if r != 3]
        assert [(s["item_id"], s["timestamp"]) for s in samples if s["user_id"] == u] == labelled[-4:]


# ---------------------------------------------------------------- (d) determinism


def test_the_same_seed_builds_the_same_samples_and_pairs(built, tmp_path):
    _, info, samples, train_df, _ = built
    again = tmp_path / "again"
    info2 = pipeline.build("recbench", "ml-1m", again, tasks=["ctr"], seed=0, limit=N_USERS, options=OPTS)
    assert info2["fingerprint"] == info["fingerprint"]
    assert pl.read_parquet(pairs_path(again, "recbench")).equals(train_df)
    other = tmp_path / "other"
    pipeline.build("recbench", "ml-1m", other, tasks=["ctr"], seed=1, limit=N_USERS, options=OPTS)
    assert {s["user_id"] for s in read_jsonl(other / "samples.jsonl")} != {s["user_id"] for s in samples}


# ---------------------------------------------------------------- (e, f) scoring


def _samples(labels, users):
    return [{"id": f"s{k}", "task": "ctr", "user_id": u, "item_id": f"i{k}", "label": y}
            for k, (y, u) in enumerate(zip(labels, users))]


def _rec(sid, p):
    return {"id": sid, "parsed": {"p_yes": p}, "valid": True}


def test_scores_hand_worked_and_against_sklearn():
    labels = [1, 0, 1, 0, 1, 1, 0, 0, 1]
    users = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    p = [0.9, 0.4, 0.3, 0.2, 0.6, 0.1, 0.5, 0.7, 0.8]
    samples = _samples(labels, users)
    m = CtrTask().score(samples, {s["id"]: _rec(s["id"], v) for s, v in zip(samples, p)})
    # per user: a: positives 0.9, 0.3 vs negative 0.4 -> 1/2; b: 0.6, 0.1 vs 0.2 -> 1/2; c: 0.8 vs 0.5, 0.7 -> 1
    assert m["GAUC"] == pytest.approx((3 * 0.5 + 3 * 0.5 + 3 * 1.0) / 9)
    assert m["GAUC_unweighted"] == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert m["AUC"] == pytest.approx(roc_auc_score(labels, p), abs=1e-12)
    assert m["logloss"] == pytest.approx(log_loss(labels, p), abs=1e-12)
    assert m["invalid_rate"] == 0.0 and m["missing"] == 0.0 and m["gauc_users"] == 3
    # impressions differ per user: the two GAUCs part
    samples = samples[:7]
    m = CtrTask().score(samples, {s["id"]: _rec(s["id"], v) for s, v in zip(samples, p)})
    assert m["GAUC"] == pytest.approx((3 * 0.5 + 3 * 0.5) / 6) and m["gauc_users"] == 2


def test_an_answer_without_yes_or_no_is_counted_and_scored_as_a_tie():
    task = CtrTask()
    none = task.parse_options({}, OptionScores({"Yes": -math.inf, "No": -math.inf}))
    assert not none.valid and none.error == NO_OPTION and none.value == {"p_yes": None}
    only_no = task.parse_options({}, OptionScores({"Yes": -math.inf, "No": -0.1}))
    assert only_no.valid and only_no.value == {"p_yes": 0.0}
    half = task.parse_options({}, OptionScores({"Yes": math.log(0.3), "No": math.log(0.1)}))
    assert half.value["p_yes"] == pytest.approx(0.75)

    labels, users = [1, 0, 1, 0], ["a", "a", "b", "b"]
    samples = _samples(labels, users)
    preds = {"s0": _rec("s0", 0.9), "s1": {"id": "s1", "parsed": none.value, "valid": False, "error": NO_OPTION},
             "s2": _rec("s2", 0.7)}  # s3 has no line at all
    m = task.score(samples, preds)
    assert m["invalid_rate"] == 0.5 and m["missing"] == 1.0
    # every pair holds a failed negative, which counts one half in each of its pairs: AUC 0.5 (scoring a failure
    # as P(Yes) 0.5, the old rule, ranks both positives above it: 1.0), per user too
    assert m["AUC"] == 0.5 and m["GAUC"] == 0.5
    assert roc_auc_score(labels, [0.9, 0.5, 0.7, 0.5]) == 1.0  # what the old rule gave
    # log loss reads a failed answer as P(Yes) 0.5: -(ln .9 + ln .7 + 2 ln .5) / 4
    assert m["logloss"] == pytest.approx(-(math.log(0.9) + math.log(0.7) + 2 * math.log(0.5)) / 4, abs=1e-12)
    assert m["logloss"] == pytest.approx(log_loss(labels, [0.9, 0.5, 0.7, 0.5]), abs=1e-12)


def test_a_ctr_row_without_any_usable_answer_has_no_auc():
    """No usable answer: AUC, GAUC and log loss would come from the failure rule alone (random's 0.5 / 0.693),
    so they are NaN, with the invalid rate 1; the units carry only the invalid rate."""
    task = CtrTask()
    samples = _samples([1, 0, 1, 0], ["a", "a", "b", "b"])
    bad = {"s0": {"id": "s0", "parsed": {"p_yes": None}, "valid": False, "error": NO_OPTION}}
    for preds in ({}, bad):
        m = task.score(samples, preds)
        assert all(math.isnan(m[k]) for k in ("AUC", "GAUC", "GAUC_unweighted", "GAUC_pos", "logloss"))
        assert m["invalid_rate"] == 1.0 and m["missing"] == 4.0 - len(preds)
        assert set(task.units(samples, preds)) == {"invalid_rate"}
    # a hand-edited p_yes that is no number (a bool, an int no float holds) is no usable answer either
    odd = {"s0": _rec("s0", True), "s1": _rec("s1", 10**400)}
    assert task.score(samples, odd)["invalid_rate"] == 1.0
    assert task.import_answer(samples[0], {"probability": True})[1].startswith("probability True is not a number")
    assert "is not a number in [0, 1]" in task.import_answer(samples[0], {"probability": 10**400})[1]


def test_a_generated_answer_parses_too():
    task = CtrTask()
    assert task.parse({}, " Yes.").value == {"p_yes": 1.0} and task.parse({}, "no").value == {"p_yes": 0.0}
    assert not task.parse({}, "Maybe").valid


# ---------------------------------------------------------------- (g) references


def test_references_fit_on_training_pairs_and_popularity_beats_random(built, ml1m):
    out, _, _, _, _ = built
    dlrms = ["dnn", "pnn", "deepfm", "dcn", "dcnv2", "masknet", "finalmlp", "autoint", "gdcn", "dnn_text", "dnn_semantic"]
    assert serving(get_task("recbench", "ctr")) == ["popularity", "random", "item_mean", "itemknn", "ease", "als",
                                                    "markov", *dlrms]
    # the trained models come only from `recharness train`: score fits the cheap ones, never a DLRM
    assert serving(get_task("recbench", "ctr"), on_the_fly=True) == ["popularity", "random", "item_mean"]
    rows = {r.method: r for r in pipeline.score(out, seed=0) if r.kind == "reference"}
    assert set(rows) == {"popularity", "random", "item_mean"}
    assert rows["popularity"].metrics["AUC"] > rows["random"].metrics["AUC"] + 0.1
    assert rows["item_mean"].metrics["AUC"] > rows["random"].metrics["AUC"] + 0.1
    assert abs(rows["random"].metrics["AUC"] - 0.5) < 0.1
    # fitted on train.parquet only: the validation slice and the test pairs count for nothing
    data = TrainData.of_build(ml1m, out, "recbench")
    assert data.pairs.height == pl.read_parquet(pairs_path(out, "recbench")).height
    pop = fit("popularity", data)[0]
    assert sum(pop.counts.values()) == data.pairs["label"].sum()


def test_ctr_references_refuse_training_data_without_pairs(ml1m):
    sample = {"id": "x", "task": "ctr", "user_id": "1", "item_id": "1"}
    with pytest.raises(ConfigError, match="training pairs"):
        fit("popularity", TrainData.leave_last_out(ml1m))[0].predict([sample], CtrTask())
    with pytest.raises(ConfigError, match="training pairs"):
        fit("item_mean", TrainData.leave_last_out(ml1m))
    task = CtrTask()
    with pytest.raises(ConfigError, match="rebuild"):
        task.references(ml1m, [sample])


def test_train_stage_writes_the_on_the_fly_rows(built):
    out, _, _, _, _ = built
    before = [(r.method, r.metrics) for r in pipeline.score(out, seed=2) if r.kind == "reference"]
    train(out, suite="recbench", seed=2, baselines=["popularity", "random", "item_mean"], latency_runs=50)
    timing = ("latency_s", "train_s", "throughput_per_s")
    after = [(r.method, r.metrics) for r in pipeline.score(out, seed=2) if r.kind == "reference"]
    assert all(m[k] > 0 for _, m in after for k in timing)  # RecBench's latency, per trained model
    assert [(n, {k: v for k, v in m.items() if k not in timing}) for n, m in after] == before


# ---------------------------------------------------------------- (h) end to end


def test_build_run_score_report_from_the_command_line(ml1m, tmp_path):
    out = tmp_path / "run"
    runner = CliRunner()

    def invoke(*args):
        res = runner.invoke(app, list(args), catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    invoke("build", "recbench", "-t", "ctr", "-d", "ml-1m", "--seed", "0", "-n", "25", "-o", str(out),
           "--option", "train_pairs=5000")
    invoke("run", "recbench", "-d", "ml-1m", "-m", "fake", "-o", str(out), "--no-cache")
    recs = list(read_jsonl(out / "predictions" / "fake.jsonl"))
    assert len(recs) == 100 and all(r["valid"] and 0 <= r["parsed"]["p_yes"] <= 1 for r in recs)
    assert all(set(json.loads(r["output"])) == {"Yes", "No"} for r in recs)
    invoke("score", "recbench", "-d", "ml-1m", "-o", str(out))
    invoke("report", "recbench", "-d", "ml-1m", "-o", str(out))
    rows = json.loads((out / "scores.json").read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    assert {r["method"] for r in rows} == {"fake", "popularity", "random", "item_mean"}
    assert all({"AUC", "GAUC", "GAUC_unweighted", "invalid_rate"} <= set(r["metrics"]) for r in rows)
    # popularity's click score is a ranking, not a probability: no log loss for it
    assert {r["method"] for r in rows if "logloss" in r["metrics"]} == {"fake", "random", "item_mean"}
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "AUC" in html and "item_mean" in html


def test_options_are_checked(ml1m, tmp_path):
    with pytest.raises(ConfigError, match="test_pairs_per_user"):
        pipeline.build("recbench", "ml-1m", tmp_path, options={"test_pair_per_user": 3})
    with pytest.raises(ConfigError, match="negatives"):
        pipeline.build("recbench", "ml-1m", tmp_path, options={"negatives": "some"})
    ds = Dataset("t", pl.DataFrame({"user_id": ["u"], "item_id": ["i"], "rating": [4.0], "timestamp": [None]},
                                   schema_overrides={"timestamp": pl.Int64}),
                 pl.DataFrame({"item_id": ["i"], "title": ["I"]}), pl.DataFrame({"user_id": ["u"]}))
    with pytest.raises(ConfigError, match="timestamp"):
        list(CtrTask().build(ds, BuildConfig()))


# ---------------------------------------------------------------- (i) Tables 3/4 and the latency chart


def test_paper_tables_lay_out_auc_overall_and_latency():
    from recharness.core.types import ScoreRow
    from recharness.tasks.recbench.tables import across_datasets, latency_label

    assert (latency_label(0.00043), latency_label(0.54373), latency_label(6.8), latency_label(None)) == \
        ("0.43ms", "543.73ms", "6.80s", "–")
    assert latency_label(0.0000042) == "0.0042ms"  # a lookup is not "0.00ms"

    def row(method, kind, auc, lat):
        return ScoreRow(method=method, task="ctr", n=4, kind=kind, metrics={"AUC": auc, "latency_s": lat})

    md = across_datasets({
        "ml-1m": [row("qwen", "model", 0.52, 0.5), row("deepfm", "reference", 0.80, 0.0004)],
        "mind": [row("qwen", "model", 0.60, 0.7), row("deepfm", "reference", 0.70, 0.0006)],
        "hm": [row("qwen", "model", 0.55, 0.6)],
    })
    assert "| Recommender | ml-1m | mind | hm | Overall | Latency |" in md
    assert "| qwen | 0.5200 | 0.6000 | 0.5500 | 0.5567 | 600.00ms |" in md  # (0.52+0.60+0.55)/3; mean latency
    assert "| deepfm | 0.8000 | 0.7000 | – | – | 0.50ms |" in md  # no Overall without every dataset
    t3, t4 = md.index("Table 3"), md.index("Table 4")
    assert t3 < md.index("| qwen") < t4 < md.index("| deepfm")
    assert "**" not in md  # no fine-tuned rows: no group headers

    # fine-tuned LLM rows (their recorded finetune identity) go to Table 4 in the paper's groups D/E/F
    def tuned(method, items, auc):
        return ScoreRow(method=method, task="ctr", n=4, kind="model", metrics={"AUC": auc, "latency_s": 0.3},
                        extra={"model": {"backend": "hf", "finetune": {"items": items, "steps": 9}}})

    md = across_datasets({"ml-1m": [row("qwen", "model", 0.52, 0.5), tuned("ft-sid", "sid", 0.61),
                                    tuned("ft-text", "text", 0.66), row("deepfm", "reference", 0.80, 0.0004),
                                    tuned("ft-id", "id", 0.58)]})
    lines = md.splitlines()
    t3, t4 = lines.index(next(x for x in lines if "Table 3" in x)), lines.index(next(x for x in lines if "Table 4" in x))
    assert [x.split(" |")[0] for x in lines[t3:t4] if x.startswith("| ") and "Recommender" not in x] == ["| qwen"]
    order = [x.split(" |")[0] for x in lines[t4:] if x.startswith("| ") and "Recommender" not in x]
    assert order == ["| **D: LLMs, item IDs (fine-tuned)**", "| ft-id", "| **E: LLMs, text (fine-tuned)**", "| ft-text",
                     "| **F: LLMs, semantic IDs (fine-tuned)**", "| ft-sid", "| **conventional models trained here**",
                     "| deepfm"]
    assert "| ft-text | 0.6600 | 0.6600 | 300.00ms |" in md


def test_report_draws_quality_against_latency(tmp_path):
    from recharness.core.types import ScoreRow
    from recharness.report.html import Palette, _latency_chart, write_report

    rows = [ScoreRow(method="qwen", task="ctr", n=4, kind="model", metrics={"AUC": 0.52, "latency_s": 0.5}),
            ScoreRow(method="deepfm", task="ctr", n=4, kind="reference", metrics={"AUC": 0.8, "latency_s": 0.0004}),
            ScoreRow(method="random", task="ctr", n=4, kind="reference", metrics={"AUC": 0.5})]
    chart = _latency_chart(rows, "AUC", Palette(rows))
    assert chart is not None and chart[1] == 2  # two timed points, both non-zero
    grey = chart[2]["deepfm"]
    assert chart[2]["qwen"] != grey and grey[1:3] == grey[3:5] == grey[5:7] and grey == "#303030"  # references in grey, darkest first
    assert _latency_chart(rows[2:], "AUC", Palette(rows)) is None  # nothing timed: no chart
    html = write_report(rows, tmp_path).read_text()
    assert "alt='AUC vs latency'" in html and "alt='AUC'" in html


def test_train_command_fits_dlrms_once_and_score_reads_them(ml1m, tmp_path, monkeypatch):
    """`recharness train recbench -b …` as a user runs it: the DLRMs train on the build's pairs, their
    weights are saved, their rows carry RecBench's latency and the training time, and `score` reads
    their predictions without fitting anything again."""
    pytest.importorskip("torch")
    pytest.importorskip("torch_rechub")
    out = tmp_path / "run"
    pipeline.build("recbench", "ml-1m", out, tasks=["ctr"], seed=0, limit=60, options={"train_pairs": 6000})
    res = CliRunner().invoke(app, ["train", "recbench", "-o", str(out), "-b", "deepfm", "-b", "item_mean", "-b", "popularity", "-b", "random",
                                   "--latency-runs", "30"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert (out / "models" / "deepfm" / "model.pt").exists()
    import recharness.baselines as baselines_mod

    def refit(*a, **k):
        raise AssertionError("score fitted a model that `train` wrote")

    monkeypatch.setattr(baselines_mod, "fit", refit)
    rows = {r.method: r for r in pipeline.score(out) if r.kind == "reference"}
    deepfm = rows["deepfm"].metrics
    assert 0 <= deepfm["AUC"] <= 1 and deepfm["invalid_rate"] == 0.0
    assert deepfm["latency_s"] > 0 and deepfm["train_s"] > 0 and deepfm["throughput_per_s"] > 0
    assert "dnn" not in rows  # not trained, and never fitted on the fly
    recs = list(read_jsonl(out / "predictions" / "reference" / "deepfm.jsonl"))
    assert len(recs) == 240 and all(0 <= r["parsed"]["p_yes"] <= 1 for r in recs)
    # the row's AUC is scikit-learn's on the saved scores and the samples' labels
    label = {s["id"]: s["label"] for s in read_jsonl(out / "samples.jsonl")}
    assert deepfm["AUC"] == pytest.approx(roc_auc_score([label[r["id"]] for r in recs],
                                                        [r["parsed"]["p_yes"] for r in recs]), abs=1e-12)
    assert recs[0]["latency_runs"] == 30

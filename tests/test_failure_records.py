"""Every task of every suite scores the runner's failure records (a sample that could not be
answered: HTTP 4xx, prompt too long, bad response) as invalid: never dropped from the denominator,
never a hit, never a deliberate refusal. Samples come from the real builders on real data; half of
them get a failure record exactly as the runner writes it, half a correct answer, so every metric
is exactly "the all-correct value, with the failed half scored as the worst".
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recharness.core.errors import SampleError
from recharness.core.types import BuildConfig
from recharness.execution.executor import failure_record
from recharness.runner.pipeline import _latency_summary
from recharness.tasks.llmrec.explanation import text_scores
from recharness.tasks.perrecbench.scoring import order_from_values, score_groups
from recharness.tasks.registry import get_task, suites

IDENTITY = {"name": "fake", "kind": "openai"}
ERRORS = [SampleError("http_400", "HTTP 400: bad request"), SampleError("context_overflow", "prompt of 9000 tokens"),
          SampleError("bad_response", "unreadable response body")]


def failed(s: dict, n: int) -> dict:
    """The record run_samples writes when answering sample `s` raised."""
    return {"id": s["id"], "task": s["task"], "model": IDENTITY, "build": "b0", **failure_record(ERRORS[n % 3])}


def answered(task, s: dict, text: str) -> dict:
    """The record of a correct answer, parsed by the task's own parser."""
    p = task.parse(s, text)
    assert p.valid, (text, p.error)
    return {"id": s["id"], "task": s["task"], "model": IDENTITY, "build": "b0", "output": text, "parsed": p.value,
            "valid": True, "error": None, "attempts": 1, "latency_s": 0.5, "prompt_tokens": 10,
            "completion_tokens": 4, "cached": False}


def half_failed(samples, good) -> tuple[dict, dict, set[str]]:
    """(all predictions, the correct half alone, ids of the failed half): even positions fail."""
    preds, ok, bad = {}, {}, set()
    for n, s in enumerate(samples):
        if n % 2 == 0:
            preds[s["id"]] = failed(s, n)
            bad.add(s["id"])
        else:
            preds[s["id"]] = ok[s["id"]] = good(s)
    assert bad and ok
    return preds, ok, bad


def build(suite: str, name: str, ds, limit: int = 6, **opts):
    task = get_task(suite, name)
    samples = list(task.build(ds, BuildConfig(seed=0, limit=limit, options=opts)))
    if hasattr(task, "setup"):
        task.setup(ds)
    assert len(samples) >= 4
    return task, samples


def test_failure_record_shape():
    r = failed({"id": "x", "task": "t"}, 0)
    assert r == {"id": "x", "task": "t", "model": IDENTITY, "build": "b0", "output": "", "parsed": None,
                 "valid": False, "error": "http_400: HTTP 400: bad request", "error_kind": "http_400", "attempts": 0,
                 "latency_s": None, "prompt_tokens": None, "completion_tokens": None, "cached": False}


def test_every_task_is_covered_here():
    """A new task or suite must be added to this file."""
    assert {k: list(v.tasks) for k, v in suites().items()} == {
        "llmrec": ["sequential", "direct", "rating", "explanation", "summarization"],
        "perrecbench": ["point", "pair", "list"],
        "recbench-plus": ["explicit", "implicit", "misinformed", "interest", "demographics"],
        "recbench": ["ctr", "seqrec"],
    }


# ---------------------------------------------------------------- llmrec


def test_sequential(ml1m):
    task, samples = build("llmrec", "sequential", ml1m)
    preds, _, bad = half_failed(samples, lambda s: answered(task, s, f"1. {s['target_title']}"))
    m = task.score(samples, preds)
    n, nv = len(samples), len(samples) - len(bad)
    assert m["valid_rate"] == nv / n and m["missing"] == 0.0
    for k in ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR"):
        assert m[k] == pytest.approx(nv / n), k  # each correct answer a hit at rank 1, each failure a miss
    assert m["matched_share"] == 1.0  # failures named nothing: not in the matched share
    assert task.score(samples, {k: preds[k] for k in bad})["HR@10"] == 0.0


def test_direct(ml1m):
    task, samples = build("llmrec", "direct", ml1m)

    def good(s):
        first = s["candidates"].index(s["target"]) + 1
        rest = [k for k in range(1, len(s["candidates"]) + 1) if k != first]
        return answered(task, s, ", ".join(map(str, [first, *rest])))

    preds, _, bad = half_failed(samples, good)
    m = task.score(samples, preds)
    n, nv = len(samples), len(samples) - len(bad)
    assert m["valid_rate"] == nv / n and m["partial_rate"] == 0.0 and m["missing"] == 0.0
    for k in ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR"):
        assert m[k] == pytest.approx(nv / n), k


def test_rating(ml1m):
    task, samples = build("llmrec", "rating", ml1m)
    preds, _, bad = half_failed(samples, lambda s: answered(task, s, f"{s['target_rating']:g}"))
    m = task.score(samples, preds)
    n = len(samples)
    assert m["invalid_rate"] == len(bad) / n and m["missing"] == 0.0 and m["clipped_rate"] == 0.0
    assert m["RMSE"] == 0.0 and m["MAE"] == 0.0  # over the valid answers only, all exact
    # the fallback metrics score each failure at the worst rating: the end of 1-5 farthest from the true one
    err = np.array([max(s["target_rating"] - 1, 5 - s["target_rating"]) if s["id"] in bad else 0.0 for s in samples])
    assert m["MAE_fb"] == pytest.approx(np.abs(err).mean(), abs=1e-12)
    assert m["RMSE_fb"] == pytest.approx(np.sqrt((err**2).mean()), abs=1e-12)
    assert m["MAE_fb"] > 0


@pytest.mark.parametrize("name", ["explanation", "summarization"])
def test_review_text_tasks(amazon2023, name):
    task, samples = build("llmrec", name, amazon2023, limit=8, min_history=2)
    words = {"explanation": 12, "summarization": 6}[name]

    def good(s):
        text = " ".join(s["reference"].split()[:words])
        return answered(task, s, text)

    preds, ok, bad = half_failed(samples, good)
    m = task.score(samples, preds)
    n = len(samples)
    assert m["invalid_rate"] == len(bad) / n and m["missing"] == 0.0
    hyps = ["" if s["id"] in bad else preds[s["id"]]["parsed"]["text"] for s in samples]
    expect = text_scores(hyps, [s["reference"] for s in samples])
    for k in ("BLEU-1", "BLEU-4", "ROUGE-1", "ROUGE-2", "ROUGE-L"):
        assert m[k] == pytest.approx(expect[k], abs=1e-9), k
    # ROUGE is a mean over samples: the failed half adds zeros, it is not left out
    valid_only = task.score([s for s in samples if s["id"] in ok], ok)
    assert m["ROUGE-1"] == pytest.approx(valid_only["ROUGE-1"] * len(ok) / n, abs=1e-9)
    assert m["words"] == pytest.approx(np.mean([len(preds[i]["parsed"]["text"].split()) for i in ok]))


# ---------------------------------------------------------------- recbench-plus


@pytest.mark.parametrize("name", ["explicit", "implicit", "misinformed", "interest", "demographics"])
def test_recbench_plus(ml1m, name):
    task, samples = build("recbench-plus", name, ml1m, limit=5)

    def good(s):
        titles = [task.ctx.title(i) for i in s["gt"]]
        return answered(task, s, "\n".join(f"{k}. {t}" for k, t in enumerate(titles, 1)))

    samples = [s for s in samples if s["gt"]]
    preds, ok, bad = half_failed(samples, good)
    m = task.score(samples, preds)
    n, nv = len(samples), len(ok)
    valid_only = task.score([s for s in samples if s["id"] in ok], ok)
    assert valid_only["valid_rate"] == 1.0 and valid_only["P"] > 0 and valid_only["R"] == 1.0
    assert valid_only["FTR"] == 0.0
    assert m["valid_rate"] == nv / n and m["failed"] == len(bad)
    assert m["n_scored"] == n and m["missing"] == 0.0  # failures are scored, not dropped
    assert m["P"] == pytest.approx(valid_only["P"] * nv / n) and m["R"] == pytest.approx(nv / n)
    # FTR on the wrong side: a failure is a failure to recommend, but never a correct decline
    assert m["FTR"] == pytest.approx(0.0 if name == "misinformed" else len(bad) / n)
    assert ("CMR" in m) == ("CMR" in valid_only)
    if "CMR" in valid_only:
        assert m["CMR"] == valid_only["CMR"]  # over queries that recommended something, as before
    groups = task.breakdown(samples, preds)
    assert sum(g["n_scored"] for k, g in groups.items() if k.startswith("history=")) == n


def test_recbench_plus_misinformed_failures_never_count_as_declining(ml1m):
    """All-failed misinformed answers score FTR 0 (a decline would be 1), P = R = 0."""
    task, samples = build("recbench-plus", "misinformed", ml1m, limit=5)
    m = task.score(samples, {s["id"]: failed(s, n) for n, s in enumerate(samples)})
    assert (m["FTR"], m["P"], m["R"], m["valid_rate"], m["n_scored"]) == (0.0, 0.0, 0.0, 0.0, len(samples))
    declined = {s["id"]: answered(task, s, "I can't recommend anything: that actor was not in that film.")
                for s in samples}
    assert task.score(samples, declined)["FTR"] == 1.0


def test_recbench_plus_parser_crash_is_not_a_decline(ml1m, monkeypatch):
    from recharness.tasks.recbench_plus import base

    task, samples = build("recbench-plus", "misinformed", ml1m, limit=5)
    monkeypatch.setattr(base, "resolve_answer", lambda *a: 1 / 0)
    p = task.parse(samples[0], "Heat (1995)")
    assert not p.valid and p.value["parse_error"]
    recs = {s["id"]: {"id": s["id"], "output": "Heat (1995)", "parsed": p.value, "valid": False} for s in samples}
    m = task.score(samples, recs)
    assert (m["FTR"], m["parse_errors"], m["valid_rate"]) == (0.0, float(len(samples)), 0.0)


# ---------------------------------------------------------------- perrecbench


def _true_order(s) -> list[int]:
    return order_from_values(s["truth"]["relative_ratings"])


def _perrec_good(name, task, s):
    if name == "point":
        parsed = {"ratings": list(s["truth"]["ratings"]), "failed": 0}
    elif name == "pair":
        parsed = {"ordering": _true_order(s), "comparisons": 3, "agree": 3, "disagree": 0, "failed": 0}
    else:
        parsed = task.parse(s, json.dumps({"predicted_ranking": _true_order(s)})).value
        parsed = {"ordering": list(parsed)}
    return {"id": s["id"], "task": s["task"], "model": IDENTITY, "build": "b0", "output": "…", "parsed": parsed,
            "valid": True, "error": None, "calls": 2, "retries": 0, "attempts": 1, "latency_s": 1.0,
            "prompt_tokens": 20, "completion_tokens": 8, "cached": False}


@pytest.mark.parametrize("name", ["point", "pair", "list"])
def test_perrecbench(ml1m, name):
    task, samples = build("perrecbench", name, ml1m, limit=4, profile=False)
    preds, _, bad = half_failed(samples, lambda s: _perrec_good(name, task, s))
    m = task.score(samples, preds)
    assert m["invalid"] == len(bad) and m["missing"] == 0.0 and m["groups"] == len(samples)
    # every failed group scores tau 0 in its level's mean; correct ones their own tau
    tau_ok = {g.id: g.tau_rank for g in score_groups(samples, {s["id"]: _perrec_good(name, task, s) for s in samples})}
    levels = task.breakdown(samples, preds)
    assert set(levels) == {s["level"] for s in samples}  # every level is checked below, none silently skipped
    for lv, row in levels.items():
        ids = [s["id"] for s in samples if s["level"] == lv]
        assert row["groups"] == len(ids) and row["invalid"] == sum(i in bad for i in ids)
        assert row["tau_rank"] == pytest.approx(np.mean([0.0 if i in bad else tau_ok[i] for i in ids]))
        assert m[f"tau_{lv}"] == row["tau_rank"]
    assert m["calls_per_group"] == 2.0 and m["retries"] == 0.0
    if name == "point":
        users_failed = sum(len(s["users"]) for s in samples if s["id"] in bad)
        assert m["unrated"] == users_failed and m["unparsed_users"] == users_failed
        assert m["MAE"] == 0.0 and m["RMSE"] == 0.0
    if name == "pair":
        assert m["comparisons_per_group"] == 3.0 and m["failed_comparisons"] == 0.0


def test_perrecbench_compat_mode_reports_the_failures_it_drops(ml1m):
    """compat=perrecbench reproduces the original's mean, which drops unparseable groups; the
    headline tau_rank still counts them, and the dropped ones are reported."""
    task, samples = build("perrecbench", "list", ml1m, limit=4, profile=False, compat="perrecbench")
    preds, _, bad = half_failed(samples, lambda s: _perrec_good("list", task, s))
    m = task.score(samples, preds)
    assert m["invalid"] == len(bad) and m["dropped_compat"] == len(bad)


# ---------------------------------------------------------------- recbench


def test_recbench_ctr(ml1m):
    """A failed pair counts one half in every AUC pair it is in (a coin flip), log 2 in log loss, and is counted; a
    correct answer is P(Yes) = the label."""
    from sklearn.metrics import log_loss, roc_auc_score

    from recharness.core.types import OptionScores

    task, samples = build("recbench", "ctr", ml1m, limit=6)

    def good(s):
        p = task.parse_options(s, OptionScores({"Yes": 0.0 if s["label"] else -math.inf,
                                                "No": -math.inf if s["label"] else 0.0}))
        assert p.valid and p.value == {"p_yes": float(s["label"])}
        return {"id": s["id"], "task": s["task"], "model": IDENTITY, "build": "b0", "output": "{}", "parsed": p.value,
                "valid": True, "error": None, "attempts": 1, "latency_s": 0.1, "prompt_tokens": 10,
                "completion_tokens": None, "cached": False}

    preds, _, bad = half_failed(samples, good)
    m = task.score(samples, preds)
    y = [s["label"] for s in samples]
    p = [0.5 if s["id"] in bad else float(s["label"]) for s in samples]
    assert m["invalid_rate"] == len(bad) / len(samples) and m["missing"] == 0.0
    ya, ok = np.array(y), np.array([s["id"] not in bad for s in samples])
    P, N, Pv, Nv = (ya == 1).sum(), (ya == 0).sum(), ((ya == 1) & ok).sum(), ((ya == 0) & ok).sum()
    won = roc_auc_score(ya[ok], ya[ok]) * Pv * Nv if Pv and Nv else 0.0  # the answered pairs: all right
    assert m["AUC"] == pytest.approx((won + 0.5 * (P * N - Pv * Nv)) / (P * N), abs=1e-12) and m["AUC"] < 1.0
    assert m["logloss"] == pytest.approx(log_loss(y, p), abs=1e-9)
    # all failed: no AUC at all (it would come from the failure rule alone, random's 0.5), never better than chance
    assert math.isnan(task.score(samples, {k: preds[k] for k in bad})["AUC"])


def test_recbench_seqrec(ml1m):
    """A failed sample's target is unranked (counts 0); a correct answer names the target first."""
    task, samples = build("recbench", "seqrec", ml1m)
    preds, _, bad = half_failed(samples, lambda s: answered(task, s, f"1. {s['target_title']}"))
    m = task.score(samples, preds)
    n, nv = len(samples), len(samples) - len(bad)
    assert m["valid_rate"] == nv / n and m["missing"] == 0.0
    for k in ("NDCG@10", "HR@10", "MRR", "Recall@5", "Recall@10"):
        assert m[k] == pytest.approx(nv / n), k
    assert "Recall@20" not in m  # beyond the 10 titles asked for
    assert m["matched_share"] == 1.0
    assert task.score(samples, {k: preds[k] for k in bad})["NDCG@10"] == 0.0


# ---------------------------------------------------------------- aggregation


def test_latency_summary_skips_failed_samples():
    recs = [failed({"id": "a", "task": "t"}, 0), failed({"id": "b", "task": "t"}, 1),
            {"latency_s": 1.0, "completion_tokens": 10, "cached": False},
            {"latency_s": 3.0, "completion_tokens": 20, "cached": True}]
    assert _latency_summary(recs) == {"latency_s": 2.0, "latency_uncached_s": 1.0, "completion_tokens": 15.0}
    assert _latency_summary(recs[:2]) == {}


def test_recbench_plus_unreadable_answer_is_not_a_decline(ml1m):
    """An answer with neither a title nor a refusal in it (cut off before its list) is invalid and scores the worst
    FTR: 0 on misinformed queries, where declining (FTR 1) is the right answer, 1 elsewhere."""
    for name, worst in (("misinformed", 0.0), ("explicit", 1.0)):
        task, samples = build("recbench-plus", name, ml1m, limit=5)
        garbled = {}
        for s in samples:
            p = task.parse(s, "Here are my recommendations:")  # then nothing: cut off
            assert not p.valid and p.error == "no titles and no refusal found in the answer"
            garbled[s["id"]] = {"id": s["id"], "output": "Here are my recommendations:", "parsed": p.value, "valid": False,
                                "error": p.error}
        m = task.score(samples, garbled)
        assert (m["FTR"], m["P"], m["R"], m["valid_rate"]) == (worst, 0.0, 0.0, 0.0), name

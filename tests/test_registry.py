"""The one Registry and what is registered on it: suites, backends, datasets, metrics, baselines."""

from __future__ import annotations

import asyncio
import csv
import io
import sys
import threading

import pytest
from typer.testing import CliRunner

from recharness.baselines import BASELINES, PopularityRanker, RandomRanker
from recharness.cli import app
from recharness.core.errors import ConfigError
from recharness.core.registry import Registry
from recharness.core.types import ScoreRow
from recharness.data.prepare import DATASETS, PREPARERS, domain_for
from recharness.metrics.registry import METRICS, header, lead_order, metric_info
from recharness.models.registry import BACKENDS, resolve_model
from recharness.report.tables import columns, to_markdown, write_scores
from recharness.tasks.registry import SUITES, Suite, get_suite, get_task, suites

# ---------------------------------------------------------------- the generic registry


def test_add_get_meta_names_and_decorator():
    r = Registry("widget")
    r.add("alpha", 1, colour="red")

    @r.register("beta", colour="blue")
    def beta():
        return 2

    assert r.get("alpha") == 1 and r.get("beta") is beta and r.get("beta")() == 2
    assert r.meta("beta") == {"colour": "blue"}
    assert r.names() == ["alpha", "beta"] and list(r) == ["alpha", "beta"] and len(r) == 2
    assert "alpha" in r and "gamma" not in r
    assert dict(r.items()) == {"alpha": 1, "beta": beta}
    r.add("alpha", 1)  # the same object again is fine
    with pytest.raises(ValueError, match="registered twice"):
        r.add("alpha", 3)


def test_unknown_name_suggests_the_nearest():
    r = Registry("widget")
    r.add("popularity", 1)
    r.add("random", 2)
    with pytest.raises(ConfigError, match=r"unknown widget 'popularty' \(did you mean 'popularity'\?\); known: popularity, random"):
        r.get("popularty")
    with pytest.raises(ConfigError, match="unknown widget 'zzz'; known: popularity, random"):
        r.meta("zzz")


def test_lazy_targets_import_on_first_get_only():
    r = Registry("thing")
    r.add("decoder", "json.decoder:JSONDecoder.decode", kind="method")
    r.add("missing", "recharness.no_such_module:X")
    assert r.meta("decoder") == {"kind": "method"}  # metadata never imports
    import json.decoder

    assert r.get("decoder") is json.decoder.JSONDecoder.decode
    assert "recharness.no_such_module" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        r.get("missing")


# ---------------------------------------------------------------- suites and tasks


def test_suites_are_records_with_capabilities():
    all_suites = suites()
    assert set(all_suites) == {"llmrec", "perrecbench", "recbench-plus", "recbench"} and set(SUITES) >= set(all_suites)
    llmrec = get_suite("llmrec")
    assert isinstance(llmrec, Suite) and llmrec.default_tasks == ["sequential", "direct"]
    assert llmrec.supports("judge") and not get_suite("perrecbench").supports("judge")
    assert callable(llmrec.hook("judge"))
    assert get_suite("perrecbench").paper_tables is not None
    assert callable(llmrec.paper_tables)  # not a paper layout: direct's references, sampled vs full-catalog order
    assert all(s.supports("options") for s in all_suites.values())
    with pytest.raises(ConfigError, match="does not support judge"):
        get_suite("recbench-plus").hook("judge")
    with pytest.raises(ConfigError, match="did you mean 'llmrec'"):
        get_suite("llmrek")
    with pytest.raises(ConfigError, match="has no task 'sequentail' \\(did you mean 'sequential'\\?\\)"):
        get_task("llmrec", "sequentail")
    assert get_task("llmrec", "direct").name == "direct"


def test_suites_options_lists_every_task_with_defaults_and_help():
    res = CliRunner().invoke(app, ["suites", "--options", "perrecbench"], catch_exceptions=False, terminal_width=250)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "point, pair, list" in out  # one table for tasks that share their options
    assert "retrieved history items shown per user" in out and "│ 4 " in out  # k, its default and help
    assert "format_indicator" not in out  # perrecbench prompts have no separate format part to drop
    res = CliRunner().invoke(app, ["suites", "--options", "llmrec"], catch_exceptions=False, terminal_width=250)
    for task in ("sequential", "direct", "rating", "explanation", "summarization"):
        assert f"llmrec ({task}" in res.output or f", {task}" in res.output
    assert "n_candidates" in res.output and "behaviour" in res.output
    res = CliRunner().invoke(app, ["suites", "--options", "nope"])
    assert res.exit_code != 0 and "unknown suite 'nope'" in str(res.exception)


# ---------------------------------------------------------------- backends and datasets


def test_backends_are_registered_lazily_by_prefix():
    assert set(BACKENDS) == {"llamacpp", "openai", "hf", "fake"}
    assert BACKENDS.meta("fake")["usage"].startswith("fake")  # the module is not imported to read this
    with pytest.raises(ConfigError, match="unknown model backend 'opneai' \\(did you mean 'openai'\\?\\)"):
        resolve_model("opneai:gpt-x")
    with pytest.raises(ConfigError, match="did you mean 'qwen2.5-coder-0.5b-instruct'"):
        resolve_model("qwen2.5-coder-0.6b-instruct")
    with pytest.raises(ConfigError, match="unknown model 'openai:'"):
        resolve_model("openai:")


def test_openai_factory_maps_spec_and_options(monkeypatch):
    monkeypatch.setenv("K", "secret")
    b = resolve_model("openai:m1@http://127.0.0.1:9/v1", api_key_env="K", concurrency=3, timeout_s=2.5, max_attempts=2)
    assert (b.model, b.base_url, b.max_concurrency, b.timeout_s, b.max_attempts) == ("m1", "http://127.0.0.1:9/v1", 3, 2.5, 2)
    asyncio.run(b.aclose())


def test_datasets_carry_their_domain():
    assert set(DATASETS) == set(PREPARERS)
    assert domain_for("ml-1m") == "movie" and domain_for("amazon2023") == "product"
    assert domain_for("recbole") is None and domain_for("my-own-name") is None
    with pytest.raises(ConfigError, match="did you mean 'ml-1m'"):
        DATASETS.get("ml-1n")


# ---------------------------------------------------------------- metrics and tables

#: every metric name the current suites write into scores.json (judge slugs vary)
SCORED = ["BLEU-1", "BLEU-4", "CMR", "FTR", "HR@1", "HR@10", "HR@5", "HR@20", "MAE", "MAE_fb", "MRR", "NDCG@10",
          "NDCG@5", "P", "R", "RMSE", "RMSE_fb", "ROUGE-1", "ROUGE-2", "ROUGE-L", "calls_per_group", "clipped_rate",
          "comparisons_per_group", "completion_tokens", "disagree_rate", "dropped_compat", "failed_comparisons",
          "faith[openai-fake]", "groups", "invalid", "invalid_rate", "judged[openai-fake]", "latency_s",
          "latency_uncached_s", "matched_share", "missing", "n_scored", "partial_rate", "pers[openai-fake]",
          "retries", "tau", "tau_compat", "tau_easy", "tau_hard", "tau_medium", "tau_rank", "tied", "unmatched",
          "unparsed_users", "unrated", "valid_rate", "words", "parse_errors", "failed", "gt_match_rate",
          "AUC", "GAUC", "logloss"]


def test_every_metric_has_a_direction_and_a_description():
    for name in METRICS:
        meta = METRICS.meta(name)
        assert "higher_is_better" in meta and meta["higher_is_better"] in (True, False, None), name
        assert meta["description"] and "\n" not in meta["description"], name
    for name in SCORED:
        assert metric_info(name) is not None, f"{name} is not registered in recharness.metrics.registry"
    assert metric_info("HR@20").name == "HR@{k}" and metric_info("HR@5").name == "HR@5"
    assert metric_info("no-such-metric") is None
    # RMSE and MAE cover valid answers only (a rating row's headline is RMSE_fb): the header says so
    assert (header("NDCG@10"), header("RMSE"), header("words"), header("new")) == ("NDCG@10 ↑", "RMSE (valid) ↓", "words",
                                                                                  "new")


def test_column_order_is_what_it_was():
    """scores.md/csv/json are compared across versions: the leading columns keep this order."""
    assert lead_order() == ["tau", "tau_easy", "tau_medium", "tau_hard", "HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10",
                            "MRR", "RMSE", "MAE", "RMSE_fb", "MAE_fb", "BLEU-1", "BLEU-4", "ROUGE-1", "ROUGE-2",
                            "ROUGE-L", "invalid", "invalid_rate", "valid_rate", "partial_rate", "matched_share",
                            "latency_s", "latency_concurrency", "completion_tokens"]
    rows = [ScoreRow(method="m", task="t", n=2, kind="model",
                     metrics={"words": 3.0, "HR@20": 0.5, "MRR": 0.1, "missing": 0.0, "HR@1": 0.2, "latency_uncached_s": 1.0}),
            ScoreRow(method="popularity", task="t", n=2, kind="reference", metrics={"MRR": 0.3, "RMSE": 1.0})]
    assert columns(rows) == ["HR@1", "MRR", "RMSE", "words", "HR@20"]


def test_markdown_headers_are_marked_and_csv_is_not(tmp_path):
    rows = [ScoreRow(method="m", task="t", n=2, kind="model", metrics={"HR@1": 0.5, "RMSE": 1.25, "words": 3.0})]
    md = to_markdown(rows)
    assert "| method | HR@1 ↑ | RMSE (valid) ↓ | words |" in md and "| m | 0.500 | 1.250 | 3.000 |" in md
    paths = write_scores(rows, tmp_path)
    assert next(csv.reader(io.StringIO(paths["csv"].read_text()))) == ["task", "method", "kind", "n", "coverage", "HR@1", "RMSE", "words"]
    assert "↑" not in paths["json"].read_text()


# ---------------------------------------------------------------- baselines


def test_baselines_registry():
    assert BASELINES.get("popularity") is PopularityRanker and BASELINES.get("random") is RandomRanker
    assert all(BASELINES.meta(n)["description"] for n in BASELINES)


def test_random_top_k_returns_what_is_left_when_fewer_than_k_remain():
    result: list = []
    t = threading.Thread(target=lambda: result.append(RandomRanker(list("abcde"), seed=0).top_k(3, exclude={"a", "b", "c"})),
                         daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "top_k did not return"
    assert sorted(result[0]) == ["d", "e"]
    assert RandomRanker(list("abc")).top_k(2, exclude={"a", "b", "c", "zz"}) == []
    assert sorted(RandomRanker(["x", "x", "y"]).top_k(5)) == ["x", "y"]  # duplicates in the catalog count once


def test_built_in_models_are_named_for_what_they_are_and_old_names_still_work_with_a_note(monkeypatch):
    from recharness.models import builtin
    from recharness.models.builtin import ALIASES, BUILTIN_MODELS, builtin_name

    monkeypatch.setattr(builtin, "_WARNED", set())  # once per process: an earlier test may have used the alias

    assert "qwen2.5-coder-0.5b-instruct" in BUILTIN_MODELS and "qwen2.5-0.5b" not in BUILTIN_MODELS
    said = []
    assert builtin_name("qwen2.5-0.5b", warn=said.append) == "qwen2.5-coder-0.5b-instruct"
    assert builtin_name("qwen2.5-0.5b", warn=said.append) == "qwen2.5-coder-0.5b-instruct"
    assert len(said) == 1 and "deprecated" in said[0] and "Qwen2.5-Coder-0.5B-Instruct" in said[0]
    assert set(ALIASES.values()) <= set(BUILTIN_MODELS) and builtin_name("nosuch") is None


def test_a_gguf_header_names_the_model_and_its_quantisation(smollm2_path):
    from recharness.models.gguf_header import read_header
    from recharness.models.registry import resolve_model

    assert read_header(smollm2_path) == {"general_name": "Smollm2 135M 8k Lc100K Mix1 Ep2", "quantization": "Q4_1"}
    ident = resolve_model("smollm2-135m").identity()
    assert ident["quantization"] == "Q4_1" and ident["sha256"] == "b179c9523d0e6a0f"


def test_the_tau_description_says_which_tau_the_headline_is():
    """The headline tau counts the prediction's ties as coin flips (0.667 where tau-b gives 0.816 for a hedging
    answer, tests/test_perrecbench_ties.py): `recharness metrics` must not call it tau-b."""
    from recharness.metrics.registry import metric_info

    text = metric_info("tau").description
    assert "coin flips" in text and not text.startswith("Kendall tau-b")

"""PerRecBench fine-tuning (arXiv 2501.13391 §6): training examples from held-out user groups that
share no user and no query item with the build, answers in exactly the format the suite parses,
weight merging (linear = the average of the deltas, TIES as worked by hand), and a fine-tuned /
merged `hf:DIR` that answers a PerRecBench sample through the hf backend.

The model tests load the built-in SmolLM2 through transformers and train at most two steps on two
examples.
"""

from __future__ import annotations

import copy
import json

import pytest

from recharness.core.errors import ConfigError
from recharness.runner import pipeline

# fine-tuning trains real models for minutes: `make test-heavy`, not `make test` (README)
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def prb_run(ml1m, tmp_path_factory):
    """Two test groups per level, with few-shot examples from held-out groups (also excluded from training)."""
    out = tmp_path_factory.mktemp("ftp") / "perrecbench"
    pipeline.build("perrecbench", "ml-1m", out, seed=0, limit=2,
                   options={"profile": False, "shots": 1, "heldout": 2})
    return out


def _test_users_items(run_dir):
    _, samples = pipeline.load_build(run_dir)
    users = {u for s in samples for u in s["truth"]["user_ids"]}
    users |= {u["user_id"] for s in samples for sh in s["shots"] for u in sh["users"]}
    items = {s["item_id"] for s in samples} | {sh["item_id"] for s in samples for sh in s["shots"]}
    return users, items


def _groups(run_dir, ml1m, per_level):
    """The training groups `perrecbench_examples` uses, by query item."""
    from recharness.tasks.perrecbench.finetune import _opts, build_groups, training_groups

    info = json.loads((run_dir / "build.json").read_text())
    users, items = build_groups(run_dir)
    gs = training_groups(ml1m.interactions, _opts(info).groups, per_level=per_level,
                         exclude_users=users, exclude_items=items)
    return {g.item_id: g for lv in gs for g in gs[lv]}


def test_training_groups_share_no_user_and_no_item_with_the_build(ml1m, prb_run):
    from recharness.tasks.perrecbench.finetune import build_groups, perrecbench_examples

    test_users, test_items = _test_users_items(prb_run)
    users, items = build_groups(prb_run)  # test groups, their shots and every held-out group
    assert test_users <= users and test_items <= items
    for lv in ("easy", "medium", "hard"):
        held = json.loads((prb_run / "perrecbench" / f"held_out-{lv}.json").read_text())
        assert set(held) <= items and {m["user_id"] for v in held.values() for m in v[0]} <= users

    per_level = 3
    groups = _groups(prb_run, ml1m, per_level)
    assert len(groups) == 3 * per_level
    n = {lv: [len(g.members) for g in groups.values() if g.level == lv] for lv in ("easy", "medium", "hard")}
    assert n == {"easy": [2] * 3, "medium": [3] * 3, "hard": [4] * 3}
    for g in groups.values():  # the test groups' criteria: distinct preferences, active users
        rel = [m.relative_rating for m in g.members]
        assert all(abs(a - b) > 0.6 for i, a in enumerate(rel) for b in rel[i + 1:])
        assert all(m.history_len > 20 for m in g.members)
        assert max(m.timestamp for m in g.members) - min(m.timestamp for m in g.members) <= 7 * 86400

    sizes = [len(g.members) for g in groups.values()]
    want = {"pointwise": sum(sizes), "pairwise": sum(k * (k - 1) for k in sizes), "listwise": len(sizes)}
    want["joint"] = sum(want.values())
    for task, count in want.items():
        exs = perrecbench_examples(prb_run, ml1m, task, groups=per_level)
        assert len(exs) == count, task
        for e in exs:
            assert e.key[0] in groups and e.key[0] not in items
            assert set(e.users) == {m.user_id for m in groups[e.key[0]].members}
            assert not set(e.users) & users
            assert not any(m["role"] == "assistant" for m in e.messages)  # no few-shot turns
    # the examples do not depend on the finetune seed, a sample of them does
    a = perrecbench_examples(prb_run, ml1m, "pairwise", groups=per_level, limit=5, seed=1)
    assert [e.id for e in a] == [e.id for e in perrecbench_examples(prb_run, ml1m, "pairwise", groups=per_level,
                                                                     limit=5, seed=1)]
    assert len(a) == 5 and {e.id for e in a} <= {e.id for e in perrecbench_examples(prb_run, ml1m, "pairwise",
                                                                                        groups=per_level)}


def test_an_example_from_a_test_group_is_refused(ml1m, prb_run):
    from recharness.finetune.examples import Example
    from recharness.tasks.perrecbench.finetune import check_groups_disjoint, perrecbench_examples

    users, items = _test_users_items(prb_run)
    e = perrecbench_examples(prb_run, ml1m, "listwise", groups=1)[0]
    check_groups_disjoint([e], users, items)
    user = sorted(users)[0]
    with pytest.raises(ConfigError, match=f"user {user}"):
        check_groups_disjoint([Example(e.id, e.messages, e.answer, key=e.key, users=(*e.users, user))], users, items)
    item = sorted(items)[0]
    with pytest.raises(ConfigError, match=f"query item {item}"):
        check_groups_disjoint([Example(e.id, e.messages, e.answer, key=(item, "easy"), users=e.users)], users, items)
    with pytest.raises(ConfigError, match="pointwise, pairwise, listwise or joint"):
        perrecbench_examples(prb_run, ml1m, "rating")


def test_answers_parse_with_the_suites_parsers_to_the_true_order(ml1m, prb_run):
    from recharness.tasks.perrecbench import prompts
    from recharness.tasks.perrecbench.finetune import perrecbench_examples
    from recharness.tasks.perrecbench.original import truth_of
    from recharness.tasks.perrecbench.parsing import parse_pair, parse_ranking, parse_rating
    from recharness.tasks.perrecbench.scoring import prediction_scores

    groups = _groups(prb_run, ml1m, 2)
    seen = set()
    for e in perrecbench_examples(prb_run, ml1m, "joint", groups=2):
        fmt = e.id.split("-")[1]
        g = groups[e.key[0]]
        idx = [int(x) - 1 for x in e.id.rsplit("-", len(g.members) if fmt == "list" else 2 if fmt == "pair" else 1)[1:]]
        rel = [m.relative_rating for m in g.members]
        sample = {"truth": truth_of(g)}
        if fmt == "point":
            p = parse_rating(e.answer)
            assert p.valid and p.value == g.members[idx[0]].rating
            assert e.messages[0]["content"] == prompts.POINT_SYSTEM.format(domain=ml1m.domain)
        elif fmt == "pair":
            p = parse_pair(e.answer)
            assert p.valid and p.value == ("A" if rel[idx[0]] > rel[idx[1]] else "B")
            assert e.messages[-1]["content"].endswith(prompts.PAIR_ASK)
        else:
            p = parse_ranking(e.answer, len(g.members))
            assert p.valid and p.value == sorted(range(1, len(rel) + 1), key=lambda i: -rel[i - 1])
            # scored as the suite scores a prediction: the true order exactly
            scores, _ = prediction_scores(sample, {"ordering": p.value})
            assert sorted(range(len(rel)), key=lambda i: -scores[i]) == sorted(range(len(rel)), key=lambda i: -rel[i])
        seen.add(fmt)
    assert seen == {"point", "pair", "list"}
    # the pointwise answers of a whole group rank its users by relative rating, as the suite ranks ratings
    g = next(g for g in groups.values() if g.level == "hard")
    scores, _ = prediction_scores({"truth": truth_of(g)}, {"ratings": [m.rating for m in g.members]})
    assert scores == pytest.approx([m.relative_rating for m in g.members])


def test_ties_on_hand_made_tensors_is_the_hand_worked_result():
    import torch

    from recharness.finetune.merge import combine

    t1 = torch.tensor([1.0, -2.0, 3.0, -0.5])
    t2 = torch.tensor([-1.5, 1.0, 0.2, 2.0])
    t3 = torch.tensor([0.5, -3.0, -1.0, 1.2])
    # density 0.5 keeps 2 of 4 entries by magnitude: [0,-2,3,0], [-1.5,0,0,2], [0,-3,0,1.2];
    # elected signs (sign of the sums -1.5, -5, 3, 3.2): - - + +;
    # disjoint mean of the agreeing entries: -1.5, (-2-3)/2, 3, (2+1.2)/2
    got = combine([t1, t2, t3], [1, 1, 1], "ties", density=0.5)
    assert torch.allclose(got, torch.tensor([-1.5, -2.5, 3.0, 1.6]))
    assert torch.allclose(combine([t1, t2, t3], [1, 1, 1], "ties", density=0.5, majority_sign="frequency"), got)
    # weights scale the kept entries after the sign election: entry 4 = (2*2 + 1.2) / 2
    assert torch.allclose(combine([t1, t2, t3], [1, 2, 1], "ties", density=0.5),
                          torch.tensor([-3.0, -2.5, 3.0, 2.6]))
    # a disagreement TIES resolves by sign where the mean would cancel: [2, -1] -> 2, not 0.5
    assert torch.allclose(combine([torch.tensor([2.0]), torch.tensor([-1.0])], [1, 1], "ties", density=1.0),
                          torch.tensor([2.0]))
    # linear with 1/3 each is the plain average (the paper's merge)
    assert torch.allclose(combine([t1, t2, t3], [1 / 3] * 3, "linear"), (t1 + t2 + t3) / 3, atol=1e-6)
    with pytest.raises(ConfigError, match="linear, ties"):
        combine([t1], [1], "svd")


# --- with the model --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(smollm2_path):
    pytest.importorskip("peft", reason="the train extra is not installed")
    pytest.importorskip("transformers", reason="the train extra is not installed")
    from recharness.finetune.api import load_base

    return load_base(str(smollm2_path))


@pytest.fixture(scope="module")
def two_finetunes(smollm2_path, base, ml1m, prb_run, tmp_path_factory, random_lora):
    """A real pairwise fine-tune (`finetune`, two steps on two examples) and a listwise-tagged adapter with
    random B (so its delta is large), both exported as finetune does."""
    from recharness.finetune.api import finetune
    from recharness.finetune.export import export_merged

    d = tmp_path_factory.mktemp("ftm")
    res = finetune("perrecbench", "pair", prb_run, str(smollm2_path), d / "pair", lr=5e-3, max_steps=2, batch=1,
                   micro_batch=1, examples=2, train_groups=1, checkpoint_every=1)
    tok, model = base
    pm = random_lora(model, rank=16, alpha=32)
    export_merged(pm, copy.deepcopy(tok), d / "rand", {"base": str(smollm2_path), "suite": "perrecbench",
                                                        "task": "listwise", "items": "text"})
    return res, d / "pair", d / "rand"


def _weights(directory):
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors"))


@pytest.mark.llm
def test_finetune_perrecbench_writes_an_hf_dir_with_its_adapter_and_the_papers_defaults(two_finetunes):
    from recharness.finetune.api import recipe

    res, pair, _ = two_finetunes
    assert res.out == pair and res.task == "pairwise" and res.train.steps == 2 and res.examples == 2
    info = json.loads((pair / "finetune.json").read_text())
    assert info["suite"] == "perrecbench" and info["task"] == "pairwise" and info["formats"] == ["pair"]
    assert info["profile"] == "none" and info["train_groups"] >= 1
    s = info["settings"]
    assert (s["rank"], s["alpha"], s["lr"], s["max_len"]) == (16, 32, 5e-3, 2048)
    # the paper's settings are the defaults when not overridden
    assert recipe("perrecbench", "pointwise").lora == recipe("perrecbench", "point").lora == (16, 32)
    assert recipe("perrecbench", "pairwise").train == {"lr": 1e-5, "epochs": 2, "batch": 32, "max_len": 2048}
    assert recipe("perrecbench", None).task == "joint" and recipe("perrecbench", "multitask").task == "joint"
    cfg = json.loads((pair / "adapter" / "adapter_config.json").read_text())
    assert cfg["r"] == 16 and cfg["lora_alpha"] == 32
    # safetensors and JSON only: nothing that would need unpickling in the model directory
    files = {p.suffix for p in pair.rglob("*") if p.is_file()}
    assert files <= {".json", ".jsonl", ".safetensors", ".jinja", ".txt", ".model", ".md"}, files


@pytest.mark.llm
def test_linear_merge_is_the_average_of_the_deltas_and_ties_merges_them(smollm2_path, base, two_finetunes,
                                                                          tmp_path):
    import torch

    from recharness.finetune.merge import adapter_deltas, combine, merge

    _, pair, rand = two_finetunes
    tok, model = base
    w0 = {k: v.detach().clone() for k, v in model.named_parameters()}
    out = merge([pair, rand], tmp_path / "linear", base_model=(copy.deepcopy(tok), copy.deepcopy(model)))
    got, w1, w2 = _weights(out), _weights(pair), _weights(rand)
    k = "model.layers.0.self_attn.q_proj.weight"
    d1, d2 = w1[k] - w0[k], w2[k] - w0[k]
    assert d1.abs().max() > 1e-4 and d2.abs().max() > 1e-3  # both fine-tunes moved this matrix
    # θ0 + (Δ1 + Δ2)/2, with each Δ taken from the sources' own merged weights (peft's merge_and_unload)
    assert torch.allclose(got[k], w0[k] + (d1 + d2) / 2, atol=1e-6, rtol=0)
    assert torch.allclose(got[k], (w1[k] + w2[k]) / 2, atol=1e-6, rtol=0)
    m = "model.layers.0.mlp.up_proj.weight"  # not adapted: the base's
    assert torch.equal(got[m], w0[m])
    info = json.loads((out / "finetune.json").read_text())
    assert info["task"] == "merged" and info["merge"]["method"] == "linear" and info["merge"]["weights"] == [0.5, 0.5]
    assert [s["task"] for s in info["merge"]["sources"]] == ["pairwise", "listwise"]
    assert {s["delta_from"] for s in info["merge"]["sources"]} == {"adapter"}

    ties = merge([pair, rand], tmp_path / "ties", method="ties", density=0.3,
                 base_model=(copy.deepcopy(tok), copy.deepcopy(model)))
    # TIES trims by rank of magnitude, so it is checked on the exact LoRA deltas (the adapters' B @ A, which
    # the linear check above just matched to peft's merged weights), not on differences of rounded weights
    a1, a2 = adapter_deltas(pair / "adapter")[k], adapter_deltas(rand / "adapter")[k]
    assert torch.allclose(a1, d1, atol=1e-6) and torch.allclose(a2, d2, atol=1e-6)
    want = w0[k] + combine([a1, a2], [1.0, 1.0], "ties", density=0.3)
    assert torch.allclose(_weights(ties)[k], want, atol=1e-6, rtol=0)
    kept = (a1 != 0).float().mean()
    assert kept == 1 and ((_weights(ties)[k] - w0[k]).abs() > 0).float().mean() < 0.6  # trimmed: 30% + 30% at most
    assert json.loads((ties / "finetune.json").read_text())["merge"]["density"] == 0.3
    with pytest.raises(ConfigError, match="one finite weight per model"):
        merge([pair, rand], tmp_path / "bad", weights=[1.0], base_model=(tok, model))


@pytest.mark.llm
def test_a_merged_model_answers_a_perrecbench_sample_through_the_hf_backend(base, two_finetunes, prb_run, tmp_path):
    from recharness.finetune.merge import merge
    from recharness.models.hf import HFBackend

    _, pair, rand = two_finetunes
    tok, model = base
    out = merge([pair, rand], tmp_path / "merged", base_model=(copy.deepcopy(tok), copy.deepcopy(model)))
    hf = HFBackend(str(out))
    assert hf.identity()["finetune"]["task"] == "merged"
    run = tmp_path / "run"
    pipeline.build("perrecbench", "ml-1m", run, tasks=["list"], seed=0, limit=1,
                   options={"profile": False, "levels": "easy"})
    path, _ = pipeline.run(run, hf, "merged", limit=1, use_cache=False, max_retries=0)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(recs) == 1 and recs[0]["task"] == "list" and isinstance(recs[0]["output"], str)
    assert recs[0]["model"]["finetune"]["weights"] == json.loads((out / "finetune.json").read_text())["weights"]


def test_run_task_answers_one_format_and_table_1_shows_the_others_as_missing(prb_run, tmp_path):
    """`recharness run -t point`: a single-format fine-tune is scored on its own format only; the other
    formats' cells are '–' (not a 0 for unanswered groups), and an unknown task is a clear error."""
    import shutil

    from typer.testing import CliRunner

    from recharness.cli import app
    from recharness.tasks.perrecbench.table import table1_rows

    run = tmp_path / "run"
    shutil.copytree(prb_run, run, ignore=shutil.ignore_patterns("predictions", "cache"))
    res = CliRunner().invoke(app, ["run", "perrecbench", "-o", str(run), "-m", "fake", "--name", "only-point",
                                   "-t", "point", "--no-cache"])
    assert res.exit_code == 0, res.output
    recs = [json.loads(x) for x in (run / "predictions" / "only-point.jsonl").read_text().splitlines()]
    _, samples = pipeline.load_build(run)
    assert sorted(r["id"] for r in recs) == sorted(s["id"] for s in samples if s["task"] == "point")
    row = next(r for r in table1_rows(pipeline.score(run, resamples=0)) if r[0] == "only-point")
    cells = dict(zip([f"{lv} {t}" for lv in ("easy", "medium", "hard") for t in ("point", "pair", "list")], row[1:10]))
    assert all(v == "–" for k, v in cells.items() if not k.endswith("point")), cells
    assert all(v != "–" for k, v in cells.items() if k.endswith("point")), cells
    bad = CliRunner().invoke(app, ["run", "perrecbench", "-o", str(run), "-m", "fake", "-t", "nope", "--no-cache"])
    assert isinstance(bad.exception, ConfigError) and "this build's tasks are point, pair, list" in str(bad.exception)


def test_a_merge_source_that_is_no_fine_tune_or_a_damaged_one_is_named(tmp_path):
    """Before, an empty folder or a cut finetune.json read as {} and the merge said "the models name different
    or no base models (['None'])"."""
    from recharness.core.errors import InputError
    from recharness.finetune.merge import read_source

    from recharness.finetune.merge import merge

    empty = tmp_path / "empty"
    empty.mkdir()
    assert read_source(empty)["no_info"] and read_source(empty)["info"] == {}  # another tool's: fine with --base
    with pytest.raises(ConfigError, match="has no finetune.json .not a fine-tune made by `recharness finetune`.: "
                                          "give the base model with --base"):
        merge([empty, empty], tmp_path / "out", base_model=object())
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "finetune.json").write_text('{"base": "HuggingFaceTB/SmolLM2-135M-Instruct", "items": "text"')
    with pytest.raises(InputError, match="finetune.json.*unreadable"):
        read_source(cut)
    (cut / "finetune.json").write_text('["not", "an", "object"]')
    with pytest.raises(InputError, match="not a JSON object"):
        read_source(cut)
    (cut / "finetune.json").write_text('{"base": "b", "items": "text"}')
    assert read_source(f"hf:{cut}")["info"] == {"base": "b", "items": "text"}

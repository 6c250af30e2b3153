"""Pieces the LLMRec ranking tasks share: catalog matching, ranking scores, the split (leave-last-out or
one global cut time, `--option split=`) and the training part reference models learn from."""

from __future__ import annotations

from recharness.core.errors import ConfigError
from recharness.matching.answers import CatalogContext  # noqa: F401 - the suite's tasks read it from here
from recharness.tasks.llmrec.prompts import PromptParts
from recharness.tasks.options import DEFAULT_CUT, SPLITS

SUITE = "llmrec"


def parts_from_options(opts: dict) -> PromptParts:
    return PromptParts(
        task_description=bool(opts.get("task_description", True)),
        behaviour=bool(opts.get("behaviour", True)),
        format_indicator=bool(opts.get("format_indicator", True)),
    )


def ranking_scores(ranked: list[list[str]], targets: list[str], hr_ks=(1, 5, 10), ndcg_ks=(5, 10)) -> dict[str, float]:
    """HR@k, NDCG@k and MRR for one held-out target per sample."""
    from recharness.metrics.ranking import target_metrics

    if not targets:
        return {}
    per = target_metrics(ranked, targets, ks=tuple(sorted(set(hr_ks) | set(ndcg_ks))))
    out = {f"HR@{k}": float(per[f"hr@{k}"]) for k in hr_ks}
    out.update({f"NDCG@{k}": float(per[f"ndcg@{k}"]) for k in ndcg_ks})
    out["MRR"] = float(per["mrr"])
    return out


def reference_predictions(task, dataset, samples: list[dict], seed: int) -> dict[str, dict[str, dict]]:
    """Popularity and random reference rows as prediction records, so one scorer scores all:
    the task's baselines (`Task.baselines`), fitted on the build's training part (`training_data`)."""
    from recharness.tasks.references import reference_records

    return reference_records(task, dataset, samples, seed, train=training_data(dataset, split_of(samples)))


def split_users(dataset, opts: dict, config, *, min_history: int, interactions=None) -> tuple[list, dict]:
    """(the users' `UserSplit`s, the split as recorded in each sample): `--option split=leave_last_out`
    (default: each user's last item held out) or `global_time` (one cut time, `--option cut=q`:
    `data.temporal_split`). `interactions`: a subset of the dataset's (default: all of them)."""
    interactions = dataset.interactions if interactions is None else interactions
    how = opts.get("split", "leave_last_out")
    kw = {"min_history": min_history, "limit": config.limit, "seed": config.seed, "users": config.users}
    if how == "leave_last_out":
        if opts.get("cut") is not None:
            raise ConfigError(f"--option cut={opts['cut']}: a cut time applies to split=global_time only "
                              "(split=leave_last_out holds out each user's last item): add --option split=global_time")
        from recharness.data.leave_last_out import leave_last_out

        return leave_last_out(interactions, **kw), {"split": "leave_last_out"}
    if how == "global_time":
        from recharness.data.temporal_split import global_time

        cut = float(opts.get("cut") or DEFAULT_CUT)
        splits, t = global_time(interactions, cut=cut, meta=dataset.meta, **kw)
        return splits, {"split": "global_time", "cut": cut, "cut_time": t}
    raise ConfigError(f"--option split={how}: known splits are {', '.join(SPLITS)}")


def split_of(samples: list[dict]) -> dict:
    """The split a build's samples were made with (samples of a leave-last-out build record none)."""
    return (samples[0].get("split") if samples else None) or {"split": "leave_last_out"}


def training_data(dataset, split: dict):
    """What reference models (and a retriever of candidates) learn from: every interaction but each
    user's last (leave-last-out), or every interaction before the cut time (global_time), for all users."""
    from recharness.baselines import TrainData

    if split.get("split") == "global_time":
        from recharness.data.temporal_split import training_part

        rows = training_part(dataset.interactions, split["cut_time"]).select("user_id", "item_id", "timestamp")
        return TrainData(rows, dataset.items["item_id"].to_list(), item_table=dataset.items, dataset_name=dataset.name)
    return TrainData.leave_last_out(dataset)


def keep_training_part(out, dataset, split: dict) -> None:
    """Where the `train` stage and `-m baseline:NAME` find it (`TrainData.of_build` reads a build's own
    training rows at `pairs_path(run, suite)`): a global-time build writes its training part there
    (every interaction before the cut, label 1, in time order), so `train` fits on exactly what
    `training_data` gives; a leave-last-out build removes one an earlier build left in the directory."""
    if out is None:
        return
    import polars as pl

    from recharness.baselines import pairs_path
    from recharness.core.io import atomic_write_parquet

    path = pairs_path(out, SUITE)
    if split.get("split") != "global_time":
        if path.exists():
            path.unlink()
        return
    rows = training_data(dataset, split).interactions.with_columns(pl.lit(1, dtype=pl.Int8).alias("label"))
    atomic_write_parquet(path, rows)


def why_empty(task_name: str, dataset, min_history: int, opts: dict | None = None) -> str | None:
    """Which filter left a ranking task without users: the history length (and, for a global-time split,
    the cut), named with its numbers."""
    if (opts or {}).get("split") == "global_time":
        from recharness.data.temporal_split import why_empty as why_empty_global

        why = why_empty_global(dataset.interactions, float(opts.get("cut") or DEFAULT_CUT), min_history)
        return f"{task_name}: {why}" if why else None
    lengths = dataset.interactions.group_by("user_id").len()["len"]
    if lengths.is_empty():
        return f"{task_name}: {dataset.name} has no interactions"
    kept = int((lengths > min_history).sum())
    if kept == 0:
        return (f"{task_name}: min_history={min_history} keeps 0 of {lengths.len()} users (a user needs more than "
                f"min_history interactions; the longest history here has {int(lengths.max())}): "
                f"lower it with --option min_history=N")
    return None


def popularity(dataset, split: dict | None = None):
    """The training part's item popularity (each user's last interaction held out, or, for a global-time
    split, every interaction before the cut), for beyond-accuracy metrics."""
    from recharness.metrics.beyond_accuracy import Popularity

    train = training_data(dataset, split or {"split": "leave_last_out"})
    return Popularity.of(train.interactions, dataset.items["item_id"].to_list())


class SplitPopularity:
    """`popularity` per split, computed when first asked (a build records its split in its samples)."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.cache: dict[tuple, object] = {}

    def of(self, samples: list[dict]):
        split = split_of(samples)
        key = tuple(sorted(split.items()))
        if key not in self.cache:
            self.cache[key] = popularity(self.dataset, split)
        return self.cache[key]


def target_seen(samples: list[dict]) -> dict[str, float]:
    """{"target_seen_rate": share of samples whose held-out item is also in the user's history} when there is
    one (a repeat purchase: H&M, Amazon), else {}: the rows should be read with it (`metrics.registry`)."""
    repeats = [s["target"] in set(s.get("seen") or ()) for s in samples]
    return {"target_seen_rate": sum(repeats) / len(repeats)} if any(repeats) else {}


def beyond_accuracy(pop, ids: list[str], ranked: list[list[str]], targets: list[str], k: int = 10,
                    clusters=None, orders: list[int] | None = None) -> dict:
    """coverage / Gini / ARP / novelty of the top-k lists and HR@k on head vs tail targets, as units (`orders`:
    each sample's candidate order, for coverage and Gini per order)."""
    from recharness.metrics.beyond_accuracy import beyond_accuracy_units

    if pop is None or not ids:
        return {}
    hits = [float(t in r[:k]) for r, t in zip(ranked, targets)]
    return beyond_accuracy_units(ids, ranked, targets, hits, pop, k=k, accuracy=f"HR@{k}", clusters=clusters,
                                 orders=orders)


def ranking_units(ids: list[str], ranked: list[list[str]], targets: list[str], hr_ks=(1, 5, 10),
                  ndcg_ks=(5, 10), clusters=None) -> dict:
    """`ranking_scores`' metrics as per-sample units (means over samples), for confidence intervals."""
    from recharness.metrics.bootstrap import mean_units
    from recharness.metrics.ranking import target_metrics

    if not targets:
        return {}
    per = target_metrics(ranked, targets, ks=tuple(sorted(set(hr_ks) | set(ndcg_ks))), per_sample=True)
    kw = {"how": "mean over samples", "clusters": clusters}
    out = {f"HR@{k}": mean_units(ids, per[f"hr@{k}"], **kw) for k in hr_ks}
    out.update({f"NDCG@{k}": mean_units(ids, per[f"ndcg@{k}"], **kw) for k in ndcg_ks})
    out["MRR"] = mean_units(ids, per["mrr"], **kw)
    return out


def order_swaps(refs: list, sampled: str = "NDCG@10", full: str = "NDCG@10 (full)") -> list[tuple[str, str]]:
    """(a, b) for each pair of rows that `sampled` puts in one order and `full` in the other: a is above b on
    the sampled candidates and below it on the full catalog (strictly on both; a tie is no swap)."""
    out = []
    for i, a in enumerate(refs):
        for b in refs[i + 1:]:
            ds = a.metrics[sampled] - b.metrics[sampled]
            df = a.metrics[full] - b.metrics[full]
            if ds * df < 0:
                out.append((a.method, b.method) if ds > 0 else (b.method, a.method))
    return out


def _places(refs: list, metric: str) -> list[str]:
    """Each row's place by `metric` (higher first), as `order_swaps` reads the order: tied values share a place,
    marked "=" ("1=", "1=", "3")."""
    vals = [r.metrics[metric] for r in refs]
    return [f"{1 + sum(w > v for w in vals)}" + ("=" if vals.count(v) > 1 else "") for v in vals]


def sampled_vs_full(rows, sampled: str = "NDCG@10", full: str = "NDCG@10 (full)") -> str | None:
    """Markdown, per task whose reference rows carry both metrics: the references ordered by `sampled`
    (on the sampled candidates) beside their order by `full` (the whole catalog; tied values share a place,
    "1=", as `order_swaps` counts a tie as no swap), and a flagged line naming each pair whose order swaps
    (Krichene & Rendle 2020: sampled metrics need not keep the order of the full-catalog ones). None when
    no task has two such rows."""
    out = []
    for task in dict.fromkeys(r.task for r in rows):
        refs = [r for r in rows if r.task == task and r.kind == "reference"
                and isinstance(r.metrics.get(sampled), float) and isinstance(r.metrics.get(full), float)]
        if len(refs) < 2:
            continue
        refs.sort(key=lambda r: -r.metrics[sampled])
        by_sampled, by_full = _places(refs, sampled), _places(refs, full)
        lines = [f"### {task}: references on the sampled candidates vs the whole catalog\n",
                 f"| reference | {sampled} (sampled) | order | {full} | order |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {r.method} | {r.metrics[sampled]:.4f} | {by_sampled[k]} | {r.metrics[full]:.4f} | {by_full[k]} |"
                  for k, r in enumerate(refs)]
        swaps = order_swaps(refs, sampled, full)
        if swaps:
            m = {r.method: r.metrics for r in refs}
            ci = {r.method: r.ci or {} for r in refs}

            def noise(a: str, b: str) -> str:
                """Point estimates swap; say where the two rows' 95% intervals overlap (the gap may be noise)."""
                both = [x for x in (sampled, full) if all(ci[k].get(x, {}).get("lo") is not None for k in (a, b))]
                over = [x for x in both if ci[a][x]["lo"] <= ci[b][x]["hi"] and ci[b][x]["lo"] <= ci[a][x]["hi"]]
                if not both:
                    return " (no intervals to judge it by)"
                return (f" (their 95% intervals overlap on {' and '.join(over)}: the swap may be noise)" if over
                        else " (their 95% intervals are apart on both)")

            named = "; ".join(f"{a} above {b} sampled ({m[a][sampled]:.4f} vs {m[b][sampled]:.4f}) but below it on "
                              f"the whole catalog ({m[a][full]:.4f} vs {m[b][full]:.4f}){noise(a, b)}"
                              for a, b in swaps)
            lines.append(f"\n**Order differs** (point estimates) between the sampled candidates and the whole catalog "
                         f"for {len(swaps)} pair{'s' if len(swaps) > 1 else ''} (Krichene & Rendle 2020): {named}.")
        else:
            lines.append(f"\nThe references keep their order by {sampled} on the whole catalog.")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out) if out else None

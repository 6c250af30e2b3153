"""Personalization Tau Correlation: Kendall tau per group, averaged per level, two ways.

Default ("rank vectors"): for each user of a group, the predicted preference
(predicted relative rating, or n - position in the predicted order) against
the true relative rating; Kendall tau per group with the prediction's ties
counted as coin flips (`tau_ties_as_coin_flips`: the expected tau of the
paper's argsort ranking when its ties are broken at random; tau-b when neither
side has ties).  An unparseable or missing answer scores 0 (no information, the
expected tau of a random order) and is counted; so is a prediction with every
user tied.

Compat ("perrecbench"): the original evaluate_single.py.  It turns both sides
into *orderings* -- which user index stands at each position, best first
(argsort of the relative ratings, reversed) -- and takes scipy's tau between
the two orderings; parse failures ("format_not_correct") are dropped from
the mean, which runs over all groups of one label file, whatever their sizes.
So the compat `tau` of a run is the mean over its label files (a sample's
`source`; one file per level for groups we select) of the file's mean over
groups: for one file of 2 two-user groups and 1 three-user group with taus
1, 1 and 1/3, the authors' number is 7/9 = 0.7778, not the mean of the
easy and medium level means, 2/3 = 0.6667.  Per level (the breakdown and
`tau_<level>`) it is the mean over that level's kept groups.  Tau over orderings is tau between the *inverse* permutations of
the rank vectors, which is a different number once a group has 3+ users:

  true relative ratings of users 1, 2, 3: +1.0, +2.0, -1.0
      true order (best first) [2, 1, 3]      true ranks (1 = best) (2, 1, 3)
  predicted order [3, 1, 2]                  predicted ranks (2, 3, 1)
  rank vectors: users 1-2, 1-3 and 2-3 are all discordant:        tau = -1
  orderings:    (3, 1, 2) vs (2, 1, 3): positions 1-2 and 2-3
                concordant, 1-3 discordant:                       tau = +1/3

The prediction gets every pairwise preference wrong (it puts the user who
liked the item least first and the one who liked it most last), so -1 is the
right score; the orderings give it +1/3.  With two users both conventions
agree, so the easy level is unaffected.  (A later revision of the authors'
anonymous repository converts orderings to ranks first, i.e. our default.)
tests/test_perrecbench_scoring.py checks this example and hand-made files in
both modes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from recharness.metrics.correlation import kendall_tau
from recharness.metrics.rating import rating_errors
from recharness.tasks.perrecbench.groups import LEVELS


@dataclass
class GroupScore:
    id: str
    level: str
    n: int
    status: str  # "ok", "invalid", "missing", "tied"
    tau_rank: float  # 0 unless status == "ok"
    tau_compat: float | None  # None: dropped by the original evaluation


def order_from_values(values) -> list[int]:
    """The original's ordering: 1-based indices by descending value (np.argsort reversed, ties included)."""
    return [int(i) + 1 for i in np.argsort(np.asarray(values, dtype=np.float64))[::-1]]


def prediction_scores(sample: dict, parsed) -> tuple[list[float] | None, list | None]:
    """(higher-is-preferred score per user, the original's ordering) from a parsed prediction, or Nones."""
    if not isinstance(parsed, dict):
        return None, None
    n = len(sample["truth"]["relative_ratings"])
    avg = sample["truth"]["avg_ratings"]
    if parsed.get("ratings") is not None:
        r = parsed["ratings"]
        if len(r) != n or any(x is None or isinstance(x, str) for x in r):
            return None, None
        rel = [float(x) - float(a) for x, a in zip(r, avg)]
        return rel, order_from_values(rel)
    if parsed.get("ordering") is not None:
        o = parsed["ordering"]
        if not isinstance(o, list) or sorted(o) != list(range(1, n + 1)):
            return None, (o if isinstance(o, list) else None)
        score = [0.0] * n
        for pos, u in enumerate(o):
            score[u - 1] = float(n - pos)
        return score, o
    return None, None


def score_groups(samples: list[dict], predictions: dict[str, dict]) -> list[GroupScore]:
    """Per-group taus in both conventions."""
    out: list[GroupScore] = []
    xs, ys, gs, idx = [], [], [], []
    for s in samples:
        truth = s["truth"]["relative_ratings"]
        p = predictions.get(s["id"])
        if p is None:
            out.append(GroupScore(s["id"], s["level"], len(truth), "missing", 0.0, None))
            continue
        scores, ordering = prediction_scores(s, p.get("parsed"))
        if not p.get("valid", True):
            scores = None
        compat = None  # an invalid answer (e.g. every pairwise comparison failed: the heapsort's fixed order) is dropped
        if p.get("valid", True) and ordering is not None and len(ordering) == len(truth) and all(isinstance(v, (int, float)) for v in ordering):
            # scipy.stats.kendalltau(pred_order, true_order); NaN (e.g. a constant list) stays NaN, as there
            compat = kendall_tau(ordering, order_from_values(truth))
        if scores is None:
            out.append(GroupScore(s["id"], s["level"], len(truth), "invalid", 0.0, compat))
            continue
        out.append(GroupScore(s["id"], s["level"], len(truth), "ok", 0.0, compat))
        idx.append(len(out) - 1)
        xs += scores
        ys += truth
        gs += [len(idx) - 1] * len(truth)
    for k, g in enumerate(idx):
        x = np.asarray([v for v, c in zip(xs, gs) if c == k], dtype=np.float64)
        y = np.asarray([v for v, c in zip(ys, gs) if c == k], dtype=np.float64)
        t = tau_ties_as_coin_flips(x, y)
        if np.isnan(t) or np.ptp(x) == 0:
            out[g].status = "tied"  # one value for every user: no ranking at all (0)
        else:
            out[g].tau_rank = float(t)
    return out


def tau_ties_as_coin_flips(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau of a prediction `x` against the truth `y` with the prediction's ties counted as coin flips:
    (concordant - discordant) over the pairs the truth orders, sqrt(n0 (n0 - truth ties)) as tau-b's truth side.
    The paper ranks users by argsort of the predicted relative ratings, which breaks every tie one way or the
    other; this is that ranking's expected tau when ties are broken at random. tau-b also shrinks its
    denominator for the prediction's ties, so an answer that hedges (two users at their mean) scored above that
    expectation ([4, 3, 3] against a strict truth: 0.816 where the expectation is 0.667). Equal to tau-b (and
    scipy's kendalltau) when neither side has ties; NaN when the truth orders no pair."""
    n = x.size
    i, j = np.triu_indices(n, 1)
    s = float(np.sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])))
    n0 = i.size
    ordered = n0 - int(np.sum(y[i] == y[j]))
    return s / np.sqrt(n0 * ordered) if ordered > 0 else float("nan")


def _mean(v: list[float]) -> float:
    return float(np.mean(v)) if v else float("nan")


def level_table(groups: list[GroupScore], *, compat: bool = False, invalid: str = "zero") -> dict[str, dict[str, float]]:
    """{level: {tau, tau_rank, tau_compat, groups, invalid, missing, tied, dropped}} in easy/medium/hard order."""
    by: dict[str, list[GroupScore]] = defaultdict(list)
    for g in groups:
        by[g.level].append(g)
    table = {}
    for lv in [*(x for x in LEVELS if x in by), *sorted(x for x in by if x not in LEVELS)]:
        gl = by[lv]
        ranked = [g.tau_rank for g in gl if invalid == "zero" or g.status in ("ok", "tied")]
        kept = [g.tau_compat for g in gl if g.tau_compat is not None]
        row = {
            "tau_rank": _mean(ranked),
            "tau_compat": (sum(kept) / len(kept)) if kept else float("nan"),
            "groups": float(len(gl)),
            "invalid": float(sum(g.status == "invalid" for g in gl)),
            "missing": float(sum(g.status == "missing" for g in gl)),
            "tied": float(sum(g.status == "tied" for g in gl)),
            "dropped_compat": float(len(gl) - len(kept)),
        }
        row = {"tau": row["tau_compat"] if compat else row["tau_rank"], **row}
        table[lv] = row
    return table


def rating_table(samples: list[dict], predictions: dict[str, dict]) -> dict[str, dict[str, float]]:
    """MAE / RMSE of pointwise ratings (clipped to 1..5) per level and overall, over parsed ratings."""
    per: dict[str, tuple[list, list, int]] = defaultdict(lambda: ([], [], 0))
    for s in samples:
        p = predictions.get(s["id"])
        parsed = p.get("parsed") if p else None
        if isinstance(parsed, dict) and "ratings" not in parsed:
            continue  # an ordering-only method (e.g. the random reference) predicts no ratings
        r = parsed.get("ratings") if isinstance(parsed, dict) else None
        for lv in (s["level"], "all"):
            t, q, miss = per[lv]
            if r is None:
                per[lv] = (t, q, miss + len(s["truth"]["ratings"]))
                continue
            for x, y in zip(r, s["truth"]["ratings"]):
                if x is None or isinstance(x, str):
                    miss += 1
                else:
                    t.append(y)
                    q.append(float(x))
            per[lv] = (t, q, miss)
    out = {}
    for lv, (t, q, miss) in per.items():
        if not t and not miss:
            continue
        e = rating_errors(t, q, clip=(1.0, 5.0)) if t else {"mae": float("nan"), "rmse": float("nan")}
        out[lv] = {"MAE": e["mae"], "RMSE": e["rmse"], "rated": float(len(t)), "unrated": float(miss)}
    return out


def source_file(sample: dict) -> str:
    """The label file a group came from (the original evaluation averages over one file's groups);
    samples built before this was recorded: one file per level, as we write them."""
    return str(sample.get("source") or sample["level"])


def compat_tau(samples: list[dict], groups: list[GroupScore]) -> float:
    """The original evaluation's tau: per label file the mean over its kept groups (a NaN group
    makes its file NaN, as there), then the mean over files whose mean is a number."""
    per: dict[str, list[float]] = defaultdict(list)
    for s, g in zip(samples, groups):
        if g.tau_compat is not None:
            per[source_file(s)].append(g.tau_compat)
    means = [sum(v) / len(v) for v in per.values() if v]
    return _mean([m for m in means if not np.isnan(m)])


def summarize(samples: list[dict], predictions: dict[str, dict], *, compat: bool = False, invalid: str = "zero",
              with_ratings: bool = False) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Headline metrics and the per-level breakdown for one method on one task."""
    groups = score_groups(samples, predictions)
    levels = level_table(groups, compat=compat, invalid=invalid)
    metrics: dict[str, float] = {}
    rank = _mean([row["tau_rank"] for row in levels.values() if not np.isnan(row["tau_rank"])])
    if invalid == "drop":  # said in the metrics: the tables' notes and the headline's reading depend on it
        metrics["dropped_unparsed"] = float(sum(row["invalid"] + row["missing"] for row in levels.values()))
        unscored = sum(np.isnan(row["tau_rank"]) for row in levels.values())
        if unscored:  # a level whose every group was dropped: the headline is the mean of the other levels
            metrics["levels_without_tau"] = float(unscored)
    by_file = compat_tau(samples, groups)
    # tau_rank: the mean over levels, as the paper's "Avg." column; tau_compat: over label files, as the original
    metrics.update(tau=by_file if compat else rank, tau_rank=rank, tau_compat=by_file)
    for lv, row in levels.items():
        metrics[f"tau_{lv}"] = row["tau"]
    for key in ("invalid", "missing", "tied", "dropped_compat"):
        metrics[key] = float(sum(row[key] for row in levels.values()))
    metrics["groups"] = float(len(groups))
    if with_ratings:
        rt = rating_table(samples, predictions)
        if "all" in rt:
            metrics["MAE"], metrics["RMSE"] = rt["all"]["MAE"], rt["all"]["RMSE"]
            metrics["unrated"] = rt["all"]["unrated"]
        for lv in levels:
            if lv in rt:
                levels[lv].update({"MAE": rt[lv]["MAE"], "RMSE": rt[lv]["RMSE"]})
    return metrics, levels


def _user_errors(samples: list[dict], predictions: dict[str, dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: sum of absolute and of squared rating errors (predictions clipped to 1..5) and the
    number of rated users, as `rating_table` pools them (ordering-only predictions: nothing)."""
    n = len(samples)
    abs_e, sq_e, cnt = np.zeros(n), np.zeros(n), np.zeros(n)
    for k, s in enumerate(samples):
        p = predictions.get(s["id"])
        parsed = p.get("parsed") if p else None
        if isinstance(parsed, dict) and "ratings" not in parsed:
            continue
        r = parsed.get("ratings") if isinstance(parsed, dict) else None
        for x, y in zip(r or [], s["truth"]["ratings"]):
            if x is None or isinstance(x, str):
                continue
            e = min(max(float(x), 1.0), 5.0) - y
            abs_e[k] += abs(e)
            sq_e[k] += e * e
            cnt[k] += 1
    return abs_e, sq_e, cnt


def resampling(samples: list[dict]) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """How the groups are resampled: (strata, clusters, what one unit is). A group is the unit, within its level
    (its orders together, `tasks.orders.order_clusters`); when one query item is asked in groups of several
    levels (`items=shared`, or the authors' label files) those groups share the item and most of their members,
    so the item is the unit, with its groups at every level, and levels are not strata."""
    from recharness.tasks.orders import order_clusters

    groups_of: dict[str, set] = {}
    for s in samples:
        groups_of.setdefault(str(s.get("item_id")), set()).add(s.get("order_of", s["id"]))
    if any(len(g) > 1 for g in groups_of.values()):
        return None, np.asarray([str(s.get("item_id")) for s in samples]), "query items resampled with their groups"
    return np.array([s["level"] for s in samples]), order_clusters(samples), "groups resampled within levels"


def tau_units(samples: list[dict], predictions: dict[str, dict], *, compat: bool = False, invalid: str = "zero",
              with_ratings: bool = False) -> dict:
    """`summarize`'s metrics as units over groups, resampled within levels: tau per level is the
    mean of group taus, the headline the mean over levels (tau_rank) or over label files
    (tau_compat); MAE/RMSE pool rated users over groups."""
    from recharness.metrics.bootstrap import RatioUnits

    if not samples:
        return {}
    groups = score_groups(samples, predictions)
    ids = [s["id"] for s in samples]
    lv = np.array([g.level for g in groups])
    rank = np.array([g.tau_rank for g in groups])
    counted = np.array([invalid == "zero" or g.status in ("ok", "tied") for g in groups], dtype=np.float64)
    kept = np.array([g.tau_compat is not None for g in groups])
    comp = np.array([g.tau_compat if g.tau_compat is not None else 0.0 for g in groups], dtype=np.float64)
    comp_ok = bool(np.isfinite(comp).all())  # a NaN group poisons its file: no interval then
    comp = np.where(np.isfinite(comp), comp, 0.0)
    files = np.array([source_file(s) for s in samples])
    # a group asked under several orders of its users (`--option orders=K`): its K samples are one unit; a query
    # item asked at several levels: its groups are one unit
    st, cl, unit = resampling(samples)
    out: dict = {}
    if counted.any():
        out["tau_rank"] = RatioUnits(ids, rank * counted, counted, groups=lv, strata=st,
                                     how=f"mean over levels of the mean tau over groups ({unit})", clusters=cl)
    if kept.any() and comp_ok:
        out["tau_compat"] = RatioUnits(ids, comp * kept, kept, groups=files, strata=st,
                                       how=f"mean over label files of the mean tau over kept groups ({unit})",
                                       clusters=cl)
    for level in dict.fromkeys(lv.tolist()):
        m = lv == level
        if compat:
            if (kept & m).any() and comp_ok:
                out[f"tau_{level}"] = RatioUnits(ids, comp * (kept & m), kept & m, strata=st,
                                                 how=f"mean over groups ({unit})", clusters=cl)
        elif (counted * m).any():
            out[f"tau_{level}"] = RatioUnits(ids, rank * counted * m, counted * m, strata=st,
                                             how=f"mean over groups ({unit})", clusters=cl)
    head = out.get("tau_compat" if compat else "tau_rank")
    if head is not None:
        out["tau"] = head
    if with_ratings:
        abs_e, sq_e, cnt = _user_errors(samples, predictions)
        if cnt.any():
            out["MAE"] = RatioUnits(ids, abs_e, cnt, strata=st, how=f"mean over rated users ({unit})", clusters=cl)
            out["RMSE"] = RatioUnits(ids, sq_e, cnt, transform="sqrt", strata=st,
                                     how=f"root mean squared error over rated users ({unit})", clusters=cl)
    return out

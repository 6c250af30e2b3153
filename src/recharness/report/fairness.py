"""What accuracy alone hides, in report.html beside the score tables: popularity bias, order
sensitivity and memorization.

A recommender can be accurate by recommending what everyone watches, an LLM's ranking can depend on
where the target stands in the prompt, and an LLM can "recommend" an item because it has read the
dataset. Each section is shown only where the run carries what it needs, and says nothing otherwise:

- **accuracy vs popularity bias** (a task whose rows have `ARP@10`, `metrics/beyond_accuracy.py`): the
  task's headline metric against ARP@10 per method, and the beyond-accuracy columns side by side;
- **order sensitivity** (LLMRec direct built with `--option orders=K`): each method's `NDCG@10 order
  spread` (the mean over users of the std of a user's NDCG@10 across its K orders) and its HR@1 by the
  target's candidate position (`target at p: HR@1`), against the expected HR@1 of a random ranker;
- **memorization beside accuracy** (a `recharness probe memorization` result named as a method of the
  run): the probe's coverages and the task's headline metric re-scored by the task's own `score` and
  `units` on the samples whose target the model reproduced vs the others.

report.html imports this module (`write_report`'s hook), never the other way round (no import cycle):
the page's palette and each task's headline metric are handed in.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import math
import re
from collections import Counter
from pathlib import Path

from recharness.core.types import ScoreRow, is_number
from recharness.report.tables import display_name, fmt, header, value_text
from recharness.tasks.orders import shown_count

e = html.escape

#: the beyond-accuracy columns of the popularity table, after the accuracy metric and head / tail accuracy
BEYOND = ("coverage@{k}", "Gini@{k}", "ARP@{k}", "novelty@{k}")
_AT = re.compile(r"^target at (\d+): HR@1$")
#: users / groups without all K orders counted (`tasks.orders.order_metrics`), present only when some are
LEFT_OUT = "order units left out"


def spread_key(row: ScoreRow) -> str | None:
    """The row's "<metric> order spread" (NDCG@10 for LLMRec direct, tau for PerRecBench listwise: the mean over
    users / groups of the std across their orders), or None."""
    return next((k for k, v in row.metrics.items() if k.endswith(" order spread") and _number(v)), None)


_number = is_number


def _chart(fig, alt: str, caption: str, nonzero: int, colours: dict[str, str]) -> str:
    """A matplotlib figure as an inline PNG figure, with the marks and colours the page's checks read
    (the same attributes report.html's other charts carry)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    img = base64.b64encode(buf.getvalue()).decode()
    return (f"<figure data-nonzero='{nonzero}' data-colours='{e(json.dumps(colours, sort_keys=True))}'>"
            f"<img alt='{e(alt)}' src='data:image/png;base64,{img}'><figcaption>{e(caption)}</figcaption></figure>")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    # labels are literal text: a "$" in a method or run name (scores.json, a folder) is no mathtext
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def interval_bars(ax, at, los, his, *, horizontal: bool, **style):
    """Error bars drawn from each interval's lo to its hi, whatever the point value: a cluster-resampled ratio's
    interval need not hold its value, and bars drawn as value − lo / hi − value (clamped at 0) would show a wider
    interval that does. `at`: the positions on the other axis; entries with no interval (None) are left out."""
    keep = [(a, lo, hi) for a, lo, hi in zip(at, los, his) if _number(lo) and _number(hi)]
    if not keep:
        return None
    pos, mid, half = [k[0] for k in keep], [(k[1] + k[2]) / 2 for k in keep], [(k[2] - k[1]) / 2 for k in keep]
    return (ax.errorbar(mid, pos, xerr=half, fmt="none", **style) if horizontal
            else ax.errorbar(pos, mid, yerr=half, fmt="none", **style))


def _plain_tick(x: float) -> str:
    """A log axis' tick as a plain decimal (0.5, 20, 1,500): matplotlib's own (10^2) is mathtext, which
    `_plt` turns off so that a "$" in a method's name stays literal."""
    if x <= 0:
        return "0"
    if x >= 1:
        return f"{x:,.0f}" if x >= 10 or x == int(x) else f"{x:.1f}"
    return f"{x:.{max(1, -math.floor(math.log10(x)))}f}"


def _plain_log_ticks(axis, values: list[float]) -> None:
    """Plain decimal labels on a log axis: the powers of ten, and 2 and 5 times them within two decades."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda x, _: _plain_tick(x)))
    if max(values) / min(values) < 100:
        axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        axis.set_minor_formatter(FuncFormatter(lambda x, _: _plain_tick(x)))
    else:
        axis.set_minor_formatter(NullFormatter())


def _marker(row: ScoreRow, palette) -> str:
    """Models as circles, references each in its own marker (they share greys), as on the latency chart."""
    return "o" if row.kind != "reference" else palette.style(row.method)["marker"]


def _table(head: list[str], body: list[list[str]]) -> str:
    """A plain table of already-formatted cells (every cell escaped here)."""
    return ("<div class='scroll'><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in body) + "</table></div>")


def task_parts(rows: list[ScoreRow], key: str | None, palette, samples: list[dict]) -> list[str]:
    """The popularity-bias and order-sensitivity sections of one task (`rows` all of that task, `key` its
    headline metric, `samples` the run's samples), each [] where the rows do not carry it."""
    return popularity_parts(rows, key, palette) + order_parts(rows, palette, samples)


# ------------------------------------------------------------------ accuracy vs popularity bias


def _arp_key(rows: list[ScoreRow]) -> tuple[str, int]:
    """(ARP@k, k) of the rows: @10 where any row has it (every suite's list length), else the longest they
    have (LLMRec direct with 10 candidates or fewer measures its lists below the candidate count)."""
    ks = {int(m[4:]) for r in rows for m in r.metrics if m.startswith("ARP@") and m[4:].isdigit()}
    k = 10 if 10 in ks or not ks else max(ks)
    return f"ARP@{k}", k


def popularity_parts(rows: list[ScoreRow], key: str | None, palette) -> list[str]:
    """The task's headline metric against ARP@10 (or the task's shorter list), one point per method, and the beyond-accuracy table;
    [] when fewer than two methods carry both (one point shows no trade-off)."""
    from recharness.metrics.registry import metric_info

    info = metric_info(key) if key else None
    if not (info and info.higher_is_better and info.group == "accuracy"):  # e.g. no NDCG@10 with 4 candidates
        return []
    arp, k = _arp_key(rows)
    pts = [r for r in rows if _number(r.metrics.get(arp)) and _number(r.metrics.get(key))]
    if len(pts) < 2:
        return []
    task = rows[0].task
    head = next((m for r in pts for m in r.metrics if m.endswith(" head")), None)
    cols = [key] + [c for c in (head, head and head.removesuffix(" head") + " tail", *(c.format(k=k) for c in BEYOND))
                    if c and any(c in r.metrics for r in pts)]
    body = [[display_name(r)] + [value_text(r, c) for c in cols] for r in pts]
    if any(r.metrics[key] or r.metrics[arp] for r in pts):
        chart = "<div class='charts'>" + _popularity_chart(pts, key, palette, k) + "</div>"
    else:  # every point at the origin: nothing to see
        chart = (f"<p class='nochart'>No chart of {e(key)} against {arp}: both are 0 for every "
                 "method.</p>")
    return [f"<h3>{e(task)}: accuracy against popularity bias</h3>",
            chart,
            _table(["method"] + [header(c) for c in cols], body),
            f"<p class='note'><small>{arp} (average recommended popularity) = the mean number of training "
            f"interactions of a method's top-{k} items: further right, more popular items. A method high and to the "
            "left is accurate without leaning on what everyone has seen; head / tail = accuracy on samples whose "
            "target is among the 20% most interacted items / the rest. Coverage and Gini have no interval (a "
            "bootstrap of a set statistic is biased).</small></p>"]


def _popularity_chart(pts: list[ScoreRow], key: str, palette, k: int = 10) -> str:
    arp = f"ARP@{k}"
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = [r.metrics[arp] for r in pts]
    bars = False
    for r in pts:
        x, y, colour = r.metrics[arp], r.metrics[key], palette(r)
        cx, cy = r.ci.get(arp), r.ci.get(key)
        if cx or cy:  # the 95% intervals, in the method's colour
            bars = True
            # each drawn from lo to hi: a cluster-resampled ratio's interval need not hold its point value
            for drawn in (interval_bars(ax, [y], [cx["lo"]], [cx["hi"]], horizontal=True, ecolor=colour,
                                        elinewidth=1.2, capsize=3, clip_on=False) if cx else None,
                          interval_bars(ax, [x], [cy["lo"]], [cy["hi"]], horizontal=False, ecolor=colour,
                                        elinewidth=1.2, capsize=3, clip_on=False) if cy else None):
                if drawn is not None:
                    _, caps, lines = drawn
                    for a in (*caps, *lines):  # whole pixels in the method's colour, no lighter antialiased twin
                        a.set_antialiased(False)
        ax.scatter([x], [y], color=colour, s=64, marker=_marker(r, palette), label=display_name(r),
                   edgecolors="#222", linewidths=.4, clip_on=False, zorder=3)
    if min(xs) > 0 and max(xs) / min(xs) > 10:
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis, xs)
    ax.margins(x=0.08, y=0.1)
    ys = [r.metrics[key] for r in pts] + [r.ci[key][b] for r in pts if key in r.ci for b in ("lo", "hi")]
    if min(ys) >= 0:  # no negative accuracy on the axis (an all-zero column is drawn on [0, 1])
        ax.set_ylim(0, None if max(ys) > 0 else 1)
    scale = ", log scale" if ax.get_xscale() == "log" else ""
    ax.set_xlabel(f"{arp}: mean training interactions of the top-{k} items{scale}")
    ax.set_ylabel(header(key))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.grid(alpha=.3)
    fig.tight_layout()
    caption = (f"{header(key)} against popularity bias ({arp}), one point per method"
               + ("; bars: 95% intervals" if bars else ""))
    return _chart(fig, f"{key} vs {arp}", caption, sum(1 for r in pts if r.metrics[key] or r.metrics[arp]),
                  {r.method: palette(r) for r in pts})


# ------------------------------------------------------------------ order sensitivity


def positions(row: ScoreRow) -> dict[int, float]:
    """{candidate position (1-based): HR@1 over the samples whose target stood there} of one row."""
    return {int(m.group(1)): v for k, v in row.metrics.items() if (m := _AT.match(k)) and _number(v)}


def order_parts(rows: list[ScoreRow], palette, samples: list[dict]) -> list[str]:
    """Order spread and HR@1 by the target's position per method; [] unless the task was built with several
    candidate orders. Rows aggregated over the orders (Borda) have one ranking per user: no spread, left out
    (scored now without one; an older scores.json's 0 is left out by `derived_from`)."""
    own = [r for r in rows if spread_key(r) and positions(r) and not r.extra.get("derived_from")]
    if not own:
        return []
    task = rows[0].task
    key = spread_key(own[0])
    ts = [s for s in samples if s.get("task") == task and "target_position" in s]
    n_at = Counter(int(s["target_position"]) for s in ts)
    sizes = {shown_count(s) for s in ts}
    n_cand = sizes.pop() if len(sizes) == 1 else None
    # mixed sizes (PerRecBench's groups of 2-4 users): each position's HR@1 with no position bias, the mean of
    # 1/(candidates) over its samples, falls with the position; drawn when every row rests on the same samples
    chances = [{p: r.metrics.get(f"target at {p}: chance") for p in sorted(positions(r))} for r in own]
    chance = chances[0] if n_cand is None and chances and all(
        c == chances[0] and all(_number(v) for v in c.values()) for c in chances) and chances[0] else None
    ks = {int(r.metrics["orders"]) for r in own if _number(r.metrics.get("orders"))}
    where = sorted({p for r in own for p in positions(r)})
    left = [r for r in own if _number(r.metrics.get(LEFT_OUT)) and r.metrics[LEFT_OUT]]
    spread = _table(["method", "candidate orders", header(key)] + (["users / groups left out"] if left else []),
                    [[display_name(r), fmt(int(r.metrics["orders"])) if _number(r.metrics.get("orders")) else "–",
                      value_text(r, key)] + ([fmt(int(r.metrics.get(LEFT_OUT) or 0))] if left else []) for r in own])
    # the samples each position's HR@1 rests on: the row's own (its complete users' samples, `order_metrics`);
    # one column when every row rests on the same, else one per row (a `--limit` row covers fewer users)
    counts = [{p: r.metrics.get(f"target at {p}: samples") for p in where} for r in own]
    known = all(_number(c.get(p)) for c in counts for p in where)
    if known and all(c == counts[0] for c in counts):
        by_pos = _table(["target at position", "samples"] + (["no position bias (mean 1/n)"] if chance else [])
                        + [display_name(r) for r in own],
                        [[str(p), fmt(int(counts[0][p]))] + ([fmt(chance.get(p))] if chance else [])
                         + [fmt(positions(r).get(p)) for r in own] for p in where])
    elif known:
        by_pos = _table(["target at position"] + [f"{display_name(r)} (samples)" for r in own],
                        [[str(p)] + [f"{fmt(positions(r).get(p))} ({fmt(int(c[p]))})" for r, c in zip(own, counts)]
                         for p in where])
    else:  # scores from before the counts were kept: the build's samples per position, as counted then
        by_pos = _table(["target at position", "samples in the build"] + [display_name(r) for r in own],
                        [[str(p), str(n_at[p]) if n_at else "–"] + [fmt(positions(r).get(p)) for r in own]
                         for p in where])
    random_hr1 = f" A random ranker's expected HR@1 is 1/{n_cand} = {fmt(1 / n_cand)} (the dotted line)." \
        if n_cand else (" The samples show different numbers of candidates (n), and later positions exist only in "
                        "the larger ones, so even a ranker with no position bias scores lower there: the dotted line "
                        "and the column \"no position bias\" give its expected HR@1 at each position, the mean of "
                        "1/n over that position's samples; read a method's bias against that line, not against a "
                        "flat one." if chance else
                        " The samples show different numbers of candidates, so even a ranker with no position bias "
                        "scores lower at the later positions, which only the larger ones have: compare positions "
                        "with care.")
    derived = [r for r in rows if r.extra.get("derived_from")]  # scored without a spread (`aggregated`)
    return [f"<h3>{e(task)}: order sensitivity</h3>",
            f"<p>Each user was asked under {'/'.join(map(str, sorted(ks))) or 'several'} orders of the same "
            "candidates (PerRecBench: a group's users; a group of fewer users than that in as many orders as it has "
            "users), the target's position (PerRecBench: the most-liked user's) "
            "balanced over the orders. The order spread is, for each user (PerRecBench: group), the standard "
            f"deviation (population, ddof = 0) of its {e(key.removesuffix(' order spread'))} across its orders, "
            "averaged over the users: 0 means every user's answer scores the same under all of its orders, and the "
            "larger it is, the more a user's score moves when only the order changes. Only users who "
            "answered under every order count, for the spread and for the HR@1 by position below"
            + (" (users / groups left out: not all orders answered, or an answer the headline metric drops; such a "
               "row's HR@1 by position rests on fewer samples than counted there)" if left else "")
            + ".</p>",
            spread,
            ("<div class='charts'>" + _position_chart(own, where, n_cand, palette, chance) + "</div>"
             if any(v for r in own for v in positions(r).values()) else
             "<p class='nochart'>No chart of HR@1 by the target's position: it is 0 for every method and position."
             "</p>"),
            ("<p>HR@1 by the target's position among the candidates: a flat line means no position bias (the top "
             "answer does not depend on where the target is shown); a line falling from left to right means the "
             "method favours candidates shown first." if n_cand else
             "<p>HR@1 by the target's position among the candidates: a line that keeps its distance to what no "
             "position bias gives means none (the top answer does not depend on where the target is shown); one "
             "falling below it from left to right means the method favours candidates shown first.")
            + f"{random_hr1} Each position rests on the samples counted beside it: with few, read small differences "
            "as noise.</p>",
            by_pos]\
        + ([f"<p class='note'><small>{e(', '.join(display_name(r) for r in derived))}: one ranking per user "
            "aggregated over the orders (Borda), so no order spread or position bias of its own; its accuracy is "
            "in the table above.</small></p>"] if derived else [])


def _position_chart(rows: list[ScoreRow], where: list[int], n_cand: int | None, palette,
                    chance: dict[int, float] | None = None) -> str:
    from matplotlib.ticker import MaxNLocator

    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for r in rows:
        pos = positions(r)
        xs = [p for p in where if p in pos]
        # not antialiased: where two methods' lines meet (HR@1 = 0 is common) neither turns into a blend of both
        ax.plot(xs, [pos[p] for p in xs], color=palette(r), label=display_name(r), linewidth=1.6, markersize=6,
                clip_on=False, antialiased=False, **palette.style(r.method))
    if n_cand:
        ax.axhline(1 / n_cand, color="#000000", linestyle=":", linewidth=1.2, label=f"random ranker (1/{n_cand})")
    elif chance:
        xs = [p for p in where if p in chance]
        ax.plot(xs, [chance[p] for p in xs], color="#000000", linestyle=":", linewidth=1.2,
                label="no position bias (mean 1/n)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("target's position among the candidates")
    ax.set_ylabel("HR@1")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    ax.grid(alpha=.3)
    fig.tight_layout()
    return _chart(fig, "HR@1 by target position", "HR@1 by the target's candidate position (position bias)",
                  sum(1 for r in rows for v in positions(r).values() if v), {r.method: palette(r) for r in rows})


# ------------------------------------------------------------------ memorization beside accuracy


def probe_results(path: Path | None, dataset: str | None) -> list[tuple[str, dict]]:
    """(name, result) of the memorization probe results at `path` (one `NAME.json` or a folder of them) or,
    without one, in the probe's default folder for `dataset` (<data home>/runs/probe-memorization/DATASET,
    where `recharness probe memorization` writes). Results of another dataset and files that are no probe
    result are left out, with a warning on the console; a `path` that does not exist is an error (a default
    folder that does not, is none), and so is a file `path` (named by the user) that is unreadable, no probe
    result or one of another dataset."""
    from recharness.core.errors import ConfigError, InputError
    from recharness.core.paths import dataset_runs_name, runs_dir

    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"--memorization {path}: no such file or folder (a `recharness probe memorization` "
                              "result NAME.json, or the folder holding them)")
    elif dataset:
        path = runs_dir() / "probe-memorization" / dataset_runs_name(dataset)
    if path is None or not path.exists():
        return []
    named = not path.is_dir()  # one file the user named: what is wrong with it is an error, not a silent gap
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out = []
    for f in files:
        try:
            res = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as ex:
            problem = f"not a readable JSON file ({type(ex).__name__}: {str(ex)[:200]})"
        else:
            problem = None
            if not isinstance(res, dict) or not isinstance(res.get("kinds"), dict):
                problem = "not a `recharness probe memorization` result (no \"kinds\" object)"
            elif dataset and res.get("dataset") not in (None, dataset, dataset_runs_name(dataset)):
                # (a run built from a dataset's path records the path; the probe, the dataset's name)
                problem = f"a memorization probe result of dataset {res.get('dataset')!r}, not of this run's {dataset!r}"
        if problem is None:
            out.append((f.stem, res))
        elif named:
            raise InputError(f, f"--memorization: {problem}")
        else:  # found in a folder: left out, and said
            logging.getLogger(__name__).warning("memorization section: %s left out: %s", f, problem)
    return out


def _same_model(probed, answered) -> bool:
    """Whether a probe result's model is the one a row's answers came from: the same backend and model (where and
    how it was served, e.g. `base_url` or a local server's extra body, aside); a side that does not say (an import,
    an older result) is not refused."""
    if not isinstance(probed, dict) or not isinstance(answered, dict) or answered.get("backend") == "imported":
        return True
    keys = ("backend", "model", "sha256", "gguf_sha256", "finetune")
    return ({k: probed.get(k) for k in keys if k in probed or k in answered}
            == {k: json.loads(json.dumps(answered.get(k), default=str)) for k in keys if k in probed or k in answered})


def _model_name(identity) -> str:
    return str(identity.get("model") or identity.get("backend")) if isinstance(identity, dict) else "an unknown model"


def _coverage_text(c: dict | None) -> str:
    if not c or not _number(c.get("value")):
        return "–"
    return f"{fmt(c['value'])} [{fmt(c['lo'])}, {fmt(c['hi'])}] ({c.get('hits')}/{c.get('n')})"


def _copied_text(entry: dict, rule: str) -> str:
    """", 1 equal to a shown line" when exact answers of the `full` rule equal a shown line's fields: there a copy
    of the context cannot be told from recall."""
    n = entry.get("copied_hits") if rule == "full" else None
    return f", {n} equal to a shown line" if isinstance(n, int) and n > 0 else ""


def _judged_text(res: dict) -> str:
    """How many items the probe judged, and the probes (of any kind) it could not: failed, empty, unanswered."""
    n = res["kinds"]["item"]["title"].get("n")
    left = {k: res.get(k) for k in ("failed", "empty", "unanswered") if isinstance(res.get(k), int) and res.get(k) > 0}
    return (f"{n} items answered and judged (limit {res.get('limit')}, seed {res.get('seed')}"
            + ("; not judged, of every kind: " + ", ".join(f"{v} {k}" for k, v in left.items()) if left else "")
            + ")")


def _decile_parts(matched: list) -> list[str]:
    """Item coverage (title) by popularity decile, one row per probe result that has it: whether recall
    concentrates on popular items."""
    rows = []
    for name, res, _ in matched:
        by = (res["kinds"].get("item") or {}).get("by_decile")
        if not isinstance(by, dict) or not by:
            continue
        cells = []
        for d in range(1, 11):
            c = by.get(str(d), by.get(d)) or {}
            cells.append(f"{fmt(c['value'])} ({c.get('hits')}/{c.get('n')})" if _number(c.get("value")) else "–")
        rows.append([name] + cells)
    if not rows:
        return []
    return ["<p>Item coverage (title) by popularity decile: items ranked by their interactions in the dataset, "
            "decile 1 the most popular tenth; hits / probed items in each (– where none was probed).</p>",
            _table(["method"] + [f"decile {d}" for d in range(1, 11)], rows)]


def _split_text(part: dict) -> str:
    if not part.get("n"):
        return "–"
    if _number(part.get("lo")):
        return f"{fmt(part['value'])} [{fmt(part['lo'])}, {fmt(part['hi'])}]"
    return f"{fmt(part.get('value'))}" + (f" ({part['why']})" if part.get("why") else "")


def subset_score(task, samples: list[dict], recs: dict[str, dict], metric: str, *, resamples: int,
                 seed: int) -> dict:
    """`metric` of `task` on `samples` by the task's own `score`, with the 95% interval its `units` give
    (resampled as the score stage does; none below MIN_UNITS independent units): {n, value, lo, hi | why}."""
    import numpy as np

    from recharness.metrics.bootstrap import MIN_UNITS, percentile_ci
    from recharness.metrics.registry import wants_ci

    if not samples:
        return {"n": 0}
    out = {"n": len(samples), "value": task.score(samples, recs).get(metric)}
    units = (task.units(samples, recs) or {}).get(metric) if wants_ci(metric) and resamples else None
    if units is None:
        return out
    k = units.independent_support()
    if k < MIN_UNITS:
        out["why"] = f"no CI: {k} unit{'s' if k != 1 else ''}"
        return out
    ci = percentile_ci(np.concatenate([units.replicates(w) for w in units.counts(resamples, seed)]))
    if ci:
        out.update(lo=ci[0], hi=ci[1])
    return out


def memorized_split(out: Path, rows: list[ScoreRow], memorized: dict[str, set[str]], heads: dict[str, str | None],
                    probed: dict[str, set[str]] | None = None) -> list[dict]:
    """Per row of `rows` (model rows; `memorized` by predictions-file name) and task whose samples have a
    `target`: the task's headline metric on the samples (those the row was scored on) whose target is
    memorized vs the others, re-scored from the predictions by the task itself. With `probed` (the items the
    probe asked), "other" is the probed items not reproduced, and samples whose target was never asked are
    only counted (`unprobed`): an item the probe never asked about is not known to be unmemorized."""
    from recharness.metrics.bootstrap import DEFAULT_RESAMPLES
    from recharness.runner.imported import as_given_samples
    from recharness.runner.pipeline import methods_by_task

    row_of = {(r.method, r.task): r for r in rows}
    st = next((r.extra["ci_settings"] for r in rows if r.extra.get("ci_settings")), {})
    resamples, seed = int(st.get("resamples", DEFAULT_RESAMPLES)), int(st.get("seed", 0))
    found = []
    for t, task, task_samples, methods in methods_by_task(out, references=False, only=set(memorized)):
        key = heads.get(t)
        for name, _, recs, extra in methods:
            row = row_of.get((name, t))
            mem = memorized.get(extra.get("derived_from") or name)
            if row is None or key is None or mem is None:
                continue
            samples = task_samples if row.coverage is None else [s for s in task_samples if s["id"] in recs]
            samples = as_given_samples(samples, recs)  # an import scored against its own targets
            if not samples or any(s.get("target") is None for s in samples):
                continue
            asked = (probed or {}).get(extra.get("derived_from") or name)
            parts = {"memorized": [s for s in samples if str(s["target"]) in mem],
                     "other": [s for s in samples if str(s["target"]) not in mem
                               and (asked is None or str(s["target"]) in asked)]}
            found.append({"row": row, "task": t, "metric": key,
                          "unprobed": None if asked is None else len(samples) - sum(map(len, parts.values())),
                          **{k: subset_score(task, v, recs, key, resamples=resamples, seed=seed)
                             for k, v in parts.items()}})
    return found


def memorization_parts(out: Path, rows: list[ScoreRow], dataset: str | None, heads: dict[str, str | None],
                       path: Path | None = None) -> list[str]:
    """The probe results named as methods of the run (a predictions file's name; its derived rows too) beside
    their accuracy; [] when none is."""
    from recharness.core.errors import RecharnessError

    matched = []
    for name, res in probe_results(path, dataset):
        named = [r for r in rows if r.kind == "model" and name in (r.method, r.extra.get("derived_from"))]
        own = [r for r in named if _same_model(res.get("model"), r.extra.get("model"))]
        for r in named:
            if r not in own:  # a result of another model under this name (`probe --name`): not this row's recall
                logging.getLogger(__name__).warning(
                    "memorization section: %s left out for %s: the probe asked %s, the row's answers are %s's",
                    name, r.method, _model_name(res.get("model")), _model_name(r.extra.get("model")))
        if own:
            matched.append((name, res, own))
        elif path is not None and Path(path).is_file():  # the file the user named: why it shows nowhere
            logging.getLogger(__name__).warning("memorization section: %s left out: no model of the run is named "
                                                "%r (the result's file name)", path, name)
    if not matched:
        return []
    kinds = [("item", "title", "item coverage (title)"), ("item", "full", "item (title and genres)"),
             ("user", "full", "user coverage"), ("interaction", "item", "interaction coverage (movie id)"),
             ("interaction", "full", "interaction (movie id and rating)")]
    body = [[name] + [_coverage_text(res["kinds"].get(k, {}).get(rule)) + _copied_text(res["kinds"].get(k, {}), rule)
                      for k, rule, _ in kinds]
            for name, res, _ in matched]
    parts = ["<h2>Memorization beside accuracy</h2>",
             "<p>What the model reproduces of the dataset's own files (<code>recharness probe memorization</code>): "
             "the share of probed ids answered exactly, with its exact 95% interval and hits / probed; where an "
             "exact answer equals one of the lines shown as context, how many did (indistinguishable from copying the context).</p>",
             _table(["method"] + [h for *_, h in kinds], body)]
    parts += _decile_parts(matched)
    memorized = {name: {str(i) for i in res["memorized_items"]} for name, res, _ in matched
                 if isinstance(res.get("memorized_items"), list)}
    if not memorized:
        return parts
    probed = {name: {str(i) for i in res["probed_items"]} for name, res, _ in matched
              if isinstance(res.get("probed_items"), list)}
    try:
        split = memorized_split(out, [r for _, _, own in matched for r in own], memorized, heads, probed)
    except RecharnessError as ex:  # a moved run without its dataset, an edited predictions file: said, not hidden
        return parts + [f"<p class='note'><small>No accuracy split: {e(str(ex))}</small></p>"]
    if not split:
        return parts
    parts.append(_table(["method", "task", "metric", "memorized targets (n)", "value [95% interval]",
                         "other targets (n)", "value [95% interval]"],
                        [[display_name(x["row"]), x["task"], header(x["metric"]), str(x["memorized"]["n"]),
                          _split_text(x["memorized"]), str(x["other"]["n"]), _split_text(x["other"])] for x in split]))
    asked = "; ".join(f"{name}: {_judged_text(res)}" for name, res, _ in matched
                      if name in memorized and (res["kinds"].get("item") or {}).get("title"))
    parts.append("<p>Memorized targets: samples whose target item the model reproduced (its title) in the probe. "
                 "<b>Higher accuracy on memorized targets than on the others suggests recall rather than "
                 "recommendation</b>: the model may name the item because it has read the dataset, not because "
                 "it fits the user. Memorized items are often popular ones, which any recommender hits more "
                 "often: compare with the head / tail accuracy of the references above. "
                 + ("\"Other\" targets are those the probe asked about and the model did not reproduce; samples "
                    "whose target the probe never asked about are left out of both ("
                    + "; ".join(f"{e(display_name(x['row']))} on {e(x['task'])}: {x['unprobed']}" for x in split
                                if x.get("unprobed") is not None) + "). "
                    if any(x.get("unprobed") is not None for x in split) else "")
                 + ((("For " + ", ".join(dict.fromkeys(e(display_name(x["row"])) for x in split
                                                     if x.get("unprobed") is None)) + ", \"other\" targets")
                     if any(x.get("unprobed") is not None for x in split) else "\"Other\" targets")
                    + " include items the probe never asked about (a result written before the probe recorded the "
                    "items it asked). " if any(x.get("unprobed") is None for x in split) else "")
                 + (f"({e(asked)})" if asked else "") + "</p>")
    return parts

"""report.html beside accuracy: popularity bias, order sensitivity and memorization (report/fairness.py).

Each section is checked against hand-worked values: hand-built score rows for what the page shows of them,
and tiny LLMRec direct runs on ML-1M whose answers are written by hand, so every split and position is
known (a ranking that keeps the shown order hits at position 1 only; one that puts the target first
scores NDCG@10 = 1, third 1/log2(4) = 0.5, last of 20 0). The charts are decoded pixel by pixel, as in
test_report_browser.py: each method's colour must be drawn."""

from __future__ import annotations

import base64
import io
import json
import math
import re
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from recharness.core.errors import ConfigError  # noqa: E402
from recharness.core.rundir import RunDir  # noqa: E402
from recharness.core.types import ScoreRow  # noqa: E402
from recharness.metrics.bootstrap import resample_counts  # noqa: E402
from recharness.report import fairness, html  # noqa: E402
from recharness.report.tables import load_scores, write_scores  # noqa: E402
from recharness.runner import pipeline  # noqa: E402

BLUE, RED = "#1f77b4", "#d62728"  # the page's first two model colours (html.Palette.MODELS)


def _capture(monkeypatch) -> list:
    """The figures the section functions draw, kept open for their data (the PNG is still written)."""
    figs = []
    real = fairness._chart

    def keep(fig, *a, **kw):
        fig.canvas.draw()
        figs.append(fig)
        return real(fig, *a, **kw)

    monkeypatch.setattr(fairness, "_chart", keep)
    return figs


def _pixels(text: str) -> list[Counter]:
    """Per chart in `text`: its decoded pixels' colours counted (#rrggbb)."""
    from PIL import Image

    out = []
    for b in re.findall(r"src='data:image/png;base64,([^']+)'", text):
        img = Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB")
        out.append(Counter("#%02x%02x%02x" % c for c in (img.get_flattened_data() if hasattr(img, "get_flattened_data")
                                                  else img.getdata())))
    return out


def _marks_as_the_browser_test_reads_them(alt: str, px: Counter, colours: set[str]) -> None:
    """test_report_browser's rule for every chart of a page: marks in the methods' colours, and no clearly
    coloured mark (40+ pixels) in a colour no method has (e.g. an antialiased lighter twin of a line)."""
    from test_report_browser import _check_marks

    _check_marks(alt, {c: n for c, n in px.items() if c != "#ffffff" and n >= 10}, colours)


def _ci(lo, hi):
    return {"lo": lo, "hi": hi, "resamples": 1000}


# ------------------------------------------------------------------ accuracy vs popularity bias


def _beyond_rows():
    llm = ScoreRow("llm<b>x</b>", "sequential",
                   {"NDCG@10": 0.4, "HR@10": 0.6, "ARP@10": 50.0, "coverage@10": 0.12, "Gini@10": 0.75,
                    "novelty@10": 9.25, "HR@10 head": 0.8, "HR@10 tail": 0.2}, 20,
                   ci={"NDCG@10": _ci(0.3, 0.5), "ARP@10": _ci(40.0, 60.0), "HR@10 head": _ci(0.6, 0.9)})
    pop = ScoreRow("popularity", "sequential",
                   {"NDCG@10": 0.3, "ARP@10": 2000.0, "coverage@10": 0.003, "Gini@10": 0.99, "novelty@10": 2.5,
                    "HR@10 head": 0.7, "HR@10 tail": 0.0}, 20, kind="reference",
                   ci={"NDCG@10": _ci(0.2, 0.4), "ARP@10": _ci(2000.0, 2000.0)})
    rnd = ScoreRow("random", "sequential", {"NDCG@10": 0.1, "ARP@10": 30.0, "coverage@10": 0.9, "Gini@10": 0.2,
                                            "novelty@10": 11.0}, 20, kind="reference")
    return [llm, pop, rnd]


def test_accuracy_against_popularity_chart_and_table(monkeypatch):
    figs = _capture(monkeypatch)
    rows = _beyond_rows()
    palette = html.Palette(rows)
    text = "".join(fairness.popularity_parts(rows, "NDCG@10", palette))
    # the table: method, accuracy, head, tail, coverage, Gini, ARP, novelty; values over their intervals
    heads = re.findall(r"<th>([^<]*)</th>", text)
    assert heads == ["method", "NDCG@10 ↑", "HR@10 head ↑", "HR@10 tail ↑", "coverage@10", "Gini@10", "ARP@10",
                     "novelty@10"]
    first = re.findall(r"<td>([^<]*)</td>", text)[:8]
    assert first == ["llm&lt;b&gt;x&lt;/b&gt;", "0.400 [0.300, 0.500]", "0.800 [0.600, 0.900]", "0.200", "0.120",
                     "0.750", "50.000 [40.000, 60.000]", "9.250"]
    assert "<b>x</b>" not in text  # the method name is escaped everywhere, legend aside (a picture)
    assert "<td>2000.0 [2000.0, 2000.0]</td>" in text and "<td>random (ref)</td>" in text
    # the chart: ARP spans 30 … 2000 (> 10×): log x axis; one point per method where its values are
    ax = figs[-1].axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel() and ax.get_ylabel() == "NDCG@10 ↑"
    from matplotlib.collections import LineCollection, PathCollection

    points = [tuple(map(float, c.get_offsets()[0])) for c in ax.collections if isinstance(c, PathCollection)]
    assert points == [(50.0, 0.4), (2000.0, 0.3), (30.0, 0.1)]
    # error bars for the llm (x: 40-60, y: 0.3-0.5) in its colour; popularity's zero-width ARP bar, random none
    blue = tuple(np.round(np.array([0x1f, 0x77, 0xb4]) / 255, 3))
    llm_segs = {tuple(tuple(round(float(v), 12) for v in p) for p in seg) for coll in ax.collections
                if isinstance(coll, LineCollection) and tuple(np.round(coll.get_color()[0][:3], 3)) == blue
                for seg in coll.get_segments()}
    assert ((40.0, 0.4), (60.0, 0.4)) in llm_segs and ((50.0, 0.3), (50.0, 0.5)) in llm_segs
    # the picture: each method's colour drawn (the model blue, the references' greys)
    (px,) = _pixels(text)
    assert px[BLUE] >= 40, px.most_common(12)
    assert px[palette.colours["popularity"]] >= 20 and px[palette.colours["random"]] >= 20, px.most_common(12)
    assert palette.colours["popularity"] == "#303030" and palette.colours["random"] == "#8c8c8c"
    _marks_as_the_browser_test_reads_them("NDCG@10 vs ARP@10", px, {BLUE, "#303030", "#8c8c8c"})


def test_popularity_section_needs_two_methods_with_arp_and_accuracy(monkeypatch):
    figs = _capture(monkeypatch)
    rows = _beyond_rows()
    assert fairness.popularity_parts(rows[:1], "NDCG@10", html.Palette(rows)) == []
    no_acc = [rows[0], ScoreRow("x", "sequential", {"ARP@10": 10.0}, 20)]  # ARP without the headline: no point
    assert fairness.popularity_parts(no_acc, "NDCG@10", html.Palette(no_acc)) == []
    assert fairness.popularity_parts(rows, None, html.Palette(rows)) == []
    # a "headline" that is no accuracy (4 candidates: no NDCG@10, html's fallback picks the order spread)
    spread = [ScoreRow(r.method, r.task, {**r.metrics, "NDCG@10 order spread": 0.1}, 20, kind=r.kind) for r in rows]
    assert fairness.popularity_parts(spread, "NDCG@10 order spread", html.Palette(spread)) == []
    # ARP within 10× (30 … 50): a linear axis
    lin = [rows[0], rows[2]]
    text = "".join(fairness.popularity_parts(lin, "NDCG@10", html.Palette(lin)))
    assert "alt='NDCG@10 vs ARP@10'" in text
    ax = figs[-1].axes[0]
    assert ax.get_xscale() == "linear" and "log scale" not in ax.get_xlabel()
    # the bound: 9× stays linear, 11× is drawn on a log axis and says so
    for ratio, scale in ((9, "linear"), (11, "log")):
        pair = [lin[0], ScoreRow("random", "sequential", {**lin[1].metrics, "ARP@10": 50.0 * ratio}, 20,
                                 kind="reference")]
        fairness.popularity_parts(pair, "NDCG@10", html.Palette(pair))
        ax = figs[-1].axes[0]
        assert ax.get_xscale() == scale and ("log scale" in ax.get_xlabel()) == (scale == "log")


# ------------------------------------------------------------------ tiny hand-answered direct runs


def _record(sample: dict, ranking: list[str], fp: str, name: str) -> dict:
    return {"id": sample["id"], "task": sample["task"], "build": fp, "output": ", ".join(ranking),
            "parsed": {"ranking": ranking, "how": "numbers", "out_of_range": 0, "partial": False}, "valid": True,
            "model": {"backend": "test", "model": name}}


def _write_predictions(out, name: str, records: list[dict]) -> None:
    rd = RunDir(out)
    rd.predictions_dir.mkdir(parents=True, exist_ok=True)
    rd.predictions(name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _at(sample: dict, place: int | None) -> list[str]:
    """The candidates with the target put at `place` (1-based; None: last)."""
    others = [c for c in sample["candidates"] if c != sample["target"]]
    k = len(others) if place is None else place - 1
    return others[:k] + [sample["target"]] + others[k:]


@pytest.fixture(scope="module")
def orders_run(ml1m, tmp_path_factory):
    """LLMRec direct, 5 users × 4 orders of 4 candidates: every user's target at each position once.
    `shown` ranks the candidates as shown (HR@1 = 1 exactly at position 1), `reversed` the other way (at 4)."""
    out = tmp_path_factory.mktemp("orders") / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=5, options={"orders": 4, "n_candidates": 4})
    info, samples = RunDir(out).load_build()
    _write_predictions(out, "shown", [_record(s, list(s["candidates"]), info["fingerprint"], "shown") for s in samples])
    _write_predictions(out, "reversed", [_record(s, list(s["candidates"])[::-1], info["fingerprint"], "reversed")
                                         for s in samples])
    write_scores(pipeline.score(out, references=False, resamples=200), out)
    return out, samples


def test_order_sensitivity_section_shows_position_bias_against_random(orders_run, monkeypatch):
    out, samples = orders_run
    assert len(samples) == 20 and Counter(s["target_position"] for s in samples) == {1: 5, 2: 5, 3: 5, 4: 5}
    rows = load_scores(out)
    assert [r.method for r in rows] == ["reversed", "reversed (Borda over 4 orders)", "shown",
                                        "shown (Borda over 4 orders)"]  # predictions files in name order
    figs = _capture(monkeypatch)
    palette = html.Palette(rows)
    text = "".join(fairness.order_parts(rows, palette, samples))
    # the spread: the mean over users of the population std of a user's NDCG@10 across its 4 orders, the target
    # ranked at its position p (`shown`: 1/log2(p + 1)) or at 5 - p (`reversed`), worked out from the positions
    def spread(rank):
        per: dict = {}
        for s in samples:
            per.setdefault(s["order_of"], []).append(1 / math.log2(rank(s["target_position"]) + 1))
        return float(np.mean([np.std(v) for v in per.values()]))
    assert f"<td>shown</td><td>4</td><td>{spread(lambda p: p):.3f}</td>" in text
    assert f"<td>reversed</td><td>4</td><td>{spread(lambda p: 5 - p):.3f}</td>" in text
    # HR@1 by position (columns: reversed, shown): reversed hits exactly at 4, shown exactly at 1; 5 samples each
    table = text[text.index("<th>target at position</th>"):]
    assert "<th>samples</th><th>reversed</th><th>shown</th></tr>" in table
    assert re.findall(r"<tr><td>(\d)</td><td>(\d+)</td><td>([\d.]+)</td><td>([\d.]+)</td></tr>", table) == [
        ("1", "5", "0.000", "1.000"), ("2", "5", "0.000", "0.000"), ("3", "5", "0.000", "0.000"),
        ("4", "5", "1.000", "0.000")]
    assert "a flat line means no position bias" in text
    assert "A random ranker's expected HR@1 is 1/4 = 0.250" in text
    # the Borda rows aggregate the orders: named under the table, not drawn as a position line
    assert "reversed (Borda over 4 orders), shown (Borda over 4 orders): one ranking per user" in text
    ax = figs[-1].axes[0]
    lines = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}
    assert lines["shown"] == ([1, 2, 3, 4], [1.0, 0.0, 0.0, 0.0])
    assert lines["reversed"] == ([1, 2, 3, 4], [0.0, 0.0, 0.0, 1.0])
    assert list(lines["random ranker (1/4)"][1]) == [0.25, 0.25]
    assert len(lines) == 3
    (px,) = _pixels(text)
    assert palette.colours["reversed"] == BLUE and palette.colours["shown"] == "#2ca02c"
    assert px[BLUE] >= 40 and px["#2ca02c"] >= 40, px.most_common(12)
    assert px[RED] < 10  # the Borda row's colour (2nd model) is not drawn: no line of its own
    _marks_as_the_browser_test_reads_them("HR@1 by target position", px, {BLUE, "#2ca02c"})


def test_a_limited_rows_hr1_by_position_names_its_own_samples(orders_run, tmp_path):
    """A row run with --limit 8 (2 whole users of 5) rests on 2 samples a position, not the build's 5: the table
    said 5 beside it. Each row now carries its counts, and rows resting on different ones say so each."""
    import shutil

    from recharness.runner.coverage import record_run

    src, samples = orders_run
    out = tmp_path / "run"
    shutil.copytree(src, out)
    info, _ = RunDir(out).load_build()
    part = [s for s in samples if s["order_of"] in list(dict.fromkeys(x["order_of"] for x in samples))[:2]]
    _write_predictions(out, "part", [_record(s, list(s["candidates"]), info["fingerprint"], "part") for s in part])
    record_run(RunDir(out), "part", limit=len(part), tasks=None)
    rows = pipeline.score(out, references=False, resamples=0)
    byname = {r.method: r for r in rows}
    assert [byname["part"].metrics[f"target at {p}: samples"] for p in (1, 2, 3, 4)] == [2, 2, 2, 2]
    assert [byname["shown"].metrics[f"target at {p}: samples"] for p in (1, 2, 3, 4)] == [5, 5, 5, 5]
    text = "".join(fairness.order_parts(rows, html.Palette(rows), samples))
    table = text[text.index("<th>target at position</th>"):]
    assert "<th>samples</th>" not in table and "part [limit: n = 8 of 20] (samples)" in table
    assert re.search(r"<tr><td>1</td><td>1.000 \(2\)</td>", table), table[:600]
    assert "<td>1.000 (5)</td>" in table


def test_order_section_only_with_several_orders(orders_run):
    out, samples = orders_run
    rows = _beyond_rows()
    assert fairness.order_parts(rows, html.Palette(rows), samples) == []


def test_report_page_carries_the_order_section(orders_run):
    out, _ = orders_run
    page = html.write_report(load_scores(out), out).read_text(encoding="utf-8")
    assert "<h3>direct: order sensitivity</h3>" in page and "alt='HR@1 by target position'" in page
    # with 4 candidates there is no NDCG@10: the headline is HR@1, set against the popularity of the top-1 (a
    # complete answer's top 10 would be all 4 candidates: ARP@10 the candidates', not the method's)
    assert "alt='HR@1 vs ARP@1'" in page and "vs ARP@10" not in page and "ARP@10" not in page
    assert "Memorization beside accuracy" not in page  # no probe of these names anywhere


# ------------------------------------------------------------------ memorization beside accuracy


def _coverage(hits: int, n: int) -> dict:
    from recharness.probes.memorization import coverage

    return coverage([True] * hits + [False] * (n - hits))


@pytest.fixture(scope="module")
def memo_run(ml1m, tmp_path_factory):
    """LLMRec direct, 12 users, 20 candidates, two hand-answered methods and their probe results.

    llm-a: memorized = the targets of samples 0-5, each ranked first (NDCG@10 1); of the others, 6 and 7
    first, 8 third (0.5), 9-11 last (0): memorized 6 × 1.0 = 1.000, others (1 + 1 + 0.5) / 6 = 0.417.
    llm-b: memorized = the targets of samples 0 and 1 (and an item no sample has); 0 third, 1 last, 2-7 first,
    8-11 last: memorized (0.5 + 0) / 2 = 0.250 (2 users: no interval), others 6 / 10 = 0.600."""
    base = tmp_path_factory.mktemp("memo")
    out = base / "run"
    pipeline.build("llmrec", "ml-1m", out, tasks=["direct"], seed=0, limit=12)
    info, samples = RunDir(out).load_build()
    fp = info["fingerprint"]
    a = {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 3, 9: None, 10: None, 11: None}
    b = {0: 3, 1: None, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: None, 9: None, 10: None, 11: None}
    _write_predictions(out, "llm-a", [_record(s, _at(s, a[k]), fp, "llm-a") for k, s in enumerate(samples)])
    _write_predictions(out, "llm-b", [_record(s, _at(s, b[k]), fp, "llm-b") for k, s in enumerate(samples)])
    # not the defaults (1,000 resamples, seed 0): the split must take them from the score stage
    write_scores(pipeline.score(out, references=False, resamples=500, ci_seed=7), out)
    probes = base / "probes"
    probes.mkdir()

    def result(memorized, item=(6, 200), by_decile=None, **counts):
        return {"dataset": "ml-1m", "limit": 200, "seed": 0, "unanswered": 0, "memorized_items": memorized, **counts,
                "kinds": {"item": {"title": _coverage(*item), "full": _coverage(item[0] - 1, item[1]),
                                   **({"by_decile": by_decile} if by_decile else {})},
                          "user": {"full": _coverage(0, 200), "copied_hits": 0},
                          "interaction": {"full": _coverage(3, 200), "copied_hits": 2}}}

    targets = [s["target"] for s in samples]
    # by decile as the probe writes it (JSON: string keys; a decile with no probed item has no value)
    deciles = {str(d): _coverage(h, n) if n else {"value": None, "n": 0}
               for d, (h, n) in enumerate([(4, 20), (2, 20)] + [(0, 20)] * 7 + [(0, 0)], 1)}
    (probes / "llm-a.json").write_text(json.dumps(result(targets[:6], by_decile=deciles)))
    (probes / "llm-b.json").write_text(json.dumps(result([targets[0], targets[1], "no-such-item"], (2, 194),
                                                         failed=4, empty=2)))
    (probes / "llm-b.answers.jsonl").write_text('{"id": "item-1"}\n')  # the probe's answer log: not a result
    (probes / "someone-else.json").write_text(json.dumps(result(targets)))  # no method of the run
    other = base / "other-dataset"
    other.mkdir()
    (other / "llm-a.json").write_text(json.dumps({**result(targets), "dataset": "amazon2023"}))
    return out, samples, probes, other


def test_memorized_targets_split_by_hand(memo_run):
    out, samples, probes, _ = memo_run
    assert len({s["target"] for s in samples}) == 12  # distinct targets: the hand split holds
    page = html.write_report(load_scores(out), out, memorization=probes).read_text(encoding="utf-8")
    sec = page[page.index("<h2>Memorization beside accuracy</h2>"):]
    sec = sec[:sec.index("<h2>", 5)]
    # the probe's coverages, from its result file, with their exact intervals and hits / probed
    c = _coverage(6, 200)
    assert (f"<tr><td>llm-a</td><td>0.030 [{c['lo']:.3f}, {c['hi']:.3f}] (6/200)</td>") in sec
    assert c["lo"] == pytest.approx(0.0111, abs=1e-4) and c["hi"] == pytest.approx(0.0642, abs=1e-4)
    assert "<td>0.000 [0.000, 0.018] (0/200)</td>" in sec  # user coverage: none reproduced, the interval still open
    c3 = _coverage(3, 200)  # interaction: 3 exact, 2 of them equal to a shown line's fields
    assert f"<td>0.015 [{c3['lo']:.3f}, {c3['hi']:.3f}] (3/200), 2 equal to a shown line</td>" in sec
    assert "someone-else" not in sec  # a probe of no method of the run
    rows = re.findall(r"<tr><td>([^<]*)</td><td>direct</td><td>NDCG@10 ↑</td><td>(\d+)</td><td>([^<]*)</td>"
                      r"<td>(\d+)</td><td>([^<]*)</td></tr>", sec)
    assert [r[:2] for r in rows] == [("llm-a", "6"), ("llm-b", "2")]
    (_, _, mem_a, n_other_a, other_a), (_, _, mem_b, n_other_b, other_b) = rows
    assert mem_a == "1.000 [1.000, 1.000]" and n_other_a == "6"  # every memorized target hit first
    m = re.fullmatch(r"0\.417 \[([\d.]+), ([\d.]+)\]", other_a)
    assert m and 0 <= float(m.group(1)) < 0.417 < float(m.group(2)) <= 1, other_a
    assert mem_b == "0.250 (no CI: 2 units)" and n_other_b == "10"
    m = re.fullmatch(r"0\.600 \[([\d.]+), ([\d.]+)\]", other_b)
    assert m and float(m.group(1)) < 0.6 < float(m.group(2)), other_b
    assert "Higher accuracy on memorized targets than on the others suggests recall rather than " \
           "recommendation" in sec
    assert "llm-a: 200 items answered and judged (limit 200, seed 0)" in sec
    # what the probe could not judge is said, not counted as asked (it read "194 items asked")
    assert "llm-b: 194 items answered and judged (limit 200, seed 0; not judged, of every kind: 4 failed, " \
           "2 empty)" in sec
    # item coverage by popularity decile: hits / probed in each, – where none was probed
    assert ("<tr><td>llm-a</td><td>0.200 (4/20)</td><td>0.100 (2/20)</td>" + "<td>0.000 (0/20)</td>" * 7
            + "<td>–</td></tr>") in sec
    assert "decile 1 the most popular tenth" in sec and "<tr><td>llm-b</td><td>0.0" not in sec.split("decile 1 the")[1]


def test_split_values_are_the_tasks_own_and_the_intervals_the_score_stages(memo_run):
    """The split's numbers against the task's score on the hand-picked subsets: NDCG@10 = 1.0 / 0.41667."""
    out, samples, _, _ = memo_run
    rows = load_scores(out)
    split = fairness.memorized_split(out, rows, {"llm-a": {s["target"] for s in samples[:6]}},
                                     {"direct": "NDCG@10"})
    (x,) = split
    assert x["row"].method == "llm-a" and x["memorized"]["n"] == 6 and x["other"]["n"] == 6
    assert x["memorized"]["value"] == pytest.approx(1.0) and x["other"]["value"] == pytest.approx(2.5 / 6)
    assert (x["memorized"]["lo"], x["memorized"]["hi"]) == (1.0, 1.0)
    # "other" (samples 6-11, one unit each: 1, 1, 0.5, 0, 0, 0) resampled as the score stage was told to:
    # 500 resamples, seed 7
    other = np.array([1, 1, 0.5, 0, 0, 0])
    reps = np.concatenate([w @ other / 6 for w in resample_counts(6, 500, 7)])
    lo, hi = np.percentile(reps, [2.5, 97.5])
    assert (x["other"]["lo"], x["other"]["hi"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    seed0 = np.concatenate([w @ other / 6 for w in resample_counts(6, 1000, 0)])
    assert tuple(np.percentile(seed0, [2.5, 97.5])) != (lo, hi)  # the defaults would show
    # the whole row's NDCG@10 is (6 + 2.5) / 12: the split's parts add up to the table's value
    whole = next(r for r in rows if r.method == "llm-a").metrics["NDCG@10"]
    assert whole == pytest.approx(8.5 / 12)


def test_default_probe_folder_and_other_datasets(memo_run, monkeypatch, tmp_path):
    out, _, probes, other = memo_run
    from recharness.core import paths

    home = tmp_path / "runs"
    (home / "probe-memorization").mkdir(parents=True)
    (home / "probe-memorization" / "ml-1m").symlink_to(probes)
    monkeypatch.setattr(paths, "runs_dir", lambda: home)
    page = html.write_report(load_scores(out), out).read_text(encoding="utf-8")
    assert "<h2>Memorization beside accuracy</h2>" in page and "<tr><td>llm-a</td>" in page
    # a result of another dataset with a method's name says nothing: no empty section
    page = html.write_report(load_scores(out), out, memorization=other).read_text(encoding="utf-8")
    assert "Memorization beside accuracy" not in page
    with pytest.raises(ConfigError, match="no such file or folder"):
        html.write_report(load_scores(out), out, memorization=tmp_path / "missing")


def test_report_command_takes_memorization(memo_run):
    """`recharness report SUITE -o RUN --memorization PATH`: the section from those results; a PATH that does not
    exist is one error line, exit code 2."""
    import subprocess
    import sys

    out, _, probes, _ = memo_run
    def run(*extra):
        return subprocess.run([sys.executable, "-m", "recharness", "report", "llmrec", "-o", str(out), *extra],
                              capture_output=True, text=True, timeout=300)

    p = run("--memorization", str(probes / "llm-b.json"))
    assert p.returncode == 0, p.stderr
    page = RunDir(out).report_html.read_text(encoding="utf-8")
    assert "<tr><td>llm-b</td><td>direct</td><td>NDCG@10 ↑</td><td>2</td><td>0.250 (no CI: 2 units)</td>" in page
    assert "<tr><td>llm-a</td>" not in page.split("<h2>Memorization beside accuracy</h2>")[1].split("<h2>")[0]
    p = run("--memorization", str(probes / "missing.json"))
    assert p.returncode == 2 and p.stderr.strip().startswith("error: --memorization"), p.stderr


def test_other_targets_are_the_probed_ones_not_reproduced(memo_run):
    """With the probe's asked items, "other" is asked-but-not-reproduced: samples 6-8 of llm-a (NDCG@10 1, 1, 0.5),
    not 9-11, whose targets the probe never asked about (counted as unprobed, in neither part)."""
    out, samples, _, _ = memo_run
    targets = [s["target"] for s in samples]
    (x,) = fairness.memorized_split(out, load_scores(out), {"llm-a": set(targets[:6])}, {"direct": "NDCG@10"},
                                    probed={"llm-a": set(targets[:9])})
    assert x["memorized"]["n"] == 6 and x["other"]["n"] == 3 and x["unprobed"] == 3
    assert x["other"]["value"] == pytest.approx(2.5 / 3)
    # without the asked items (an older probe result), every non-memorized target is "other"
    (y,) = fairness.memorized_split(out, load_scores(out), {"llm-a": set(targets[:6])}, {"direct": "NDCG@10"})
    assert y["other"]["n"] == 6 and y["unprobed"] is None


def test_a_probe_of_another_model_under_a_rows_name_is_not_its_memorization(memo_run, tmp_path, caplog):
    """A result named like a row but made by another model (`probe --name llm-a -m other`): left out, said (before,
    the other model's memorized items split this row's accuracy); the same model served elsewhere is this row's.
    A run built from the dataset's path takes the results of that dataset's name."""
    import logging

    out, samples, probes, _ = memo_run
    res = json.loads((probes / "llm-a.json").read_text())
    d = tmp_path / "p"
    d.mkdir()
    (d / "llm-a.json").write_text(json.dumps({**res, "model": {"backend": "llamacpp", "model": "qwen"}}))
    with caplog.at_level(logging.WARNING):
        page = html.write_report(load_scores(out), out, memorization=d).read_text(encoding="utf-8")
    assert "Memorization beside accuracy" not in page and "the probe asked qwen" in caplog.text
    (d / "llm-a.json").write_text(json.dumps({**res, "model": {"backend": "test", "model": "llm-a",
                                                                "base_url": "http://elsewhere/v1"}}))
    page = html.write_report(load_scores(out), out, memorization=d).read_text(encoding="utf-8")
    assert "<h2>Memorization beside accuracy</h2>" in page
    from recharness.report.fairness import probe_results

    assert [n for n, _ in probe_results(probes, "/data/prepared/ml-1m")] == ["llm-a", "llm-b", "someone-else"]


def test_mixed_old_and_new_probe_results_state_the_other_targets_per_row(memo_run, tmp_path):
    """llm-a's result lists the items it asked, llm-b's (older) does not: the note says "other" leaves the unasked
    out for llm-a and includes them for llm-b (before, one sentence claimed the first for both)."""
    out, samples, probes, _ = memo_run
    targets = [s["target"] for s in samples]
    d = tmp_path / "p"
    d.mkdir()
    a = json.loads((probes / "llm-a.json").read_text())
    (d / "llm-a.json").write_text(json.dumps({**a, "probed_items": targets[:9]}))
    (d / "llm-b.json").write_text((probes / "llm-b.json").read_text())
    page = html.write_report(load_scores(out), out, memorization=d).read_text(encoding="utf-8")
    assert "llm-a on direct: 3" in page
    assert "For llm-b, \"other\" targets include items the probe never asked about" in page


def test_an_imported_row_or_a_model_served_elsewhere_keeps_its_probe_result():
    """An imported row's model says "imported" (it cannot be compared with a probe's), and a model run on another
    host with another extra body is the same model: neither is left out (the review of the first version)."""
    from recharness.report.fairness import _same_model

    probed = {"backend": "openai", "model": "qwen", "base_url": "http://127.0.0.1:8000/v1",
              "extra_body": {"repeat_penalty": 1.0}}
    assert _same_model(probed, {"backend": "imported", "model": "qwen", "file": "x.jsonl"})
    assert _same_model(probed, {"backend": "openai", "model": "qwen", "base_url": "http://gpu:8000/v1"})
    assert not _same_model(probed, {"backend": "openai", "model": "llama"})



def test_interval_bars_span_lo_to_hi_even_when_the_interval_misses_the_value():
    """A cluster-resampled ratio's interval need not hold its value (0.10 with [0.12, 0.20]): the chart draws the
    interval the table shows, not value − lo / hi − value clamped at 0 (which drew 0.10–0.20)."""
    plt = fairness._plt()
    fig, ax = plt.subplots()
    _, _, (lines,) = fairness.interval_bars(ax, [0, 1], [0.12, None], [0.20, None], horizontal=True)
    (seg,) = lines.get_segments()  # one interval: the row without one draws none
    assert [tuple(p) for p in seg] == [pytest.approx((0.12, 0)), pytest.approx((0.20, 0))]
    _, _, (vlines,) = fairness.interval_bars(ax, [3], [0.5], [0.9], horizontal=False)
    assert [tuple(p) for p in vlines.get_segments()[0]] == [pytest.approx((3, 0.5)), pytest.approx((3, 0.9))]
    assert fairness.interval_bars(ax, [0], [None], [None], horizontal=True) is None
    plt.close(fig)

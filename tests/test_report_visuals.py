"""The report's charts read well: header cells break only between words or after "_", reference greys are
dark enough to see as lines on white, epochs are whole numbers, nothing is clipped at the frame, and the
latency axis is labelled in plain decimals."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from recharness.core.types import ScoreRow  # noqa: E402
from recharness.report import html  # noqa: E402


def _capture(monkeypatch) -> list:
    """The figures the chart functions draw (instead of their PNGs)."""
    figs = []
    real = html._png

    def keep(fig):
        figs.append(fig)
        fig.canvas.draw()  # the tick labels as drawn
        return real(fig)

    monkeypatch.setattr(html, "_png", keep)
    return figs


def test_header_cells_never_break_mid_word_and_wrap_after_underscores():
    assert "th{font-size:.85em;white-space:normal;vertical-align:bottom;overflow-wrap:normal;" \
           "word-break:normal}" in html.STYLE
    rows = [ScoreRow("m", "t", {"unrecognised_rate": 0.1, "completion_tokens": 3.0}, 4)]
    table = html._score_table(rows, ["unrecognised_rate", "completion_tokens"], identities=False)
    assert "<th>unrecognised_<wbr>rate ↓</th>" in table and "<th>completion_<wbr>tokens</th>" in table


def test_reference_greys_are_dark_enough_for_lines_and_each_method_keeps_a_style():
    rows = [ScoreRow("llm", "t", {}, 1)] + [ScoreRow(f"ref{k}", "t", {}, 1, kind="reference") for k in range(17)]
    p = html.Palette(rows)
    greys = [int(p.colours[f"ref{k}"][1:3], 16) for k in range(17)]
    assert greys[0] == 0x30 and greys[-1] == 0x8c and greys == sorted(greys)  # #303030 … #8c8c8c, none lighter
    assert all(p.colours[f"ref{k}"] == f"#{g:02x}{g:02x}{g:02x}" for k, g in enumerate(greys))
    assert p.colours["llm"] == "#1f77b4"
    styles = [tuple(p.style(f"ref{k}").values()) for k in range(17)]
    assert len(set(styles)) == 17  # same grey or not, no two references share marker and dash


def test_plain_decimals_on_the_latency_axis(monkeypatch):
    assert [html._plain(x) for x in (0.004, 0.04, 0.4, 2, 2.5, 20, 1500)] == \
        ["0.004", "0.04", "0.4", "2", "2.5", "20", "1,500"]
    figs = _capture(monkeypatch)
    rows = [ScoreRow("llm", "ctr", {"AUC": 0.6, "latency_s": 0.4}, 8),
            ScoreRow("pop", "ctr", {"AUC": 0.5, "latency_s": 0.0009}, 8, kind="reference"),
            ScoreRow("dnn", "ctr", {"AUC": 1.0, "latency_s": 0.002}, 8, kind="reference")]
    assert html._latency_chart(rows, "AUC", html.Palette(rows)) is not None
    ax = figs[-1].axes[0]
    labels = [t.get_text() for t in ax.xaxis.get_ticklabels(which="both") if t.get_text()]
    assert labels and all("10^" not in x and "×" not in x and "$" not in x for x in labels), labels
    assert {"1", "10", "100"} <= set(labels)
    # the three rows' points, none at the top (AUC 1.0) cut by the frame
    assert sum(len(c.get_offsets()) for c in ax.collections) == 3
    for coll in ax.collections:
        assert coll.get_clip_on() is False
    lo, hi = ax.get_ylim()
    assert lo < 0.5 and hi > 1.0


def test_learning_curves_have_whole_epochs_and_unclipped_lines(monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    for name, vals in (("dnn", [0.5, 0.6, 0.62]), ("pnn", [0.55, 0.58, 0.57])):
        d = tmp_path / "models" / name
        d.mkdir(parents=True)
        (d / "train_log.jsonl").write_text("".join(
            json.dumps({"epoch": k + 1, "loss": 0.7, "metric": "auc", "valid": v, "best": max(vals[: k + 1]),
                        "seconds": 0.1}) + "\n" for k, v in enumerate(vals)))
    rows = [ScoreRow(n, "ctr", {"AUC": 0.5}, 4, kind="reference") for n in ("dnn", "pnn")]
    parts = html.training_section(tmp_path, html.Palette(rows))
    assert any("learning curves auc" in p for p in parts)
    ax = figs[-1].axes[0]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    lines = ax.get_lines()
    assert [ln.get_color() for ln in lines] == ["#303030", "#8c8c8c"]
    assert all(ln.get_clip_on() is False for ln in lines)
    assert lines[0].get_marker() != lines[1].get_marker()


def test_console_score_table_wraps_metric_headers_instead_of_cutting_them():
    from rich.console import Console

    from recharness.report.tables import to_rich, wrap_header

    assert wrap_header("completion_tokens") == "completion_\ntokens"
    assert wrap_header("NDCG@10") == "NDCG@10"
    rows = [ScoreRow(m, "seqrec", {"NDCG@10": 0.1, "completion_tokens": 31.0, "unrecognised_rate": 0.25,
                                   "invalid_top1_share": 0.5}, 4, kind=k)
            for m, k in (("qwen2.5-coder-0.5b-instruct", "model"), ("popularity", "reference"))]
    con = Console(width=80, record=True)
    for t in to_rich(rows):
        con.print(t)
    text = con.export_text()
    assert "…" not in text, text
    for piece in ("completion_", "tokens", "unrecognised_", "rate", "invalid_", "top1_share", "31.000", "0.250"):
        assert piece in text, (piece, text)


def test_console_puts_beyond_accuracy_in_its_own_table_and_says_why_cells_have_no_interval_once():
    from rich.console import Console

    from recharness.metrics.registry import metric_group
    from recharness.report.tables import to_rich

    assert metric_group("HR@10 head") == "beyond accuracy" and metric_group("HR@10") == "accuracy"  # specific wins
    assert metric_group("coverage@10") == metric_group("novelty@5") == "beyond accuracy"
    rows = [ScoreRow(m, "sequential", {"HR@10": 0.5, "coverage@10": 0.01, "HR@10 head": 1.0}, 3, kind=k,
                     extra={"no_interval": {"HR@10": "n too small: 3 units", "HR@10 head": "n too small: 1 unit"}})
            for m, k in (("some-model", "model"), ("popularity", "reference"))]
    tables = to_rich(rows)
    assert [t.title for t in tables] == ["sequential (n = 3)", "sequential (n = 3): beyond accuracy"]
    assert [[c.header for c in t.columns] for t in tables] == [["method", "HR@10 ↑"],
                                                               ["method", "coverage@10", "HR@10 head ↑"]]
    con = Console(width=100, record=True)
    for t in tables:
        con.print(t)
    text = con.export_text()
    assert "(no CI" not in text and "popularity (ref)" in text
    assert tables[0].caption == "No interval where a column has fewer than 5 independent units: 3 units."
    assert tables[1].caption == "No interval where a column has fewer than 5 independent units: 1 unit."
    many = [ScoreRow(m, "ctr", {"AUC": v}, 40, kind="model", ci={"AUC": {"lo": v - 0.1, "hi": v + 0.1, "top": True}},
                     extra={"ci_settings": {"resamples": 1000, "seed": 0}}) for m, v in (("a", 0.7), ("b", 0.6))]
    con = Console(width=200, record=True)
    con.print(to_rich(many)[0])
    assert "[lo, hi] = the 95% bootstrap interval" in con.export_text()  # printed, not eaten as markup


def test_the_headline_is_a_metric_of_the_family_never_a_qualified_one():
    from recharness.report.html import headline_metric

    # direct with 8 candidates has no NDCG@10: the headline is NDCG@5, not the order spread or a head/tail split
    assert headline_metric(None, "direct", ["HR@10 head", "NDCG@10 order spread", "HR@1", "NDCG@5"]) == "NDCG@5"
    assert headline_metric(None, "x", ["HR@10 head", "HR@1"]) == "HR@1"
    assert headline_metric(None, "x", ["NDCG@10 order spread"]) is None


def test_every_chart_with_nothing_but_zeros_is_a_line_saying_so():
    """No chart of all-zero (or missing) values, and none dropped silently: the group, latency, popularity and
    position charts say in one line why they are not drawn, as the headline bar chart does."""
    from recharness.report import fairness

    bd = {"conditions=1": {"NDCG@10": 0.0}, "conditions=2": {"NDCG@10": 0.0}}
    rows = [ScoreRow("m", "t", {"NDCG@10": 0.0, "latency_s": 0.2}, 8, extra={"breakdown": bd}),
            ScoreRow("pop", "t", {"NDCG@10": 0.0, "latency_s": 0.001}, 8, kind="reference", extra={"breakdown": bd})]
    text = "".join(html.task_section(rows, None, "t"))
    assert "<figure" not in text
    for line in ("No chart of NDCG@10: it is 0 (or missing) for every method.",
                 "No chart of NDCG@10 by conditions: it is 0 (or missing) for every method and group.",
                 "No chart of NDCG@10 against latency: NDCG@10 is 0 for every timed method."):
        assert f"<p class='nochart'>{line}</p>" in text, (line, text)
    # one timed method: no comparison to draw, and nothing to explain
    one = [ScoreRow("m", "t", {"NDCG@10": 0.0, "latency_s": 0.2}, 8), ScoreRow("x", "t", {"NDCG@10": 0.0}, 8)]
    assert "against latency" not in "".join(html.task_section(one, None, "t"))

    pop = [ScoreRow(m, "t", {"NDCG@10": 0.0, "ARP@10": 0.0}, 8, kind=k)
           for m, k in (("m", "model"), ("p", "reference"))]
    text = "".join(fairness.popularity_parts(pop, "NDCG@10", html.Palette(pop)))
    assert "<figure" not in text and "No chart of NDCG@10 against ARP@10: both are 0 for every method." in text
    pos = [ScoreRow(m, "t", {"NDCG@10 order spread": 0.0, "target at 1: HR@1": 0.0, "target at 2: HR@1": 0.0,
                             "orders": 2}, 8) for m in ("a", "b")]
    text = "".join(fairness.order_parts(pos, html.Palette(pos), []))
    assert "<figure" not in text
    assert "No chart of HR@1 by the target's position: it is 0 for every method and position." in text
    # a non-zero value anywhere: the chart, and no such line
    pos[0].metrics["target at 2: HR@1"] = 0.5
    text = "".join(fairness.order_parts(pos, html.Palette(pos), []))
    assert "<figure data-nonzero='1'" in text and "No chart" not in text


def test_console_score_table_marks_the_strongest_reference_its_caption_names():
    """The caption said "◆ Strongest reference by NDCG@10", but no row of the terminal table carried ◆."""
    from rich.console import Console

    from recharness.report.tables import STRONGEST, to_rich

    rows = [ScoreRow("some-model", "seqrec", {"NDCG@10": 0.1}, 4, kind="model"),
            ScoreRow("popularity", "seqrec", {"NDCG@10": 0.2}, 4, kind="reference",
                     extra={"strongest_reference": "NDCG@10"})]
    con = Console(width=100, record=True)
    for t in to_rich(rows):
        con.print(t)
    text = con.export_text()
    assert STRONGEST in text and f"popularity (ref) {STRONGEST}" in text, text


def test_a_latency_timed_under_load_says_so_in_the_legend(monkeypatch):
    """A model timed with 8 requests in flight holds the server's queue in its latency: the chart's legend says it,
    beside references timed as single calls."""
    figs = _capture(monkeypatch)
    rows = [ScoreRow("llm", "ctr", {"AUC": 0.6, "latency_s": 0.4, "latency_concurrency": 8.0}, 8),
            ScoreRow("llm1", "ctr", {"AUC": 0.6, "latency_s": 0.4, "latency_concurrency": 1.0}, 8),
            ScoreRow("pop", "ctr", {"AUC": 0.5, "latency_s": 0.0009}, 8, kind="reference")]
    assert html._latency_chart(rows, "AUC", html.Palette(rows)) is not None
    legend = [t.get_text() for t in figs[-1].axes[0].get_legend().get_texts()]
    assert legend == ["llm (timed at concurrency 8)", "llm1", "pop (ref)"], legend

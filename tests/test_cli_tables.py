"""Method names are never cut in console tables: on a narrow terminal `compare`, `baselines` and `models`
wrap a long name over lines (rich's `overflow="fold"`) instead of ending it in "…"."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from recharness import cli

LONG = "qwen2.5-coder-0.5b-instruct-finetuned-ctr"


def column_text(text: str, k: int) -> str:
    """Column `k` of a rich table as printed, its cells' pieces over every line joined, without spaces (a folded
    name whole)."""
    pieces = []
    for line in text.splitlines():
        cells = re.split(r"[│┃]", line)
        if len(cells) > k + 2:  # a row line: border, cells…, border
            pieces.append(cells[k + 1].strip())
    return re.sub(r"\s+", "", "".join(pieces))


def _print(tables, width: int) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None)
    for t in tables:
        con.print(t)
    return buf.getvalue()


def test_compare_never_cuts_the_two_names():
    r = {"task": "ctr", "a": LONG, "b": "popularity", "n": 20, "n_task": 20, "metric": "AUC", "value_a": 0.61,
         "value_b": 0.55, "diff": 0.06, "lo": -0.02, "hi": 0.14, "p_boot": 0.2, "p_perm": 0.21, "only_a": 0,
         "only_b": 0, "resamples": 1000, "permutations": 1000}
    text = _print([t for t, _ in cli._compare_tables([r])], 70)
    assert "…" not in text, text
    assert LONG in column_text(text, 1), text  # its own column's header, folded
    assert f"{LONG}−popularity[95%CI]" in column_text(text, 3), text


def test_compare_says_its_values_leave_out_samples_one_method_did_not_answer():
    """The paired values are over the samples both answered: with some answered by one only, the note says they
    may differ from the score tables (which count every sample of each method)."""
    r = {"task": "ctr", "a": "llm", "b": "popularity", "n": 18, "n_task": 20, "metric": "AUC", "value_a": 0.61,
         "value_b": 0.55, "diff": 0.06, "lo": -0.02, "hi": 0.14, "p_boot": 0.2, "p_perm": 0.21, "only_a": 0,
         "only_b": 2, "resamples": 1000, "permutations": 1000}
    (_, note), = cli._compare_tables([r])
    assert note.startswith("paired over the 18 of 20 samples both answered; answered by only one: 0 by llm, 2 by "
                           "popularity (left out, so these values are over the samples both answered and may differ "
                           "from the score tables)"), note
    (_, note), = cli._compare_tables([{**r, "n": 20, "only_b": 0}])
    assert "answered by only one" not in note and "score tables" not in note


@pytest.fixture()
def narrow(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buf, width=60, color_system=None))
    return buf


def test_models_and_baselines_lists_never_cut_a_name(narrow, monkeypatch):
    from recharness.models import builtin

    cli.models_list()
    text = narrow.getvalue()
    names = column_text(text, 0)
    assert all(n in names for n in builtin.BUILTIN_MODELS), text
    assert "qwen2.5-coder-0.5b-instruct" in names and "…" not in names

    narrow.truncate(0)
    narrow.seek(0)
    from recharness.baselines import BASELINES

    cli.baselines()
    text = narrow.getvalue()
    names = column_text(text, 0)
    assert all(n in names for n in BASELINES), (sorted(BASELINES), text)
    assert "sid-sasrec-free" in names and "dnn_semantic" in names and "…" not in names

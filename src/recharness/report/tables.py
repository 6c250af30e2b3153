"""Score rows → one table per task, written as JSON, Markdown and CSV.

Column order and the higher/lower-is-better marker come from the metric
registry (recharness.metrics.registry). Headers of the tables people read
(scores.md, the terminal, report.html) carry the marker: "HR@10 ↑",
"RMSE (valid) ↓"; scores.csv and scores.json keep the bare metric names, so
programs reading them see the same keys as before.

Confidence intervals (`ScoreRow.ci`, filled by the score stage): the tables
people read show "value [lo, hi]" (the 95% interval, often asymmetric), in bold the best
row of a column and every row not distinguishable from it (exact paired sign-flip test up to 20
independent units, AUC's up to 16 and random flips to 20, paired bootstrap above; p >= 0.05), with a note under each table saying so; scores.csv has the bounds
in `<metric>_lo` / `<metric>_hi` columns beside each metric that has them,
scores.json the whole `ci` record.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import asdict
from pathlib import Path

from rich.markup import escape

from recharness.core.rundir import RunDir
from recharness.core.types import ScoreRow
from recharness.metrics.registry import header, is_hidden, lead_order


def columns(rows: list[ScoreRow]) -> list[str]:
    """The metric columns of `rows`: the registry's leading metrics in its order, then the rest as first
    seen; hidden bookkeeping metrics left out (they stay in scores.json)."""
    from recharness.tasks.registry import load_suites

    load_suites()  # the suites declare their own columns (direction, hidden, interval)
    seen: list[str] = []
    for r in rows:
        for k in r.metrics:
            if k not in seen and not is_hidden(k):
                seen.append(k)
    lead = lead_order()
    return [c for c in lead if c in seen] + [c for c in seen if c not in lead]


def fmt(v) -> str:
    """A number as tables show it; "–" for none and for an undefined one (NaN: e.g. RMSE with no valid answer)."""
    if v is None:
        return "–"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "–"
        if 0 < abs(v) < 0.001:  # a trained model's latency in seconds: keep its digits
            return f"{v:.2e}"
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def signed(d: float) -> str:
    """A difference with its sign, never shown as +0.0000 when it is not zero (4e-05 is "+4.0e-05")."""
    return f"{d:+.4f}" if d == 0 or abs(d) >= 0.0001 else f"{d:+.1e}"


def display_name(row: ScoreRow) -> str:
    """A row's name in every table and chart: a reference says so, a row over part of the task's samples
    says which part (`limit 40/400`, `imported 170/200`, `partial 12/20`), an import over all of them says
    it is one (`[imported]`, `[imported as reference]`)."""
    cov = coverage_text(row)
    return row.method + (" (ref)" if row.kind == "reference" else "") + (f" [{cov}]" if cov else "")


def coverage_text(row: ScoreRow) -> str:
    """Which samples a row covers, and whether it is an import (the CSVs' coverage column, `display_name`'s
    brackets): `limit: n = 40 of 400`, ..., `imported` (as reference / finetuned) for an import over every
    sample, which never passes for a run of this harness; "" for a run over every sample."""
    from recharness.runner.coverage import label

    cov = label(getattr(row, "coverage", None))
    model = (row.extra or {}).get("model") or {}
    if not cov and isinstance(model, dict) and model.get("backend") == "imported":
        cov = "imported" + (f" as {model['kind']}" if model.get("kind") in ("reference", "finetuned") else "")
    return cov


def value_text(row: ScoreRow, metric: str) -> str:
    """A cell: the value and its 95% interval as [lo, hi] (intervals are often asymmetric), or why
    it has none ("n too small: 3 units")."""
    v = row.metrics.get(metric)
    ci = row.ci.get(metric) if row.ci else None
    if ci is None or not isinstance(v, (int, float)):
        why = (row.extra.get("no_interval") or {}).get(metric) if row.extra else None
        if why and why.startswith("n too small: "):  # "n too small: 4 units" → "(no CI: 4 units)"
            return f"{fmt(v)} (no CI: {why.removeprefix('n too small: ')})"
        return f"{fmt(v)} (no interval: {why})" if why else fmt(v)
    return f"{fmt(v)} [{fmt(ci['lo'])}, {fmt(ci['hi'])}]"


def cells(rows: list[ScoreRow], cols: list[str]) -> list[list[tuple[str, bool]]]:
    """(text, marked) per row and column: marked = best in its column or not distinguishable from it,
    shown only where at least two rows have an interval for the column."""
    marking = {c for c in cols if sum(c in r.ci and "top" in r.ci[c] for r in rows) >= 2}
    return [[(value_text(r, c), c in marking and bool(r.ci.get(c, {}).get("top"))) for c in cols] for r in rows]


def p_value(p: float | None, resamples: int | None = None) -> str:
    """A p-value as the test can state it: "–" when undefined (every replicate non-finite, or null as
    scores.json stores it); a two-sided bootstrap p (2 x the smaller tail) of 0 as below 2 / resamples, the
    smallest p it gives above 0, not 0; below 0.001 as "< 0.001". Tables and `compare` both print this."""
    if p is None or p != p:
        return "–"
    if p == 0 and resamples:
        return f"< {2 / resamples:.2g}"
    return "< 0.001" if p < 0.001 else f"{p:.3g}"


def _p_text(p: float | None, resamples: int | None) -> str:
    """`p_value` in a sentence: "p = 0.03", "p < 0.002"."""
    t = p_value(p, resamples)
    return f"p {t}" if t.startswith("<") else f"p = {t}"


#: a verdict of `runner.intervals.versus_strongest_reference` as the sentence says it ("... it (diff, p)")
_VERSUS = {"beats": "beats", "below": "is below", "not distinguishable": "is not distinguishable from"}


def ci_note(rows: list[ScoreRow]) -> str | None:
    """What the [lo, hi] and the bold mean, for the rows of one table (None when no row has an interval)."""
    if not any(r.ci for r in rows):  # why no row is tested against a reference is said all the same
        return (_reference_notes(rows) + _unfinished_note(rows)).strip() or None
    # each setting the rows were scored with (a leaderboard's runs may differ), in the rows' order
    settings = list(dict.fromkeys((st.get("resamples"), st.get("seed")) for r in rows
                                  if isinstance(st := r.extra.get("ci_settings"), dict) and st))
    how = "; ".join((f"{b:,} resamples" if b else "bootstrap resamples") + f" of the independent units, seed {seed}"
                    for b, seed in settings) or "bootstrap resamples of the independent units"
    if len(settings) > 1:
        how += ", by run"
    note = (f"[lo, hi] = the 95% bootstrap interval ({how}); "
            "bold = the best row of a column and every row not distinguishable from it "
            "(paired test, p ≥ 0.05: the exact sign-flip test up to 20 independent units, the paired bootstrap on "
            "the same resamples above; a row alone in its comparison is never marked).")
    if any(c.get("p_test") == "permutation" and not c.get("generic") for r in rows for c in r.ci.values()):
        note += (" AUC's sign-flip test is exact up to 16 independent units; from 17 to 20 it takes 1,000 random "
                 "flips.")
    fewer = sorted({c.get("resamples") for r in rows for c in r.ci.values() if c.get("generic")} - {None})
    if fewer:
        note += (" Intervals from re-scoring resampled samples (the task has no per-unit contract), "
                 f"{'/'.join(f'{k:,}' for k in fewer)} resamples.")
    if any(c.get("p_test") in ("exact", "permutation") and c.get("generic") for r in rows for c in r.ci.values()):
        note += (" With 20 samples or fewer and no per-unit contract, the bold rests on the paired swap test by "
                 "re-scoring (each sample's two answers swapped; every swap where they fit the time budget, else "
                 "random ones).")
    if any(c.get("overlap") for r in rows for c in r.ci.values()):
        note += " Where rows were not resampled alike, overlapping intervals stand in for the test."
    if len({(r.coverage or {}).get("answered") for r in rows}) > 1:  # rows on different sample sets
        note += (" Rows are compared only with rows scored on the same samples: a row marked with its coverage "
                 "(n = … of …) is bold against those alone, never against the rows over every sample.")
    vs = [(r.method, r.extra["vs_strongest_reference"], (r.extra.get("ci_settings") or {}).get("resamples"))
          for r in rows if r.extra.get("vs_strongest_reference")]
    if vs:  # one sentence per reference: rows of several runs (a leaderboard) may each have their own
        by_ref: dict[tuple[str, str], list] = {}
        for name, v, b in vs:
            by_ref.setdefault((v["metric"], v["reference"]), []).append((name, v, b))
        for (metric, ref), named in by_ref.items():
            note += (f" {STRONGEST} Strongest reference by {metric}: {ref}; "
                     + "; ".join(f"{name} {_VERSUS.get(v['verdict'], v['verdict'])} it ({signed(v['diff'])}, "
                                 f"{_p_text(v['p'], v.get('resamples', b))}, {v['test']})" for name, v, b in named)
                     + ".")
    if not vs:
        marked = next((r for r in rows if r.extra.get("strongest_reference")), None)
        if marked is not None:
            note += f" {STRONGEST} the strongest reference by {marked.extra['strongest_reference']}."
    unmarked = sorted({m for r in rows for m, c in r.ci.items() if c.get("not_compared")})
    if unmarked:
        note += (f" No bold in {', '.join(unmarked)}: the rows' values rest on different samples (each row's own "
                 "subset, e.g. its valid answers), so no row is best of them.")
    return note + _reference_notes(rows) + _unfinished_note(rows)


def _reference_notes(rows: list[ScoreRow]) -> str:
    """Why a model row has no verdict against the strongest reference, and when that reference is the strongest
    only among simple ones: said whether or not any row has an interval."""
    note = ""
    for r in rows:
        nv = r.extra.get("no_verdicts")
        if nv:
            note += (f" No model row is tested against a reference: the best reference by {nv['metric']}, {r.method}, "
                     f"has no interval ({nv['why']}), and a weaker one does not stand in for it.")
    unlike = [r for r in rows if r.extra.get("no_verdict")]
    if unlike:
        note += (f" No verdict against {STRONGEST} for {', '.join(r.method for r in unlike)}: "
                 f"{unlike[0].extra['no_verdict']}.")
    for r in rows:
        left_out = r.extra.get("untrained_references")
        if left_out and r.extra.get("strongest_reference"):
            note += (f" No trained reference is in this run, so {r.method} is the strongest only among simple ones "
                     f"(this task offers {', '.join(left_out)}: `recharness train`).")
    return note


def _unfinished_note(rows: list[ScoreRow]) -> str:
    """References whose training began and wrote no predictions: said where the numbers are read (tables, report),
    not only by `score` on the terminal."""
    unfinished = list(dict.fromkeys(n for r in rows for n in r.extra.get("unfinished_references", [])))
    if not unfinished:
        return ""
    return (f" Not in this table: {', '.join(unfinished)}, whose training began but wrote no predictions (it did "
            f"not finish: `recharness train -b NAME` again); {STRONGEST} and bold are among the rows shown.")


#: the mark of the strongest reference's row (the one each model row is tested against), in every table
STRONGEST = "◆"


def table_name(row: ScoreRow) -> str:
    """A row's name in a table: `display_name`, and the strongest reference marked (`STRONGEST`)."""
    return display_name(row) + (f" {STRONGEST}" if row.extra.get("strongest_reference") else "")


def to_markdown(rows: list[ScoreRow]) -> str:
    out = []
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        cols = columns(trs)
        n = max((r.coverage or {}).get("of", r.n) for r in trs)  # the task's samples; a row over part of them says so
        out.append(f"### {task} (n = {n})\n")
        out.append("| method | " + " | ".join(map(header, cols)) + " |")
        out.append("|---|" + "---:|" * len(cols))
        for r, cs in zip(trs, cells(trs, cols)):
            name = table_name(r).replace("|", "\\|")  # Markdown: only a pipe would break the row
            out.append(f"| {name} | " + " | ".join(f"**{t}**" if top else t for t, top in cs) + " |")
        out.append("")
        note = ci_note(trs)
        if note:
            out.append(note + "\n")
        for r in trs:
            bd = r.extra.get("breakdown")
            if bd:
                out.append(breakdown_markdown(f"{task}: {display_name(r)} by group", bd))
    ft = finetune_notes(rows)
    if ft:
        out.append(ft)
    return "\n".join(out)


def finetune_label(ft: dict) -> str:
    """One line on what a fine-tuned model is: base, adapter settings, examples, steps, training time (or the merge)."""
    m = ft.get("merge")
    if m:
        how = f"{m.get('method')} merge" + (f" (density {m['density']})" if m.get("density") is not None else "")
        w = m.get("weights")
        return (f"{how} of {len(m.get('sources') or [])} fine-tunes of {ft.get('base')}: "
                f"{', '.join(map(str, m.get('sources') or []))}" + (f", weights {w}" if w else ""))
    st = ft.get("settings") or {}
    parts = [f"base {ft.get('base')}", f"task {ft.get('task')}" + (f" ({ft['items']} items)" if ft.get("items") else "")]
    if st:
        parts.append(f"LoRA r={st.get('rank')} α={st.get('alpha')}, lr {st.get('lr')}, batch {st.get('batch')}")
    if ft.get("examples") is not None:
        parts.append(f"{ft['examples']:,} training examples")
    if ft.get("steps") is not None:
        parts.append(f"{ft['steps']:,} steps")
    if ft.get("train_s") is not None:
        parts.append(f"{ft['train_s'] / 60:.1f} min training")
    if ft.get("quant"):
        parts.append(f"GGUF {ft['quant']}")
    return "; ".join(parts)


def finetune_notes(rows: list[ScoreRow]) -> str | None:
    """Every fine-tuned model among the rows, named with how it was trained (RecBench / PerRecBench rows
    must say their base model, adapter settings, examples, steps and training time)."""
    seen = {}
    for r in rows:
        ft = ((r.extra or {}).get("model") or {}).get("finetune")
        if isinstance(ft, dict) and r.method not in seen:
            seen[r.method] = finetune_label(ft)
    if not seen:
        return None
    return "### Fine-tuned models\n\n" + "\n".join(f"- {escape(k)}: {v}" for k, v in seen.items()) + "\n"


def breakdown_markdown(title: str, breakdown: dict[str, dict[str, float]]) -> str:
    """A task's per-group metrics ({group: {metric: value}}) as one Markdown table."""
    cols: list[str] = []
    for m in breakdown.values():
        cols += [c for c in m if c not in cols]
    lines = [f"#### {title}\n", "| group | " + " | ".join(map(header, cols)) + " |", "|---|" + "---:|" * len(cols)]
    for g, m in breakdown.items():
        lines.append(f"| {g} | " + " | ".join(fmt(m.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def wrap_header(text: str, width: int = 12) -> str:
    """A long metric header in lines of about `width`, broken after its underscores ("completion_tokens" →
    "completion_" / "tokens"), so a narrow terminal shows all of it instead of "completion_to…"."""
    if len(text) <= width or "_" not in text:
        return text
    lines, cur = [], ""
    for part in re.split(r"(?<=_)", text):
        if cur and len(cur) + len(part) > width:
            lines.append(cur)
            cur = ""
        cur += part
    return "\n".join([*lines, cur])


def to_rich(rows: list[ScoreRow]) -> list:
    """Rich Tables for the terminal (Markdown wraps badly there): per task, one of its accuracy, validity
    and cost columns and, when it has them, one of its beyond-accuracy columns (together they are too wide
    for a terminal and every name would fold)."""
    from recharness.metrics.registry import metric_group

    tables = []
    for task in dict.fromkeys(r.task for r in rows):
        trs = [r for r in rows if r.task == task]
        n = max((r.coverage or {}).get("of", r.n) for r in trs)
        groups: dict[str, list[str]] = {"accuracy": []}
        for c in columns(trs):
            groups.setdefault(metric_group(c), []).append(c)
        for group, cols in groups.items():
            if cols or group == "accuracy":
                title = f"{task} (n = {n})" + ("" if group == "accuracy" else f": {group}")
                tables.append(_rich_table(trs, cols, title))
    return tables


_NO_CI = re.compile(r" \(no CI: ([^)]*)\)$")


def _rich_table(rows: list[ScoreRow], cols: list[str], title: str):
    """One terminal table; why cells have no interval ("3 units") is said once, under it, not in each cell."""
    from rich.table import Table

    from recharness.metrics.bootstrap import MIN_UNITS

    cs = cells(rows, cols)
    why: dict[str, list[str]] = {}  # "3 units" → the columns whose cells say so
    for line in cs:
        for c, (text, _) in zip(cols, line):
            if (m := _NO_CI.search(text)) and c not in why.setdefault(m.group(1), []):
                why[m.group(1)].append(c)
    t = Table(title=title, title_justify="left")
    names = [escape(table_name(r)) for r in rows]  # the strongest reference marked, as the caption says
    t.add_column("method", overflow="fold", min_width=min(18, max(12, *map(len, names))))  # wraps, never cut
    for c in cols:  # a metric's header is never cut: it wraps after its underscores (else folds)
        t.add_column(escape(wrap_header(header(c))), justify="right", overflow="fold")
    for name, line in zip(names, cs):
        t.add_row(name, *(f"[bold]{_NO_CI.sub('', text)}[/]" if top else _NO_CI.sub("", text) for text, top in line))
    notes = []
    if why:
        by = "; ".join(f"{k} ({', '.join(v)})" if len(why) > 1 else k for k, v in why.items())
        notes.append(f"No interval where a column has fewer than {MIN_UNITS} independent units: {by}.")
    if note := ci_note(rows):
        notes.append(note)
    if notes:
        t.caption, t.caption_justify = escape(" ".join(notes)), "left"  # "[lo, hi]" is text, not markup
    return t


def write_scores(rows: list[ScoreRow], out: Path, extra_md: str | None = None) -> dict[str, Path]:
    """scores.json/.md/.csv written as one set (`core.io.write_set`: a crash leaves the old set or the new)."""
    from recharness.core.io import write_set

    paths = {fmt: RunDir(out).scores(fmt) for fmt in ("json", "md", "csv")}
    # an undefined value (NaN, ±inf) is null: strict JSON readers (JavaScript's JSON.parse) reject a bare NaN
    texts = {paths["json"]: json.dumps(finite_or_null([asdict(r) for r in rows]), indent=2, allow_nan=False)}
    md = to_markdown(rows)
    if extra_md:
        md += "\n## In the paper's layout\n\n" + extra_md + "\n"
    texts[paths["md"]] = md
    allcols = columns(rows)
    with_ci = {c for c in allcols if any(c in r.ci for r in rows)}
    head = [x for c in allcols for x in ((c, f"{c}_lo", f"{c}_hi") if c in with_ci else (c,))]
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["task", "method", "kind", "n", "coverage", *head])
    for r in rows:
        vals = []
        for c in allcols:
            vals.append(finite_or_null(r.metrics.get(c)))
            if c in with_ci:
                ci = r.ci.get(c) or {}
                vals += [finite_or_null(ci.get("lo")), finite_or_null(ci.get("hi"))]
        w.writerow([r.task, r.method, r.kind, r.n, coverage_text(r), *("" if v is None else v for v in vals)])
    texts[paths["csv"]] = buf.getvalue()
    write_set(texts)
    return paths


def finite_or_null(obj):
    """`obj` with every non-finite float (NaN: a metric undefined on its samples) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def _bad_field(r: ScoreRow) -> str | None:
    """What in a score row is not of the type `score` writes, else None."""
    def is_number(v) -> bool:  # NaN and infinities too: a metric may be undefined, shown as "–"
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for name in ("method", "task", "kind"):
        if not isinstance(getattr(r, name), str):
            return f"{name} is {type(getattr(r, name)).__name__}, not text"
    for name in ("metrics", "extra", "ci"):
        if not isinstance(getattr(r, name), dict):
            return f"{name} is {type(getattr(r, name)).__name__}, not an object"
    for m, v in r.metrics.items():
        if v is not None and not is_number(v):
            return f"metrics.{m} is {json.dumps(v, default=str)[:40]}, not a number"
    for m, c in r.ci.items():
        if not isinstance(c, dict):
            return f"ci.{m} is {type(c).__name__}, not an object"
        if "lo" not in c and "hi" not in c:
            continue  # an entry without an interval (a note, a p-value)
        for b in ("lo", "hi"):
            if not is_number(c.get(b)):
                return f"ci.{m}.{b} is {json.dumps(c.get(b), default=str)[:40]}, not a number"
        if not c["lo"] <= c["hi"]:
            return f"ci.{m} runs from {c['lo']} down to {c['hi']}"
    if not isinstance(r.n, int) or isinstance(r.n, bool):
        return f"n is {json.dumps(r.n, default=str)[:40]}, not a whole number"
    return None


def load_scores(out: Path) -> list[ScoreRow]:
    p = RunDir(out).scores("json")
    if not p.exists():
        from recharness.core.errors import ConfigError

        raise ConfigError(f"no scores in {out}: run `recharness score` first")
    from recharness.core.errors import InputError, one_line

    try:
        rows = [ScoreRow(**d) for d in json.loads(p.read_text(encoding="utf-8"))]
    except (ValueError, TypeError) as e:  # bad JSON, not a list of rows, or a row with unknown / missing fields
        raise InputError(p, f"not a scores file written by `recharness score` ({one_line(str(e), 160)}); "
                            "run `recharness score` again") from None
    for k, r in enumerate(rows):  # a hand-edited or foreign file: named here, not a traceback in the tables
        bad = _bad_field(r)
        if bad is not None:
            raise InputError(p, f"row {k} ({str(r.method)[:60]!r}): {bad}; run `recharness score` again",
                             field=bad.split(" ", 1)[0])
    rd = RunDir(out)
    if rd.build_json.is_file():  # scores of an earlier build of this folder are not this build's results
        now = rd.build_info().get("fingerprint")
        stale = {r.build for r in rows if r.build is not None and r.build != now}
        if now and stale:
            from recharness.core.errors import ConfigError

            raise ConfigError(f"{p} holds the scores of another build of {out} (build {sorted(stale)[0][:12]}…, now "
                              f"{now[:12]}…): the samples were rebuilt since; run `recharness score` again")
    check_scores_are_current(out, rows, p)
    return rows


def check_scores_are_current(out: Path, rows: list[ScoreRow], scores_path: Path) -> None:
    """A row's numbers are of the answers `score` read: a model's predictions file, a trained reference's file
    (their sha256, in the row), or a reference computed because `train` had written none. A file changed since
    (run --overwrite, --redo-invalid, a resumed or finished run, train --retrain or --tune) or removed, a reference
    trained since, or answers with no row (a model run since) would show beside numbers not computed from them,
    so each is refused, named."""
    from recharness.core.errors import ConfigError
    from recharness.core.rundir import file_sha256

    rd = RunDir(out)

    def stale(what: str, f: Path, why: str) -> ConfigError:
        return ConfigError(f"{scores_path} holds {what} from before {rd.relative(f)} {why}: run `recharness score` "
                           "again")

    seen: dict[Path, str | None] = {}
    for r in rows:
        want = r.extra.get("predictions_sha256")
        if r.kind == "model":
            stem = r.extra.get("derived_from") or r.method
            f = rd.predictions_dir / f"{stem}.jsonl"
        elif r.kind == "reference":
            stem, f = r.method, rd.reference_dir / f"{r.method}.jsonl"
            if r.extra.get("computed") and f.is_file():
                raise stale(f"the reference {stem} computed on the fly", f, "was trained")
        else:
            continue
        if not want:
            continue
        if f not in seen:
            seen[f] = file_sha256(f) if f.is_file() else None
        if seen[f] != want:
            raise stale(f"{stem}'s scores", f, "is gone" if seen[f] is None else "changed")
    scored = {r.extra.get("derived_from") or r.method for r in rows if r.kind == "model"}
    for f in rd.prediction_files():
        if f.stem not in scored and f.stat().st_size:
            raise stale("no row for that model", f, "was written")
    if any(r.kind == "reference" for r in rows):  # scored with references: each trained one has its rows
        scored = {r.method for r in rows if r.kind == "reference"}
        for f in rd.reference_files():
            if f.stem not in scored and f.stat().st_size:
                raise stale("no row for that reference", f, "was written")

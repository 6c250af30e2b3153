"""report.html and the leaderboard as a person sees them: rendered in headless Chromium at 1280 px.

Static checks (always): one self-contained file, no script, nothing fetched, untrusted text escaped,
a chart per task, no absolute machine path; and the charts themselves, decoded pixel by pixel (never
the page's own claims about them): every chart draws marks, each method's colour is read off the bar
charts in the order of scores.json (references grey, models coloured) and is the same wherever it appears. Browser checks (where /usr/bin/chromium is installed,
Debian package `chromium`; skipped with the reason otherwise): a test-only copy of the page gets a
probe script that writes into the DOM whether tables and charts are visible, whether anything is
wider than the viewport, and which resources loaded; Chromium's --dump-dom returns it. A
screenshot of the original page must show content (not a blank page).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from recharness.models.fake import FakeBackend
from recharness.report.html import write_leaderboard, write_report
from recharness.report.tables import load_scores, write_scores
from recharness.runner import pipeline

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars"]

PROBE = """<script>
addEventListener('load', () => {
  const vis = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const W = window.innerWidth;
  const wide = [...document.querySelectorAll('body *')].filter(el => el.getBoundingClientRect().right > W + 1
      && !el.closest('.scroll')).map(el => el.tagName + '.' + el.className);
  const imgs = [...document.querySelectorAll('img')];
  // each chart as Chromium decoded and drew it: its pixels' colours (counts of 10 or more), white left out
  const hist = img => { const c = document.createElement('canvas'); c.width = img.naturalWidth;
    c.height = img.naturalHeight; const g = c.getContext('2d'); g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data, h = {};
    for (let i = 0; i < d.length; i += 4) { const k = '#' + [d[i], d[i + 1], d[i + 2]].map(v =>
      v.toString(16).padStart(2, '0')).join(''); if (k !== '#ffffff') h[k] = (h[k] || 0) + 1; }
    return Object.fromEntries(Object.entries(h).filter(([, n]) => n >= 10)); };
  const out = {
    width: W, scrollWidth: document.documentElement.scrollWidth,
    tables: document.querySelectorAll('table').length,
    tablesVisible: [...document.querySelectorAll('table')].filter(vis).length,
    charts: imgs.length, chartsLoaded: imgs.filter(i => i.complete && i.naturalWidth > 0 && vis(i)).length,
    wide: wide.slice(0, 5),
    boxesOverflowing: [...document.querySelectorAll('.scroll')].filter(el => vis(el) && el.scrollWidth > el.clientWidth + 1)
        .map(el => (el.querySelector('th, td') || el).textContent.slice(0, 40)),
    figures: imgs.map(i => ({alt: i.alt, hist: hist(i)})),
    resources: performance.getEntriesByType('resource').map(r => r.name).filter(n => !n.startsWith('data:')),
    scripts: document.scripts.length - 1,
  };
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _fake_run(out, suite, tasks, limit, options=None):
    pipeline.build(suite, "ml-1m", out, tasks=tasks, seed=0, limit=limit, options=options)
    pipeline.run(out, FakeBackend("fake"), "fake", use_cache=False)
    write_scores(pipeline.score(out, resamples=200), out)
    return write_report(load_scores(out), out)


@pytest.fixture(scope="module")
def pages(ml1m, tmp_path_factory):
    base = tmp_path_factory.mktemp("reports")
    runs = {"llmrec": _fake_run(base / "llmrec", "llmrec", ["sequential", "direct"], 5),
            "recbench-plus": _fake_run(base / "rbp", "recbench-plus", ["explicit"], 4),
            "perrecbench": _fake_run(base / "prb", "perrecbench", ["list"], 1, {"profile": False}),
            "ctr": _fake_run(base / "ctr", "recbench", ["ctr"], 4, {"train_pairs": 2000})}
    board = write_leaderboard([p.parent for p in runs.values()], base / "board")
    return base, runs, board


def test_pages_are_self_contained_and_escaped(pages):
    base, runs, board = pages
    for path in [*runs.values(), board["html"]]:
        html = path.read_text(encoding="utf-8")
        assert "<script" not in html.lower()
        assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:|//)""", html, re.I), path
        assert "url(" not in html and "@import" not in html
        assert str(base) not in html  # no machine path: shown relative to the data home / working dir
    rbp = runs["recbench-plus"].read_text()
    assert rbp.count("<img") >= 3  # P by method, by number of conditions, with/without history
    assert "alt='P by conditions'" in rbp and "alt='P by history'" in rbp
    seq = runs["llmrec"].read_text()
    assert "alt='NDCG@10'" in seq and "target</td>" in seq and "What was run" in seq
    assert "Invalid answers" in seq
    assert "alt='tau by difficulty'" in runs["perrecbench"].read_text()
    assert "alt='AUC'" in runs["ctr"].read_text()
    csv = board["csv"].read_text().splitlines()
    assert csv[0].startswith("suite,dataset,task,run,build,method,kind,n,")
    assert {line.split(",")[0] for line in csv[1:]} == {"llmrec", "recbench-plus", "perrecbench", "recbench"}


def _chromium(*args, timeout=120):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); the browser checks need it")
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=timeout)


def _probe(page, tmp_path, width: int) -> dict:
    probe = tmp_path / f"probe-{width}.html"  # a test-only copy: the real page has no script
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    res = _chromium(f"--user-data-dir={tmp_path / f'profile-{width}'}", f"--window-size={width},900",
                    "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    m = re.search(r"<pre id=\"probe\">(.*?)</pre>", res.stdout, re.S)
    assert m, res.stderr[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


def _grey(colour: str) -> bool:
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    return r == g == b


@pytest.mark.parametrize("which", ["llmrec", "recbench-plus", "perrecbench", "ctr", "leaderboard"])
def test_rendered_in_chromium_at_1280_and_800px(pages, which, tmp_path):
    _, runs, board = pages
    page = board["html"] if which == "leaderboard" else runs[which]
    got = _probe(page, tmp_path, 1280)
    assert got["width"] == 1280
    assert got["scrollWidth"] <= got["width"], got  # nothing overflows the viewport
    assert not got["wide"], got
    assert not got["boxesOverflowing"], got  # at 1280 px every table fits: none scrolls inside its box
    assert got["tables"] >= 2 and got["tablesVisible"] >= got["tables"] - _hidden_tables(page), got
    assert got["charts"] >= 1 and got["chartsLoaded"] == got["charts"], got
    assert got["resources"] == [] and got["scripts"] == 0, got
    # the charts as Chromium drew them: each has marks in the method colours read off the page's PNGs
    colours = set(page_colours(page).values()) if which != "leaderboard" else \
        {c for _, img in charts(page) for c in bar_colours(img)}  # (no scores.json beside the leaderboard)
    assert colours
    for f in got["figures"]:
        assert f["hist"], f["alt"]
        _check_marks(f["alt"], f["hist"], colours)
    narrow = _probe(page, tmp_path, 800)
    assert narrow["width"] == 800 and narrow["scrollWidth"] <= 800, narrow  # a wide table scrolls in its box
    assert not narrow["wide"], narrow


#: the reference methods of the pages above (drawn in greys)
REFERENCES = {"popularity", "random", "item_mean", "kg-conditions", "lead_words", "previous_review"}


def charts(page) -> list[tuple[str, "Image.Image"]]:  # noqa: F821
    """Every chart of the page, decoded: (alt text, RGB image)."""
    import base64
    import io

    from PIL import Image

    html = page.read_text(encoding="utf-8")
    return [(alt, Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB"))
            for alt, b in re.findall(r"<img alt='([^']*)' src='data:image/png;base64,([^']+)'", html)]


def _hex(c) -> str:
    return "#%02x%02x%02x" % c[:3]


def bar_colours(img) -> list[str]:
    """The bars' colours, top to bottom: per pixel row, a colour filling 8 or more pixels in a row (not
    white, black or the error bars' #333333), kept where 5 or more rows in a row share it."""
    px, (w, h) = img.load(), img.size
    skip = {(255, 255, 255), (0, 0, 0), (0x33, 0x33, 0x33)}
    per_row = []
    for y in range(h):
        colour, run, prev = None, 0, None
        for x in range(w):
            c = px[x, y]
            run = run + 1 if c == prev else 1
            prev = c
            if run >= 8 and c not in skip:
                colour = c
                break
        per_row.append(colour)
    bars, cur, n = [], None, 0
    for c in per_row + [None]:
        if c == cur:
            n += 1
            continue
        if cur is not None and n >= 5 and (not bars or bars[-1] != _hex(cur)):  # an error bar splits no bar
            bars.append(_hex(cur))
        cur, n = c, 1
    return bars


def page_colours(page) -> dict[str, str]:
    """{method: colour} read off the page's bar charts (one per task and headline metric): the bars are the
    task's rows of scores.json in order, those with a non-zero value drawn. A method drawn in two colours fails."""
    scores = json.loads((page.parent / "scores.json").read_text())
    found: dict[str, set[str]] = {}
    for alt, img in charts(page):
        rows = [r for r in scores if alt in r["metrics"] and isinstance(r["metrics"][alt], (int, float))]
        tasks = {r["task"] for r in rows}
        for task in tasks:  # a bar chart is per task; the alt names its metric
            drawn = [r["method"] for r in rows if r["task"] == task and r["metrics"][alt] != 0]
            bars = bar_colours(img)
            if len(bars) != len(drawn):
                continue  # another task's chart of the same metric
            for method, colour in zip(drawn, bars):
                found.setdefault(method, set()).add(colour)
    assert all(len(c) == 1 for c in found.values()), found  # one colour per method across the page
    return {m: c.pop() for m, c in found.items()}


def _near(a: str, b: str, tol: int = 24) -> bool:
    return all(abs(int(a[k:k + 2], 16) - int(b[k:k + 2], 16)) <= tol for k in (1, 3, 5))


def _chroma(colour: str) -> int:
    rgb = [int(colour[k:k + 2], 16) for k in (1, 3, 5)]
    return max(rgb) - min(rgb)


def _check_marks(alt: str, hist: dict[str, int], colours: set[str]) -> None:
    """A chart draws marks: 40 or more pixels in the methods' colours read off the bar charts (a model's
    colour or a reference's grey, not only axes and text); every clearly coloured mark (40 or more pixels)
    is in a colour some model has on the bar charts: no method changes colour from chart to chart."""
    marks = sum(n for c, n in hist.items() if c in colours and (not _grey(c) or n >= 40))
    assert marks >= 40, (alt, sorted(hist.items(), key=lambda x: -x[1])[:12], colours)
    models = {c for c in colours if not _grey(c)}
    strong = {c for c, n in hist.items() if n >= 40 and _chroma(c) >= 40}  # clearly coloured, not a blend with grey
    if models:  # (a line's antialiased edge over another line shifts a colour a little: #2c7fb8 for #1f77b4)
        assert all(any(_near(c, m) for m in models) for c in strong), (alt, strong, models)


def test_charts_drawn_with_marks_and_one_colour_per_method(pages):
    """Decoded chart pixels (no browser needed): the checks the browser test repeats on what Chromium drew."""
    from collections import Counter

    _, runs, _ = pages
    for which, page in runs.items():
        colours = page_colours(page)
        scores = json.loads((page.parent / "scores.json").read_text())
        drawn = {r["method"] for r in scores for k in ("NDCG@10", "P", "tau", "AUC") if r["metrics"].get(k)}
        assert set(colours) == drawn, (which, colours, drawn)  # every method with a bar was read off the charts
        if "fake" in drawn:
            assert not _grey(colours["fake"]), (which, colours)  # the model: a colour
        for method, colour in colours.items():
            assert _grey(colour) == (method in REFERENCES), (which, method, colour)
            assert int(colour[1:3], 16) <= 0x8c, (which, method, colour)  # no grey too light to see on white
        for alt, img in charts(page):
            hist = {_hex(c): n for c, n in Counter(img.get_flattened_data() if hasattr(img, 'get_flattened_data') else img.getdata()).items() if c != (255, 255, 255) and n >= 10}
            _check_marks(alt, hist, set(colours.values()))


def _hidden_tables(page) -> int:
    """Tables inside closed <details> (per-group tables, prompts) are not rendered until opened."""
    html = page.read_text(encoding="utf-8")
    return sum(block.count("<table") for block in re.findall(r"<details>(.*?)</details>", html, re.S))


def test_screenshot_shows_the_page(pages, tmp_path):
    from PIL import Image

    _, runs, _ = pages
    shot = tmp_path / "shot.png"
    res = _chromium(f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900", f"--screenshot={shot}",
                    runs["llmrec"].as_uri())
    assert shot.exists(), res.stderr[-2000:]
    img = Image.open(shot).convert("L")
    assert img.size == (1280, 900)
    hist = img.histogram()
    dark = sum(hist[:200]) / sum(hist)
    assert 0.02 < dark < 0.6, dark  # text, tables and bars, not a blank or black page
    assert sum(1 for h in hist if h) > 50

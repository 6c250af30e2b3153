"""report.html and the leaderboard as a person sees them: rendered in headless Chromium at 1280 px.

Static checks (always): one self-contained file, no script, nothing fetched, untrusted text escaped,
a chart per task, no absolute machine path. Browser checks (where /usr/bin/chromium is installed,
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
  const out = {
    width: W, scrollWidth: document.documentElement.scrollWidth,
    tables: document.querySelectorAll('table').length,
    tablesVisible: [...document.querySelectorAll('table')].filter(vis).length,
    charts: imgs.length, chartsLoaded: imgs.filter(i => i.complete && i.naturalWidth > 0 && vis(i)).length,
    wide: wide.slice(0, 5),
    boxesOverflowing: [...document.querySelectorAll('.scroll')].filter(el => vis(el) && el.scrollWidth > el.clientWidth + 1)
        .map(el => (el.querySelector('th, td') || el).textContent.slice(0, 40)),
    figures: [...document.querySelectorAll('figure')].map(f => ({alt: f.querySelector('img').alt,
        nonzero: +f.dataset.nonzero, colours: JSON.parse(f.dataset.colours || '{}')})),
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
    # every chart draws something; one colour per method on the whole page: references grey, models not
    assert all(f["nonzero"] >= 1 for f in got["figures"]), got["figures"]
    seen: dict[str, set[str]] = {}
    for f in got["figures"]:
        for method, colour in f["colours"].items():
            seen.setdefault(method, set()).add(colour)
    assert seen and all(len(c) == 1 for c in seen.values()), seen
    for method, (colour,) in seen.items():
        assert _grey(colour) == (method in REFERENCES), (method, colour)
    narrow = _probe(page, tmp_path, 800)
    assert narrow["width"] == 800 and narrow["scrollWidth"] <= 800, narrow  # a wide table scrolls in its box
    assert not narrow["wide"], narrow


#: the reference methods of the pages above (drawn in greys)
REFERENCES = {"popularity", "random", "item_mean", "kg-conditions", "lead_words", "previous_review"}


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

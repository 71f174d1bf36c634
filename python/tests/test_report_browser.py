"""Reports in a browser: open a ``report.html`` in headless Chromium (Debian's
``chromium``) on a phone-sized viewport, check there are no console errors and
no external requests, that the table of contents, every table and every figure
are present and rendered, that the page needs no sideways scrolling, and save a
full-page screenshot (PNG) under the test's tmp dir.

The reports come from ``ampsched reproduce aash --out DIR``; set
``AMPSCHED_REPORT=DIR/report.html`` (CI does) or leave ``results/aash/report.html``
in the repository to check a real one. The contract pages below (a conforming
report and broken ones) run always, so the checker itself is tested.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT

CHROMIUM = os.environ.get("AMPSCHED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt install chromium)")

# What the page says about itself, measured in the browser.
PROBE = """() => {
  const vis = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const nav = document.querySelector('nav');
  const links = nav ? [...nav.querySelectorAll('a[href^="#"]')] : [];
  const figures = [...document.querySelectorAll('figure')];
  return {
    viewport: document.querySelector('meta[name=viewport]') !== null,
    nav: nav !== null,
    tocLinks: links.length,
    tocBroken: links.filter(a => !document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1))))
                    .map(a => a.getAttribute('href')),
    tables: document.querySelectorAll('table').length,
    tablesShown: [...document.querySelectorAll('table')].filter(t => vis(t) && t.rows.length > 0).length,
    figures: figures.length,
    figuresShown: figures.filter(f => vis(f) &&
        [...f.querySelectorAll('svg, img')].some(g => vis(g) && (g.tagName !== 'IMG' || g.naturalWidth > 0))).length,
    // A table overflows when it is wider than its container and the container does not
    // scroll it (cut off or spilling over the page), or when the container itself is
    // wider than the viewport.
    tablesOverflowing: [...document.querySelectorAll('table')].map((t, i) => {
      const box = t.parentElement;
      const ox = getComputedStyle(box).overflowX;
      const scrolls = ox === 'auto' || ox === 'scroll';
      const tw = t.getBoundingClientRect().width, bw = box.clientWidth;
      const cap = t.caption ? t.caption.textContent.slice(0, 40) : '';
      if (box.getBoundingClientRect().right > window.innerWidth + 1)
        return `table ${i + 1} (${cap}): its container is wider than the page`;
      if (tw > bw + 1 && !scrolls)
        return `table ${i + 1} (${cap}): ${Math.round(tw)} px in a ${bw} px container that does not scroll`;
      return null;
    }).filter(x => x),
    tablesScrolled: [...document.querySelectorAll('table')]
        .filter(t => t.getBoundingClientRect().width > t.parentElement.clientWidth + 1).length,
    pageWidth: document.documentElement.scrollWidth,
    viewWidth: window.innerWidth,
    fontPx: parseFloat(getComputedStyle(document.body).fontSize),
  };
}"""


DESKTOP = {"width": 1400, "height": 900}


def check_report(html: Path, screenshot: Path, viewport: dict | None = None) -> dict:
    """Open ``html`` like a phone would (or at ``viewport``); return the findings
    (``problems`` lists what is wrong)."""
    viewport = viewport or PHONE
    mobile = viewport["width"] < 800
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    external: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(
                viewport=viewport, device_scale_factor=2 if mobile else 1, is_mobile=mobile, has_touch=mobile
            )
            page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))

            def on_request(r):
                if not r.url.startswith(("file:", "data:", "about:", "blob:")):
                    external.append(r.url)

            page.on("request", on_request)
            page.goto(html.resolve().as_uri(), wait_until="load")
            facts = page.evaluate(PROBE)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    raw = html.read_text(encoding="utf-8")
    problems = list(errors)
    problems += [f"loads an external resource: {u}" for u in external]
    if not facts["nav"] or facts["tocLinks"] == 0:
        problems.append("no table of contents (<nav> with #links)")
    problems += [f"table of contents link {h} goes nowhere" for h in facts["tocBroken"]]
    if facts["tables"] == 0 or facts["tablesShown"] < raw.count("<table"):
        problems.append(f"tables: {facts['tablesShown']} shown of {raw.count('<table')} in the file")
    if facts["figures"] == 0 or facts["figuresShown"] < raw.count("<figure"):
        problems.append(f"figures: {facts['figuresShown']} with a drawing shown of {raw.count('<figure')} in the file")
    if not facts["viewport"]:
        problems.append("no <meta name=viewport>: phones zoom out")
    if facts["pageWidth"] > viewport["width"] + 1:
        problems.append(f"page is {facts['pageWidth']} px wide on a {viewport['width']} px screen (sideways scrolling)")
    problems += [f"{t} (overflows its container)" for t in facts["tablesOverflowing"]]
    if not mobile and facts["tablesScrolled"]:
        problems.append(f"{facts['tablesScrolled']} table(s) need a scrollbar on a {viewport['width']} px screen")
    if facts["fontPx"] < 12:
        problems.append(f"body text is {facts['fontPx']} px")
    facts["problems"] = problems
    return facts


GOOD = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>aash</title>
<style>body{font:16px/1.4 sans-serif;margin:0 1rem;max-width:60rem}
.scroll{overflow-x:auto}svg{max-width:100%;height:auto}table{border-collapse:collapse}td,th{padding:.2rem .5rem}</style>
</head><body><nav><h2>Contents</h2><ol><li><a href="#e1">Experiment 1</a></li>
<li><a href="#e2">Experiment 2</a></li></ol></nav>
<section id="e1"><h2>Experiment 1</h2><div class="scroll"><table><tr><th>vm</th><th>completion_s</th><th>speedup</th>
<th>wait_s</th><th>migrations</th><th>fast share</th></tr><tr><td>vm1</td><td>12.5</td><td>1.31</td><td>0.20</td>
<td>14</td><td>0.52</td></tr></table></div>
<figure><svg viewBox="0 0 400 200" width="400" height="200" xmlns="http://www.w3.org/2000/svg">
<rect x="20" y="40" width="60" height="160" fill="#36c"/></svg><figcaption>Completion</figcaption></figure></section>
<section id="e2"><h2>Experiment 2</h2><figure><img alt="speedup" width="300" height="150" src="data:image/svg+xml;utf8,
%3Csvg xmlns='http://www.w3.org/2000/svg' width='300' height='150'%3E%3Ccircle cx='75' cy='75' r='50'/%3E%3C/svg%3E">
<figcaption>Speedup</figcaption></figure></section></body></html>"""


def test_a_conforming_report_passes_and_is_photographed(tmp_path):
    html = tmp_path / "report.html"
    html.write_text(GOOD, encoding="utf-8")
    shot = tmp_path / "report.png"
    f = check_report(html, shot)
    assert f["problems"] == []
    assert (f["tables"], f["figures"], f["tocLinks"]) == (1, 2, 2)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "change, expect",
    [
        (("</body>", "<script>console.error('boom')</script></body>"), "console.error: boom"),
        (("</body>", "<script>undefinedFunction()</script></body>"), "page error"),
        (("<nav>", "<div>"), "no table of contents"),
        (('href="#e2"', 'href="#missing"'), "goes nowhere"),
        (("<rect", "<rect style='display:none'"), None),  # a hidden shape inside a shown svg is fine
        (("<svg viewBox", "<svg style='display:none' viewBox"), "figures: 1 with a drawing shown of 2"),
        (("max-width:60rem", "min-width:900px"), "sideways scrolling"),
        (('<div class="scroll"><table>', '<div style="overflow:hidden"><table style="width:800px">'), "overflows its"),
        (('<div class="scroll"><table>', '<div style="overflow:visible"><table style="width:800px">'), "overflows its"),
        (('<div class="scroll"><table>', '<div class="scroll"><table style="width:800px">'), None),
        (('<div class="scroll"><table>', '<div class="scroll"><table style="width:1500px">'), "need a scrollbar"),
        (("</body>", "<img src='https://example.invalid/x.png'></body>"), "external resource"),
        (('<meta name="viewport" content="width=device-width, initial-scale=1">', ""), None),
    ],
)
def test_the_checker_catches_broken_reports(tmp_path, change, expect):
    html = tmp_path / "report.html"
    html.write_text(GOOD.replace(*change), encoding="utf-8")
    # a table wider than a desktop page is fine on a phone (it scrolls in its box), not on a desktop
    f = check_report(html, tmp_path / "shot.png", DESKTOP if expect == "need a scrollbar" else None)
    if expect is None:
        if "viewport" in change[0]:
            assert any("viewport" in p for p in f["problems"])
        else:
            assert f["problems"] == []
    else:
        assert any(expect in p for p in f["problems"]), f["problems"]


def _real_report() -> Path | None:
    env = os.environ.get("AMPSCHED_REPORT")
    if env:
        return Path(env)
    p = ROOT / "results" / "aash" / "report.html"
    return p if p.exists() else None


NO_REPORT = "no report: run `ampsched reproduce aash --out DIR` and set AMPSCHED_REPORT=DIR/report.html"


@pytest.mark.skipif(_real_report() is None, reason=NO_REPORT)
def test_the_reproduced_report_reads_well_on_a_phone(tmp_path):
    html = _real_report()
    assert html is not None and html.exists(), f"AMPSCHED_REPORT={html} does not exist"
    shot = tmp_path / "report.png"
    f = check_report(html, shot)
    assert f["problems"] == [], "\n".join(f["problems"])
    assert shot.stat().st_size > 0
    # On a desktop screen no table needs its scrollbar: headers wrap instead.
    wide = check_report(html, tmp_path / "report-desktop.png", DESKTOP)
    assert wide["problems"] == [], "\n".join(wide["problems"])
    out = os.environ.get("AMPSCHED_SCREENSHOT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(out) / "report-phone.png")
        shutil.copy(tmp_path / "report-desktop.png", Path(out) / "report-desktop.png")

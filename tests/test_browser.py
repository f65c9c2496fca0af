"""The HTML report in a real browser: headless Chromium (Debian's package) driven by
playwright's Python package: no console error, every plot drawn, hover text shown, the
timeline zooms. Skipped without Chromium or playwright, except in CI (CI set), where that
is a failure: CI installs both (.ci/run)."""

import os
import shutil

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from conftest import ROOT, sample

TUNE_RESULT = ROOT / "bench" / "workloads" / "zoo_scripts" / "zoo_plain.py.cg-advise.json"   # real, H100


def chromium_path():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if path is None or sync_playwright is None:
        missing = "Chromium" if path is None else "playwright (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test: {missing} not found")
        pytest.skip(f"{missing} not found")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def open_page(browser, page_path):
    errors = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: errors.append(f"fetched {request.url}")
            if not request.url.startswith("file:") else None)
    page.goto(page_path.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def drawn(page, selector):
    """(elements drawn with a non-empty box, their count) inside each SVG of the selector."""
    return page.eval_on_selector_all(selector, """svgs => svgs.map(s => {
        const box = s.getBoundingClientRect();
        const shapes = [...s.querySelectorAll('rect,line,circle,path,text')].filter(e => {
            const b = e.getBoundingClientRect(); return b.width > 0 || b.height > 0; });
        return [box.width > 100 && box.height > 10, shapes.length]; })""")


@pytest.mark.parametrize("name", ["zoo_mlp_profiled", "compute_eager", "launch_graphed"])
def test_profile_report_renders(browser, tmp_path, name):
    out = tmp_path / f"{name}.html"
    assert CliRunner().invoke(cli, ["analyze", str(sample(name)), "--html", str(out)]).exit_code in (0, 1)
    page, errors = open_page(browser, out)
    charts = drawn(page, "svg.chart, svg.plot")
    # timeline, iterations, two histograms, ranges, and predictions (withheld for a graphed run)
    assert len(charts) == (5 if name == "launch_graphed" else 6)
    assert all(ok and shapes > 3 for ok, shapes in charts), charts
    assert drawn(page, "svg.axis")[0][1] > 3                       # the timeline's axis, drawn by the script
    # hover: a GPU operation's name and duration in the read-out
    visible = page.eval_on_selector_all("svg.plot rect.ek, svg.plot rect.eg", """rects => {
        const plot = document.querySelector('svg.plot').getBoundingClientRect();
        return rects.findIndex(r => { const b = r.getBoundingClientRect();
            return b.left >= plot.left && b.right <= plot.right; }); }""")
    gpu = page.locator("svg.plot rect.ek, svg.plot rect.eg").nth(visible)
    gpu.hover(force=True)
    readout = page.locator("#timeline .readout").inner_text()
    title = gpu.locator("title").text_content()
    assert readout == title and (" us " in title or " ms " in title)
    page.locator("svg.chart rect.busy").first.hover(force=True)
    assert "GPU busy" in page.locator("#iterations .readout").inner_text()
    # zoom: the wheel narrows the timeline's view box, reset restores it
    before = page.get_attribute("svg.plot", "viewBox")
    page.locator("svg.plot").scroll_into_view_if_needed()
    box = page.locator("svg.plot").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 20)
    page.mouse.wheel(0, -300)
    page.wait_for_function(f"document.querySelector('svg.plot').getAttribute('viewBox') !== {before!r}")
    after = page.get_attribute("svg.plot", "viewBox")
    assert float(after.split()[2]) < float(before.split()[2])
    page.click("button[data-act=reset]")
    assert page.get_attribute("svg.plot", "viewBox").split()[2] == before.split()[2]
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert errors == []


def test_tune_report_renders(browser, tmp_path):
    out = tmp_path / "combined.html"
    assert CliRunner().invoke(cli, ["report", str(sample("zoo_mlp_profiled")), str(TUNE_RESULT),
                                    "-o", str(out)]).exit_code == 0
    page, errors = open_page(browser, out)
    assert page.locator("#tune tr.win").count() == 1
    assert page.locator("#tune pre.diff .da").count() > 0          # added lines, highlighted
    page.locator("#predictions path.meas").first.hover(force=True)
    assert "measured" in page.locator("#predictions .readout").inner_text()
    assert errors == []

"""The demo report in a real headless Chromium (Debian's /usr/bin/chromium driven by playwright, no download).

Checks: no console errors, no network request but the file itself, every chart drawn, the verdict banner and the
SIMULATED badge visible, the print stylesheet applies and prints to PDF, hostile text never runs, and a
screenshot is written. Also: ``harness report`` on a copied run directory reproduces the same summary.json.
The browser is installed by ``scripts/install-chromium.sh``; this test never installs anything.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer
from PIL import Image
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Request, sync_playwright
from typer.testing import CliRunner

from harness.cli import app
from harness.report.commands import index_command, report_command
from harness.report.writers import render_run
from tests.support.sample import XSS, hostile_summary, sample_summary, write_sample_run
from tests.support.sample_effects import with_effects

CHROMIUM = Path("/usr/bin/chromium")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
CHARTS = ("latency", "hit-quality", "windows", "throughput", "hit-class")
pytestmark = pytest.mark.timeout(180)
# Every text element's box inside the forest plot, and the boxes of its columns (page pixels).
_FOREST_BOXES = """svg => {
  const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return {texts: [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getAttribute('class'), ...box(t)]),
          axis: box(svg.querySelector('line.axis')), svg: box(svg),
          legend: [...document.querySelectorAll('#forest .forest-legend li')].map(li => [li.textContent, ...box(li)])};
}"""


@dataclass
class Visit:
    """What a page did while loading."""

    page: Page
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-chromium.sh (as root) to install Debian's chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, timeout=60_000,
                               args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fixture copied and rebuilt with ``harness report``."""
    run = Path(shutil.copytree(FIXTURES / "demo-sim", tmp_path_factory.mktemp("results") / "demo-sim"))
    app = typer.Typer()
    app.command()(report_command)
    result = CliRunner().invoke(app, [str(run)])
    assert result.exit_code == 0, result.output
    return run


def _open(browser: Browser, path: Path, media: str = "screen") -> Visit:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    visit = Visit(page)

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            visit.errors.append(f"console {msg.type}: {msg.text}")

    def on_dialog(dialog: Dialog) -> None:
        visit.dialogs.append(dialog.message)
        dialog.dismiss()

    def on_request(request: Request) -> None:
        visit.requests.append(request.url)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: visit.errors.append(f"page error: {exc}"))
    page.on("dialog", on_dialog)
    page.on("request", on_request)
    page.emulate_media(media="print" if media == "print" else "screen")
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_timeout(300)  # let any late request or error surface
    return visit


def test_copied_run_reproduces_summary_json(demo_run: Path) -> None:
    assert (demo_run / "summary.json").read_bytes() == (FIXTURES / "demo-sim" / "summary.json").read_bytes()
    html = demo_run / "report.html"
    assert html.stat().st_size < 5 * 1024 * 1024


def test_demo_report_in_chromium(browser: Browser, demo_run: Path, tmp_path: Path) -> None:
    report = demo_run / "report.html"
    visit = _open(browser, report)
    page = visit.page
    try:
        assert visit.errors == []
        assert visit.requests == [report.as_uri()]
        assert page.locator("#simulated-badge").is_visible()
        assert page.locator("header.banner h1").inner_text() == "GO: ship cpu (16 GiB CPU tier)."
        banner = page.eval_on_selector("header.banner", "e => getComputedStyle(e).backgroundColor")
        assert banner == "rgb(27, 127, 59)"  # --go
        for name in CHARTS:
            box = page.locator(f"svg#chart-{name}").bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 150, name
        for section in ("fit", "checks", "arms", "charts", "drills", "launch", "host", "files"):
            assert page.locator(f"section#{section}").is_visible(), section
        assert page.locator("a.raw", has_text="manifest.json").count() == 1
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, "nothing overflows the page sideways"
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        with Image.open(shot) as image:
            assert image.width == 1280 and image.height > 4000
    finally:
        page.close()


def test_report_shows_intervals_n_and_marks_unresolved(browser: Browser, demo_run: Path, tmp_path: Path) -> None:
    visit = _open(browser, demo_run / "report.html")
    page = visit.page
    try:
        assert visit.errors == []
        legend = page.locator("#stats-legend")
        assert legend.is_visible() and "95% confidence interval" in legend.inner_text()
        arms = page.locator("#arm-1-cpu")
        cells = arms.locator("td.pc")
        texts = [t.replace("\n", " ") for t in cells.all_inner_texts()]
        assert any("1,720 ms" in t and "[1,580–1,924]" in t and "n=907" in t for t in texts), texts
        unresolved = arms.locator("td.pc.unres").first
        assert unresolved.is_visible()
        text = unresolved.inner_text().replace("\n", " ")
        assert text.startswith("≥ ") and "n=216, unresolved" in text
        assert "sample p99" in (unresolved.get_attribute("title") or "")
        colour = unresolved.locator(".v").evaluate("e => getComputedStyle(e).color")
        style = unresolved.locator(".v").evaluate("e => getComputedStyle(e).fontStyle")
        assert colour == "rgb(138, 90, 0)" and style == "italic"  # not the ink colour of a resolved figure
        pill = page.locator(".pill.s-unresolved").first
        pass_bg = page.locator(".pill.s-pass").first.evaluate("e => getComputedStyle(e).backgroundImage")
        assert "gradient" in pill.evaluate("e => getComputedStyle(e).backgroundImage") and pass_bg == "none"
        assert page.locator("section#noise-floor").is_visible()
        assert "sequential steps saved 8% of load time" in page.locator("#load-time").inner_text()
        assert page.locator(".pill.early").count() == 2
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, "interval lines wrap instead of widening the tables"
        page.locator("#arm-1-cpu").screenshot(path=str(tmp_path / "cpu-arm.png"))
    finally:
        page.close()


def test_print_stylesheet_and_pdf(browser: Browser, demo_run: Path, tmp_path: Path) -> None:
    visit = _open(browser, demo_run / "report.html", media="print")
    page = visit.page
    try:
        assert visit.errors == []
        assert page.eval_on_selector("nav.toc", "e => getComputedStyle(e).display") == "none"
        pdf = tmp_path / "report.pdf"
        page.pdf(path=str(pdf), format="A4", print_background=True)
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF") and data.count(b"/Type /Page") >= 5
    finally:
        page.close()


def _overlaps(boxes: list[list[object]]) -> list[tuple[object, object]]:
    """Pairs of labels whose boxes (``[text, ..., left, top, right, bottom]``) overlap by more than half a pixel."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            al, at, ar, ab = (float(v) for v in a[-4:])  # type: ignore[arg-type]
            bl, bt, br, bb = (float(v) for v in b[-4:])  # type: ignore[arg-type]
            if min(ar, br) - max(al, bl) > 0.5 and min(ab, bb) - max(at, bt) > 0.5:
                found.append((a[0], b[0]))
    return found


def _check_forest(browser: Browser, report: Path, rows: int, shot: Path, shown: str | None = None) -> None:
    """The forest plot is at the top, visible, one row per comparison, no two labels overlap, labels stay in their
    columns, no markup shows as text (``shown``: hostile text that must appear literally); a screenshot is saved."""
    visit = _open(browser, report)
    page = visit.page
    try:
        assert visit.errors == [] and visit.dialogs == [] and visit.requests == [report.as_uri()]
        assert page.evaluate("document.scripts.length") == 0
        forest = page.locator("section#forest")
        assert forest.is_visible() and page.locator("svg#forest-plot").is_visible()
        tops = page.evaluate("[...document.querySelectorAll('section')].map(e => [e.id, e.offsetTop])")
        order = [name for name, _ in sorted(tops, key=lambda t: t[1])]
        assert order.index("forest") < order.index("effects") < order.index("fit"), order  # at the top
        assert page.locator("svg#forest-plot g.forest-row").count() == rows
        boxes = page.eval_on_selector("svg#forest-plot", _FOREST_BOXES)
        texts = [t for t in boxes["texts"] if t[4] > t[2]]  # drawn (non-empty) text
        assert len(texts) >= rows + 4
        assert _overlaps(texts) == [] and _overlaps(boxes["legend"]) == []
        left, top, right, bottom = boxes["svg"]
        for t in texts:
            assert left <= t[2] and t[4] <= right + 0.5 and top <= t[3] and t[5] <= bottom + 0.5, t
            if t[1] == "label":
                assert t[4] <= boxes["axis"][0], t  # row labels end before the axis begins
            if t[1] and t[1].startswith("ratio"):
                assert t[2] >= boxes["axis"][2], t  # the ratio column starts after it
        visible = forest.inner_text()
        for raw in ("&lt;", "&amp;", "{{", "{%", *(() if shown else ("<script",))):
            assert raw not in visible, raw
        assert shown is None or shown in visible  # hostile text shown as text, never run
        forest.screenshot(path=str(shot))
        print(f"forest plot screenshot: {shot}")
        with Image.open(shot) as image:
            assert image.width > 600 and image.height > 200 + 20 * rows
    finally:
        page.close()


def test_forest_plot_of_a_real_run_in_chromium(browser: Browser, tmp_path: Path) -> None:
    """A real simulated rollout (the demo-prelayout run), its summary rebuilt from the records by harness report."""
    run = Path(shutil.copytree(FIXTURES / "demo-prelayout", tmp_path / "demo-prelayout"))
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    rows = sum(len(arm["effects"]) for arm in json.loads((run / "summary.json").read_text())["arms"])
    assert rows >= 12
    _check_forest(browser, run / "report.html", rows, tmp_path / "forest-demo.png")


@pytest.mark.parametrize(("hostile", "repeat"), [(False, 1), (True, 4)], ids=["sample", "hostile-many-rows"])
def test_forest_plot_edges_in_chromium(browser: Browser, tmp_path: Path, hostile: bool, repeat: int) -> None:
    """Every outcome, unresolved and clipped rows; hostile arm and step names over many rows."""
    summary = with_effects(hostile_summary() if hostile else sample_summary(), repeat=repeat)
    run = write_sample_run(tmp_path / "run", summary)
    render_run(run)
    shot = tmp_path / f"forest-{'hostile' if hostile else 'sample'}.png"
    rows = sum(len(arm.effects) for arm in summary.arms)  # every outcome's sample row (13), ``repeat`` times
    assert rows == 13 * repeat
    _check_forest(browser, run / "report.html", rows, shot, f"cpu{XSS}" if hostile else None)


def test_hostile_text_never_runs(browser: Browser, tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "hostile", hostile_summary())
    render_run(run)
    report = run / "report.html"
    visit = _open(browser, report)
    try:
        assert visit.dialogs == []
        assert visit.requests == [report.as_uri()]  # an injected <img src=x> would have fetched
        assert visit.errors == []
        assert visit.page.evaluate("document.scripts.length") == 0
        assert visit.page.evaluate("document.images.length") == 0
        assert "<script>alert(1)</script>" in visit.page.locator("header.banner").inner_text()  # shown as text
    finally:
        visit.page.close()


def test_index_in_chromium(browser: Browser, demo_run: Path) -> None:
    results = demo_run.parent
    shutil.copytree(FIXTURES / "nogo-vllm", results / "nogo-vllm")
    app = typer.Typer()
    app.command()(index_command)
    assert CliRunner().invoke(app, [str(results)]).exit_code == 0
    index = results / "index.html"
    visit = _open(browser, index)
    try:
        assert visit.errors == []
        assert visit.requests == [index.as_uri()]
        assert visit.page.locator("svg[id^='chart-trend-']").count() == 2
        visit.page.locator("a", has_text="demo-sim").click()
        visit.page.wait_for_load_state("load")
        assert visit.page.url == (demo_run / "report.html").as_uri()
    finally:
        visit.page.close()

"""report.html: every section, the verdict banner, SIMULATED badge, self-contained, under 5 MB."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.report.html import render_html, verdict_title
from harness.report.load import load_summary
from harness.schema.summary import Summary
from tests.support.sample import sample_summary, write_sample_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
SECTIONS = ("verdict", "fit", "checks", "arms", "charts", "drills", "launch", "host", "files")
CHARTS = ("chart-latency", "chart-hit-quality", "chart-windows", "chart-throughput", "chart-hit-class")


class _Refs(HTMLParser):
    """Collects every tag and every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "formaction", "poster", "data", "srcset"):
                self.urls.append((tag, name, value or ""))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Summary, str]:
    run = write_sample_run(tmp_path_factory.mktemp("demo") / "run")
    summary = sample_summary()
    return summary, render_html(summary, run)


@pytest.fixture(scope="module")
def nogo() -> str:
    return render_html(load_summary(FIXTURES / "nogo-vllm"), None)


def test_every_section_is_present(demo: tuple[Summary, str]) -> None:
    _, html = demo
    for section in SECTIONS:
        assert f'id="{section}"' in html, section
    for chart in CHARTS:
        assert f'id="{chart}"' in html, chart
    for i, arm in enumerate(("gpu-only", "cpu", "tiered")):
        assert f'id="arm-{i}-{arm}"' in html and f"<h3>{arm} <span" in html
    assert "Fit screen" in html and "Drills" in html and "Launch commands and images" in html
    assert "storage_pressure on tiered" in html
    assert "python -m harness.sim serve" in html  # exact launch command
    assert "AMD EPYC 9454" in html and "3.11.7" in html  # host and versions


def test_banner_verdict_recommendation_and_simulated_badge(demo: tuple[Summary, str]) -> None:
    _, html = demo
    assert '<header class="banner v-go" id="verdict">' in html
    assert "GO: ship cpu" in html
    assert 'id="simulated-badge"' in html
    assert html.index('id="simulated-badge"') < html.index("<h1>GO: ship cpu (16 GiB CPU tier).</h1>")  # badge first
    assert "<title>[SIMULATED] " in html


def test_real_engine_has_no_simulated_badge(nogo: str) -> None:
    html = nogo
    assert "SIMULATED" not in html
    assert '<header class="banner v-no-go"' in html
    assert "NO-GO: keep the baseline" in html
    assert "sha256:9d1f8c1b2e3a" in html  # image digest
    assert "vllm/vllm-openai:v0.32.0" in html
    assert "CPU Offloading is currently only supported" in html  # failed arm's log tail


def test_missing_metrics_show_missing_with_names_never_zero(nogo: str) -> None:
    html = nogo
    row = re.search(r'<a href="#arm-1-cpu">cpu</a>.*?</tr>', html, re.DOTALL)
    assert row is not None
    assert 'class="missing"' in row.group(0)
    assert "vllm:prompt_tokens_cached_by_source_total{source=host}" in html
    assert 'title="looked for: vllm:prompt_tokens_cached_by_source_total{source=host}">missing</span>' in html


def test_failed_baseline_renders_without_steps() -> None:
    summary = load_summary(FIXTURES / "failed-baseline")
    html = render_html(summary, None)
    assert '<header class="banner v-failed"' in html
    assert "RUN FAILED" in html
    assert "no steps ran" in html
    assert "CUDA out of memory" in html
    assert html.count('class="nodata"') == 5  # every chart says why it is absent


def test_self_contained_no_external_references(demo: tuple[Summary, str]) -> None:
    _, html = demo
    parser = _Refs()
    parser.feed(html)
    assert "script" not in parser.tags
    assert "link" not in parser.tags  # no external stylesheet
    assert "img" not in parser.tags and "iframe" not in parser.tags and "object" not in parser.tags
    for tag, attr, url in parser.urls:
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I), (tag, attr, url)
        assert not url.startswith("//"), (tag, attr, url)
    assert "@import" not in html
    assert "url(" not in re.sub(r"url\(#[^)]+\)", "", html)  # only in-page fragment references
    assert "<!DOCTYPE svg" not in html


def test_size_and_print_stylesheet(demo: tuple[Summary, str]) -> None:
    _, html = demo
    assert len(html.encode()) < 5 * 1024 * 1024
    assert "@media print" in html


def test_render_is_deterministic(demo: tuple[Summary, str]) -> None:
    summary, html = demo
    again = render_html(summary, None)
    strip_links = re.compile(r'<section id="files">.*?</section>', re.DOTALL)
    assert strip_links.sub("", again) == strip_links.sub("", html)


def test_verdict_titles() -> None:
    base = sample_summary()
    assert verdict_title(base) == "GO: ship cpu"
    assert verdict_title(base.model_copy(update={"verdict": "hold"})).startswith("HOLD")
    assert verdict_title(base.model_copy(update={"verdict": "no-go"})) == "NO-GO: keep the baseline"
    assert verdict_title(base.model_copy(update={"verdict": "failed"})) == "RUN FAILED"


def test_percentiles_show_interval_and_n_and_unresolved_ones_are_marked(demo: tuple[Summary, str]) -> None:
    _, html = demo
    assert "<span>[1,580–1,924]</span> <span>n=907</span>" in html  # cpu c32 p99 TTFT
    cell = re.search(r'<td class="n pc unres" title="sample p99 390 ms; unresolved[^"]*">'
                     r'<span class="v">≥ 321 ms</span><span class="ci"><span>n=216, unresolved</span>', html)
    assert cell is not None  # cpu c4 p99 TTFT: only a lower bound
    assert ">390 ms<" not in html  # the unresolved sample p99 is never shown as a figure
    assert 'id="stats-legend"' in html and "order-statistic (exact binomial, distribution-free)" in html


def test_rules_show_evidence_and_unresolved_is_distinct(demo: tuple[Summary, str]) -> None:
    _, html = demo
    assert '<tr class="r-unresolved">' in html and 'class="pill s-unresolved">unresolved<' in html
    assert "0.65x [0.59–0.72]" in html and "vs 1.10x" in html
    assert "shared with baseline" in html
    assert "s-inconclusive" not in html and "inconclusive" not in html.split("<style>")[1].split("</style>")[0]


def test_noise_floor_load_time_and_early_steps(demo: tuple[Summary, str]) -> None:
    _, html = demo
    assert 'id="noise-floor"' in html and "1.06x [1.01–1.11]" in html
    assert "499 s of 540 s planned; sequential steps saved 8% of load time (2 of 9 steps ended early)" in html
    assert "<strong>c32</strong> ended early at 41 s of 60 s planned: decision settled" in html
    assert html.count('class="pill early">ended early<') == 2


def test_slo_unmet_banner_is_its_own() -> None:
    unmet = sample_summary().model_copy(update={"verdict": "slo-unmet", "exit_code": 5, "recommended_arm": None})
    html = render_html(unmet, None)
    assert '<header class="banner v-slo-unmet"' in html
    assert "SLO UNMET: every arm breaks the same budget, the baseline included" in html
    assert ".banner.v-slo-unmet" in html

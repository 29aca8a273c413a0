"""Charts draw what is there and say what is missing; a missing value is a gap, never a 0."""

from __future__ import annotations

import re

import pytest

from harness.report.charts import hit_quality_chart, hit_shares, latency_chart, load_label, throughput_chart
from harness.report.charts_time import TrendSeries, hit_class_chart, trend_chart, windows_chart
from harness.report.html import build_charts
from harness.schema.intervals import Percentiles
from harness.schema.summary import HitTokens, StepSummary, Summary
from tests.support.sample import sample_summary


@pytest.fixture(scope="module")
def sample() -> Summary:
    return sample_summary()


def _empty_steps(summary: Summary) -> Summary:
    arms = [arm.model_copy(update={"steps": [], "windows": []}) for arm in summary.arms]
    return summary.model_copy(update={"arms": arms})


def test_every_chart_draws_for_the_sample(sample: Summary) -> None:
    charts = build_charts(sample)
    assert [c.name for c in charts] == ["latency", "hit-quality", "windows", "throughput", "hit-class"]
    for chart in charts:
        assert chart.svg is not None, chart.name
        assert chart.note is None
        assert chart.caption
        assert f'id="chart-{chart.name}"' in chart.svg


def test_latency_chart_draws_slo_budget_labels(sample: Summary) -> None:
    svg = str(latency_chart(sample).svg)
    assert "p99 budget 2000 ms" in svg
    assert "p99 budget 100 ms" in svg
    no_slo = sample.model_copy(update={"slo": {}})
    assert "p99 budget" not in str(latency_chart(no_slo).svg)


def test_windows_chart_marks_breaches(sample: Summary) -> None:
    svg = str(windows_chart(sample).svg)
    assert "breached window" in svg and "unresolved window" in svg
    # one shaded span per breached window and metric
    breached = sum(1 for arm in sample.arms for w in arm.windows for m in ("ttft", "itl")
                   if any(m in b for b in w.breached))
    assert breached >= 5
    assert svg.count("fill: #d55e00; opacity: 0.18") == breached
    assert "<pattern" in svg  # hatched unresolved windows


def test_charts_without_data_say_why(sample: Summary) -> None:
    empty = _empty_steps(sample)
    for make in (latency_chart, hit_quality_chart, throughput_chart, windows_chart, hit_class_chart):
        chart = make(empty)
        assert chart.svg is None
        assert chart.note


def test_hit_shares_missing_source_is_none_not_zero() -> None:
    step = StepSummary(index=0, label="c1", hit_tokens=HitTokens(gpu=10, cpu=None, disk=0, miss=5))
    assert hit_shares(step) is None
    step = StepSummary(index=0, label="c1", hit_tokens=HitTokens(gpu=0, cpu=0, disk=0, miss=0))
    assert hit_shares(step) is None
    step = StepSummary(index=0, label="c1", hit_tokens=HitTokens(gpu=30, cpu=10, disk=0, miss=60))
    assert hit_shares(step) == {"gpu": 0.3, "cpu": 0.1, "disk": 0.0, "miss": 0.6}


def test_hit_quality_chart_labels_missing_steps(sample: Summary) -> None:
    arms = list(sample.arms)
    steps = [s.model_copy(update={"hit_tokens": HitTokens(missing=["x"])}) if s.index == 0 else s
             for s in arms[1].steps]
    arms[1] = arms[1].model_copy(update={"steps": steps})
    svg = str(hit_quality_chart(sample.model_copy(update={"arms": arms})).svg)
    assert svg.count(">missing<") == 1


def test_latency_gap_for_missing_percentile(sample: Summary) -> None:
    arms = list(sample.arms)
    steps = [s.model_copy(update={"ttft_ms": Percentiles()}) for s in arms[0].steps]
    arms[0] = arms[0].model_copy(update={"steps": steps})
    chart = latency_chart(sample.model_copy(update={"arms": arms}))
    assert chart.svg is not None  # the other arms still draw


def test_load_label_follows_step_kind(sample: Summary) -> None:
    assert load_label(sample.arms) == "concurrency (users)"
    open_loop = [a.model_copy(update={"steps": [s.model_copy(update={"concurrency": None, "rate_rps": 2.0})
                                                for s in a.steps]}) for a in sample.arms]
    assert load_label(open_loop) == "offered load (requests/s)"
    assert load_label([]) == "step"


def test_trend_chart() -> None:
    chart = trend_chart("trend-x", "t", ["r1", "r2", "r3"],
                        [TrendSeries("cpu", [100.0, None, 120.0]), TrendSeries("gpu-only", [150.0, 140.0, None])])
    assert chart.svg is not None
    assert re.search(r">cpu<", str(chart.svg))
    empty = trend_chart("trend-y", "t", ["r1"], [TrendSeries("cpu", [None])])
    assert empty.svg is None
    assert empty.note


def _log_scale(sample: Summary) -> Summary:
    """The sample with a 100x spread of TTFT, so the latency chart uses a log axis."""
    arms = list(sample.arms)
    steps = list(arms[0].steps)
    steps[0] = steps[0].model_copy(update={"ttft_ms": steps[0].ttft_ms.model_copy(update={"p50": 3.0})})
    arms[0] = arms[0].model_copy(update={"steps": steps})
    return sample.model_copy(update={"arms": arms})


def test_no_raw_mathtext_in_any_chart(sample: Summary) -> None:
    log_sample = _log_scale(sample)
    charts = [*build_charts(sample), latency_chart(log_sample)]
    assert 'transform="scale' in str(charts[-1].svg) or charts[-1].svg is not None
    for chart in charts:
        svg = str(chart.svg)
        assert "$" not in svg, chart.name
        assert "mathdefault" not in svg, chart.name
        assert "^{" not in svg, chart.name
    ticks = re.findall(r">([0-9][0-9,.]*)</text>", str(charts[-1].svg))
    assert "1,000" in ticks and "10" in ticks  # plain decade labels on the log axis


def test_latency_chart_draws_intervals_and_open_markers_for_unresolved(sample: Summary) -> None:
    svg = str(latency_chart(sample).svg)
    assert "95% interval" in svg and "unresolved: at least" in svg
    # the c4 p99s are unresolved: drawn as open (white-filled) triangles, not as points on the line
    assert svg.count("fill: #ffffff") >= 6
    resolved_only = sample.model_copy(update={"arms": [a.model_copy(update={"steps": a.steps[1:]})
                                                       for a in sample.arms]})
    ttft_only = str(latency_chart(resolved_only).svg)
    assert ttft_only.count("fill: #ffffff") < svg.count("fill: #ffffff")

"""Figures a results history cannot hold: NaN and Infinity refused at read, absurd values refused by the index.

Known answers: a history whose summaries hold NaN, Infinity and 1e308 gives an index.json a strict JSON parser reads
(no bare NaN/Infinity), the NaN/Infinity runs listed as unreadable naming the field, the 1e308 figures dropped and
listed as invalid, and a trend chart whose axis the other runs set (one plausible outlier is marked off the scale).
``harness report --from-summary`` on such a summary exits 2 naming the field; figures built in memory that are not
finite print as "invalid", never "nan"/"inf", and no figure prints hundreds of digits.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, NoReturn

import pytest
import typer
from typer.testing import CliRunner

from harness.config.steps import StepsSpec
from harness.report import fmt, fmt_ci
from harness.report.commands import report_command
from harness.report.index import scan_runs, scenario_trends, write_index
from harness.report.index_figures import MAX_LATENCY_MS
from harness.report.load import ReportInputError, load_summary_file, non_finite
from harness.schema.intervals import QuantileCI, RatioCI
from harness.schema.summary import Summary
from tests.support.sample import sample_summary, write_sample_run

BAD_ARM = "cpu"  # arms[1] of the sample summary
TYPICAL_MS = 1720.0  # its top step's p99 TTFT
OUTLIER_MS = 900_000.0  # a plausible but wild run (15 minutes)


def _reject(constant: str) -> NoReturn:
    raise ValueError(f"bare {constant} in JSON")


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity, as strict parsers do."""
    return json.loads(text, parse_constant=_reject)


def _run(i: int) -> Summary:
    return sample_summary().model_copy(update={"run_id": f"r{i:02d}", "started_at": f"2025-01-{i + 1:02d}T00:00:00Z"})


def _poison(run_dir: Path, literal: str) -> None:
    """Put ``literal`` (raw JSON text) in the bad arm's top-step p99 TTFT, its interval's top and its tokens/s."""
    path = run_dir / "summary.json"
    data = json.loads(path.read_text())
    top = data["arms"][1]["steps"][-1]
    assert data["arms"][1]["name"] == BAD_ARM
    top["ttft_ms"]["p99"] = top["ttft_ms"]["p99_ci"]["hi"] = top["output_tokens_per_s"] = "@BAD@"
    path.write_text(json.dumps(data, indent=2).replace('"@BAD@"', literal))


def _set_top_p99(s: Summary, arm: str, value: float) -> Summary:
    arms = list(s.arms)
    k = next(i for i, a in enumerate(arms) if a.name == arm)
    top = arms[k].steps[-1]
    ttft = top.ttft_ms.model_copy(update={"p99": value, "p99_ci": None})
    arms[k] = arms[k].model_copy(update={"steps": [*arms[k].steps[:-1], top.model_copy(update={"ttft_ms": ttft})]})
    return s.model_copy(update={"arms": arms})


def bad_history(results: Path) -> Path:
    """Ten runs: NaN, Infinity and 1e308 in three of them, a 900,000 ms p99 in another, the rest ordinary."""
    poisoned = {2: "NaN", 4: "Infinity", 6: "1e308"}
    for i in range(10):
        s = _set_top_p99(_run(i), BAD_ARM, OUTLIER_MS) if i == 8 else _run(i)
        run_dir = write_sample_run(results / s.run_id, s)
        if i in poisoned:
            _poison(run_dir, poisoned[i])
    return results


def y_ticks(svg: str) -> list[float]:
    """The numbers on the chart's value axis, read from the SVG's y tick labels."""
    labels = re.findall(r'<g id="[^"]*ytick_\d+">.*?<text[^>]*>([^<]*)</text>', svg, flags=re.S)
    return [float(label.replace(",", "")) for label in labels]


def test_index_over_nan_inf_and_1e308_is_strict_json_with_a_readable_chart(tmp_path: Path) -> None:
    results = bad_history(tmp_path / "results")
    written = write_index(results)
    text = written["json"].read_text()
    data = strict_json(text)  # no bare NaN / Infinity anywhere
    assert not re.search(r"\d{25}", text)
    runs = {r["run_dir"]: r for r in data["runs"]}
    for name, literal in (("r02", "NaN"), ("r04", "Infinity")):
        assert runs[name]["ok"] is False
        assert f"arms.1.steps.2.ttft_ms.p99: {literal} " in runs[name]["error"]
    huge = runs["r06"]
    assert huge["ok"] is True and huge["ttft_p99_ms"][BAD_ARM] is None and huge["ttft_p99_ci"][BAD_ARM] is None
    assert huge["step_measures"][BAD_ARM]["c32"]["output_tokens_per_s"] is None
    refused = {(f["arm"], f["step"], f["measure"], f["value"], f["reason"]) for f in huge["invalid"]}
    assert refused == {(BAD_ARM, "c32", m, "1e+308", "implausible")
                       for m in ("ttft_p99_ms", "ttft_p99_ci", "output_tokens_per_s")}
    assert runs["r08"]["ttft_p99_ms"][BAD_ARM] == OUTLIER_MS and runs["r08"]["invalid"] == []
    entries, _ = scan_runs(results)
    (trend,) = scenario_trends(entries)
    svg = str(trend.chart.svg)
    ticks = y_ticks(svg)
    assert ticks and max(ticks) < 10 * TYPICAL_MS  # the axis is the ordinary runs', not the outlier's
    assert "900,000 ms" in svg  # the outlier is marked off the scale with its value
    assert not re.search(r"\d{13}", svg.replace(",", ""))
    html = written["html"].read_text()
    assert "1e+308" in html and not re.search(r"[\d,]{40}", html)


def test_a_chart_with_one_outlier_and_few_runs() -> None:
    from harness.report.charts_time import TrendSeries, off_scale_fence, trend_chart

    assert off_scale_fence([2000.0, 1e6]) is None  # two runs cannot say which is the outlier
    assert off_scale_fence([2000.0, 2010.0, 1990.0, 2005.0, 1e6]) == pytest.approx(2005.0 * 8, rel=0.01)
    chart = trend_chart("t", "t", ["a", "b", "c", "d"], [TrendSeries("x", [1.0, math.nan, math.inf, 2.0])])
    assert chart.svg is not None and max(y_ticks(str(chart.svg))) <= 2.5


def test_summary_with_nan_or_infinity_is_refused_naming_the_field(tmp_path: Path) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        run_dir = write_sample_run(tmp_path / literal, _run(0))
        _poison(run_dir, literal)
        with pytest.raises(ReportInputError, match=rf"arms\.1\.steps\.2\.ttft_ms\.p99: {literal} is not a finite"):
            load_summary_file(run_dir / "summary.json")
        result = CliRunner().invoke(_app(), [str(run_dir), "--from-summary"])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert non_finite({"a": [1.0, {"b": 2}], "c": None}) is None
    assert non_finite([{"x": 1.0}, {"y": [0.0, math.nan]}]) == ("1.y.1", "NaN")


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(report_command)
    return app


def test_figures_that_are_not_finite_print_invalid_and_huge_ones_stay_short() -> None:
    for render in (fmt.ms, fmt.num, fmt.pct, fmt.ratio):
        assert render(math.nan) == "invalid" and render(math.inf) == "invalid"
    assert fmt.ms(1e308) == "1e+308 ms" and fmt.num(1e308) == "1e+308" and fmt.tokens(10**400) == "1.00e+400"
    unbounded = fmt_ci.ratio_view(RatioCI(ratio=1.2, lo=0.8, hi=math.inf, resolved=True, confidence=0.95))
    assert unbounded.resolved and "inf" not in unbounded.text and unbounded.text.endswith("–∞]")
    broken = fmt_ci.ratio_view(RatioCI(ratio=math.nan, lo=0.8, hi=1.3, resolved=True, confidence=0.95))
    assert broken.text.startswith("invalid") and not broken.resolved and "nan" not in broken.text
    view = fmt_ci.interval_view(None, QuantileCI(lo=math.nan, hi=None, n=40))
    assert view.kind == "invalid" and view.unresolved and "nan" not in view.text.lower()
    assert fmt_ci.interval_view(math.inf, None, count=10).kind == "invalid"
    assert fmt_ci.point_view(math.nan, 500).kind == "invalid"


def test_latency_bound_is_the_longest_request_timeout() -> None:
    field = StepsSpec.model_fields["request_timeout_s"]
    le = next(m.le for m in field.metadata if hasattr(m, "le"))
    assert le * 1000.0 == MAX_LATENCY_MS

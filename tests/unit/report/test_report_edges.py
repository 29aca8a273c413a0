"""Sparse and empty summaries render every output without inventing numbers; the benchmark runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.headline import headline
from harness.report.writers import write_reports
from harness.schema.summary import ArmSummary, StepSummary, Summary
from tools.bench import report as bench


def _bare(arms: list[ArmSummary]) -> Summary:
    return Summary(run_id="r", scenario="s", scenario_hash="h", engine="vllm", model="m", simulated=False,
                   verdict="hold", recommended_arm=None, exit_code=3, verdict_reason="not enough data",
                   started_at="", finished_at="", arms=arms)


@pytest.mark.parametrize("arms", [
    [],
    [ArmSummary(name="gpu-only", tier="gpu-only", decision="baseline", steps=[StepSummary(index=0, label="c1")])],
], ids=["no-arms", "all-none"])
def test_sparse_summaries_render(tmp_path: Path, arms: list[ArmSummary]) -> None:
    written = write_reports(_bare(arms), tmp_path)
    head = headline(_bare(arms))
    html = written["html"].read_text()
    assert '<header class="banner v-hold"' in html
    assert html.count('class="nodata"') == 5
    assert "The fit screen was not run" in html
    assert "No drills were run." in html
    md = written["md"].read_text()
    assert md.splitlines()[0] == f"**{head.lead}** {head.body}".replace("_", "\\_")
    assert head.lead.startswith("HOLD: keep the GPU-only baseline") and head.body
    if arms:
        row = next(line for line in md.splitlines() if line.startswith("| gpu-only"))
        assert "| no samples | no samples | missing | missing |" in row
        assert ">no samples<" in html


def test_bench_render_reports_times_and_size(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A chart-less summary keeps this fast; the full sample is what `make perf` times.
    monkeypatch.setattr(bench, "sample_summary", lambda: _bare([]))
    result = bench.bench_render(2)
    assert result.runs == 2 and result.first_s > 0 and result.median_s > 0
    assert 5_000 < result.report_bytes < 5 * 1024 * 1024
    assert bench.main(["--runs", "1"]) == 0
    assert "report render: runs=1" in capsys.readouterr().out
    with pytest.raises(ValueError, match="between 1 and"):
        bench.bench_render(0)
    with pytest.raises(SystemExit):
        bench.main(["--runs", "0"])
    assert "n_runs must be between" in capsys.readouterr().err

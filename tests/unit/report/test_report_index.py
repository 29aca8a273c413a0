"""results/index.html and index.json: runs newest first, unreadable runs listed, trends per scenario."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.report import index as index_mod
from harness.report.index import scan_runs, scenario_trends, write_index
from harness.report.load import ReportInputError
from tests.support.sample import sample_summary, write_sample_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for name in ("demo-sim", "nogo-vllm", "failed-baseline", "invalid-summary"):
        shutil.copytree(FIXTURES / name, results / name)
    (results / "demo-sim" / "report.html").write_text("<html></html>")
    (results / "not-a-run").mkdir()
    (results / "stray.txt").write_text("x")
    return results


def test_scan_orders_newest_first_and_keeps_unreadable(tmp_path: Path) -> None:
    entries, left_out = scan_runs(_results(tmp_path))
    assert left_out == 0
    assert [e.run_dir for e in entries if e.ok] == ["failed-baseline", "nogo-vllm", "demo-sim"]
    bad = [e for e in entries if not e.ok]
    assert len(bad) == 1 and bad[0].run_dir == "invalid-summary" and "invalid summary" in (bad[0].error or "")
    demo = next(e for e in entries if e.run_dir == "demo-sim")
    assert demo.href == "demo-sim/report.html" and demo.simulated is True and demo.verdict == "go"
    assert demo.ttft_p99_ms == {"gpu-only": 2650.0, "cpu": 1720.0, "tiered": 2460.0}
    nogo = next(e for e in entries if e.run_dir == "nogo-vllm")
    assert nogo.href is None  # no report.html yet: no dead link
    assert nogo.ttft_p99_ms["tiered"] is None  # the failed arm has no figure, not 0


def test_write_index_files(tmp_path: Path) -> None:
    results = _results(tmp_path)
    written = write_index(results)
    html = written["html"].read_text()
    data = json.loads(written["json"].read_text())
    assert [r["run_dir"] for r in data["runs"]][:3] == ["failed-baseline", "nogo-vllm", "demo-sim"]
    assert '<a href="demo-sim/report.html">demo-sim</a>' in html
    assert "SIMULATED" in html and "unreadable" in html
    assert html.count('<figure class="chart"') == 2  # scenarios demo and vllm-tiered
    assert "<script" not in html and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', "")


def test_trend_per_scenario_oldest_first(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for i, ttft in enumerate((1000.0, 1500.0, 1200.0)):
        base = sample_summary()
        arms = list(base.arms)
        top = arms[1].steps[-1]
        steps = [*arms[1].steps[:-1], top.model_copy(update={"ttft_ms": top.ttft_ms.model_copy(update={"p99": ttft})})]
        arms[1] = arms[1].model_copy(update={"steps": steps})
        write_sample_run(results / f"run-{i}", base.model_copy(update={
            "arms": arms, "run_id": f"run-{i}", "started_at": f"2025-01-0{i + 1}T00:00:00Z"}))
    entries, _ = scan_runs(results)
    trends = scenario_trends(entries)
    assert len(trends) == 1 and trends[0].scenario == "demo" and trends[0].runs == 3
    assert trends[0].chart.svg is not None


def test_many_runs_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_mod, "MAX_RUNS", 2)
    results = tmp_path / "results"
    for i in range(4):
        shutil.copytree(FIXTURES / "failed-baseline", results / f"r{i}")
    entries, left_out = scan_runs(results)
    assert len(entries) == 2 and left_out == 2
    assert {e.run_dir for e in entries} == {"r3", "r2"}


def test_empty_and_missing_results(tmp_path: Path) -> None:
    written = write_index(tmp_path)
    assert "No readable runs yet." in written["html"].read_text()
    with pytest.raises(ReportInputError, match="not a directory"):
        write_index(tmp_path / "nope")


def test_index_shows_p99_with_interval_and_n(tmp_path: Path) -> None:
    results = _results(tmp_path)
    entries, _ = scan_runs(results)
    demo = next(e for e in entries if e.run_dir == "demo-sim")
    ci = demo.ttft_p99_ci["cpu"]
    assert ci is not None and ci.resolved and ci.n == 907 and demo.ttft_p99_count["cpu"] == 907
    write_index(results)
    html = (results / "index.html").read_text()
    assert "cpu: <span class=\"v\">1,720 ms [1,580–1,924] n=907</span>" in html
    assert 'id="stats-legend"' in html
    data = json.loads((results / "index.json").read_text())
    run = next(r for r in data["runs"] if r["run_dir"] == "demo-sim")
    assert run["ttft_p99_ci"]["cpu"]["n"] == 907
    for chart in scenario_trends(entries):
        assert "$" not in str(chart.chart.svg) and "mathdefault" not in str(chart.chart.svg)

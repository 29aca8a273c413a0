"""Baseline drift in the results index: change points per scenario, arm and measure, tested by simulation.

Known answers: a planted 20% shift in a noisy history (4-5% CV) is found at its run (within one), a flat noisy
history is not; bad input (missing figures, NaNs, one run, 2000 runs) gives notes, never a traceback. Every history
is seeded. The false-positive rate and power over many histories are measured by ``python -m
tools.bench.drift`` (too slow for a unit test).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from harness.report import drift as drift_mod
from harness.report import index as index_mod
from harness.report.drift import scenario_drift, step_measures
from harness.report.index import IndexEntry, drift_report, refresh_index, scan_runs, scenario_trends, write_index
from harness.schema.summary import LaunchRecord, Summary
from harness.stats import changepoint
from tests.support.sample import XSS, hostile_summary, sample_summary, write_sample_run

SHIFT_AT = 18
RUNS = 30


def _with_figures(base: Summary, i: int, figures: dict[str, dict[str, float | None]], image: str | None) -> Summary:
    """``base`` as run ``i``: each arm's top step carries ``figures[arm]`` (ttft/itl p99, output tok/s)."""
    arms = []
    for arm in base.arms:
        fig = figures.get(arm.name)
        steps = list(arm.steps)
        if fig is not None and steps:
            top = steps[-1]
            steps[-1] = top.model_copy(update={
                "ttft_ms": top.ttft_ms.model_copy(update={"p99": fig.get("ttft"), "p99_ci": None}),
                "itl_ms": top.itl_ms.model_copy(update={"p99": fig.get("itl"), "p99_ci": None}),
                "output_tokens_per_s": fig.get("tps")})
        launch = (arm.launch or LaunchRecord(command="x", launcher="docker")).model_copy(update={"image": image})
        arms.append(arm.model_copy(update={"steps": steps, "launch": launch}))
    day = f"2025-{1 + i // 28:02d}-{1 + i % 28:02d}T03:23:00Z"
    return base.model_copy(update={"arms": arms, "run_id": f"run-{i:03d}", "started_at": day})


def history(n: int = RUNS, *, cv: float = 0.04, shift: float = 1.0, at: int = SHIFT_AT, shifted: str = "gpu-only",
            seed: int = 1, base: Summary | None = None, new_image_at: int | None = None) -> list[Summary]:
    """``n`` runs of the sample scenario with log-normal noise; ``shifted``'s p99 TTFT is x``shift`` from run ``at``."""
    rng = random.Random(seed)
    base = base or sample_summary()
    out = []
    for i in range(n):
        figures: dict[str, dict[str, float | None]] = {}
        for arm in base.arms:
            top = arm.steps[-1]
            factor = shift if (arm.name == shifted and i >= at) else 1.0
            ttft, itl, tps = top.ttft_ms.p99 or 1000.0, top.itl_ms.p99 or 50.0, top.output_tokens_per_s or 1000.0
            figures[arm.name] = {"ttft": ttft * factor * math.exp(rng.gauss(0, cv)),
                                 "itl": itl * math.exp(rng.gauss(0, cv)), "tps": tps * math.exp(rng.gauss(0, cv))}
        image = "vllm/vllm-openai:v0.33.0" if new_image_at is not None and i >= new_image_at else \
            "vllm/vllm-openai:v0.32.0"
        out.append(_with_figures(base, i, figures, image))
    return out


def entries_of(summaries: list[Summary]) -> list[IndexEntry]:
    """Index entries as scan_runs makes them, oldest first (in memory: no files)."""
    return [index_mod._from_summary(Path(s.run_id), s, None) for s in summaries]


def write_history(results: Path, summaries: list[Summary]) -> Path:
    for s in summaries:
        write_sample_run(results / s.run_id, s)
    return results


def test_planted_shift_is_found_at_its_run_and_flat_measures_are_not() -> None:
    series, points = scenario_drift("demo", entries_of(history(shift=1.2, new_image_at=SHIFT_AT)))
    assert len(series) == 9 and all(s.tested and s.runs == RUNS for s in series)  # 3 arms x 3 measures
    assert [(p.arm, p.measure) for p in points] == [("gpu-only", "ttft_p99_ms")]
    p = points[0]
    assert abs(p.run_index - SHIFT_AT) <= 1 and p.run_dir == f"run-{p.run_index:03d}"
    assert p.p_value <= p.alpha == pytest.approx(drift_mod.FAMILY_ALPHA / 9) and 1.12 < p.ratio < 1.3 and p.worse
    assert p.step == "c32" and p.n_before + p.n_after == RUNS
    if p.run_index == SHIFT_AT:
        assert p.image_before == "vllm/vllm-openai:v0.32.0" and p.image_after == "vllm/vllm-openai:v0.33.0"
        assert drift_mod.image_text(p) == "image vllm/vllm-openai:v0.32.0 → vllm/vllm-openai:v0.33.0"
    # the new image is within one run of it: the change point is the engine's, not drift
    assert p.cause == "engine-changed" and [(c.what, c.run_dir) for c in p.coincides] == [("image", "run-018")]
    assert "→" in drift_mod.change_text(p) and "worse" in drift_mod.change_text(p)


def test_flat_noisy_history_has_no_change_point() -> None:
    series, points = scenario_drift("demo", entries_of(history(cv=0.05, seed=2)))
    assert points == [] and all(s.tested for s in series)


def test_known_answer_over_seeds() -> None:
    """The rule itself, on 12 bare histories: a 20% shift at 4% CV is found within one run every time, the flat twins
    raise no alarm, and change points besides the planted one stay rare (each history is tested at 0.05/9)."""
    alpha = drift_mod.FAMILY_ALPHA / 9  # what each of a scenario's 9 histories must reach
    extra = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        noise = 1000.0 * np.exp(rng.normal(0.0, 0.04, RUNS))
        flat = changepoint.detect(noise, alpha=alpha, seed=seed)
        assert flat.tested and flat.change_points == [], seed
        shifted = noise.copy()
        shifted[SHIFT_AT:] *= 1.2
        found = changepoint.detect(shifted, alpha=alpha, seed=seed).change_points
        hits = [c for c in found if abs(c.index - SHIFT_AT) <= 1]
        assert len(hits) == 1 and hits[0].p_value <= alpha and 1.1 < hits[0].ratio < 1.3, seed
        extra += len(found) - 1
    assert extra <= 1


def test_same_history_same_answer_and_higher_throughput_is_better() -> None:
    runs = entries_of(history(shift=1.0, seed=4))
    for e in runs[15:]:
        e.step_measures["cpu"]["c32"]["output_tokens_per_s"] = 1.25 * (e.step_measures["cpu"]["c32"][
            "output_tokens_per_s"] or 0.0)
    first = scenario_drift("demo", runs)
    assert first == scenario_drift("demo", runs)  # seeded: the nightly index does not flicker
    (p,) = first[1]
    assert (p.arm, p.measure, p.worse) == ("cpu", "output_tokens_per_s", False)


def test_one_outlier_run_is_not_a_shift() -> None:
    runs = entries_of(history(cv=0.04, seed=5))
    runs[RUNS - 1].step_measures["gpu-only"]["c32"]["ttft_p99_ms"] = 9000.0  # a noisy runner, once
    runs[10].step_measures["gpu-only"]["c32"]["ttft_p99_ms"] = 8000.0
    assert scenario_drift("demo", runs)[1] == []


def test_too_few_runs_are_not_tested_and_say_so(tmp_path: Path) -> None:
    results = write_history(tmp_path / "results", history(n=4, shift=2.0, at=2))
    written = write_index(results)
    data = json.loads(written["json"].read_text())
    assert data["drift"]["points"] == [] and len(data["drift"]["series"]) == 9
    assert {s["note"] for s in data["drift"]["series"]} == {"too few runs (4) to test for drift (at least 12 needed)"}
    md = written["drift"].read_text()
    assert "too few runs (4) to test for drift" in md and "No history was tested for drift." in md
    assert "too few runs (4) to test for drift" in written["html"].read_text()


def test_index_html_json_and_markdown_carry_the_change_point(tmp_path: Path) -> None:
    results = write_history(tmp_path / "results", history(shift=1.2))
    written = write_index(results)
    data = json.loads(written["json"].read_text())
    (point,) = data["drift"]["points"]
    assert point["arm"] == "gpu-only" and point["measure"] == "ttft_p99_ms" and abs(point["run_index"] - 18) <= 1
    assert data["drift"]["min_runs"] == changepoint.MIN_RUNS and data["drift"]["method"].startswith("ruptures PELT")
    newest = data["runs"][0]
    assert newest["top_step"]["cpu"] == "c32" and "ttft_p99_ms" in newest["step_measures"]["cpu"]["c4"]
    html = written["html"].read_text()
    assert 'id="drift-points"' in html and point["run_dir"] in html and "1 change point(s)" in html
    assert f'<a href="{point["run_dir"]}/report.html">{point["run_dir"]}</a>' not in html  # no report.html: no link
    assert 'stroke-dasharray' in html  # the marker line in the trend chart
    md = written["drift"].read_text()
    rows = [line for line in md.split("\n\n")[2].splitlines() if line.startswith("| ")]  # the change points' table
    assert len(rows) == 2 and "| gpu-only |" in rows[1] and "p99 TTFT (c32)" in rows[1] and "worse" in rows[1]
    assert {line.replace("\\|", "").count("|") for line in rows} == {9}


def test_missing_figures_nan_and_a_failed_arm_leave_gaps_not_errors() -> None:
    summaries = history(shift=1.2, seed=3)
    runs = entries_of(summaries)
    for i in (3, 7, 21):  # a run lacking the figure, a NaN, an infinity
        runs[i].step_measures["gpu-only"]["c32"]["ttft_p99_ms"] = (None, math.nan, math.inf)[(3, 7, 21).index(i)]
    runs[5].step_measures.pop("cpu")  # the arm did not run
    runs[6].step_measures["tiered"] = {}  # it ran no step
    series, points = scenario_drift("demo", runs)
    gpu = next(s for s in series if (s.arm, s.measure) == ("gpu-only", "ttft_p99_ms"))
    assert gpu.runs == RUNS - 3 and gpu.tested
    assert [(p.arm, p.measure) for p in points] == [("gpu-only", "ttft_p99_ms")]
    assert next(s for s in series if s.arm == "cpu").runs == RUNS - 1
    # NaN and unresolved p99s in a real Summary are no figures either
    top = summaries[0].arms[0].steps[-1]
    nan = top.model_copy(update={"ttft_ms": top.ttft_ms.model_copy(update={"p99": math.nan}),
                                 "output_tokens_per_s": None})
    broken = summaries[0].model_copy(update={"arms": [summaries[0].arms[0].model_copy(update={"steps": [nan]})]})
    assert step_measures(broken)["gpu-only"]["c32"] == {"ttft_p99_ms": None, "itl_p99_ms": pytest.approx(
        nan.itl_ms.p99), "output_tokens_per_s": None}
    unresolved = sample_summary().arms[0].steps[0]  # c4: its p99 cannot be resolved
    assert unresolved.ttft_ms.p99_ci is not None and not unresolved.ttft_ms.p99_ci.resolved
    assert step_measures(sample_summary())["gpu-only"]["c4"]["ttft_p99_ms"] is None


def test_a_single_run_and_no_steps(tmp_path: Path) -> None:
    results = write_history(tmp_path / "results", history(n=1))
    assert refresh_index(results) is None
    assert "too few runs (1) to test for drift" in (results / "drift.md").read_text()
    empty = entries_of(history(n=12))
    for e in empty:
        e.step_measures.clear()
        e.top_step.clear()
    assert scenario_drift("demo", empty) == ([], [])


def test_2000_runs_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    base = entries_of(history(n=RUNS, shift=1.2))
    many = [base[i % RUNS].model_copy(update={"run_dir": f"r{i:04d}", "started_at": f"{i:06d}"}, deep=True)
            for i in range(2000)]
    newest_first = list(reversed(many))
    trends = scenario_trends(newest_first)
    assert len(trends) == 1 and trends[0].runs == index_mod.MAX_TREND_RUNS
    assert all(s.runs <= index_mod.MAX_TREND_RUNS for s in trends[0].drift_series)
    assert all(0 <= p.run_index < index_mod.MAX_TREND_RUNS for p in trends[0].drift)
    series, _ = scenario_drift("demo", many)  # asked for every run: only the newest MAX_HISTORY are tested
    assert all(s.runs <= drift_mod.MAX_HISTORY for s in series)


def test_drift_failures_never_fail_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = write_history(tmp_path / "results", history(n=12))

    def broken(*_args: object, **_kwargs: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(changepoint, "detect", broken)
    assert refresh_index(results) is None
    notes = {s["note"] for s in json.loads((results / "index.json").read_text())["drift"]["series"]}
    assert notes == {"not tested: RuntimeError: boom"}
    monkeypatch.setattr(index_mod, "scenario_drift", broken)
    assert refresh_index(results) is None
    assert "drift not computed: RuntimeError: boom" in (results / "drift.md").read_text()


def test_hostile_names_are_escaped_everywhere(tmp_path: Path) -> None:
    hostile = hostile_summary()
    base = hostile.model_copy(update={"arms": [hostile.arms[0].model_copy(update={"name": f"gpu {XSS}"}),
                                               *hostile.arms[1:]]})
    results = write_history(tmp_path / "results", history(shift=1.25, shifted=base.arms[0].name, base=base))
    written = write_index(results)
    entries, _ = scan_runs(results)
    report = drift_report(scenario_trends(entries))
    assert report.points and XSS in report.points[0].arm
    for name in ("html", "drift", "json"):
        text = written[name].read_text()
        assert "<script" not in text and "<img src=x" not in text, name
    assert "&lt;script&gt;" in written["drift"].read_text() and "&lt;script&gt;" in written["html"].read_text()


def _edited_at(summaries: list[Summary], at: int, *, factor: float, scenario: bool = False,
               version: bool = False) -> list[Summary]:
    """From run ``at`` every arm's p99 TTFT is x``factor`` and the scenario's hash (or the engine version) changed."""
    out = []
    for i, s in enumerate(summaries):
        if i < at:
            out.append(s)
            continue
        arms = []
        for arm in s.arms:
            top = arm.steps[-1]
            ttft = top.ttft_ms.model_copy(update={"p99": (top.ttft_ms.p99 or 0.0) * factor})
            arms.append(arm.model_copy(update={"steps": [*arm.steps[:-1], top.model_copy(update={"ttft_ms": ttft})]}))
        update: dict[str, object] = {"arms": arms}
        if scenario:
            update["scenario_hash"] = "sha256:5c2e1b77aa00"
        if version:
            update["versions"] = {**s.versions, "harness": "0.2.0"}
        out.append(s.model_copy(update=update))
    return out


def test_a_scenario_edit_at_a_change_point_is_attributed_to_it_not_to_drift() -> None:
    edited = _edited_at(history(cv=0.04, seed=6), SHIFT_AT, factor=1.3, scenario=True)
    _, points = scenario_drift("demo", entries_of(edited))
    ttft = [p for p in points if p.measure == "ttft_p99_ms"]
    assert {p.arm for p in ttft} == {"gpu-only", "cpu", "tiered"}  # every arm moved with the edit
    for p in points:
        assert p.cause == "scenario-changed", p
        (change,) = [c for c in p.coincides if c.what == "scenario"]
        assert (change.before, change.after) == ("sha256:3f2a9c0d5e7b", "sha256:5c2e1b77aa00")
        assert change.run_dir == f"run-{SHIFT_AT:03d}" and abs(change.offset) <= 1
        assert (p.scenario_hash_before, p.engine_version_before) != (None, None)
    # the same shift with the same scenario is drift; one with a new engine version is the engine's
    _, same = scenario_drift("demo", entries_of(_edited_at(history(cv=0.04, seed=6), SHIFT_AT, factor=1.3)))
    assert same and {p.cause for p in same} == {"drift"} and all(p.coincides == [] for p in same)
    assert {p.engine_version_after for p in same} == {"0.1.0"}
    bumped = _edited_at(history(cv=0.04, seed=6), SHIFT_AT, factor=1.3, version=True)
    _, engine = scenario_drift("demo", entries_of(bumped))
    assert engine and {p.cause for p in engine} == {"engine-changed"}
    assert {(c.what, c.before, c.after) for p in engine for c in p.coincides} == {("engine-version", "0.1.0", "0.2.0")}


def test_drift_md_names_the_scenario_change_and_what_a_quiet_history_can_miss(tmp_path: Path) -> None:
    edited = _edited_at(history(cv=0.04, seed=6), SHIFT_AT, factor=1.3, scenario=True)
    written = write_index(write_history(tmp_path / "results", edited))
    data = json.loads(written["json"].read_text())
    assert data["drift"]["points"] and {p["cause"] for p in data["drift"]["points"]} == {"scenario-changed"}
    tested = [s for s in data["drift"]["series"] if s["tested"]]
    assert len(tested) == 9
    for s in tested:  # each tested history: its spread and the smallest shift found 80% of the time at it
        assert 0.01 < s["spread"] < 0.08
        found = s["detectable"]["smallest"]
        assert found["found"] >= 0.8 * found["sims"] and 0.05 <= found["shift"] <= 0.3
        assert s["detectable"]["spread_simulated"] >= s["spread"]
    md = written["drift"].read_text()
    assert "| cpu | p99 TTFT (c32) | 30 |" in md  # the detectability table's row for the history
    assert "same image" not in md

"""Two demo runs made before the steady-state change (issue 32), rebuilt: every comparison is on the steady-state
samples it names, and every ratio is what an independent computation on those samples gives.

``tests/fixtures/runs/demo-quiet-precut`` (a quiet host) and ``demo-busy-precut`` (two CPU burners beside it) are
``make demo`` runs made by the harness before the change, with the ``summary.json`` it wrote then (both GO); the
rendered reports and the record parts (``requests.parquet`` holds the same rows) were left out. The independent
computation reads ``requests.parquet`` and ``steps.jsonl`` with pyarrow and json alone: MSER-5 evaluated from its
formula with loops, the cut applied in send order, numpy's quantiles and a plain token count over the window.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from harness.decision import evaluate, summarize
from harness.decision.summarize import rebuild_summary
from harness.schema.intervals import RatioCI
from harness.schema.summary import StepSummary, Summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
RUNS = ("demo-quiet-precut", "demo-busy-precut")
TOLERANCE = 0.01


class Step:
    """One arm's step from the raw files: its rows in send order and its journaled span."""

    def __init__(self, rows: dict[str, np.ndarray], start_ns: int, end_ns: int) -> None:
        order = np.lexsort((rows["request_id"], rows["send_ns"]))
        self.rows = {k: v[order] for k, v in rows.items()}
        self.start_ns, self.end_ns = start_ns, end_ns
        self.ok = np.array([e is None for e in self.rows["error_kind"]])
        first = self.rows["first_token_ns"].astype(float)
        self.ttft = (first - self.rows["send_ns"].astype(float)) / 1e6

    def mser5_cut(self) -> int:
        """The requests MSER-5 cuts (White 1997), from its formula: batch means of 5 of the successful requests' TTFT
        in send order, d minimising sum((Z_j - mean)^2) / (m - d)^2 over the first half; every request sent before the
        first kept one is cut."""
        series = self.ttft[self.ok & ~np.isnan(self.ttft)]
        m = len(series) // 5
        if m < 10:
            return 0
        z = [float(np.mean(series[5 * j: 5 * j + 5])) for j in range(m)]
        best, best_d = None, 0
        for d in range(m // 2 + 1):
            kept = z[d:]
            mean = sum(kept) / len(kept)
            value = sum((v - mean) ** 2 for v in kept) / len(kept) ** 2
            if best is None or value < best:
                best, best_d = value, d
        if best_d == 0:
            return 0
        first_kept = np.flatnonzero(self.ok & ~np.isnan(self.ttft))[5 * best_d]
        return int(first_kept)

    def steady(self, removed: int) -> tuple[np.ndarray, float, int]:
        """(steady-state TTFTs of successful requests, output tokens/s over the window, completions in it)."""
        ttft = self.ttft[removed:][self.ok[removed:] & ~np.isnan(self.ttft[removed:])]
        start = int(self.rows["send_ns"][removed]) if removed else self.start_ns
        end = self.rows["end_ns"].astype(float)
        done = self.ok & (end >= start) & (end <= self.end_ns)
        tokens = self.rows["output_tokens"].astype(float)[done].sum()
        return ttft, tokens / ((self.end_ns - start) / 1e9), int(done.sum())


def _raw_steps(run: Path) -> dict[tuple[str, int], Step]:
    table = pq.read_table(run / "requests.parquet").to_pydict()
    cols = {k: np.asarray(v, dtype=object) for k, v in table.items()}
    spans = {}
    for line in (run / "steps.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["step"] >= 0 and not e.get("drill") and not e.get("warmup"):
            spans[(e["arm"], e["step"])] = (e["start_ns"], e["end_ns"])
    out = {}
    superseded = np.array([bool(v) for v in cols.get("superseded", np.zeros(len(cols["arm"])))])
    for (arm, step), (start, end) in spans.items():
        sel = (cols["arm"] == arm) & (cols["step"] == step) & ~superseded & (cols["drill"] == None)  # noqa: E711
        sel &= np.array([start <= s <= end for s in cols["send_ns"]])
        rows = {k: v[sel] for k, v in cols.items()}
        rows["send_ns"] = rows["send_ns"].astype(np.int64)
        rows["request_id"] = rows["request_id"].astype(str)
        rows["first_token_ns"] = np.array([np.nan if v is None else float(v) for v in rows["first_token_ns"]])
        rows["end_ns"] = np.array([np.nan if v is None else float(v) for v in rows["end_ns"]])
        rows["output_tokens"] = np.array([np.nan if v is None else float(v) for v in rows["output_tokens"]])
        out[(arm, step)] = Step(rows, start, end)
    return out


@pytest.fixture(scope="module", params=RUNS)
def rebuilt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[str, Summary, dict[tuple[str, int], Step]]:
    run = tmp_path_factory.mktemp("runs") / request.param
    shutil.copytree(FIXTURES / request.param, run)
    return request.param, rebuild_summary(run), _raw_steps(run)


def _steps(summary: Summary) -> dict[tuple[str, int], StepSummary]:
    out = {(arm.name, s.index): s for arm in summary.arms for s in arm.steps}
    if summary.noise_floor is not None:
        out.update({(summary.noise_floor.arm, s.index): s for s in summary.noise_floor.steps})
    return out


def _comparisons(summary: Summary) -> list[tuple[str, str, int, str, RatioCI]]:
    """(arm, versus, step, measure, interval) of every effect row and A/A item."""
    out = [(arm.name, row.versus, row.step, row.measure, row.interval) for arm in summary.arms for row in arm.effects]
    if summary.noise_floor is not None:
        base = summary.arms[0].name
        out += [(summary.noise_floor.arm, base, it.step, it.measure, it.interval) for it in summary.noise_floor.items]
    return out


def test_the_cut_is_mser5_recomputed_from_the_raw_records(rebuilt: Any) -> None:
    _name, summary, raw = rebuilt
    for key, step in _steps(summary).items():
        state = step.steady_state
        assert state is not None, key
        assert state.requests_removed == raw[key].mser5_cut(), key
        assert state.requests == step.requests - state.requests_removed
        assert 2 * state.samples >= step.ttft_ms.count  # MSER-5 never cuts more than half the series
        assert state.settled or state.note  # a cut that shows no steady state says so


def test_every_compared_n_is_the_steady_state_sample_it_names(rebuilt: Any) -> None:
    _name, summary, _raw = rebuilt
    steps = _steps(summary)
    comparisons = _comparisons(summary)
    assert len(comparisons) >= 20
    for arm, versus, index, measure, ci in comparisons:
        mine, theirs = steps[(arm, index)].steady_state, steps[(versus, index)].steady_state
        assert mine is not None and theirs is not None
        assert ci.paired is False, (arm, index, measure)  # closed-loop steps: never paired
        throughput = measure == "output_tokens_per_s"
        want = (mine.completed, theirs.completed) if throughput else (mine.samples, theirs.samples)
        assert (ci.n, ci.n_versus) == want, (arm, versus, index, measure)
    for arm in summary.arms:
        for row in arm.effects:
            assert (row.n, row.n_versus) == (row.interval.n, row.interval.n_versus)
        for rule in arm.rules:
            if rule.interval is not None and rule.interval.n is not None and rule.kind == "regression":
                assert f"n={rule.interval.n}/{rule.interval.n_versus} (steady state)" in rule.message


def test_every_ratio_agrees_with_an_independent_computation(rebuilt: Any) -> None:
    _name, summary, raw = rebuilt
    steps = _steps(summary)
    for arm, versus, index, measure, ci in _comparisons(summary):
        if ci.ratio is None:
            continue
        mine = raw[(arm, index)].steady(steps[(arm, index)].steady_state.requests_removed)
        theirs = raw[(versus, index)].steady(steps[(versus, index)].steady_state.requests_removed)
        if measure == "output_tokens_per_s":
            expected = mine[1] / theirs[1]
        elif measure.startswith("ttft_p"):  # an improvement: theirs over mine
            q = float(measure.removeprefix("ttft_p")) / 100
            expected = np.quantile(theirs[0], q) / np.quantile(mine[0], q)
        else:  # a harm row, "p90 TTFT": the arm over the baseline
            q = float(measure.split()[0].removeprefix("p")) / 100
            expected = np.quantile(mine[0], q) / np.quantile(theirs[0], q)
        assert ci.ratio == pytest.approx(expected, rel=TOLERANCE), (arm, versus, index, measure)
        if ci.resolved:
            assert ci.lo is not None and ci.hi is not None and ci.lo <= ci.ratio <= ci.hi


def test_the_verdict_does_not_depend_on_pairing(rebuilt: Any, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """Declaring every step a planned schedule (where pairs would be allowed) changes nothing: in these closed-loop
    steps the arms got different distances down the plan, so no step served the same requests."""
    name, summary, _raw = rebuilt
    monkeypatch.setattr(summarize, "planned_steps", lambda scenario: frozenset(range(len(scenario.steps.levels))))
    assert evaluate.planned_steps is not summarize.planned_steps
    run = tmp_path / name
    shutil.copytree(FIXTURES / name, run)
    again = rebuild_summary(run)
    assert (again.verdict, again.recommended_arm) == (summary.verdict, summary.recommended_arm)
    assert [a.decision for a in again.arms] == [a.decision for a in summary.arms]
    assert [c[4] for c in _comparisons(again)] == [c[4] for c in _comparisons(summary)]

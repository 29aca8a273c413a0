"""The two clocks agree (issue 33, item 6): the demo scenario on the real clock and on the virtual clock.

Per measured step of every arm, the virtual run's TTFT p50 and p95, output throughput and prompt-token hit share
must be consistent with the real-time run's: each comparison is an interval for virtual / real (the harness's own
two-sample bootstraps: :func:`harness.stats.intervals.quantile_ratio` for percentiles, ``sum_ratio`` over time
bins for throughput; the hit share by an IID bootstrap of requests with ``arch``), at a family-wise confidence of
95% over all comparisons (Bonferroni), and each interval must contain 1. The tier shares (GPU/CPU/disk hits over
prompt tokens, from the servers' counters) must agree within that step's hit-share interval.

A real-time step the simulator itself fell behind in (its journaled ``sim_behind_s`` over 5% of the step, the
harness's own host-contention budget: the host's CPU, not the model) does not show the model and is left out; the
test needs most steps to remain, so it needs a quiet host. About five minutes (the real-time demo's): ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arch.bootstrap import IIDBootstrap

from harness.analysis.latency import derive_latencies
from harness.analysis.load import table_to_frame
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.rundir import journal
from harness.rundir.attempts import counted_rows
from harness.rundir.entries import StepEntry
from harness.rundir.layout import RunDir
from harness.rundir.parts import find_parts, read_parts
from harness.stats.intervals import binned, quantile_ratio, sum_ratio

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
MAX_BEHIND_SHARE = 0.05  # the harness's own host-contention budget
FAMILY_CONFIDENCE = 0.95
MEASURES_PER_STEP = 4  # p50, p95, throughput, hit share
BINS = 16


def _steps(run_dir: Path) -> dict[tuple[str, int], tuple[StepEntry, Any]]:
    run = RunDir(run_dir)
    entries = [e for e in journal.read_step_entries(run) if e.measured and not e.drill]
    out = {}
    for entry in entries:
        table, _ = read_parts(find_parts(run.records_dir(entry.arm)))
        df = derive_latencies(table_to_frame(table))
        df = counted_rows(df[df["step"] == entry.step], [entry])
        out[(entry.arm, entry.step)] = (entry, df.sort_values("send_ns"))
    return out


def _share_interval(cached: np.ndarray, prompt: np.ndarray, confidence: float) -> tuple[float, float]:
    boot = IIDBootstrap(cached, prompt, seed=7)
    ci = boot.conf_int(lambda c, p: np.sum(c) / np.sum(p), reps=2000, method="percentile", size=confidence)
    return float(ci[0, 0]), float(ci[1, 0])


def disagreements(real_dir: Path, virtual_dir: Path) -> tuple[list[tuple[str, int]], list[str]]:
    """(the steps compared, what disagrees) between a real-time and a virtual run of one scenario."""
    steps_r, steps_v = _steps(real_dir), _steps(virtual_dir)
    summary_r = {(a["name"], s["index"]): s for a in json.loads((real_dir / "summary.json").read_text())["arms"]
                 for s in a["steps"]}
    summary_v = {(a["name"], s["index"]): s for a in json.loads((virtual_dir / "summary.json").read_text())["arms"]
                 for s in a["steps"]}
    compared = [k for k, (e, _df) in steps_r.items() if k in steps_v
                and (e.sim_behind_s or 0.0) <= MAX_BEHIND_SHARE * e.duration_s]
    confidence = 1.0 - (1.0 - FAMILY_CONFIDENCE) / (MEASURES_PER_STEP * max(1, len(compared)))
    failures: list[str] = []
    for key in compared:
        (er, dr), (ev, dv) = steps_r[key], steps_v[key]
        for q in (0.5, 0.95):
            ci = quantile_ratio(dv["ttft_ms"].to_numpy(), dr["ttft_ms"].to_numpy(), q, confidence)
            if not (ci.resolved and ci.lo is not None and ci.hi is not None and ci.lo <= 1.0 <= ci.hi):
                failures.append(f"{key} TTFT p{q * 100:g}: virtual/real {ci.ratio} [{ci.lo}, {ci.hi}]")
        tput = sum_ratio(binned(dv["send_ns"], dv["output_tokens"].fillna(0), ev.start_ns, ev.end_ns, BINS),
                         binned(dr["send_ns"], dr["output_tokens"].fillna(0), er.start_ns, er.end_ns, BINS),
                         ev.duration_s, er.duration_s, confidence, n=len(dv), n_versus=len(dr))
        if not (tput.resolved and tput.lo is not None and tput.hi is not None and tput.lo <= 1.0 <= tput.hi):
            failures.append(f"{key} throughput: virtual/real {tput.ratio} [{tput.lo}, {tput.hi}]")
        ok_v, ok_r = dv[dv["ok"]], dr[dr["ok"]]
        lo_v, hi_v = _share_interval(ok_v["cached_tokens"].to_numpy(float), ok_v["prompt_tokens"].to_numpy(float),
                                     confidence)
        lo_r, hi_r = _share_interval(ok_r["cached_tokens"].to_numpy(float), ok_r["prompt_tokens"].to_numpy(float),
                                     confidence)
        if hi_v < lo_r or hi_r < lo_v:
            failures.append(f"{key} hit share: virtual [{lo_v:.3f}, {hi_v:.3f}] vs real [{lo_r:.3f}, {hi_r:.3f}]")
        width = max(hi_r - lo_r, hi_v - lo_v)
        if key not in summary_r or key not in summary_v:
            continue  # the A/A re-run's steps have no summary of their own (they set the noise floor)
        hr, hv = summary_r[key]["hit_tokens"], summary_v[key]["hit_tokens"]
        for tier in ("gpu", "cpu", "disk"):
            share_r, share_v = hr[tier] / hr["prompt"], hv[tier] / hv["prompt"]
            if abs(share_v - share_r) > width:
                failures.append(f"{key} {tier} share: virtual {share_v:.3f} vs real {share_r:.3f} (> {width:.3f})")
    return compared, failures


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_virtual_clock_agrees_with_real_time(tmp_path: Path) -> None:
    real = run_rollout(DEMO, RunOptions(out_dir=tmp_path / "real", write_reports=False), say=lambda _m: None)
    virtual = run_rollout(DEMO, RunOptions(out_dir=tmp_path / "virtual", write_reports=False, virtual=True),
                          say=lambda _m: None)
    assert real.run_dir is not None and virtual.run_dir is not None
    assert virtual.exit_code == real.exit_code, (real.message, virtual.message)
    compared, failures = disagreements(real.run_dir, virtual.run_dir)
    measured = [e for e in journal.read_step_entries(RunDir(real.run_dir)) if e.measured and not e.drill]
    assert len(compared) >= 0.6 * len(measured), f"the host was too busy: only {compared} could be compared"
    assert not failures, "\n".join(failures)

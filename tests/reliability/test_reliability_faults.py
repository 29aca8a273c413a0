"""Harness robustness against a misbehaving server: a crash mid-step, 5xx bursts, malformed SSE, stalled streams,
connection refused at start, a readiness timeout. The run never hangs or raises; each problem is recorded where it
happened and the run goes on (or, for the baseline, stops with exit 4)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rel_support import Progress, admin_faults, tiered_arm

from harness.config.steps import StepLevel
from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.rundir import journal
from harness.schema.summary import ArmSummary

STEP_S = 1.5
IDLE_S = 1.0


def _inject(progress: Progress, arm: str, at_step: Callable[[str], object]) -> None:
    progress.on(rf"^\[{arm}\] step 0 ", lambda _line, p: at_step(p.urls[arm]))


def test_faulty_servers_are_recorded_and_the_run_goes_on(scenario: Callable[..., Path], tmp_path: Path) -> None:
    """baseline: a burst of HTTP 500s; cpu arm: crashes mid-step; tiered: malformed SSE; tiered-b: stalled streams."""
    path = scenario("faults", arms=("baseline", "cpu-16g", "cpu-16g-disk"),
                    extra_arms=[tiered_arm("tiered-b", tmp_path / "kv-b")],
                    steps={"stream_idle_timeout_s": IDLE_S, "drain_timeout_s": 3})
    progress = Progress()

    def burst(url: str) -> None:
        progress.later(0.3, lambda: admin_faults(url, error_rate=1.0))
        progress.later(0.8, lambda: admin_faults(url, error_rate=0.0))

    def stall(url: str) -> None:
        admin_faults(url, stall_after_tokens=2)
        progress.later(0.6, lambda: admin_faults(url, stall_after_tokens=None))

    _inject(progress, "baseline", burst)
    _inject(progress, "cpu-16g", lambda url: admin_faults(url, crash_after_s=0.8))
    _inject(progress, "cpu-16g-disk", lambda url: admin_faults(url, malformed_sse_rate=0.3))
    _inject(progress, "tiered-b", stall)
    t0 = time.monotonic()
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=progress)
    progress.join()
    assert time.monotonic() - t0 < 120
    assert result.summary is not None and result.run_dir is not None, result.message
    arms: dict[str, ArmSummary] = {a.name: a for a in result.summary.arms}

    base = arms["baseline"]
    assert base.decision == "baseline" and base.failure is None
    kinds = base.steps[0].errors_by_kind
    assert kinds.get("http_5xx", 0) >= 1, kinds
    assert base.steps[0].requests > base.steps[0].errors, "requests after the burst succeed again"

    crashed = arms["cpu-16g"]
    assert crashed.decision == "failed" and crashed.failure is not None
    assert crashed.failure.phase == "step" and "exited with code 1" in crashed.failure.message
    assert any("simulated crash" in line for line in crashed.failure.log_tail)
    df = pd.read_parquet(result.run_dir / "requests.parquet")
    assert ((df["arm"] == "cpu-16g") & df["error_kind"].isna()).sum() > 0, "requests done before the crash are kept"

    malformed = arms["cpu-16g-disk"]
    assert malformed.decision != "failed" and malformed.steps, "the run went on after the crashed arm"
    assert malformed.steps[0].errors_by_kind.get("malformed_stream", 0) >= 1, malformed.steps[0].errors_by_kind

    stalled = arms["tiered-b"]
    assert stalled.decision != "failed"
    assert stalled.steps[0].errors_by_kind.get("stalled", 0) >= 1, stalled.steps[0].errors_by_kind
    span = next(e for e in journal.read(result.run_dir / "steps.jsonl") if e["arm"] == "tiered-b" and e["step"] == 0)
    assert (span["end_ns"] - span["start_ns"]) / 1e9 < STEP_S + IDLE_S + 3 + 5, "stalled streams are cut, not waited"


def test_readiness_timeout_fails_the_baseline_quickly(scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = scenario("slowstart", arms=("baseline", "cpu-16g"),
                    engine={"readiness_timeout_s": 1.5, "sim_args": ["--startup-delay-s", "60"]})
    t0 = time.monotonic()
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=lambda _m: None)
    assert time.monotonic() - t0 < 40
    assert result.exit_code == 4 and result.summary is not None
    base = result.summary.arms[0]
    assert base.decision == "failed" and base.failure is not None
    assert base.failure.phase == "readiness" and "not ready after 1.5 s" in base.failure.message
    assert result.summary.arms[1].decision == "skipped", "no comparison without a baseline"


def test_connection_refused_at_start(scenario: Callable[..., Path], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A server process that never listens: readiness gives up with the connection error, and the process is
    stopped (the autouse fixture checks nothing is left)."""
    real = build_launch_spec

    def never_listens(*args: Any, **kwargs: Any) -> LaunchSpec:
        spec = real(*args, **kwargs)
        return spec.model_copy(update={"entrypoint": ["sleep", "60"], "args": [], "readiness_timeout_s": 1.5})

    monkeypatch.setattr("harness.run.arm_server.build_launch_spec", never_listens)
    path = scenario("refused", arms=("baseline",))
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=lambda _m: None)
    assert result.exit_code == 4 and result.summary is not None
    failure = result.summary.arms[0].failure
    assert failure is not None and failure.phase == "readiness"
    assert "ConnectError" in failure.message or "refused" in failure.message.lower(), failure.message


def test_load_step_against_a_refusing_port_ends_early(tmp_path: Path) -> None:
    """The load generator facing a port nobody listens on: connection errors, an early end, no hang."""
    from harness.config.workload import RequestClass, TokenRange, WorkloadSpec
    from harness.load import StepRun, run_step, shutdown_runners
    from harness.run.ports import free_port

    port = free_port()
    wl = WorkloadSpec(classes=[RequestClass(name="c", weight=1, prompt_tokens=TokenRange(min=50, max=60),
                                            output_tokens=TokenRange(min=4, max=4))])
    req = StepRun(base_url=f"http://127.0.0.1:{port}", served_model="m", workload=wl,
                  level=StepLevel(concurrency=2, duration_s=20), step_index=0, step_label="c2", arm="a",
                  records_dir=tmp_path / "records", request_timeout_s=5, stream_idle_timeout_s=5, drain_timeout_s=2,
                  max_model_len=None, tokenizer=None)
    t0 = time.monotonic()
    try:
        outcome = run_step(req, threading.Event())
    finally:
        shutdown_runners()
    assert time.monotonic() - t0 < 15, "a refusing server ends the step early"
    assert outcome.error is not None and outcome.requests >= 1
    assert outcome.errors == outcome.requests, "nothing succeeded"
    assert outcome.errors_by_kind.get("connection", 0) >= 1
    assert set(outcome.errors_by_kind) <= {"connection", "cancelled"}, outcome.errors_by_kind  # in flight at the end

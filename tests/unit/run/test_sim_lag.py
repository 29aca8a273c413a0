"""The simulator's time lost to its own CPU: read from its admin endpoint around each step, warned about when it is
a noticeable share of the step, and never read from a real engine."""

from __future__ import annotations

import httpx
import pytest

from harness.decision.summarize import SIM_LAG_SHARE, sim_lag_warning
from harness.engines.spec import LaunchSpec
from harness.run.sim_lag import lag_during, sim_behind_s
from harness.rundir.entries import StepEntry
from harness.schema.summary import StepSummary
from tests.support.sim import running_sim


def _spec(engine: str) -> LaunchSpec:
    return LaunchSpec(engine=engine, arm="a", entrypoint=["x"], args=[], container_port=8000, host_port=8000,  # type: ignore[arg-type]
                      served_model_name="m")


def test_a_simulator_reports_its_lag_and_a_real_engine_is_never_asked() -> None:
    with running_sim(in_process=True, profile="demo", time_scale=0.05) as sim:
        lag = sim_behind_s(sim.base_url, _spec("sim"))
        assert lag is not None and lag >= 0.0
        state = httpx.get(sim.base_url + "/admin/state", timeout=5).json()
        assert lag <= state["behind_s"]
        assert sim_behind_s(sim.base_url, _spec("vllm")) is None  # a real engine has no such endpoint to ask
    assert sim_behind_s("http://127.0.0.1:9", _spec("sim")) is None  # gone: no figure, no error
    assert sim_behind_s("http://127.0.0.1:9", None) is None


def test_the_lag_of_a_step_is_the_difference_of_two_readings() -> None:
    assert lag_during(1.5, 4.0) == pytest.approx(2.5)
    assert lag_during(None, 4.0) is None and lag_during(1.0, None) is None
    assert lag_during(3.0, 1.0) is None  # the simulator restarted between the readings


def _step(duration_s: float) -> StepSummary:
    return StepSummary(index=2, label="c32", duration_s=duration_s)


def test_a_step_that_lost_a_noticeable_share_is_warned_about() -> None:
    text = sim_lag_warning("tiered", _step(16.0), 2.03)
    assert text is not None and text.startswith("tiered step 2: the simulator fell 2.03 s behind the wall clock")
    assert "(13%)" in text and "not modelled physics" in text
    assert sim_lag_warning("tiered", _step(16.0), SIM_LAG_SHARE * 16.0) is None  # at the share: not yet
    assert sim_lag_warning("tiered", _step(16.0), 0.3) is None
    assert sim_lag_warning("tiered", _step(16.0), None) is None  # a real engine, or an unreachable simulator
    assert sim_lag_warning("tiered", _step(0.0), 5.0) is None


def test_the_step_journal_keeps_the_lag_and_refuses_a_negative_one() -> None:
    entry = StepEntry(arm="a", step=0, start_ns=1, end_ns=2, sim_behind_s=0.5)
    assert StepEntry.model_validate_json(entry.model_dump_json()).sim_behind_s == 0.5
    with pytest.raises(ValueError):
        StepEntry(arm="a", step=0, start_ns=1, end_ns=2, sim_behind_s=-1.0)

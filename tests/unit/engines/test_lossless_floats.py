"""Every float an adapter renders parses back to exactly the scenario's value (``%g`` kept 6 significant digits)."""

from __future__ import annotations

import pytest

from harness.config.arms import Arm
from harness.config.engine import EngineSpec, SimNoise
from harness.engines import build_launch_spec
from harness.engines.sizes import float_flag, gib_flag

BASELINE = Arm.model_validate({"name": "baseline", "tier": "gpu-only"})


def value_after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(("number", "text"), [(0.1234567, "0.1234567"), (0.9, "0.9"), (1.0, "1"), (16.0, "16"),
                                              (0.0048828125, "0.0048828125"), (1e-07, "1e-07"), (0.0, "0")])
def test_float_flag_round_trips(number: float, text: str) -> None:
    assert float_flag(number) == text and float(text) == number
    assert gib_flag(number) == text


def test_vllm_gpu_memory_utilization_renders_exactly() -> None:
    engine = EngineSpec(kind="vllm", model="m", image="vllm/vllm-openai:v0.32.0", gpu_memory_utilization=0.1234567)
    assert value_after(build_launch_spec(engine, BASELINE).args, "--gpu-memory-utilization") == "0.1234567"


def test_simulator_floats_render_exactly() -> None:
    engine = EngineSpec(kind="sim", model="m", gpu_memory_utilization=0.1234567, sim_time_scale=0.3333333333,
                        sim_noise=SimNoise(seed=1, step_jitter=0.0123456789, run_drift=0.1234567,
                                           drift_per_hour=0.00987654321))
    args = build_launch_spec(engine, BASELINE).args
    assert value_after(args, "--gpu-memory-utilization") == "0.1234567"
    assert value_after(args, "--time-scale") == "0.3333333333"
    assert value_after(args, "--step-jitter") == "0.0123456789"
    assert value_after(args, "--run-drift") == "0.1234567"
    assert value_after(args, "--drift-per-hour") == "0.00987654321"

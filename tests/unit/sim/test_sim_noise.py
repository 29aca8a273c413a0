"""Seeded noise of the simulator (harness/sim/noise.py): off = today's timings, reproducible, moments right."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from sim_unit_helpers import drive, make_cfg

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines import build_launch_spec
from harness.sim.cli import StartupError, resolve_serve
from harness.sim.noise import Noise
from harness.sim.noise_spec import NoiseError, NoiseSpec, launch_seed
from harness.sim.scheduler import EngineCore
from harness.sim.transfer import DiskQueue

Timings = list[tuple[float | None, float | None]]


def _run(noise: NoiseSpec | None = None, n: int = 12) -> tuple[Timings, list[float]]:
    """A small fixed workload on a fake clock: per-request (first token, finished) and every step's duration."""
    cfg = make_cfg(64)
    if noise is not None:
        cfg = dataclasses.replace(cfg, noise=noise)
    core = EngineCore(cfg)
    reqs = [core.new_request(f"r{i}", list(range(i * 1000, i * 1000 + 20 + 7 * i)), 4 + i % 3, i, 0.0)
            for i in range(n)]
    for req in reqs:
        core.add(req)
    durations: list[float] = []
    now = 0.0
    for _ in range(10_000):
        if not core.has_work():
            break
        plan = core.schedule(now)
        assert plan is not None
        durations.append(plan.duration)
        core.complete(plan)
        now = plan.end
    assert not core.has_work()
    return [(r.first_token_at, r.finished_at) for r in reqs], durations


def test_noise_off_is_exactly_todays_timings() -> None:
    today, steps = _run(None)
    for off in (NoiseSpec(), NoiseSpec(seed=12345), NoiseSpec(seed=9, disk_read_tail_factor=50.0)):
        assert _run(off) == (today, steps)
    assert EngineCore(make_cfg(64)).noise is None
    # and the step time is still the documented formula, bit for bit
    cfg = make_cfg(64)
    core = EngineCore(cfg)
    core.add(core.new_request("a", list(range(10)), 2, 0, 0.0))
    plan = core.schedule(0.0)
    assert plan is not None
    c = cfg.compute
    assert plan.duration == c.step_overhead_s + 10 * c.prefill_s_per_token + c.prefill_s_per_token_ctx * 45


def test_same_seed_same_timings_other_seed_other_timings() -> None:
    spec = NoiseSpec(seed=7, step_jitter=0.2, run_drift=0.1, drift_per_hour=0.5)
    first = _run(spec)
    assert _run(spec) == first
    assert _run(dataclasses.replace(spec, seed=8)) != first
    assert first != _run(None)


def test_step_durations_are_the_noise_free_ones_times_the_factors() -> None:
    spec = NoiseSpec(seed=3, step_jitter=0.1, run_drift=0.2)
    _t, base = _run(None, n=1)  # one request: the schedule does not depend on the timings
    _t, noisy = _run(spec, n=1)
    ref = Noise(spec)
    assert len(base) == len(noisy)
    for b, x in zip(base, noisy, strict=True):
        assert x == pytest.approx(b * ref.compute_factor(0.0), rel=1e-12)


def test_linear_drift_over_modelled_time() -> None:
    noise = Noise(NoiseSpec(drift_per_hour=0.06))
    assert noise.run_factor == 1.0
    assert noise.compute_factor(0.0) == 1.0
    assert noise.compute_factor(1800.0) == pytest.approx(1.03)
    assert noise.compute_factor(3600.0) == pytest.approx(1.06)


def test_step_jitter_moments() -> None:
    sigma = 0.2
    noise = Noise(NoiseSpec(seed=11, step_jitter=sigma))
    f = np.array([noise.step_factor() for _ in range(20_000)])
    assert f.mean() == pytest.approx(1.0, abs=0.01)  # mean-corrected
    logs = np.log(f)
    assert logs.std() == pytest.approx(sigma, rel=0.03)
    assert logs.mean() == pytest.approx(-sigma * sigma / 2, abs=0.005)
    assert np.median(f) == pytest.approx(math.exp(-sigma * sigma / 2), abs=0.01)


def test_run_drift_one_draw_per_start_with_the_right_spread() -> None:
    sigma = 0.05
    factors = np.array([Noise(NoiseSpec(seed=s, run_drift=sigma)).run_factor for s in range(1500)])
    assert np.log(factors).std() == pytest.approx(sigma, rel=0.08)
    assert factors.mean() == pytest.approx(1.0, abs=0.005)
    noise = Noise(NoiseSpec(seed=4, run_drift=sigma))
    assert {noise.compute_factor(t) for t in (0.0, 10.0, 999.0)} == {noise.run_factor}  # fixed for the run


def test_knobs_draw_from_independent_streams() -> None:
    drift_only = Noise(NoiseSpec(seed=5, run_drift=0.1)).run_factor
    everything = Noise(NoiseSpec(seed=5, run_drift=0.1, step_jitter=0.3, disk_read_tail_prob=0.5,
                                 disk_read_tail_factor=9.0))
    assert everything.run_factor == drift_only


def test_launch_seed_is_stable_and_differs_by_arm() -> None:
    assert launch_seed(0, "baseline") == launch_seed(0, "baseline")
    seeds = {launch_seed(s, a) for s in (0, 1) for a in ("baseline", "baseline~aa", "cpu-16g")}
    assert len(seeds) == 6
    assert all(0 <= s < 2**63 for s in seeds)
    drifts = {Noise(NoiseSpec(seed=launch_seed(1, a), run_drift=0.05)).run_factor for a in ("baseline", "baseline~aa")}
    assert len(drifts) == 2


def test_launch_seed_golden() -> None:
    # blake2b, not Python's salted hash(): the same in every process and on every machine
    assert launch_seed(42, "baseline") == 8457359229268267078


def test_disk_read_tail_share_and_factor() -> None:
    noise = Noise(NoiseSpec(seed=2, disk_read_tail_prob=0.1, disk_read_tail_factor=20.0))
    draws = [noise.disk_read_factor() for _ in range(10_000)]
    assert set(draws) == {1.0, 20.0}
    assert draws.count(20.0) / len(draws) == pytest.approx(0.1, abs=0.01)
    assert noise.slow_reads == draws.count(20.0)
    disk = DiskQueue(1e9, 0.0, 4)
    disk.extra = lambda: 20.0
    start, end = disk.submit(0.0, 1, 10**6)
    assert end - start == pytest.approx(0.02)


def test_disk_tail_reaches_the_engines_disk_reads(tmp_path: Path) -> None:
    cfg = make_cfg(8, cpu_chunks=4, fs_root=tmp_path)  # the tier holds a whole prompt: vLLM stores all or none
    cfg = dataclasses.replace(cfg, noise=NoiseSpec(seed=1, disk_read_tail_prob=1.0, disk_read_tail_factor=10.0))
    core = EngineCore(cfg)
    assert core.offload is not None and core.offload.disk_read is not None
    assert core.offload.disk_read.extra is not None
    assert core.offload.disk_write is not None and core.offload.disk_write.extra is None  # reads only
    for i in range(6):  # fill the CPU tier so chunks cascade to disk, then come back for the first prompt
        core.add(core.new_request(f"w{i}", list(range(i * 100, i * 100 + 13)), 1, i, 0.0))
    end = drive(core)
    again = core.new_request("again", list(range(13)), 1, 0, end)
    core.add(again)
    drive(core, end)
    assert again.disk_hit_tokens > 0
    assert core.noise is not None and core.noise.slow_reads >= 1


@pytest.mark.parametrize("changes", [{"step_jitter": -0.1}, {"run_drift": 3.0}, {"drift_per_hour": -1.0},
                                     {"disk_read_tail_prob": 1.5}, {"disk_read_tail_factor": 0.5}, {"seed": -1}])
def test_bad_noise_rejected(changes: dict[str, float]) -> None:
    with pytest.raises(NoiseError):
        NoiseSpec(**changes).validate()  # type: ignore[arg-type]
    flag = {"seed": "noise_seed"}.get(next(iter(changes)), next(iter(changes)))
    with pytest.raises(StartupError, match="harness-sim: error:"):
        resolve_serve({flag: next(iter(changes.values()))})


def test_serve_flags_reach_the_engine_config_and_banner() -> None:
    _opts, cfg, banner = resolve_serve({})
    assert cfg.noise == NoiseSpec() and banner.endswith("noise off")
    _opts, cfg, banner = resolve_serve({"noise_seed": 5, "step_jitter": 0.05, "run_drift": 0.03,
                                        "drift_per_hour": 0.1, "disk_read_tail_prob": 0.02,
                                        "disk_read_tail_factor": 30.0})
    assert cfg.noise == NoiseSpec(5, 0.05, 0.03, 0.1, 0.02, 30.0)
    assert "noise: seed 5, step jitter 0.05, run drift 0.03, drift 0.1/h, disk-read tail 0.02 x30" in banner


def _sim_args(engine: EngineSpec, arm: str) -> list[str]:
    return build_launch_spec(engine, Arm.model_validate({"name": arm, "tier": "gpu-only"})).args


def test_scenario_sim_noise_renders_per_arm_seeds() -> None:
    plain = EngineSpec.model_validate({"kind": "sim", "model": "m"})
    assert plain.sim_noise is None and "--noise-seed" not in _sim_args(plain, "baseline")
    engine = EngineSpec.model_validate({"kind": "sim", "model": "m", "sim_noise": {
        "seed": 42, "step_jitter": 0.05, "run_drift": 0.03, "drift_per_hour": 0.02}})
    args = _sim_args(engine, "baseline")
    i = args.index("--noise-seed")
    assert args[i:i + 8] == ["--noise-seed", str(launch_seed(42, "baseline")), "--step-jitter", "0.05",
                             "--run-drift", "0.03", "--drift-per-hour", "0.02"]
    assert _sim_args(engine, "baseline") == args  # reproducible
    for other in ("baseline-aa", "cpu-16g"):
        seed = _sim_args(engine, other)[_sim_args(engine, other).index("--noise-seed") + 1]
        assert seed == str(launch_seed(42, other)) != args[i + 1]
    # an A/A re-run may carry a name the scenario could not (e.g. "baseline~aa"): the seed follows the name
    aa = build_launch_spec(engine, Arm.model_validate({"name": "baseline", "tier": "gpu-only"}).model_copy(
        update={"name": "baseline~aa"})).args
    assert aa[aa.index("--noise-seed") + 1] == str(launch_seed(42, "baseline~aa")) != args[i + 1]


@pytest.mark.parametrize("bad", [{"seed": -1}, {"step_jitter": -0.1}, {"run_drift": 5}, {"jitter": 0.1}])
def test_scenario_sim_noise_validated(bad: dict[str, float]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        EngineSpec.model_validate({"kind": "sim", "model": "m", "sim_noise": bad})

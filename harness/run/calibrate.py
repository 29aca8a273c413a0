"""``harness plan --calibrate``: ask the simulator how many requests each level completes per second.

For ``engine.kind: sim`` only. The baseline arm's simulator (the scenario's profile and flags, exactly the command
the run would launch, parsed by the simulator's own command line) is started in-process
(:func:`harness.sim.embedded.embedded_sim`), and each level is driven for ``seconds`` with the harness's own load path
(:func:`harness.load.run_step`, the same request plan as the run). The rate is the step's successful requests over
its planned seconds; the spread (lognormal sigma per metric, from p50 and p95) comes from the same requests. The
server starts empty and the levels run back to back, so the first level sees a colder cache than the run will: the
figures are estimates, named as such.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import typer

from harness.config.scenario import Scenario
from harness.engines import build_launch_spec
from harness.load.runners import prewarm_runner, shutdown_runners
from harness.plan.power.model import LevelRate, Throughput
from harness.plan.power.rates import PowerInputError
from harness.plan.power.resolve import sigma_from_quantiles
from harness.sim.cli import sim_app
from harness.sim.embedded import SimStartError, embedded_sim
from harness.workload.tokens import calibrate_tokenizer

DEFAULT_SECONDS = 5.0
MAX_SECONDS = 60.0
_NOT_SERVE_FLAGS = {"host", "port", "ground_truth"}


def serve_params(args: list[str]) -> dict[str, Any]:
    """The ``harness sim serve`` parameters (typed, as the command parses them) of a launch spec's arguments."""
    group: Any = typer.main.get_command(sim_app)  # typer's own click: no public type to check against
    command = group.commands["serve"]
    try:
        ctx = command.make_context("serve", list(args))
    except Exception as exc:  # a usage error of the simulator's command line
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        raise PowerInputError(f"--calibrate: the simulator's flags do not parse: {text}") from None
    params = {k: v for k, v in ctx.params.items() if k not in _NOT_SERVE_FLAGS}
    for key in ("profile_file",):
        if params.get(key) is not None:
            params[key] = Path(params[key])
    if params.get("served_model_name") is not None:
        params["served_model_name"] = list(params["served_model_name"])
    return params


def _sigmas(records: Path) -> dict[str, list[float]]:
    from harness.analysis.latency import derive_latencies, float_column
    from harness.analysis.load import table_to_frame
    from harness.rundir.parts import find_parts, read_parts

    parts = find_parts(records)
    if not parts:
        return {}
    table, _ = read_parts(parts)
    df = derive_latencies(table_to_frame(table))
    if "ok" in df:
        df = df[df["ok"].to_numpy(dtype=bool)]
    out: dict[str, list[float]] = {}
    for metric, column in (("ttft", "ttft_ms"), ("e2e", "e2e_ms"), ("itl", "itl_ms_mean")):
        values = float_column(df, column) if column in df else np.zeros(0)
        values = values[~np.isnan(values)]
        if len(values) >= 10:
            sigma = sigma_from_quantiles(float(np.quantile(values, 0.5)), float(np.quantile(values, 0.95)))
            if sigma is not None:
                out.setdefault(metric, []).append(sigma)
    return out


def calibrate(scenario: Scenario, seconds: float = DEFAULT_SECONDS,
              say: Callable[[str], None] | None = None) -> Throughput:
    """Measure every level's rate on the simulator (bounded: ``seconds`` per level plus start-up)."""
    from harness.load import StepRun, run_step

    if scenario.engine.kind != "sim":
        raise PowerInputError(f"--calibrate needs engine.kind: sim (this scenario runs {scenario.engine.kind}); on "
                              "a GPU box, run once and plan with --from-run RUN_DIR, or declare "
                              "steps.levels[].expected_rps")
    if not 0 < seconds <= MAX_SECONDS:
        raise PowerInputError(f"--calibrate-s {seconds:g}: give 0 < seconds <= {MAX_SECONDS:g}")
    arm = scenario.arms[0]
    try:
        spec = build_launch_spec(scenario.engine_for(arm), arm)
    except ValueError as exc:
        raise PowerInputError(f"--calibrate: the {arm.name} arm cannot be built: {exc}") from None
    params = serve_params(spec.args)
    steps = scenario.steps
    rates: dict[str, LevelRate] = {}
    spreads: dict[str, list[float]] = {}
    prewarm_runner()
    try:
        with tempfile.TemporaryDirectory(prefix="harness-calibrate-") as tmp, \
                embedded_sim(ready_timeout_s=30.0, **params) as sim:
            tokenizer = calibrate_tokenizer(sim.base_url, spec.served_model_name, 10.0)
            for index, level in enumerate(steps.levels):
                if say is not None:
                    say(f"calibrate: {arm.name} at {level.label} for {seconds:g} s")
                records = Path(tmp) / f"level-{index}"
                probe = level.model_copy(update={"duration_s": seconds, "requests": None})
                out = run_step(StepRun(
                    base_url=sim.base_url, served_model=spec.served_model_name, workload=scenario.workload,
                    level=probe, step_index=index, step_label=level.label, arm=arm.name, records_dir=records,
                    request_timeout_s=steps.request_timeout_s, stream_idle_timeout_s=steps.stream_idle_timeout_s,
                    drain_timeout_s=min(steps.drain_timeout_s, seconds), max_model_len=scenario.engine.max_model_len,
                    tokenizer=tokenizer, trace_base_dir=Path(scenario.source_file).parent
                    if scenario.source_file else None))
                if out.error and out.requests == 0:
                    raise PowerInputError(f"--calibrate: the simulator served nothing at {level.label}: {out.error}")
                ok = max(0, out.requests - out.errors)
                rates[level.label] = LevelRate(rps=round(ok / seconds, 3), source="calibrated",
                                               detail=f"simulator, {arm.name} arm: {ok} requests in {seconds:g} s")
                for metric, values in _sigmas(records).items():
                    spreads.setdefault(metric, []).extend(values)
    except SimStartError as exc:
        raise PowerInputError(f"--calibrate: the simulator did not start: {str(exc).splitlines()[0]}") from None
    finally:
        shutdown_runners()
    sigma = {m: round(statistics.median(v), 3) for m, v in spreads.items() if v}
    return Throughput(source="calibrated", detail=f"simulator ({arm.name} arm, {seconds:g} s per level, time scale "
                      f"{scenario.engine.sim_time_scale:g})", by_label=rates, sigma=sigma)

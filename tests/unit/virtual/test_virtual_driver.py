"""A load step on the virtual clock: closed loop, rates, trace timestamps, looks, limits, timed actions, records."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from virtual_unit_helpers import demo_scenario, start, step_run

from harness.config.steps import StepLevel
from harness.rundir.parts import read_parts
from harness.virtual.driver import REFUSAL_NS, VirtualStepDriver
from harness.virtual.world import VirtualWorld
from harness.workload.plan import build_request_plan


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    table, problems = read_parts(paths)
    assert not problems
    return table.to_pylist()


def test_closed_loop_users_send_back_to_back_and_the_step_drains(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    level = StepLevel(concurrency=4, duration_s=2.0)
    t0 = world.clock.mono_ns()
    out = VirtualStepDriver(step_run(scenario, url, tmp_path / "rec", level), engine, world.queue).run()
    rows = _rows(out.parts)
    assert out.start_ns == t0 and out.requests == len(rows) > 8 and out.errors == 0 and not out.ended_early
    deadline = t0 + 2_000_000_000
    assert out.end_ns == max(r["end_ns"] for r in rows) > deadline  # the last requests drained after the deadline
    by_user: dict[int, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["send_ns"]):
        by_user.setdefault(r["user"], []).append(r)
    assert sorted(by_user) == [0, 1, 2, 3]
    plan = build_request_plan(scenario.workload, level, step_index=0, max_model_len=8192)
    for user, mine in by_user.items():
        assert mine[0]["send_ns"] == t0 and all(r["send_ns"] < deadline for r in mine)
        for prev, nxt in itertools.pairwise(mine):
            assert nxt["send_ns"] == prev["end_ns"]  # no think time: the next request when the previous ended
        keys = [str(r["request_id"]).rsplit("/", 1)[1] for r in mine]
        assert keys == [q.key for _, q in zip(range(len(mine)), plan.user_stream(user), strict=False)]
    for r in rows:
        assert r["first_byte_ns"] == r["send_ns"] and r["chunk_ns"][0] == r["first_token_ns"]
        assert r["output_tokens"] == r["output_tokens_target"] == len(r["chunk_ns"])
        assert r["prompt_tokens"] == r["prompt_tokens_target"] and r["http_status"] == 200
        assert r["send_wall_ns"] - out.start_wall_ns == r["send_ns"] - t0
    assert out.client.send_lag_ms_p99 == 0.0 and out.client.cpu_percent is None and not out.client.saturated
    assert out.first_token_delay_ms is not None and out.first_token_delay_ms.p99 == 0.0
    assert world.clock.mono_ns() == out.end_ns


def test_a_rate_level_sends_on_the_plans_arrival_schedule(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    level = StepLevel(rate_rps=20.0, duration_s=2.0)
    t0 = world.clock.mono_ns()
    out = VirtualStepDriver(step_run(scenario, url, tmp_path / "rec", level), engine, world.queue).run()
    rows = sorted(_rows(out.parts), key=lambda r: r["send_ns"])
    plan = build_request_plan(scenario.workload, level, step_index=0, max_model_len=8192)
    offsets = []
    for item in plan.arrivals():
        if (item.offset_s or 0.0) >= 2.0:
            break
        offsets.append(t0 + int((item.offset_s or 0.0) * 1e9))
    assert [r["send_ns"] for r in rows] == offsets and len(rows) > 20
    assert all(r["planned_send_ns"] == r["send_ns"] for r in rows)


def test_trace_timestamps_replay_at_their_offsets(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    stamps = [0, 250, 400, 1500]
    trace.write_text("".join(json.dumps({"timestamp": ts, "input_length": 600, "output_length": 4,
                                         "hash_ids": [k, k + 1]}) + "\n" for k, ts in enumerate(stamps)))
    scenario = demo_scenario(tmp_path / "tier", levels=[{"rate_rps": 2.0, "duration_s": 5}], classes=[], reuse={},
                             trace={"path": str(trace), "speed": 1.0})
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    t0 = world.clock.mono_ns()
    level = scenario.steps.levels[0].model_copy(update={"rate_rps": None, "concurrency": 1})  # the trace paces it
    out = VirtualStepDriver(step_run(scenario, url, tmp_path / "rec", level), engine, world.queue).run()
    rows = sorted(_rows(out.parts), key=lambda r: r["send_ns"])
    assert [r["send_ns"] - t0 for r in rows] == [ts * 1_000_000 for ts in stamps]
    assert [r["output_tokens"] for r in rows] == [4, 4, 4, 4]


def test_a_look_that_settles_the_step_ends_its_sending_early(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    seen: list[tuple[float, int]] = []
    records = tmp_path / "rec"

    def look(elapsed_s: float) -> str | None:
        on_disk = sum(pq.read_metadata(p).num_rows for p in records.glob("part-*.parquet"))
        seen.append((elapsed_s, on_disk))
        return "settled (test)" if elapsed_s >= 2.0 else None

    t0 = world.clock.mono_ns()
    req = step_run(scenario, url, records, StepLevel(concurrency=4, duration_s=8.0), looks_s=[1.0, 2.0, 4.0],
                   on_look=look)
    out = VirtualStepDriver(req, engine, world.queue).run()
    assert out.ended_early and out.stop_reason == "settled (test)"
    assert [s for s, _ in seen] == [1.0, 2.0]  # the third look never came
    assert seen[0][1] > 0  # the looker read the records so far: they were flushed before it
    rows = _rows(out.parts)
    assert max(r["send_ns"] for r in rows) < t0 + 2_000_000_001 and out.end_ns < t0 + 4_000_000_000
    assert len(rows) == out.requests and out.errors == 0


def test_the_drain_limit_cancels_and_timed_actions_fire_at_their_times(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    fired: list[int] = []
    t0 = world.clock.mono_ns()
    req = step_run(scenario, url, tmp_path / "rec", StepLevel(concurrency=64, duration_s=0.5))
    req.drain_timeout_s = 0.05  # far less than a 64-user request takes
    actions = [(0.25, lambda: fired.append(world.clock.mono_ns())), (30.0, lambda: fired.append(-1))]
    out = VirtualStepDriver(req, engine, world.queue, actions).run()
    assert fired == [t0 + 250_000_000]
    rows = _rows(out.parts)
    cancelled = [r for r in rows if r["error_kind"] == "cancelled"]
    assert cancelled and out.errors_by_kind == {"cancelled": len(cancelled)}
    assert all(r["end_ns"] == t0 + 550_000_000 for r in cancelled) and out.end_ns == t0 + 550_000_000
    assert str(cancelled[0]["error_detail"]).startswith("still running drain_timeout_s=0.05")
    assert not engine.core.running and not engine.core.waiting  # the engine dropped them (the client went away)
    world.queue.run_until(lambda: False, limit_ns=t0 + 40_000_000_000)
    assert fired == [t0 + 250_000_000]  # an action not due by the step's end is dropped


def test_request_and_stream_limits_and_refusals(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    req = step_run(scenario, url, tmp_path / "rec", StepLevel(concurrency=2, requests=4))
    req.request_timeout_s = 0.02  # shorter than any request of this workload
    out = VirtualStepDriver(req, engine, world.queue).run()
    rows = _rows(out.parts)
    assert out.requests == 4 and {r["error_kind"] for r in rows} == {"timeout"}
    assert all(r["end_ns"] - r["send_ns"] == 20_000_000 for r in rows)
    small = step_run(scenario, url, tmp_path / "rec2", StepLevel(concurrency=1, requests=2), index=1)
    small.max_model_len = None
    engine.cfg = dataclasses.replace(engine.cfg, max_model_len=64)  # every prompt is too long now
    refused = VirtualStepDriver(small, engine, world.queue).run()
    bad = _rows(refused.parts)
    assert [r["error_kind"] for r in bad] == ["http_4xx", "http_4xx"]
    assert all(r["http_status"] == 400 and r["end_ns"] - r["send_ns"] == REFUSAL_NS for r in bad)
    assert "maximum context length" in str(bad[0]["error_detail"])


def test_a_stopped_engine_ends_the_step_with_an_error(tmp_path: Path) -> None:
    scenario = demo_scenario(tmp_path / "tier")
    world = VirtualWorld.begin()
    url, engine = start(world, scenario)
    engine.stop()
    out = VirtualStepDriver(step_run(scenario, url, tmp_path / "rec", StepLevel(concurrency=2, duration_s=1.0)),
                            engine, world.queue).run()
    assert out.error is not None and "server unreachable" in out.error and out.requests == 0

"""Fields that another section makes lead nowhere are refused at load, naming the field: a timestamps trace under
levels of different concurrency (every step would replay the same arrivals), a trace speed that rate levels
override, a concurrency search against a timestamps trace, a drill that no arm would run, a read slowdown on a real
engine and an external arm's ``shared_url`` with nothing to share. What works still loads."""

from __future__ import annotations

from config_scenarios import load_with, refused

TRACE_WORKLOAD = {"classes": [], "reuse": {}, "trace": {"path": "t.jsonl"}}


def test_a_timestamps_trace_under_rising_concurrency_is_refused() -> None:
    levels = [{"concurrency": 4, "duration_s": 10}, {"concurrency": 8, "duration_s": 10}]
    refused("steps.levels[0].concurrency: workload.trace.mode is timestamps", workload=TRACE_WORKLOAD,
             steps={"levels": levels})
    closed = {**TRACE_WORKLOAD, "trace": {"path": "t.jsonl", "mode": "closed_loop"}}
    assert len(load_with(workload=closed, steps={"levels": levels}).steps.levels) == 2
    paced = load_with(workload={**TRACE_WORKLOAD, "trace": {"path": "t.jsonl", "speed": 2}})
    assert paced.workload.trace is not None and paced.workload.trace.speed == 2  # one level at the trace's pace


def test_a_trace_speed_that_rate_levels_override_is_refused() -> None:
    rates = {"levels": [{"rate_rps": 2, "duration_s": 10}, {"rate_rps": 4, "duration_s": 10}]}
    refused("workload.trace.speed: steps.levels[0].rate_rps rescales",
             workload={**TRACE_WORKLOAD, "trace": {"path": "t.jsonl", "speed": 3}}, steps=rates)
    assert load_with(workload=TRACE_WORKLOAD, steps=rates).steps.levels[1].rate_rps == 4


def test_a_concurrency_search_against_a_timestamps_trace_is_refused() -> None:
    search = {"metric": "ttft", "budget_ms": 1000, "low": 2, "high": 16}
    refused("steps.search: a concurrency search against a trace in mode: timestamps", workload=TRACE_WORKLOAD,
             steps={"levels": [{"concurrency": 4, "duration_s": 10}], "search": search})


def test_a_drill_no_arm_would_run_is_refused() -> None:
    gpu_and_cpu = [{"name": "baseline", "tier": "gpu-only"},
                   {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 1}}]
    refused("drills[0].arm: without an arm a drill runs on the first tiered arm", arms=gpu_and_cpu,
             drills=[{"kind": "cache_loss"}])
    assert load_with(arms=gpu_and_cpu, drills=[{"kind": "cache_loss", "arm": "cpu"}]).drills[0].arm == "cpu"
    assert load_with(drills=[{"kind": "cache_loss"}]).drills[0].arm is None  # the tiered arm takes it


def test_a_read_slowdown_on_a_real_engine_is_refused() -> None:
    drill = {"kind": "storage_pressure", "read_slowdown": 4}
    engine = {"kind": "vllm", "model": "m", "launcher": "process"}
    refused("drills[0].read_slowdown: throttling disk-tier reads is the simulator's", engine=engine, drills=[drill])
    assert load_with(drills=[drill]).drills[0].read_slowdown == 4
    assert load_with(engine=engine, drills=[{"kind": "storage_pressure", "fill_gib": 1}]).drills[0].fill_gib == 1


def test_shared_url_with_nothing_to_share_is_refused() -> None:
    engine = {"kind": "vllm", "model": "m", "launcher": "external"}
    arms = [{"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://127.0.0.1:8000"}},
            {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 1},
             "server": {"base_url": "http://127.0.0.1:8001", "shared_url": True}}]
    refused("arms[1].server.shared_url: no earlier arm names http://127.0.0.1:8001", engine=engine, arms=arms)
    arms[1]["server"]["base_url"] = "http://localhost:8000"
    assert load_with(engine=engine, arms=arms).arms[1].server is not None

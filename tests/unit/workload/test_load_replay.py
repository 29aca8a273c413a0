"""Trace replay: prompts reproduce the hash_ids sharing exactly; bad lines are reported by number; pacing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.trace.mooncake import synthesize_mooncake, write_mooncake
from harness.workload.plan import build_request_plan
from harness.workload.replay import TraceLoadError, load_trace
from harness.workload.requests import PlannedRequest
from harness.workload.text import KEY_WORDS


def trace_workload(path: Path, api: str = "completions", **trace: object) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"seed": 3, "api": api, "trace": {"path": str(path), **trace}})


def words(req: PlannedRequest) -> list[str]:
    return [w for _, content in req.messages for w in content.split()]


def lcp(a: list[str] | tuple[int, ...], b: list[str] | tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.fixture
def synthetic_trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    write_mooncake(path, synthesize_mooncake(40, seed=5, n_system_prompts=3, n_documents=5, mean_tail_blocks=2))
    return path


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_prompts_share_exactly_the_blocks_their_hash_ids_share(synthetic_trace: Path, api: str) -> None:
    wl = trace_workload(synthetic_trace, api=api, mode="closed_loop")
    trace = load_trace(wl.trace)  # type: ignore[arg-type]
    plan = build_request_plan(wl, StepLevel(concurrency=1, duration_s=60), step_index=0, trace=trace)
    reqs = list(plan.user_stream(0))
    assert len(reqs) == len(trace.requests) == 40
    shift = 0 if api == "completions" else 1  # the chat role marker
    shared_pairs = 0
    for (ri, ti), (rj, tj) in itertools.combinations(zip(reqs, trace.requests, strict=True), 2):
        blocks = lcp(ti.hash_ids, tj.hash_ids)
        common = lcp(words(ri), words(rj))
        if blocks < min(len(ti.hash_ids), len(tj.hash_ids)):
            # shared blocks, then the next block's name differs within its first KEY_WORDS words
            assert blocks * 512 <= common < blocks * 512 + KEY_WORDS
        # the record hash ids (chained over the planned tokens) share as many full blocks
        if shift == 0:
            assert lcp(ri.hash_ids, rj.hash_ids) == blocks
        shared_pairs += blocks > 0
    assert shared_pairs > 40  # the trace does share prefixes
    for req, line in zip(reqs, trace.requests, strict=True):
        tokens = len(words(req)) + (len(req.messages) + 1 if api == "chat" else 0)
        assert tokens == line.input_length == req.prompt_tokens_target
        assert req.output_tokens_target == line.output_length
        assert req.trace_line == line.line_no


def test_steps_do_not_share_blocks_unless_asked(synthetic_trace: Path) -> None:
    level = StepLevel(concurrency=1, duration_s=5)
    own = trace_workload(synthetic_trace, mode="closed_loop")
    first = next(build_request_plan(own, level, step_index=0).user_stream(0))
    second = next(build_request_plan(own, level, step_index=1).user_stream(0))
    assert lcp(words(first), words(second)) < KEY_WORDS
    shared = trace_workload(synthetic_trace, mode="closed_loop", share_across_steps=True)
    a = next(build_request_plan(shared, level, step_index=0).user_stream(0))
    b = next(build_request_plan(shared, level, step_index=1).user_stream(0))
    assert a.messages == b.messages


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good(ts: int, blocks: int = 2) -> str:
    return json.dumps({"timestamp": ts, "input_length": 512 * (blocks - 1) + 100, "output_length": 10,
                       "hash_ids": list(range(ts, ts + blocks))})


def test_bad_lines_are_reported_by_number(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [
        good(0), good(10), "{not json", good(20),
        json.dumps({"timestamp": 30, "input_length": 10, "hash_ids": [1]}),
        json.dumps({"timestamp": 40, "input_length": 2000, "output_length": 5, "hash_ids": [1]}),
        good(50, blocks=20),
    ])
    with pytest.raises(TraceLoadError) as err:
        load_trace(trace_workload(path).trace, max_model_len=4096)  # type: ignore[arg-type]
    message = str(err.value)
    for fragment in ("4 bad line(s)", "line 3: not valid JSON", "line 5: missing field(s) 'output_length'",
                     "line 6: 1 hash_ids for input_length 2000; expected 4", "line 7:", "max_model_len 4096",
                     "on_bad_line: skip"):
        assert fragment in message
    loaded = load_trace(trace_workload(path, on_bad_line="skip").trace, max_model_len=4096)  # type: ignore[arg-type]
    assert [r.line_no for r in loaded.requests] == [1, 2, 4]
    assert [b.line_no for b in loaded.bad_lines] == [3, 5, 6, 7]
    assert "skipped 4 bad line(s)" in loaded.warnings[0]


def test_missing_and_empty_traces(tmp_path: Path) -> None:
    with pytest.raises(TraceLoadError, match="cannot read the trace"):
        load_trace(trace_workload(tmp_path / "nope.jsonl").trace)  # type: ignore[arg-type]
    with pytest.raises(TraceLoadError, match="no requests to replay"):
        load_trace(trace_workload(write_lines(tmp_path / "e.jsonl", [""])).trace)  # type: ignore[arg-type]


def test_timestamps_speed_rate_and_closed_loop(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [good(0), good(1000), good(3000)])
    by_speed = build_request_plan(trace_workload(path, speed=2.0), StepLevel(concurrency=1, duration_s=9), step_index=0)
    assert by_speed.mode == "open"
    assert [r.offset_s for r in by_speed.arrivals()] == [0.0, 0.5, 1.5]
    by_rate = build_request_plan(trace_workload(path), StepLevel(rate_rps=4.0, duration_s=9), step_index=0)
    offsets = [r.offset_s or 0.0 for r in by_rate.arrivals()]
    assert offsets[-1] == pytest.approx(0.5)  # 2 gaps at a mean of 4 per second
    closed = build_request_plan(trace_workload(path, mode="closed_loop"), StepLevel(concurrency=2, duration_s=9),
                        step_index=0)
    assert [r.trace_line for r in closed.user_stream(0)] == [1, 3]
    assert [r.trace_line for r in closed.user_stream(1)] == [2]


def test_unordered_timestamps_are_sorted_with_a_warning(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", [good(100), good(0)])
    loaded = load_trace(trace_workload(path).trace)  # type: ignore[arg-type]
    assert [r.line_no for r in loaded.requests] == [2, 1]
    assert any("not in order" in w for w in loaded.warnings)

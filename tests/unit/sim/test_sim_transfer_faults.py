"""Bandwidth queues, fault specifications and the CLI's start-up failures (in process)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.sim.api import ApiError, ChunkFormatter, parse_request
from harness.sim.cli import sim_app
from harness.sim.faults import FaultController, FaultError, Faults, parse_fault_update
from harness.sim.transfer import DiskQueue, Link


def test_link_is_fifo_and_contended() -> None:
    link = Link(bytes_per_s=1e9, latency_s=0.001)
    assert link.submit(0.0, 10**9) == (0.0, 1.001)
    start, end = link.submit(0.5, 10**6)  # queued behind the first job
    assert start == 1.001 and end == pytest.approx(1.001 + 0.001 + 0.001)
    assert link.submit(5.0, 0, not_before=6.0) == (6.0, 6.001)
    assert link.active_jobs(1.0) == 3 and link.active_jobs(10.0) == 0  # submitted, not yet finished


def test_disk_queue_threads_and_slowdown() -> None:
    disk = DiskQueue(bytes_per_s=1e9, latency_s=0.01, threads=4)
    assert disk.job_time(8, 10**9) == pytest.approx(1.0 + 2 * 0.01)
    disk.slowdown = 3.0
    assert disk.job_time(1, 10**9) == pytest.approx(3 * (1.0 + 0.01))


def test_fault_updates_are_validated() -> None:
    assert parse_fault_update({"error_rate": 0.5, "stall_after_tokens": None}) == {
        "error_rate": 0.5, "stall_after_tokens": None}
    with pytest.raises(FaultError):
        parse_fault_update({"bogus": 1})
    with pytest.raises(FaultError):
        parse_fault_update({"crash_after_requests": 1.5})
    ctl = FaultController(Faults(), seed=1)
    with pytest.raises(FaultError):
        ctl.update({"error_rate": 2.0})
    ctl.update({"error_rate": 1.0})
    assert ctl.should_error() and not ctl.should_malform()


def test_cli_refuses_to_start_like_the_engine() -> None:
    runner = CliRunner()
    result = runner.invoke(sim_app, ["serve", "--fail-start", "Exception: no GPU here"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == "Exception: no GPU here"
    result = runner.invoke(sim_app, ["serve", "--profile", "demo", "--max-model-len", "100000"])
    assert result.exit_code == 1 and "max seq len" in result.stderr
    result = runner.invoke(sim_app, ["serve", "--flavor", "sglang"])
    assert result.exit_code == 2
    result = runner.invoke(sim_app, ["profiles"])
    assert result.exit_code == 0 and "h200-llama3-8b" in result.stdout


def test_request_validation() -> None:
    names = ("m",)
    parsed = parse_request({"model": "m", "prompt": "a b c", "max_tokens": 2, "stream": True,
                            "stream_options": {"include_usage": True}}, "completion", names, 100)
    assert parsed.max_tokens == 2 and parsed.stream and parsed.include_usage and len(parsed.prompt_ids) == 3
    chat = parse_request({"messages": [{"role": "user", "content": "hi"}]}, "chat", names, 100)
    assert chat.max_tokens == 100 - 3
    assert parse_request({"prompt": "x"}, "completion", names, 100).max_tokens == 16
    for body, status in (({"model": "x", "prompt": "a"}, 404), ({"prompt": "a", "max_tokens": 100}, 400),
                         ({"prompt": ""}, 400), ({"prompt": "a", "n": 2}, 400), ({}, 400)):
        with pytest.raises(ApiError) as info:
            parse_request(body, "completion", names, 100)
        assert info.value.status == status


def test_chunk_formatter_renders_valid_json() -> None:
    import json

    fmt = ChunkFormatter("chat", "chatcmpl-sim-1", 123, 'we"ird')
    for text in (fmt.role_chunk(), fmt.token(0, False), fmt.token(1, True), fmt.usage_chunk(3, 2, 1)):
        assert text.startswith("data: ") and text.endswith("\n\n")
        obj = json.loads(text[6:])
        assert obj["model"] == 'we"ird' and obj["system_fingerprint"] == "harness-sim"
    assert json.loads(fmt.token(1, True)[6:])["choices"][0]["finish_reason"] == "length"

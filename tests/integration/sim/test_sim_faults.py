"""Fault injection over real sockets: refused start, crashes, stalls, 5xx, malformed SSE, start-up delay."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from harness.sim.groundtruth import read_ground_truth
from tests.support.sim import SimHandle, SimStartError, running_sim, sim_command

VLLM_CPU_MESSAGE = "Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(in_process=True, profile="demo", time_scale=0.05) as handle:
        yield handle


def _faults(sim: SimHandle, **changes: object) -> None:
    resp = httpx.post(sim.base_url + "/admin/faults", json=changes)
    assert resp.status_code == 200, resp.text


def test_fail_start_prints_engine_message_and_exits_1() -> None:
    proc = subprocess.run(sim_command(port=0, fail_start=VLLM_CPU_MESSAGE), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == VLLM_CPU_MESSAGE


def test_bad_offload_config_fails_like_vllm() -> None:
    cfg = json.dumps({"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {}})
    with pytest.raises(SimStartError) as info, running_sim(kv_transfer_config=cfg, ready_timeout_s=30):
        pass
    assert info.value.returncode == 1
    assert "cpu_bytes_to_use must be specified in kv_connector_extra_config" in info.value.stderr


def test_error_rate_and_malformed_sse(sim: SimHandle) -> None:
    body = {"model": "sim-model", "prompt": "a b", "max_tokens": 3}
    _faults(sim, error_rate=1.0)
    try:
        resp = httpx.post(sim.base_url + "/v1/completions", json=body)
        assert resp.status_code == 500
        assert resp.json()["error"]["code"] == 500
    finally:
        _faults(sim, error_rate=0.0)
    _faults(sim, malformed_sse_rate=1.0)
    try:
        with httpx.stream("POST", sim.base_url + "/v1/completions", json={**body, "stream": True}) as resp:
            text = resp.read().decode()
        events = [e for e in text.split("\n\n") if e]
        assert events[-1] == "data: [DONE]"
        bad = 0
        for event in events[:-1]:
            try:
                json.loads(event[len("data: "):])
            except json.JSONDecodeError:
                bad += 1
        assert bad == 3
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x", max_retries=0)
        with pytest.raises((json.JSONDecodeError, openai.APIError)):
            list(client.completions.create(model="sim-model", prompt="a b", max_tokens=2, stream=True))
    finally:
        _faults(sim, malformed_sse_rate=0.0)


def test_stall_keeps_stream_open(sim: SimHandle) -> None:
    _faults(sim, stall_after_tokens=2)
    tokens = 0
    try:
        with pytest.raises(httpx.ReadTimeout), httpx.stream(
            "POST", sim.base_url + "/v1/completions",
            json={"model": "sim-model", "prompt": "stall me", "max_tokens": 20, "stream": True},
            timeout=httpx.Timeout(5.0, read=1.0),
        ) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: {"):
                    tokens += 1
    finally:
        _faults(sim, stall_after_tokens=None)
    assert tokens == 2
    assert sim.ground_truth_path is not None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(r["status"] == "aborted" and r["output_tokens"] == 2 for r in read_ground_truth(sim.ground_truth_path)):
            break
        time.sleep(0.1)
    else:
        pytest.fail("stalled stream not recorded as aborted")


def test_crash_after_requests() -> None:
    with running_sim(profile="demo", time_scale=0.05, crash_after_requests=2) as sim:
        with httpx.Client(base_url=sim.base_url, timeout=10) as client:
            for _ in range(2):
                try:
                    client.post("/v1/completions", json={"model": "sim-model", "prompt": "x", "max_tokens": 1})
                except httpx.TransportError:
                    break
        assert sim.process is not None
        assert sim.process.wait(timeout=10) == 1
        assert "simulated crash" in sim.stderr()


def test_startup_delay() -> None:
    with running_sim(in_process=True, profile="demo", startup_delay_s=1.0, wait_ready=False) as sim:
        assert httpx.get(sim.base_url + "/health").status_code == 200
        assert httpx.get(sim.base_url + "/v1/models").status_code == 503
        deadline = time.monotonic() + 10
        while httpx.get(sim.base_url + "/v1/models").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


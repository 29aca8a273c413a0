"""The ``server`` section of external arms: validation (exit 2 material) and the user's commands."""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.external import ExternalServer
from harness.config.scenario import Scenario
from harness.engines.spec import LaunchSpec, MetricsEndpoint
from harness.launch.external import run_command, scrape_target
from harness.secrets.redact import Redactor

BASE: dict[str, Any] = {
    "name": "ext", "engine": {"kind": "vllm", "launcher": "external", "model": "m"},
    "workload": {"classes": [{"name": "a", "weight": 1, "prompt_tokens": {"min": 10, "max": 20},
                              "output_tokens": {"min": 1, "max": 2}}]},
    "steps": {"levels": [{"concurrency": 1, "duration_s": 1}]},
}


def _scenario(*servers: dict[str, Any] | None, launcher: str = "external") -> Scenario:
    arms = []
    for i, server in enumerate(servers):
        arm: dict[str, Any] = {"name": f"a{i}", "tier": "gpu-only" if i == 0 else "cpu"}
        if i:
            arm["offload"] = {"kind": "vllm-native", "kv_offloading_size_gib": 4}
        if server is not None:
            arm["server"] = server
        arms.append(arm)
    return Scenario.model_validate({**BASE, "engine": {**BASE["engine"], "launcher": launcher}, "arms": arms})


def test_distinct_servers_validate_and_metrics_default() -> None:
    sc = _scenario({"base_url": "http://10.0.0.1:8000/"}, {"base_url": "http://10.0.0.2:8000"})
    assert sc.arms[0].server is not None and sc.arms[0].server.metrics == "http://10.0.0.1:8000/metrics"


@pytest.mark.parametrize(("servers", "launcher", "field"), [
    (({"base_url": "http://localhost:8000"}, {"base_url": "http://127.0.0.1:8000"}), "external",
     "arms[1].server.base_url"),
    (({"base_url": "http://a:8000"}, None), "external", "arms[1].server"),
    (({"base_url": "http://a:8000"}, {"base_url": "http://b:8000"}), "process", "arms[0].server"),
])
def test_bad_external_arms_name_the_field(servers: tuple[dict[str, Any] | None, ...], launcher: str,
                                          field: str) -> None:
    with pytest.raises(ValidationError) as info:
        _scenario(*servers, launcher=launcher)
    assert field in str(info.value)


def test_same_server_is_accepted_when_declared() -> None:
    sc = _scenario({"base_url": "http://h:80"}, {"base_url": "http://h", "shared_url": True})
    assert sc.arms[1].server is not None


@pytest.mark.parametrize("url", ["ftp://h:1", "http://u:p@h:1", "http://h:1/?k=v", "h:8000"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        ExternalServer(base_url=url)


def test_command_output_is_redacted_into_the_log(tmp_path: Path) -> None:
    log, tail = tmp_path / "arm.log", deque[str](maxlen=10)
    result = run_command("echo hello --token abcdefgh123; echo plainsecret99", "restart_command", 10, log,
                         Redactor(["plainsecret99"]), tail)
    assert result.ok
    text = log.read_text()
    assert "hello" in text and "abcdefgh123" not in text and "plainsecret99" not in text


def test_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_command("sleep 30", "restart_command", 0.5, tmp_path / "l", Redactor([]), deque())
    assert not result.ok and "timed out after 0.5 s" in result.message
    assert time.monotonic() - started < 10


def test_failed_and_cancelled_commands_say_so(tmp_path: Path) -> None:
    bad = run_command("echo boom; exit 3", "clear_cache_command", 10, tmp_path / "l", Redactor([]), deque())
    assert not bad.ok and "exited with code 3" in bad.message and "boom" in bad.message
    cancel = threading.Event()
    cancel.set()
    stopped = run_command("sleep 30", "clear_cache_command", 60, tmp_path / "l", Redactor([]), deque(), cancel)
    assert not stopped.ok and "interrupted" in stopped.message


def test_metrics_url_elsewhere_is_scraped_there() -> None:
    spec = LaunchSpec(engine="vllm", arm="a", entrypoint=["x"], args=[], container_port=1, host_port=1,
                      served_model_name="m", metrics=[MetricsEndpoint(path="/metrics", format="prometheus")])
    cfg = ExternalServer(base_url="http://h:8000", metrics_url="http://h:9090/prom/metrics")
    assert scrape_target(cfg.base_url, spec, cfg) == ("http://h:9090", [MetricsEndpoint(path="/prom/metrics",
                                                                                        format="prometheus")])
    plain = ExternalServer(base_url="http://h:8000")
    assert scrape_target(plain.base_url, spec, plain) == ("http://h:8000", spec.metrics)

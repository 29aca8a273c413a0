"""The harness's own load path under test: ``harness.load.run_step`` (warm locust runner, gevent client).

Runs one closed-loop step of a :class:`~harness.perf.model.Workload` against a running simulator exactly as
a rollout step runs (record parts on disk included), pins the runner process to the client cores, samples
its CPU, and joins its records with the simulator's ground truth for the TTFT error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psutil

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.load.runners import prewarm_runner
from harness.load.spec import ClientKind
from harness.load.step import StepRun, run_step
from harness.perf.model import ClientRun, Workload, ttft_errors
from harness.perf.procs import CpuPlan, TreeCpuSampler
from harness.perf.server import MODEL, truth_records
from harness.rundir.parts import PART_GLOB, read_parts
from harness.workload.tokens import EXACT_WORDS

RUNNER_MARK = "harness.load.locust_runner"


def step_workload(workload: Workload) -> WorkloadSpec:
    """The harness workload: one completions class, fixed lengths, no shared prefixes."""
    return WorkloadSpec.model_validate({
        "seed": 1, "api": "completions", "ignore_eos": True, "reuse": {"system_prompts": None},
        "classes": [{"name": "stream", "weight": 1,
                     "prompt_tokens": {"min": workload.prompt_words, "max": workload.prompt_words},
                     "output_tokens": {"min": workload.output_tokens, "max": workload.output_tokens}}]})


def runner_pids() -> list[int]:
    """PIDs of this process's warm load runners."""
    pids = []
    for child in psutil.Process().children(recursive=False):
        try:
            if any(RUNNER_MARK in part for part in child.cmdline()):
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


def warm_runner(cpus: CpuPlan) -> int:
    """Start (or find) the idle warm runner, pin it to the client cores, return its PID."""
    prewarm_runner()
    pids = runner_pids()
    if len(pids) != 1:
        raise RuntimeError(f"expected one warm load runner, found {len(pids)}")
    cpus.place(pids[0], "client")
    return pids[0]


def run_harness(base_url: str, truth: Path, workload: Workload, cpus: CpuPlan, *, client: ClientKind = "gevent",
                label: str = "harness") -> ClientRun:
    """Run one step with the harness's load path and measure it (see the module docstring)."""
    before = len(truth_records(truth))
    pid = warm_runner(cpus)
    sampler = TreeCpuSampler(pid).start()
    with tempfile.TemporaryDirectory(prefix="harness-perf-") as tmp:
        records = Path(tmp) / "records"
        try:
            out = run_step(StepRun(
                base_url=base_url, served_model=MODEL, workload=step_workload(workload),
                level=StepLevel(concurrency=workload.concurrency, requests=workload.requests), step_index=0,
                step_label=f"perf-c{workload.concurrency}", arm="perf", records_dir=records,
                request_timeout_s=120.0, stream_idle_timeout_s=30.0, drain_timeout_s=30.0,
                max_model_len=None, tokenizer=EXACT_WORDS, client=client))
        finally:
            sampler.stop()
        table, _ = read_parts(sorted(records.glob(PART_GLOB)))
        rows: list[dict[str, Any]] = table.to_pylist()
    if out.error:
        raise RuntimeError(f"the harness step failed: {out.error}")
    ok = [r for r in rows if r["error_kind"] is None]
    if not ok:
        raise RuntimeError(f"the harness step completed no request ({out.errors} errors)")
    start = min(r["send_ns"] for r in rows)
    end = max(r["end_ns"] for r in rows if r["end_ns"] is not None)
    truth_rows = truth_records(truth, before)
    sent = {t["request_id"]: t["first_token_sent_ns"] for t in truth_rows if t.get("first_token_sent_ns")}
    firsts = {r["response_id"]: r["first_token_ns"] for r in ok if r["response_id"] and r["first_token_ns"]}
    errors_ms, sent_ns = ttft_errors(firsts, sent)
    return ClientRun(
        tool=label, workload=workload, completed=len(ok), errors=len(rows) - len(ok),
        tokens=sum(int(r["output_tokens"] or 0) for r in ok), window_s=(end - start) / 1e9,
        cpu_s=sampler.cpu_between(start, end), reported_cpu_s=out.cpu_s,
        server_tokens=sum(int(t.get("output_tokens") or 0) for t in truth_rows if t.get("status") == "ok"),
        ttft_errors_ms=errors_ms, ttft_sent_ns=sent_ns,
        run_queue_wait_s=sampler.wait_between(start, end))

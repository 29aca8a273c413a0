"""The harness's own load path under test: ``harness.load.run_step`` (warm locust runner, gevent client).

Runs one closed-loop step of a :class:`~tools.perf.model.Workload` against a running simulator exactly as
a rollout step runs (record parts on disk included), pins the runner process to the client cores, samples
its CPU, and joins its records with the simulator's ground truth for the TTFT error: of the first token's arrival
(``first_token_ns``, the kernel's receive time where Linux gives one: what the TTFT of a run is), and, for
comparison, of its parse time (``first_token_parsed_ns``, what the TTFT was before arrival times), with the
client's own delay between the two (:class:`HarnessRun`).

The runner is the one the pool hands the next step: :func:`~harness.load.runners.prewarm_runner` returns its
PID (never found by its command line). That process runs the step's users itself (local workers of a
multi-process step are its children, inside the sampled tree). After the step, the sampled CPU is checked
against the CPU the runner reports for itself, so measuring some other process is an error, not a figure.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.load.runners import prewarm_runner
from harness.load.spec import ClientKind
from harness.load.step import StepRun, run_step
from harness.rundir.parts import PART_GLOB, read_parts
from harness.workload.tokens import EXACT_WORDS
from tools.perf.model import ClientRun, Workload, ttft_errors
from tools.perf.procs import CpuPlan, TreeCpuSampler
from tools.perf.server import MODEL, truth_records

# The sampled tree must have spent at least this share of the CPU the runner reports for its own users (the
# sampler interpolates 50 ms samples, so a short window is approximate; a wrong process spends ~nothing).
MIN_SAMPLED_SHARE = 0.25
MIN_REPORTED_CPU_S = 0.2  # below this the check says nothing


class NoRunnerError(RuntimeError):
    """There is no warm load runner to measure."""


@dataclass(frozen=True)
class HarnessRun(ClientRun):
    """A harness run: its TTFT errors are of the first token's arrival; the parse-time errors and the client's
    delay between arrival and parse (per joined request, the same order) and how the arrivals were taken."""

    ttft_parsed_errors_ms: list[float] = field(default_factory=list)
    first_token_delays_ms: list[float] = field(default_factory=list)
    first_token_sources: dict[str, int] = field(default_factory=dict)  # kernel / readable / parsed -> requests


def step_workload(workload: Workload) -> WorkloadSpec:
    """The harness workload: one completions class, fixed lengths, no shared prefixes."""
    return WorkloadSpec.model_validate({
        "seed": 1, "api": "completions", "ignore_eos": True, "reuse": {"system_prompts": None},
        "classes": [{"name": "stream", "weight": 1,
                     "prompt_tokens": {"min": workload.prompt_words, "max": workload.prompt_words},
                     "output_tokens": {"min": workload.output_tokens, "max": workload.output_tokens}}]})


def warm_runner(cpus: CpuPlan) -> int:
    """Start (or reuse) the idle warm runner the next step takes, pin its tree to the client cores, return its PID."""
    pid = prewarm_runner()
    if pid is None:
        raise NoRunnerError("no warm load runner: the runner pool has no live idle runner after prewarm "
                            "(it exited at start; see its log in the harness-load-runners-* temporary directory)")
    cpus.place(pid, "client")
    return pid


def check_measured(pid: int, sampled_cpu_s: float, reported_cpu_s: float) -> None:
    """Refuse a run whose sampled process tree did not do the step's work (the runner reports its own CPU)."""
    if reported_cpu_s >= MIN_REPORTED_CPU_S and sampled_cpu_s < MIN_SAMPLED_SHARE * reported_cpu_s:
        raise RuntimeError(f"the measured process tree (PID {pid}) spent {sampled_cpu_s:.2f} CPU-s while the load "
                           f"runner reports {reported_cpu_s:.2f}: it is not the process that ran the step")


def run_harness(base_url: str, truth: Path, workload: Workload, cpus: CpuPlan, *, client: ClientKind = "gevent",
                label: str = "harness") -> HarnessRun:
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
    start, end = start_of(rows), end_of(rows)
    cpu_s = sampler.cpu_between(start, end)
    check_measured(pid, cpu_s, out.cpu_s)
    truth_rows = truth_records(truth, before)
    sent = {t["request_id"]: t["first_token_sent_ns"] for t in truth_rows if t.get("first_token_sent_ns")}
    joined = [r for r in ok if r["response_id"] and r["first_token_ns"] and r["response_id"] in sent]
    errors_ms, sent_ns = ttft_errors({r["response_id"]: r["first_token_ns"] for r in joined}, sent)
    parsed = {r["response_id"]: r["first_token_parsed_ns"] for r in joined if r.get("first_token_parsed_ns")}
    parsed_ms, _ = ttft_errors(parsed, sent)
    return HarnessRun(
        tool=label, workload=workload, completed=len(ok), errors=len(rows) - len(ok),
        tokens=sum(int(r["output_tokens"] or 0) for r in ok), window_s=(end - start) / 1e9,
        cpu_s=cpu_s, reported_cpu_s=out.cpu_s,
        server_tokens=sum(int(t.get("output_tokens") or 0) for t in truth_rows if t.get("status") == "ok"),
        ttft_errors_ms=errors_ms, ttft_sent_ns=sent_ns,
        run_queue_wait_s=sampler.wait_between(start, end), ttft_parsed_errors_ms=parsed_ms,
        first_token_delays_ms=[(parsed[r["response_id"]] - r["first_token_ns"]) / 1e6 for r in joined
                               if r["response_id"] in parsed],
        first_token_sources=dict(Counter(str(r.get("first_token_source") or "parsed") for r in joined)))


def start_of(rows: list[dict[str, Any]]) -> int:
    """The load window's start: the client's first send."""
    return min(int(r["send_ns"]) for r in rows)


def end_of(rows: list[dict[str, Any]]) -> int:
    """The load window's end: the client's last completed response (its first send when none completed)."""
    ends = [int(r["end_ns"]) for r in rows if r["end_ns"] is not None]
    return max(ends) if ends else start_of(rows)

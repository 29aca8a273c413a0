"""Rollouts of the decision benchmark in parallel: one process per rollout slot, each rollout in its own run
directory, bounded in count, per-rollout time and total time.

A :class:`Job` is one rollout; :func:`run_job` (in a worker process) runs it through
:func:`harness.run.orchestrator.run_rollout` (reports off), takes its figures from the run directory
(:mod:`.samples`, :mod:`.calibration`) and deletes the directory unless asked to keep it (the figures are what the
benchmark needs; a virtual rollout's records are megabytes). :func:`run_jobs` runs the jobs over a process pool
(``concurrent.futures``); a job over its own time limit is stopped by ``SIGALRM`` in its worker and reported as
``timeout``; once the total time is spent, jobs not yet started are dropped.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import yaml

from harness.core.gc_policy import tune_gc
from harness.run.options import RunOptions
from tools.decision_bench.cases import scenario

Kind = Literal["decision", "coverage", "truth"]


@dataclass(frozen=True)
class Job:
    """One rollout: ``kind`` says what is taken from it (decision: the verdict; coverage: the intervals; truth:
    the pooled samples)."""

    kind: Kind
    case: str
    seed: int
    step_s: float
    run_drift: float
    sequential: bool | None  # None: the case's own setting
    out: str
    keep: bool = False
    real_time: bool = False
    timeout_s: float = 600.0

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.case}-{self.seed}"


class _Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: FrameType | None) -> None:
    raise _Timeout


def _figures(job: Job, run_dir: Path) -> dict[str, Any]:
    from tools.decision_bench.calibration import estimates
    from tools.decision_bench.samples import arm_samples
    from tools.decision_bench.truth import step_parts

    samples = arm_samples(run_dir)
    names = list(samples)
    base, arm = samples[names[0]], samples[names[1]]
    if job.kind == "truth":
        return {"parts": {step: step_parts(arm[step], base[step]) for step in sorted(set(arm) & set(base))}}
    if job.kind == "coverage":
        return {"estimates": estimates(arm, base)}
    return {}


def run_job(job: Job) -> dict[str, Any]:
    """Run one rollout and return its figures (a plain dict; ``status``: ok, error or timeout)."""
    from harness.run.orchestrator import run_rollout

    tune_gc()  # a worker started by spawn or forkserver does not inherit the parent's thresholds
    work = Path(job.out) / "runs" / job.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    started = time.monotonic()
    result: dict[str, Any] = {"job": asdict(job), "status": "ok", "verdict": None, "decision": None}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, job.timeout_s)
    try:
        path = work / "scenario.yaml"
        body = scenario(job.case, job.seed, str(work / "kv-tier"), job.step_s, real_time=job.real_time,
                        run_drift=job.run_drift, sequential=job.sequential)
        path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        rollout = run_rollout(path, RunOptions(out_dir=work / "runs", write_reports=False), say=lambda *_: None)
        summary = rollout.summary
        if summary is None or rollout.run_dir is None:
            result.update(status="error", message=str(rollout.message))
        else:
            arm = summary.arms[1]
            compared = [r for r in arm.rules if r.kind in ("regression", "earns_keep", "budget", "errors")
                        and r.status != "not-applicable"]
            result.update(verdict=summary.verdict, decision=arm.decision, run_dir=str(rollout.run_dir),
                          # the statistics alone: every comparison rule passed (go but for the cause/fit rules), and
                          # harm shown (a regression breached)
                          stat_go=bool(compared) and all(r.status == "pass" for r in compared),
                          harm=any(r.kind == "regression" and r.status == "breach" for r in arm.rules),
                          **_figures(job, rollout.run_dir))
    except _Timeout:
        result.update(status="timeout", message=f"over {job.timeout_s:g} s")
    except Exception as exc:  # a rollout's own failure is a figure of the benchmark, not the end of it
        result.update(status="error", message=f"{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    result["seconds"] = round(time.monotonic() - started, 3)
    if not job.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def run_jobs(jobs: list[Job], workers: int, budget_s: float,
             on_result: Callable[[dict[str, Any]], None] = lambda _r: None) -> Iterator[dict[str, Any]]:
    """Run ``jobs`` in order over ``workers`` processes; stop starting new ones after ``budget_s`` seconds (those
    already running finish). Yields each result as it completes (``on_result`` is called first)."""
    deadline = time.monotonic() + budget_s
    queue = list(reversed(jobs))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running: set[Future[dict[str, Any]]] = set()
        while queue or running:
            while queue and len(running) < workers and time.monotonic() < deadline:
                running.add(pool.submit(run_job, queue.pop()))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                on_result(result)
                yield result

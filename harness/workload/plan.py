"""A step's request plan: deterministic request streams for its users (closed loop) or arrivals (open loop).

:func:`build_request_plan` turns the scenario's workload and one step level into a :class:`StepPlan`. The plan is a
pure function of (workload, level, step identity, token calibration): the same scenario and seed give the
same plan in every arm, so arms are compared request for request. :func:`plan_bytes` serialises the first
requests of every stream canonically and :func:`plan_fingerprint` hashes them (tests compare two plans
byte for byte).

How much of a plan a step uses depends on the server for duration-bounded closed-loop steps (a fast server
gets further down each user's sequence); request-bounded steps are exact: user ``u`` of ``N`` sends the
first ``R // N`` (+1 for ``u < R % N``) requests of its stream, open-loop steps the first ``R`` arrivals.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.config.steps import StepLevel
from harness.config.workload import RequestClass, WorkloadSpec
from harness.workload.replay import LoadedTrace, TraceGenerator, load_trace
from harness.workload.requests import PlannedRequest
from harness.workload.synthesis import SynthGenerator, longest_prompt
from harness.workload.tokens import EXACT_WORDS, TokenCalibration


class LoadConfigError(ValueError):
    """A workload the load generator cannot run as configured; the message says what to change."""


@dataclass
class StepPlan:
    """Request streams of one step."""

    mode: Literal["closed", "open"]
    users: int  # closed loop: concurrent users; open loop: 0
    rate_rps: float | None
    duration_s: float | None
    requests: int | None
    source: Literal["synthetic", "trace"]
    tag: str
    warnings: list[str] = field(default_factory=list)
    _synth: SynthGenerator | None = None
    _trace: TraceGenerator | None = None
    _think_s: float = 0.0

    def user_stream(self, user: int) -> Iterator[PlannedRequest]:
        """Closed loop: the requests of user ``user`` (endless for synthetic workloads)."""
        if self._trace is not None:
            return self._trace.user_stream(user, self.users, self._think_s)
        assert self._synth is not None
        return self._synth.user_stream(user)

    def arrivals(self) -> Iterator[PlannedRequest]:
        """Open loop: the arrivals in order, each with its ``offset_s``."""
        if self._trace is not None:
            return self._trace.arrival_stream(self.rate_rps)
        assert self._synth is not None and self.rate_rps is not None
        return self._synth.arrival_stream(self.rate_rps)

    def user_quota(self, user: int) -> int | None:
        """Closed loop: how many requests user ``user`` sends at most (None: until the time is up)."""
        if self.requests is None:
            return None
        base, extra = divmod(self.requests, max(self.users, 1))
        return base + (1 if user < extra else 0)


def step_tag(step_index: int, drill: str | None = None, drill_phase: str | None = None) -> str:
    """The name of a step's request streams (unique content differs between steps, drills and phases)."""
    tag = "warmup" if step_index == -1 else f"s{step_index}"
    if drill:
        tag += f"-{drill}" + (f"-{drill_phase}" if drill_phase else "")
    return tag


def select_classes(workload: WorkloadSpec, names: list[str] | None) -> list[RequestClass]:
    """The workload's classes, or only the named ones (unknown names are an error)."""
    if names is None:
        return list(workload.classes)
    known = workload.class_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LoadConfigError(f"unknown request class(es) {', '.join(repr(n) for n in unknown)}; "
                              f"the workload defines: {', '.join(known) or '(none)'}")
    if not names:
        raise LoadConfigError("an empty list of request classes selects nothing to send")
    return [c for c in workload.classes if c.name in names]


def check_lengths(workload: WorkloadSpec, classes: list[RequestClass], calib: TokenCalibration,
                  max_model_len: int | None) -> None:
    """Every class must fit the server's context window (prompt + output <= ``max_model_len``)."""
    if max_model_len is None:
        return
    for cls in classes:
        prompt, why = longest_prompt(workload, cls, calib)
        if prompt + cls.output_tokens.max > max_model_len:
            raise LoadConfigError(
                f"request class {cls.name!r}: {why} plus up to {cls.output_tokens.max} output tokens = "
                f"{prompt + cls.output_tokens.max} exceeds the server's max_model_len {max_model_len}; "
                "lower workload.classes[].prompt_tokens.max / output_tokens.max (or the session turns)")


def build_request_plan(workload: WorkloadSpec, level: StepLevel, *, step_index: int,
               calibration: TokenCalibration | None = None, max_model_len: int | None = None,
               drill: str | None = None, drill_phase: str | None = None, classes: list[str] | None = None,
               duration_override_s: float | None = None, requests_override: int | None = None,
               trace: LoadedTrace | None = None, base_dir: Path | None = None) -> StepPlan:
    """The plan of one step (raises :class:`LoadConfigError` or ``TraceLoadError`` for bad input)."""
    calib = calibration or EXACT_WORDS
    mml = max_model_len if max_model_len is not None else calib.max_model_len
    tag = step_tag(step_index, drill, drill_phase)
    duration = duration_override_s if duration_override_s is not None else level.duration_s
    requests = requests_override if requests_override is not None else level.requests
    if requests_override is not None and duration_override_s is None:
        duration = None
    if duration is None and requests is None:
        raise LoadConfigError("a step needs a duration or a request count")
    timestamps = workload.trace is not None and workload.trace.mode == "timestamps"
    closed = level.concurrency is not None and not timestamps
    plan = StepPlan(mode="closed" if closed else "open", users=(level.concurrency or 0) if closed else 0,
                    rate_rps=level.rate_rps, duration_s=duration, requests=requests,
                    source="trace" if workload.trace is not None else "synthetic", tag=tag,
                    _think_s=level.think_time_s)
    if workload.trace is not None:
        loaded = trace or load_trace(workload.trace, max_model_len=mml, base_dir=base_dir)
        plan.warnings.extend(loaded.warnings)
        plan._trace = TraceGenerator(loaded, workload, calib, tag)
        return plan
    chosen = select_classes(workload, classes)
    check_lengths(workload, chosen, calib, mml)
    plan._synth = SynthGenerator(workload, calib, tag, chosen, level.think_time_s)
    return plan


def plan_bytes(plan: StepPlan, per_stream: int = 32) -> bytes:
    """Canonical bytes of the first ``per_stream`` requests of every user (or arrivals): JSON lines."""
    out = bytearray()
    if plan.mode == "closed":
        for user in range(plan.users):
            for req in itertools.islice(plan.user_stream(user), per_stream):
                out += req.to_line()
    else:
        for req in itertools.islice(plan.arrivals(), per_stream * max(1, plan.users)):
            out += req.to_line()
    return bytes(out)


def plan_fingerprint(plan: StepPlan, per_stream: int = 32) -> str:
    """SHA-256 of :func:`plan_bytes` (hex)."""
    return hashlib.sha256(plan_bytes(plan, per_stream)).hexdigest()

"""Each step's load processes and master address, from the scenario's ``load`` section (one per arm).

With ``processes: auto`` an arm starts at ``min_processes`` local processes; after a step whose client health
was saturated the next step gets twice as many, up to ``max_processes`` and the host's cores. The change is said
in the live output (:attr:`LoadLayout.change`) and recorded on the next step's client health (``layout_note``).
"""

from __future__ import annotations

import os
from typing import Any

from harness.config.load import LoadSpec
from harness.schema.summary import ClientHealth


def host_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LoadLayout:
    """The load processes of one arm's steps."""

    def __init__(self, spec: LoadSpec, cores: int | None = None) -> None:
        self.spec = spec
        self.cores = cores if cores is not None else host_cores()
        if isinstance(spec.processes, int):
            self.cap = self.processes = spec.processes
        else:
            self.cap = min(spec.max_processes or self.cores, self.cores)
            self.processes = min(spec.min_processes, self.cap)
        self._note: str | None = None  # why the next step uses more processes than the last one
        self.change: str | None = None  # what :meth:`after_step` decided, in words (None: nothing to say)

    def step_fields(self) -> dict[str, Any]:
        """The ``StepRun`` fields for the next step."""
        spec = self.spec
        return {"processes": self.processes, "remote_workers": spec.remote_workers,
                "master_bind_host": spec.master_bind_host, "master_port": spec.master_port or 0,
                "worker_wait_s": spec.worker_wait_s, "saturation_cpu_percent": spec.saturation_cpu_percent,
                "saturation_lag_ms": spec.saturation_lag_ms,
                "first_token_delay_p99_ms": spec.first_token_delay_p99_ms}

    def after_step(self, client: ClientHealth, what: str) -> ClientHealth:
        """The step's client health with its layout note; with ``processes: auto``, more processes after a
        saturated step (:attr:`change` says so)."""
        note = "; ".join(n for n in (self._note, client.layout_note) if n) or None
        recorded = client.model_copy(update={"layout_note": note})
        self._note = self.change = None
        if not (self.spec.auto and client.saturated):
            return recorded
        if self.processes < self.cap:
            new = min(2 * self.processes, self.cap)
            self.change = (f"load generator saturated at {what} with {self.processes} process(es): the next step "
                           f"uses {new} (load.processes: auto, at most {self.cap})")
            self._note = f"raised from {self.processes} to {new} processes after {what} was saturated"
            self.processes = new
        else:
            self.change = (f"load generator saturated at {what} with {self.processes} process(es), the most "
                           f"load.processes: auto allows here (max_processes, {self.cores} cores): add machines "
                           "(load.remote_workers)")
        return recorded


def local_processes(processes: int, remote_workers: int) -> int:
    """Load processes a step runs on this host: a single process runs here only without remote workers (with them,
    the master coordinates and the remote workers send)."""
    return processes if processes > 1 or not remote_workers else 0


def describe_load(spec: LoadSpec, cores: int) -> str:
    """The layout in words for ``harness plan``, e.g. ``2 remote worker(s) (no local load process) joining ...``."""
    remote = spec.remote_workers
    if isinstance(spec.processes, int):
        local = local_processes(spec.processes, remote)
        text = (f"{local} local process" + ("es" if local != 1 else "")) if local else ""
    else:
        cap = min(spec.max_processes or cores, cores)
        low = local_processes(min(spec.min_processes, cap), remote)
        text = (f"auto: {low} to {cap} local processes, doubled after a saturated step (host: {cores} cores)"
                + (", none until then" if low == 0 else ""))
    if not remote:
        return text
    joined = (f"{remote} remote worker(s) joining the master at {spec.master_bind_host}:{spec.master_port} (each "
              f"step waits up to {spec.worker_wait_s:g} s for them)")
    return f"{text} + {joined}" if text else f"{joined}; no local load process (the master only coordinates)"

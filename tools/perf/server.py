"""The simulator every client-capacity and timing figure runs against, pinned to the server's core.

Two settings (both the ``h200-llama3-8b`` profile: a big GPU, so the KV cache never limits 256 streams):

- ``fast``: ``--time-scale 1e-6``: modelled step times vanish and the simulator streams as fast as its one
  core allows (``python -m tools.bench.sim`` measures that ceiling), so the client is the bottleneck.
- ``paced``: ``--time-scale 1``: the modelled H200 speed (~7 ms decode steps at 64 streams), a realistic fast
  server, for timing fidelity: the client must keep up without adding its own tail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from harness.sim.groundtruth import read_ground_truth
from tests.support.sim import SimHandle, running_sim
from tools.perf.procs import CpuPlan

PROFILE = "h200-llama3-8b"
MODEL = "sim-model"
TIME_SCALES: dict[str, float] = {"fast": 1e-6, "paced": 1.0}
Pace = Literal["fast", "paced"]


@contextlib.contextmanager
def perf_sim(pace: Pace, truth: Path, cpus: CpuPlan) -> Iterator[SimHandle]:
    """Run the simulator (subprocess, pinned to the server cores) writing ground truth to ``truth``."""
    with running_sim(profile=PROFILE, time_scale=TIME_SCALES[pace], max_num_seqs=1024,
                     ground_truth=truth) as sim:
        if sim.process is not None:
            cpus.place(sim.process.pid, "server")
        yield sim


def sim_flags(pace: Pace) -> str:
    """The simulator flags, for the table's notes."""
    return f"--profile {PROFILE} --time-scale {TIME_SCALES[pace]:g} --max-num-seqs 1024"


def truth_records(path: Path, since: int = 0) -> list[dict[str, Any]]:
    """Ground-truth records from line ``since`` on (the simulator appends one line per finished request)."""
    return read_ground_truth(path)[since:]

"""Seeded run-to-run variance of the simulated hardware (off unless asked): the physics of a real, noisy GPU box.

A real server never repeats its timings exactly: clocks and thermals move between runs, neighbours share the
host, and one disk read in many is slow. The harness's statistics must hold against that, so the simulator can
add it -- seeded, so a run is reproducible, and the same for every arm's *kind* of noise. It never looks at an
arm, a tier or a verdict: every factor below multiplies modelled physics the same way whatever is being tested.

Compute time (each scheduler step's ``T``, see :mod:`harness.sim.scheduler`; transfers and disk I/O are not
compute and are not scaled) is multiplied by::

    run_factor * (1 + drift_per_hour * t / 3600) * step_factor

- ``run_factor = exp(N(0, run_drift) - run_drift**2 / 2)``: drawn once per server start (per-run drift);
- ``t``: modelled seconds since the server started (a slow linear drift, e.g. thermal throttling; >= 0);
- ``step_factor = exp(N(0, step_jitter) - step_jitter**2 / 2)``: drawn independently for every step.

Both lognormal factors are **mean-corrected**: ``E[factor] = 1`` (their median is ``exp(-sigma**2 / 2)``,
slightly below 1), so noise widens the distribution of step times without changing their expected value.

Disk-read tail: with probability ``disk_read_tail_prob`` a disk-tier read job takes ``disk_read_tail_factor``
times longer (a slow NVMe read, a noisy neighbour on the device); the disk queue is FIFO, so reads queued
behind it wait too. It raises high TTFT percentiles of requests that hit the disk tier, not the median.

Seeding: one ``noise_seed`` feeds ``numpy.random.SeedSequence``, spawned into three independent streams (run
drift, step jitter, disk tail), so turning one knob on does not change the draws of another. With every knob at
0 (the default) nothing is drawn and timings are exactly those without this module. The harness derives the
seed of each launch from the scenario's ``engine.sim_noise.seed`` and the arm's name
(:func:`harness.sim.noise_spec.launch_seed`), so arms -- and an A/A re-run of the baseline under another name -- get
different draws, reproducibly. The knobs, their checks and the seed rule are in :mod:`harness.sim.noise_spec`
(no numpy: the command line and the engine adapter read them); this module draws.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from harness.sim.noise_spec import NoiseSpec

_BATCH = 1024


def _mean_one_lognormal(z: float | np.ndarray[Any, Any], sigma: float) -> Any:
    return np.exp(sigma * z - sigma * sigma / 2.0)


class Noise:
    """The noise of one server start: the run factor, and per-step and per-read draws."""

    def __init__(self, spec: NoiseSpec) -> None:
        spec.validate()
        self.spec = spec
        run_ss, step_ss, disk_ss = np.random.SeedSequence(spec.seed).spawn(3)
        self.run_factor = 1.0
        if spec.run_drift > 0:
            z = float(np.random.Generator(np.random.PCG64(run_ss)).standard_normal())
            self.run_factor = float(_mean_one_lognormal(z, spec.run_drift))
        self._step_rng = np.random.Generator(np.random.PCG64(step_ss))
        self._disk_rng = np.random.Generator(np.random.PCG64(disk_ss))
        self._steps: list[float] = []
        self._draws: list[float] = []
        self.steps = 0
        self.slow_reads = 0

    def step_factor(self) -> float:
        """The next step's jitter factor (1.0 when jitter is off)."""
        sigma = self.spec.step_jitter
        if sigma <= 0:
            return 1.0
        if not self._steps:  # drawn in batches (same sequence as one at a time, cheaper per step)
            z = self._step_rng.standard_normal(_BATCH)
            self._steps = _mean_one_lognormal(z, sigma)[::-1].tolist()
        self.steps += 1
        return self._steps.pop()

    def compute_factor(self, t: float) -> float:
        """Multiplier of the compute time of a step starting at modelled time ``t`` (s since start)."""
        drift = 1.0 + self.spec.drift_per_hour * max(t, 0.0) / 3600.0
        return self.run_factor * drift * self.step_factor()

    def disk_read_factor(self) -> float:
        """Multiplier of one disk read job: ``disk_read_tail_factor`` with ``disk_read_tail_prob``, else 1."""
        spec = self.spec
        if not spec.disk_tail_on:
            return 1.0
        if not self._draws:
            self._draws = self._disk_rng.random(_BATCH)[::-1].tolist()
        if self._draws.pop() < spec.disk_read_tail_prob:
            self.slow_reads += 1
            return spec.disk_read_tail_factor
        return 1.0

    def state(self) -> dict[str, Any]:
        """For ``GET /admin/state``: the knobs, the run factor drawn, and how many draws were made."""
        return {**asdict(self.spec), "run_factor": self.run_factor, "jittered_steps": self.steps,
                "slow_disk_reads": self.slow_reads, "mean_corrected": True}

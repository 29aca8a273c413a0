"""The simulator's noise knobs, their checks and the per-launch seed rule (the draws are in :mod:`harness.sim.noise`).

Kept apart from the draws so the command line and the engine adapter read them without numpy.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

SEED_BITS = 63


class NoiseError(ValueError):
    """An invalid noise specification."""


@dataclass(frozen=True)
class NoiseSpec:
    """The noise knobs (all off by default)."""

    seed: int = 0
    step_jitter: float = 0.0
    run_drift: float = 0.0
    drift_per_hour: float = 0.0
    disk_read_tail_prob: float = 0.0
    disk_read_tail_factor: float = 1.0

    def validate(self) -> None:
        if self.seed < 0:
            raise NoiseError(f"noise_seed must not be negative (got {self.seed})")
        for name in ("step_jitter", "run_drift"):
            v = getattr(self, name)
            if not 0.0 <= v <= 2.0:
                raise NoiseError(f"{name} must be within [0, 2] (a lognormal sigma; got {v})")
        if not 0.0 <= self.drift_per_hour <= 10.0:
            raise NoiseError(f"drift_per_hour must be within [0, 10] (got {self.drift_per_hour})")
        if not 0.0 <= self.disk_read_tail_prob <= 1.0:
            raise NoiseError(f"disk_read_tail_prob must be within [0, 1] (got {self.disk_read_tail_prob})")
        if not 1.0 <= self.disk_read_tail_factor <= 10_000.0:
            raise NoiseError(f"disk_read_tail_factor must be within [1, 10000] (got {self.disk_read_tail_factor})")

    @property
    def compute_on(self) -> bool:
        return self.step_jitter > 0 or self.run_drift > 0 or self.drift_per_hour > 0

    @property
    def disk_tail_on(self) -> bool:
        return self.disk_read_tail_prob > 0 and self.disk_read_tail_factor > 1

    @property
    def on(self) -> bool:
        return self.compute_on or self.disk_tail_on


def launch_seed(seed: int, arm: str) -> int:
    """Per-launch noise seed: a stable 63-bit hash of (scenario noise seed, arm name)."""
    digest = hashlib.blake2b(f"harness-sim-noise|{seed}|{arm}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)


def describe(spec: NoiseSpec) -> str:
    """One line for the start-up banner."""
    if not spec.on:
        return "noise off"
    parts = [f"seed {spec.seed}"]
    if spec.step_jitter:
        parts.append(f"step jitter {spec.step_jitter:g}")
    if spec.run_drift:
        parts.append(f"run drift {spec.run_drift:g}")
    if spec.drift_per_hour:
        parts.append(f"drift {spec.drift_per_hour:g}/h")
    if spec.disk_tail_on:
        parts.append(f"disk-read tail {spec.disk_read_tail_prob:g} x{spec.disk_read_tail_factor:g}")
    return "noise: " + ", ".join(parts)

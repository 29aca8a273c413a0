"""Drift benchmark: ``python -m tools.bench.drift [--histories N] [--seed S]`` measures the change-point
rule of the results index (:mod:`harness.stats.changepoint`, grouped by :mod:`harness.report.drift`) by simulation.

* Per history, at the level each of a scenario's nine histories is tested at (0.05 / 9): the false-positive rate
  over N flat log-normal histories (any change point is false), and the power over N histories with a planted 20%
  shift (found: a change point within one run of the planted one), for several lengths, noise levels (CV) and
  positions of the shift (mid-history, 5 or 3 runs before the newest).
* Per scenario, through :func:`harness.report.drift.scenario_drift` (3 arms x 3 measures): the share of flat
  scenarios with any change point (the family's false-alarm rate, meant to stay under 0.05), and the share of
  scenarios with one planted shift where it is found at its run and nothing else is claimed.
* Detectability (``--part detect``): the power of a planted 20% shift at 4%, 8% and 10% spread (mid-history and five
  runs before the newest) for several lengths, and the figure the index prints per history
  (:func:`harness.stats.detectability.detectability`: the smallest shift found in 80% of its 40 simulated histories)
  at several spreads and lengths, with how long each took.

Seeded: the same arguments print the same figures. About a minute and a half at N = 200 on one core (the rule), and
as long again for the detectability part.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from harness.report.drift import FAMILY_ALPHA, MEASURES, StepMeasures, scenario_drift
from harness.stats import changepoint, detectability

SHIFT = 1.2
ARMS = ("gpu-only", "cpu", "tiered")
STEP = "c32"


@dataclass(frozen=True)
class _Run:
    run_dir: str
    started_at: str | None
    engine: str | None
    model: str | None
    image: str | None
    top_step: dict[str, str]
    scenario_hash: str | None = None
    engine_version: str | None = None
    step_measures: StepMeasures = field(default_factory=dict)


def _series(rng: np.random.Generator, n: int, cv: float, at: int | None) -> NDArray[np.float64]:
    x = 1000.0 * np.exp(rng.normal(0.0, cv, n))
    if at is not None:
        x[at:] *= SHIFT
    return x


def history_rates(histories: int, n: int, cv: float, at: int | None, alpha: float, seed: int) -> float:
    """Share of histories with any change point (``at`` None: flat) or with one within a run of ``at``."""
    rng = np.random.default_rng([seed, n, int(cv * 1000), n + 1 if at is None else at])
    hits = 0
    for i in range(histories):
        found = changepoint.detect(_series(rng, n, cv, at), alpha=alpha, seed=i).change_points
        hits += bool(found) if at is None else any(abs(c.index - at) <= 1 for c in found)
    return hits / histories


def _scenario(rng: np.random.Generator, n: int, cv: float, at: int | None) -> list[_Run]:
    columns = {(arm, m.key): _series(rng, n, cv, at if (arm, m.key) == ("gpu-only", "ttft_p99_ms") else None)
               for arm in ARMS for m in MEASURES}
    return [_Run(run_dir=f"run-{i:03d}", started_at=None, engine="vllm", model="m", image=None,
                 top_step={arm: STEP for arm in ARMS},
                 step_measures={arm: {STEP: {m.key: float(columns[(arm, m.key)][i]) for m in MEASURES}}
                                for arm in ARMS})
            for i in range(n)]


def scenario_rates(scenarios: int, n: int, cv: float, at: int | None, seed: int) -> float:
    """Flat (``at`` None): share of scenarios with any change point; else: share with exactly the planted one."""
    rng = np.random.default_rng([seed, n, int(cv * 1000), 7, 0 if at is None else at + 1])
    good = 0
    for i in range(scenarios):
        _, points = scenario_drift(f"sim-{i}", _scenario(rng, n, cv, at))
        if at is None:
            good += bool(points)
        else:
            good += len(points) == 1 and points[0].arm == "gpu-only" and abs(points[0].run_index - at) <= 1
    return good / scenarios


def _interval(rate: float, n: int) -> str:
    """The rate with a Wilson 95% interval."""
    z = 1.96
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{rate:6.3f} [{max(0.0, centre - half):.3f}-{min(1.0, centre + half):.3f}]"


def detect_part(n_sim: int, alpha: float, seed: int) -> None:
    """The power of a 20% shift by spread, length and position; the index's detectable-shift figure."""
    print(f"power of a x{SHIFT} shift per history at alpha {alpha:.4f}, {n_sim} histories; rate [Wilson 95%]")
    spreads = (0.04, 0.08, 0.10)
    print(f"{'runs':>5} {'where':>12}  " + "  ".join(f"{f'spread {s:.0%}':>24}" for s in spreads))
    for n in (12, 15, 20, 30, 60):
        for label, at in (("mid", n // 2), ("5 before new", n - 5)):
            cells = [_interval(history_rates(n_sim, n, s, at, alpha, seed), n_sim) for s in spreads]
            print(f"{n:>5} {label:>12}  " + "  ".join(f"{c:>24}" for c in cells))
    print(f"the index's figure: {detectability.METHOD}")
    for n in (12, 20, 30, 60):
        for s in (0.02, 0.04, 0.08, 0.10, 0.16):
            t0 = time.perf_counter()
            d = detectability.detectability(n, s, alpha)
            found = d.smallest
            text = f"{found.shift:.1%} ({found.found}/{found.sims})" if found else "none on the grid"
            print(f"  {n:>3} runs, spread {s:4.0%}: smallest shift found {text:>18}   "
                  f"({time.perf_counter() - t0:.2f} s)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.drift", description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=int, default=200, help="simulated histories per figure (default 200)")
    parser.add_argument("--seed", type=int, default=20250101, help="any non-negative integer")
    parser.add_argument("--part", choices=("all", "rule", "detect"), default="all",
                        help="rule: false positives and power; detect: detectability (default all)")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error("--seed must be non-negative")
    n_sim = max(10, min(args.histories, 100_000))
    alpha = FAMILY_ALPHA / (len(ARMS) * len(MEASURES))
    t0 = time.perf_counter()
    if args.part in ("all", "rule"):
        rule_part(n_sim, alpha, args.seed)
    if args.part in ("all", "detect"):
        detect_part(n_sim, alpha, args.seed)
    print(f"took {time.perf_counter() - t0:.0f} s")
    return 0


def rule_part(n_sim: int, alpha: float, seed: int) -> None:
    """False positives and power per history and per scenario."""
    print(f"change-point rule: {changepoint.METHOD}")
    print(f"per history at alpha = {FAMILY_ALPHA}/{len(ARMS) * len(MEASURES)} = {alpha:.4f}; {n_sim} histories per "
          f"figure; shift x{SHIFT}; rate [Wilson 95%]")
    print(f"{'runs':>5} {'CV':>5}  {'false positives (flat)':>24}  {'power mid':>24}  {'power 5 after':>24}  "
          f"{'power 3 after':>24}")
    for n in (12, 20, 30, 60):
        for cv in (0.03, 0.05):
            cells = [_interval(history_rates(n_sim, n, cv, at, alpha, seed), n_sim)
                     for at in (None, n // 2, n - 5, n - 3)]
            print(f"{n:>5} {cv:>5.2f}  " + "  ".join(f"{c:>24}" for c in cells))
    print(f"per scenario ({len(ARMS)} arms x {len(MEASURES)} measures, family alpha {FAMILY_ALPHA}), 30 runs, "
          f"shift in one history at run 18")
    for cv in (0.03, 0.05):
        fpr = scenario_rates(n_sim, 30, cv, None, seed)
        power = scenario_rates(n_sim, 30, cv, 18, seed)
        print(f"  CV {cv:.2f}: any false alarm {_interval(fpr, n_sim)}   planted shift found alone at its run "
              f"{_interval(power, n_sim)}")


if __name__ == "__main__":
    raise SystemExit(main())

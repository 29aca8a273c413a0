"""How often the ratio intervals cover a known truth: iid against block bootstraps, on correlated synthetic series.

The question is whether a nominal 95% interval of ``p50(a) / p50(b)``, ``p95(a) / p95(b)`` or a throughput ratio
covers the true ratio in about 95% of repetitions when consecutive requests are correlated, as they are in a
closed-loop queue. The cases have known truths:

* ``ar1-lognormal-phi*``: latencies ``exp(Y)`` with ``Y`` a stationary Gaussian AR(1) (lag-one correlation phi,
  started in its stationary law), so every quantile is ``exp(mu + sigma z_q)``; phi 0 (iid: every method should
  hold), 0.5 and 0.8 (about what a demo step's TTFT ranks show at c16 and c32: lag-one autocorrelation 0.5 and
  0.7-0.85, still 0.3 at lag 10);
* ``mm1-rho*``: sojourn times of an M/M/1 queue in customer order (Lindley's recursion, started in its stationary
  law), which are exactly exponential with rate ``mu - lambda``: quantile ``-ln(1 - q) / (mu - lambda)``; the two
  arms differ in service rate;
* ``throughput-phi*``: output tokens per time bin of a window whose completion rate is modulated by a stationary
  AR(1) in log (a queue whose speed drifts), completions Poisson per bin, 8-24 tokens each; the true throughput is
  the mean rate x the mean tokens. This is the series :func:`harness.stats.intervals.sum_ratio` resamples for a
  throughput ratio (output tokens per bin of the steady-state window).

:func:`study` runs every case ``rollouts`` times per method and tallies coverage with an exact (Clopper-Pearson)
95% interval, the median ratio's bias, and the mean width. The functions take any rollouts, so the calibration on
simulated rollouts (a virtual clock; issue 32 item 5) can score its own intervals with :func:`tally` and
:func:`ratio_interval`, the same code the rules use.

Run: ``python -m tools.bench.coverage [--rollouts 400] [--n 500] [--replicates 2000] [--json FILE]``
(``make coverage-bench``). Figures measured are in ``docs/statistics.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest, norm

from harness.schema.intervals import RatioCI
from harness.stats import resample
from harness.stats.intervals import BOOTSTRAP_RESAMPLES, quantile_ratio, sum_ratio
from harness.stats.resample import METHODS, Method

F64 = npt.NDArray[np.float64]
Measure = Literal["p50", "p95", "throughput"]
Rollout = tuple[F64, F64, float, float]  # series a, series b, window a (s), window b (s)


@dataclass(frozen=True)
class Case:
    """A synthetic comparison with a known true ratio: ``generate(rng)`` makes one rollout."""

    name: str
    measure: Measure
    truth: float
    generate: Callable[[np.random.Generator], Rollout]


@dataclass(frozen=True)
class Tally:
    """Coverage of one (case, method): ``covered`` of ``rollouts`` intervals held the truth."""

    case: str
    measure: str
    method: str
    rollouts: int
    covered: int
    coverage: float
    coverage_lo: float  # exact 95% (Clopper-Pearson)
    coverage_hi: float
    below: int  # intervals entirely below the truth
    above: int
    median_bias: float  # median estimate / truth - 1
    mean_width: float  # mean hi / lo (multiplicative width)
    unresolved: int


def ar1_gaussian(rng: np.random.Generator, n: int, phi: float) -> F64:
    """A stationary AR(1) with unit variance and lag-one correlation ``phi``."""
    e = rng.standard_normal(n)
    y = np.empty(n)
    y[0] = e[0]
    scale = math.sqrt(1.0 - phi * phi)
    for i in range(1, n):
        y[i] = phi * y[i - 1] + scale * e[i]
    return y


def ar1_lognormal(rng: np.random.Generator, n: int, mu: float, sigma: float, phi: float) -> F64:
    """Latencies ``exp(mu + sigma Y)``, ``Y`` a stationary AR(1): lognormal marginals, correlated neighbours."""
    return np.asarray(np.exp(mu + sigma * ar1_gaussian(rng, n, phi)), dtype=np.float64)


def mm1_sojourn(rng: np.random.Generator, n: int, lam: float, mu: float) -> F64:
    """Sojourn times of ``n`` consecutive customers of a stationary M/M/1 queue (exactly Exp(mu - lam) each)."""
    rho = lam / mu
    wait = rng.exponential(1.0 / (mu - lam)) if rng.random() < rho else 0.0  # the stationary waiting time
    service = rng.exponential(1.0 / mu, n)
    gaps = rng.exponential(1.0 / lam, n)
    out = np.empty(n)
    for i in range(n):
        out[i] = wait + service[i]
        wait = max(0.0, out[i] - gaps[i])
    return out


def modulated_tokens(rng: np.random.Generator, bins: int, width_s: float, rate: float, phi: float,
                     spread: float) -> F64:
    """Output tokens per bin: completions Poisson(rate x exp(spread Y - spread^2/2) x width), ``Y`` a stationary
    AR(1) (mean rate exactly ``rate``), 8-24 tokens each."""
    level = np.exp(spread * ar1_gaussian(rng, bins, phi) - spread * spread / 2.0)
    done = rng.poisson(rate * level * width_s)
    tokens = rng.integers(8, 25, size=int(done.sum()))
    owner = np.repeat(np.arange(bins), done)
    return np.asarray(np.bincount(owner, weights=tokens, minlength=bins), dtype=np.float64)


def default_cases(n: int = 500) -> list[Case]:
    """The study's cases at ``n`` requests per arm (throughput: a 14 s window in 0.125 s bins, ~40 requests/s)."""
    cases: list[Case] = []
    mu_a, mu_b, sigma = math.log(100.0), math.log(120.0), 0.6
    quantiles: tuple[tuple[Measure, float], ...] = (("p50", 0.5), ("p95", 0.95))
    for phi in (0.0, 0.5, 0.8):
        for measure, q in quantiles:
            truth = math.exp(mu_a + sigma * norm.ppf(q)) / math.exp(mu_b + sigma * norm.ppf(q))

            def gen(rng: np.random.Generator, phi: float = phi) -> Rollout:
                return ar1_lognormal(rng, n, mu_a, sigma, phi), ar1_lognormal(rng, n, mu_b, sigma, phi), 1.0, 1.0

            cases.append(Case(f"ar1-lognormal-phi{phi:g}", measure, truth, gen))
    lam, mu_fast, mu_slow = 0.7, 1.2, 1.0
    for measure, _q in quantiles:
        truth = (mu_slow - lam) / (mu_fast - lam)  # the fast arm's quantile over the slow arm's: same q cancels

        def gen_q(rng: np.random.Generator) -> Rollout:
            return mm1_sojourn(rng, n, lam, mu_fast), mm1_sojourn(rng, n, lam, mu_slow), 1.0, 1.0

        cases.append(Case(f"mm1-rho{lam / mu_slow:g}-vs-{lam / mu_fast:.2g}", measure, truth, gen_q))
    window, width = 14.0, 0.125
    bins = round(window / width)
    for phi in (0.0, 0.8):
        def gen_t(rng: np.random.Generator, phi: float = phi) -> Rollout:
            a = modulated_tokens(rng, bins, width, 45.0, phi, 0.3)
            b = modulated_tokens(rng, bins, width, 30.0, phi, 0.3)
            return a, b, window, window

        cases.append(Case(f"throughput-phi{phi:g}", "throughput", 45.0 / 30.0, gen_t))
    return cases


def ratio_interval(measure: Measure, rollout: Rollout, confidence: float, method: Method,
                   replicates: int = BOOTSTRAP_RESAMPLES) -> RatioCI:
    """The interval the rules compute for ``measure`` on one rollout (two independent arms)."""
    a, b, duration_a, duration_b = rollout
    if measure == "throughput":
        return sum_ratio(a, b, duration_a, duration_b, confidence, method=method, replicates=replicates)
    return quantile_ratio(a, b, 0.5 if measure == "p50" else 0.95, confidence, method=method, replicates=replicates)


def tally(case: str, measure: str, method: str, intervals: Sequence[RatioCI], truth: float) -> Tally:
    """Coverage of ``truth`` by ``intervals`` (unresolved ones count as not covering), with an exact interval."""
    covered = below = above = unresolved = 0
    estimates: list[float] = []
    widths: list[float] = []
    for ci in intervals:
        if ci.ratio is not None:
            estimates.append(ci.ratio)
        if not ci.resolved or ci.lo is None or ci.hi is None:
            unresolved += 1
            continue
        widths.append(ci.hi / ci.lo if ci.lo > 0 else math.inf)
        if ci.hi < truth:
            below += 1
        elif ci.lo > truth:
            above += 1
        else:
            covered += 1
    k = len(intervals)
    exact = binomtest(covered, k).proportion_ci(confidence_level=0.95, method="exact") if k else None
    return Tally(case=case, measure=measure, method=method, rollouts=k, covered=covered,
                 coverage=covered / k if k else math.nan,
                 coverage_lo=float(exact.low) if exact else math.nan,
                 coverage_hi=float(exact.high) if exact else math.nan, below=below, above=above,
                 median_bias=float(np.median(estimates)) / truth - 1.0 if estimates else math.nan,
                 mean_width=float(np.mean(widths)) if widths else math.nan, unresolved=unresolved)


def study(cases: Iterable[Case], rollouts: int, methods: Sequence[Method] = METHODS, confidence: float = 0.95,
          replicates: int = BOOTSTRAP_RESAMPLES, seed: int = 20261203) -> list[Tally]:
    """Every case ``rollouts`` times, each rollout's interval by every method (the same rollouts for each)."""
    out: list[Tally] = []
    for case in cases:
        rng = np.random.default_rng([seed, zlib.crc32(f"{case.name}/{case.measure}".encode())])
        made = [case.generate(rng) for _ in range(rollouts)]
        for method in methods:
            cis = [ratio_interval(case.measure, r, confidence, method, replicates) for r in made]
            out.append(tally(case.name, case.measure, method, cis, case.truth))
    return out


def table(rows: Sequence[Tally]) -> str:
    """A plain-text table of the tallies."""
    head = (f"{'case':26s} {'measure':10s} {'method':10s} {'coverage':>9s} {'exact 95%':>15s} {'below':>6s} "
            f"{'above':>6s} {'bias':>7s} {'width':>7s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.case:26s} {r.measure:10s} {r.method:10s} {r.coverage:9.1%} "
                     f"[{r.coverage_lo:5.1%}, {r.coverage_hi:5.1%}] {r.below:6d} {r.above:6d} "
                     f"{r.median_bias:+7.2%} {r.mean_width:7.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The coverage study's command line."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.coverage", description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=400)
    parser.add_argument("--n", type=int, default=500, help="requests per arm (latency cases)")
    parser.add_argument("--replicates", type=int, default=BOOTSTRAP_RESAMPLES)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--cases", default="", help="comma-separated case-name prefixes (default: all)")
    parser.add_argument("--block-scale", type=float, default=None,
                        help="multiply the Politis-White block length by this (default: the harness's own)")
    parser.add_argument("--json", default=None, help="write the tallies here")
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad or args.rollouts < 1 or args.n < 50 or args.replicates < 100:
        parser.error(f"methods from {', '.join(METHODS)}; rollouts >= 1, n >= 50, replicates >= 100")
    if args.block_scale is not None:
        if not 0.25 <= args.block_scale <= 10:
            parser.error("--block-scale must be within 0.25..10")
        resample.BLOCK_SCALE = args.block_scale
    prefixes = [p for p in args.cases.split(",") if p]
    cases = [c for c in default_cases(args.n) if not prefixes or any(c.name.startswith(p) for p in prefixes)]
    started = time.perf_counter()
    rows = study(cases, args.rollouts, [m for m in METHODS if m in methods], replicates=args.replicates)
    print(table(rows))
    print(f"\n{args.rollouts} rollouts per case, n={args.n} per arm, {args.replicates} replicates, block scale "
          f"{resample.BLOCK_SCALE:g}, nominal 95%; "
          f"{time.perf_counter() - started:.0f} s")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The arithmetic of the ``value:`` section on :class:`~harness.schema.value.Figure` (a point with its interval):
GPUs needed from a per-server throughput, differences with the conservative interval, scaling, net saving and value
per GiB, each end taken from the ends that make it most extreme, so no step narrows an interval. Used by
:mod:`harness.decision.value` (against the baseline) and :mod:`harness.decision.value_marginal` (against the arm
without the newest tier)."""

from __future__ import annotations

import math

from harness.schema.value import Figure


def _servers(demand: float, capacity: float | None) -> int | None:
    if capacity is None or capacity <= 0 or not math.isfinite(capacity):
        return None
    return max(1, math.ceil(demand / capacity - 1e-9))


def gpus_needed(demand: float, capacity: Figure, per_server: int) -> Figure:
    """GPUs for ``demand`` at ``capacity`` per server, rounded up to whole servers; ends from the opposite ends."""
    def gpus(c: float | None) -> float | None:
        servers = _servers(demand, c)
        return None if servers is None else float(servers * per_server)

    return Figure(value=gpus(capacity.value), lo=gpus(capacity.hi), hi=gpus(capacity.lo), unit="GPUs",
                  confidence=capacity.confidence,
                  source=f"ceil({demand:g} {capacity.unit} / per-server throughput) x {per_server} GPU(s) per "
                         f"server; per-server throughput: {capacity.source}")


def minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def difference(a: Figure, b: Figure, confidence: float, unit: str, source: str) -> Figure:
    """``a - b`` of two arms' figures, conservatively ``[a_lo - b_hi, a_hi - b_lo]``; at ``confidence`` (the pair's
    Bonferroni level) when both are confidence intervals, else a bracket (None)."""
    level = confidence if a.confidence is not None and b.confidence is not None else None
    return Figure(value=minus(a.value, b.value), lo=minus(a.lo, b.hi), hi=minus(a.hi, b.lo), unit=unit,
                  confidence=level, source=source)


def scale(fig: Figure, factor: float, offset: float, unit: str, source: str) -> Figure:
    """``fig x factor + offset`` (the ends swap for a negative factor)."""
    def f(x: float | None) -> float | None:
        return None if x is None else x * factor + offset
    lo, hi = f(fig.lo), f(fig.hi)
    if factor < 0:
        lo, hi = hi, lo
    return Figure(value=f(fig.value), lo=lo, hi=hi, unit=unit, confidence=fig.confidence, source=source)


def net(saved: Figure, month: float, cost: Figure, unit: str, source: str) -> Figure:
    """GPUs saved x ``month`` - tier cost, conservatively from the opposite ends."""
    def f(gpus: float | None, money: float | None) -> float | None:
        return None if gpus is None or money is None else gpus * month - money
    return Figure(value=f(saved.value, cost.value), lo=f(saved.lo, cost.hi), hi=f(saved.hi, cost.lo), unit=unit,
                  confidence=saved.confidence, source=source)


def per_gib(money: Figure, servers: Figure, gib: float, unit: str, source: str) -> Figure:
    """``money`` / the fleet's GiB (servers x ``gib``); each end divided by the GiB that makes it most extreme."""
    def div(x: float | None, small: float | None, large: float | None) -> float | None:
        if x is None:
            return None
        d = small if x >= 0 else large  # the most extreme quotient of this end: a lower end divides by ...
        return None if d is None or d <= 0 else x / (d * gib)

    value = div(money.value, servers.value, servers.value)
    lo = div(money.lo, servers.hi, servers.lo)  # a positive lower end is smallest over the most GiB
    hi = div(money.hi, servers.lo, servers.hi)
    return Figure(value=value, lo=lo, hi=hi, unit=unit, confidence=money.confidence, source=source)


def ends(fig: Figure, digits: int = 0) -> str:
    """``12 [10, 14, 97.5%]`` (``search bracket`` in place of a level; ``?`` for an open end)."""
    def f(x: float | None) -> str:
        return "?" if x is None else f"{x:,.{digits}f}"
    level = f", {fig.confidence * 100:.3g}%" if fig.confidence is not None else ", search bracket"
    return f"{f(fig.value)} [{f(fig.lo)}, {f(fig.hi)}{level}]"

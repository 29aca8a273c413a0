"""One clock for a distributed step: each worker's monotonic clock, measured against the master's at connect.

Every machine has its own ``CLOCK_MONOTONIC`` (and a process in its own time namespace has its own too), so a
remote worker's ``send_ns`` means nothing on the master's clock, and the counted-rows mask (``send_ns`` inside the
master's journaled span, :mod:`harness.rundir.attempts`) would drop its rows. Before a step starts the master
exchanges a few time stamps with each worker (``t_sent`` master, ``t_worker``, ``t_back`` master, as NTP does);
the exchange with the shortest round trip gives the offset ``(t_sent + t_back) / 2 - t_worker`` within half that
round trip. The master adds the offset to every monotonic field of the worker's rows as they arrive
(:func:`shift_row`), so every row of the step is on the master's clock. Durations inside one row (TTFT, gaps) do
not change. An offset the exchange cannot tell from zero (no larger than its uncertainty) is taken as zero: the
same clock, as for the master's own local workers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MONO_FIELDS = ("planned_send_ns", "send_ns", "first_byte_ns", "first_token_ns", "end_ns", "first_token_parsed_ns")
LIST_FIELDS = ("chunk_ns",)
PINGS = 8  # exchanges per worker before a step
NOTE_OFFSET_S = 1.0  # an offset at least this large is said in the step's layout note


@dataclass(frozen=True)
class ClockOffset:
    """A worker's clock against the master's: add ``offset_ns`` to the worker's readings."""

    offset_ns: int
    uncertainty_ns: int  # half the best round trip
    samples: int

    @property
    def same_clock(self) -> bool:
        """True when the measured offset is zero within its uncertainty (no shift applied)."""
        return self.offset_ns == 0


def estimate(samples: Iterable[tuple[int, int, int]]) -> ClockOffset | None:
    """The offset from ``(t_sent, t_worker, t_back)`` exchanges (master, worker, master readings); None without
    any usable exchange. The one with the shortest round trip decides; within its uncertainty, zero."""
    best: tuple[int, int] | None = None  # (round trip, offset)
    count = 0
    for sent, worker, back in samples:
        if back < sent:
            continue
        count += 1
        trip = back - sent
        offset = (sent + back) // 2 - worker
        if best is None or trip < best[0]:
            best = (trip, offset)
    if best is None:
        return None
    half = best[0] // 2 + 1
    return ClockOffset(offset_ns=0 if abs(best[1]) <= half else best[1], uncertainty_ns=half, samples=count)


def shift_row(row: dict[str, Any], offset_ns: int) -> dict[str, Any]:
    """The record row with its monotonic times moved by ``offset_ns`` (in place; wall times unchanged)."""
    if offset_ns == 0:
        return row
    for name in MONO_FIELDS:
        value = row.get(name)
        if isinstance(value, int):
            row[name] = value + offset_ns
    for name in LIST_FIELDS:
        values = row.get(name)
        if isinstance(values, list):
            row[name] = [v + offset_ns for v in values if isinstance(v, int)]
    return row


def describe(rank: int, where: str, clock: ClockOffset) -> str | None:
    """A layout note for an offset worth saying (:data:`NOTE_OFFSET_S` or more), else None."""
    if abs(clock.offset_ns) < NOTE_OFFSET_S * 1e9:
        return None
    side = "behind" if clock.offset_ns > 0 else "ahead of"
    return (f"rank {rank} on {where}: its monotonic clock is {abs(clock.offset_ns) / 1e9:.3f} s {side} the "
            f"master's (measured before the step, within {clock.uncertainty_ns / 1e6:.2f} ms); its records were "
            "moved onto the master's clock")

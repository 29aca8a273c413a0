"""The virtual clock: one monotonic nanosecond counter for a whole virtual run, and the event queue that moves it.

Every time a virtual run writes (request records, scrapes' ``mono_ns``, journal spans, drill events) is read from
:class:`VirtualClock`, so every stage sees one consistent clock, as ``time.perf_counter_ns`` is for a real run.
Wall times are a fixed epoch plus the same offset (:meth:`VirtualClock.wall_ns`): the epoch is the real wall time
at which the run (or its resumed session) started, so dates in the reports are real ones, and durations between any
two stamps are virtual. Monotonic stamps start at :data:`ORIGIN_NS` (not 0: a zero reads as "unset" in places).

:class:`EventQueue` is the discrete-event loop: callbacks at virtual times, run in (time, priority, insertion)
order; running one moves the clock to its time. Nothing sleeps and nothing runs in another thread, so the same
inputs give the same sequence of events on any host. The queue outlives a step: what is due later (the next scrape,
an engine step in flight) stays queued until a later step advances the clock that far.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any

ORIGIN_NS = 1_000_000_000_000  # the first virtual monotonic stamp of a run (1000 s)

# Priorities among events due at the same instant (lower first): what a client does, then what the engine does,
# then what only observes (scrapes, looks).
PRIO_CLIENT = 0
PRIO_ENGINE = 1
PRIO_OBSERVE = 2


class VirtualClock:
    """Virtual monotonic and wall time (nanoseconds)."""

    def __init__(self, origin_ns: int = ORIGIN_NS, wall_epoch_ns: int | None = None) -> None:
        self._now = origin_ns
        self._origin = origin_ns
        self._epoch = time.time_ns() if wall_epoch_ns is None else wall_epoch_ns

    def mono_ns(self) -> int:
        """The current virtual monotonic time."""
        return self._now

    def wall_ns(self, mono_ns: int | None = None) -> int:
        """The virtual wall time of ``mono_ns`` (default: now)."""
        return self._epoch + ((self._now if mono_ns is None else mono_ns) - self._origin)

    def advance_to(self, mono_ns: int) -> None:
        """Move the clock forward to ``mono_ns`` (never back)."""
        self._now = max(self._now, mono_ns)


class EventQueue:
    """Callbacks at virtual times; :meth:`run_until` runs them in order, moving the clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def at(self, when_ns: int, prio: int, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` at ``when_ns`` (now, if that is in the past)."""
        heapq.heappush(self._heap, (max(when_ns, self.clock.mono_ns()), prio, next(self._seq), fn, args))

    def next_time(self) -> int | None:
        """When the next event is due (None: nothing queued)."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, done: Callable[[], bool], limit_ns: int | None = None) -> bool:
        """Run events until ``done()`` (checked before each event) or nothing is queued before ``limit_ns``; True
        when ``done()`` became true."""
        heap, clock = self._heap, self.clock
        while not done():
            if not heap or (limit_ns is not None and heap[0][0] > limit_ns):
                return False
            when, _prio, _seq, fn, args = heapq.heappop(heap)
            clock.advance_to(when)
            fn(*args)
        return True

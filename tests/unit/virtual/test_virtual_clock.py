"""The virtual clock's event queue: order by (time, priority, insertion), the clock moves with the events."""

from __future__ import annotations

from harness.virtual.clock import ORIGIN_NS, PRIO_CLIENT, PRIO_ENGINE, PRIO_OBSERVE, EventQueue, VirtualClock


def test_events_run_in_time_then_priority_then_insertion_order() -> None:
    queue = EventQueue(VirtualClock())
    seen: list[tuple[str, int]] = []

    def note(name: str) -> None:
        seen.append((name, queue.clock.mono_ns()))

    t = ORIGIN_NS
    queue.at(t + 20, PRIO_CLIENT, note, "late")
    queue.at(t + 10, PRIO_OBSERVE, note, "observe")
    queue.at(t + 10, PRIO_ENGINE, note, "engine")
    queue.at(t + 10, PRIO_CLIENT, note, "client-a")
    queue.at(t + 10, PRIO_CLIENT, note, "client-b")
    assert queue.run_until(lambda: False) is False  # ran dry
    assert seen == [("client-a", t + 10), ("client-b", t + 10), ("engine", t + 10), ("observe", t + 10),
                    ("late", t + 20)]


def test_run_until_stops_when_done_and_at_the_limit() -> None:
    queue = EventQueue(VirtualClock())
    count: list[int] = []
    for k in range(1, 6):
        queue.at(ORIGIN_NS + k * 1000, PRIO_CLIENT, count.append, k)
    assert queue.run_until(lambda: len(count) >= 2)
    assert count == [1, 2] and queue.clock.mono_ns() == ORIGIN_NS + 2000
    assert not queue.run_until(lambda: False, limit_ns=ORIGIN_NS + 3500)
    assert count == [1, 2, 3] and queue.next_time() == ORIGIN_NS + 4000


def test_an_event_in_the_past_runs_now_and_the_clock_never_goes_back() -> None:
    clock = VirtualClock(origin_ns=5_000, wall_epoch_ns=1_700_000_000_000_000_000)
    queue = EventQueue(clock)
    clock.advance_to(9_000)
    clock.advance_to(7_000)
    assert clock.mono_ns() == 9_000
    when: list[int] = []
    queue.at(1_000, PRIO_CLIENT, lambda: when.append(clock.mono_ns()))
    queue.run_until(lambda: bool(when))
    assert when == [9_000]
    assert clock.wall_ns() == 1_700_000_000_000_000_000 + 4_000
    assert clock.wall_ns(6_000) == 1_700_000_000_000_000_000 + 1_000

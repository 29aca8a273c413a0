"""Counter increases and histogram quantiles, robust to counter resets."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.scrape.deltas import HistogramDelta, HistogramReading, counter_increase, histogram_increase


def test_counter_increase_plain() -> None:
    assert counter_increase([10.0, 15.0, 15.0, 40.0]) == 30.0
    assert counter_increase([5.0]) == 0.0
    assert counter_increase([]) == 0.0


def test_counter_reset_counts_the_new_value_not_a_negative() -> None:
    # 100 -> 120 (+20), restart, 0 -> 7 (+7), 7 -> 30 (+23)
    assert counter_increase([100.0, 120.0, 7.0, 30.0]) == 50.0


@settings(deadline=None, max_examples=200)
@given(st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=10), min_size=1, max_size=6))
def test_counter_increase_equals_true_work_across_restarts(lives: list[list[int]]) -> None:
    # Each inner list is one server life: what it did between scrapes. The first reading of the first life is the
    # base; every later life starts from zero, so its first reading is its first increment.
    readings: list[float] = []
    expected = 0
    for life, increments in enumerate(lives):
        value = 0
        for j, inc in enumerate(increments):
            value += inc
            if life > 0 and j == 0:
                assume(readings and value < readings[-1])  # a restart is visible only as a lower reading
            if life > 0 or j > 0:
                expected += inc
            readings.append(float(value))
    total = counter_increase(readings)
    assert total == expected
    assert total >= 0


def test_histogram_quantile_interpolates_like_promql() -> None:
    delta = HistogramDelta(bounds=(0.1, 0.5, math.inf), counts=(50.0, 90.0, 100.0), count=100.0, total=20.0)
    assert delta.quantile(0.5) == pytest.approx(0.1)
    assert delta.quantile(0.25) == pytest.approx(0.05)
    assert delta.quantile(0.7) == pytest.approx(0.1 + 0.4 * (70 - 50) / 40)
    assert delta.quantile(0.95) == 0.5  # in the +Inf bucket: the highest finite bound
    assert delta.mean() == pytest.approx(0.2)
    empty = HistogramDelta(bounds=(0.1, math.inf), counts=(0.0, 0.0), count=0.0, total=0.0)
    assert empty.quantile(0.5) is None and empty.mean() is None


def test_histogram_increase_with_reset() -> None:
    a = HistogramReading(bounds=(0.1, math.inf), counts=(10.0, 20.0), total=3.0)
    b = HistogramReading(bounds=(0.1, math.inf), counts=(15.0, 30.0), total=4.0)
    after_restart = HistogramReading(bounds=(0.1, math.inf), counts=(1.0, 4.0), total=0.5)
    delta = histogram_increase([a, b, after_restart])
    assert delta is not None
    assert delta.counts == (6.0, 14.0)  # (5, 10) before the restart + (1, 4) after
    assert delta.count == 14.0
    assert delta.total == pytest.approx(1.5)


def test_histogram_increase_from_nothing() -> None:
    zero = HistogramReading(bounds=(), counts=(), total=0.0)
    b = HistogramReading(bounds=(0.1, math.inf), counts=(2.0, 3.0), total=0.4)
    delta = histogram_increase([zero, b])
    assert delta is not None and delta.counts == (2.0, 3.0) and delta.count == 3.0
    assert histogram_increase([]) is None

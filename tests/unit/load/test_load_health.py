"""Client health: saturation by CPU or by send lag, with the numbers in the note."""

from __future__ import annotations

from harness.load.health import assess, lag_stats_ms, percentile


def test_percentiles_and_lags() -> None:
    assert percentile([], 50) is None
    assert percentile([5, 1, 3], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99
    assert lag_stats_ms([1_000_000, 3_000_000]) == (1.0, 3.0, 3.0)


def test_healthy_client() -> None:
    h = assess(cpu_s=2.0, wall_s=10.0, max_process_cpu_percent=20.0, lag_p50_ms=0.2, lag_p99_ms=1.0, processes=1)
    assert h.cpu_percent == 20.0 and not h.saturated and h.note is None


def test_saturated_by_cpu_or_lag() -> None:
    h = assess(cpu_s=9.7, wall_s=10.0, max_process_cpu_percent=97.0, lag_p50_ms=1.0, lag_p99_ms=5.0, processes=1)
    assert h.saturated and "97% of a core" in (h.note or "")
    h = assess(cpu_s=1.0, wall_s=10.0, max_process_cpu_percent=10.0, lag_p50_ms=1.0, lag_p99_ms=45.0,
               processes=2, lag_limit_ms=20.0)
    assert h.saturated and "send lag p99 was 45.0 ms" in (h.note or "") and "2 process(es)" in (h.note or "")

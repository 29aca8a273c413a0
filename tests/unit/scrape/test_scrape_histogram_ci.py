"""Server histogram percentiles carry an interval: order-statistic ranks mapped to bucket edges."""

from __future__ import annotations

from harness.scrape.deltas import HistogramDelta
from harness.scrape.samples import server_percentiles


def test_histogram_percentiles_have_bucket_edge_intervals() -> None:
    # 1000 observations: 500 <= 0.1 s, 450 in (0.1, 0.5], 45 in (0.5, 1], 5 in (1, +Inf)
    hist = HistogramDelta(bounds=(0.1, 0.5, 1.0, float("inf")), counts=(500.0, 950.0, 995.0, 1000.0),
                          count=1000.0, total=300.0)
    perc = server_percentiles(hist)
    assert perc is not None and perc.count == 1000
    assert perc.p50_ci is not None and perc.p50_ci.resolved and perc.p50_ci.lo == 0.0 and perc.p50_ci.hi == 500.0
    assert perc.p95_ci is not None and perc.p95_ci.resolved and (perc.p95_ci.lo, perc.p95_ci.hi) == (100.0, 1000.0)
    # the p99's upper rank falls in the open +Inf bucket: unresolved from above, never an exact number
    assert perc.p99_ci is not None and not perc.p99_ci.resolved and perc.p99_ci.hi is None

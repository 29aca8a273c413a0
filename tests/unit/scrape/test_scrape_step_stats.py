"""Per-step server figures from a series of scrapes: boundaries, resets, missing series, gauges, TensorRT-LLM."""

from __future__ import annotations

import json

import pytest
from scrape_helpers import SECOND, series, vllm_text

from harness.scrape.catalog import load_catalog
from harness.scrape.quantities import step_quantities
from harness.scrape.samples import describe_missing, step_server_stats
from harness.scrape.series import Scrape, ScrapeSeries

VLLM = load_catalog("vllm", "0.32.0")


def test_step_delta_uses_boundary_scrapes_and_ignores_outside() -> None:
    s = series(
        (0.0, vllm_text(device=100, compute=50)),
        (1.0, vllm_text(device=110, compute=60)),  # step start boundary
        (2.0, vllm_text(device=150, host=30, compute=80, running=5, kv=0.4)),
        (3.0, vllm_text(device=200, host=40, disk=5, compute=90, running=3, kv=0.7)),  # end boundary
        (4.0, vllm_text(device=999, host=999, compute=999)),
    )
    server, hits = step_server_stats(s, VLLM, 1 * SECOND, 3 * SECOND)
    assert (hits.gpu, hits.cpu, hits.disk, hits.miss) == (90, 40, 5, 30)
    assert hits.prompt == 90 + 40 + 5 + 30
    assert hits.hit_rate() == pytest.approx(135 / 165)
    assert server.running_max == 5 and server.kv_usage_max == pytest.approx(0.7)
    assert server.scrapes == 3


def test_boundaries_between_scrapes_take_last_before_and_first_after() -> None:
    s = series((0.0, vllm_text(device=10)), (2.0, vllm_text(device=30)), (4.0, vllm_text(device=70)))
    _, hits = step_server_stats(s, VLLM, 1 * SECOND, 3 * SECOND)
    assert hits.gpu == 60  # from the scrape at 0 s to the one at 4 s


def test_server_restart_inside_the_step_is_neither_negative_nor_huge() -> None:
    s = series(
        (0.0, vllm_text(device=5000, compute=9000, preempt=7)),
        (1.0, vllm_text(device=5100, compute=9100, preempt=8)),
        (2.0, vllm_text(device=20, compute=30, preempt=0)),  # restarted
        (3.0, vllm_text(device=50, compute=60, preempt=1)),
    )
    server, hits = step_server_stats(s, VLLM, 0, 3 * SECOND)
    assert hits.gpu == 100 + 20 + 30
    assert hits.miss == 100 + 30 + 30
    assert server.preemptions == 1 + 0 + 1


def test_series_created_during_the_step_counts_from_zero() -> None:
    before = vllm_text(device=10, drop=('source="host"',))
    s = series((0.0, before), (1.0, vllm_text(device=20, host=7)))
    _, hits = step_server_stats(s, VLLM, 0, 1 * SECOND)
    assert hits.cpu == 7
    assert hits.gpu == 10


def test_missing_series_is_none_and_named() -> None:
    text = vllm_text(device=10, drop=('source="host"',))
    s = series((0.0, text), (1.0, text))
    _, hits = step_server_stats(s, VLLM, 0, SECOND)
    assert hits.cpu is None
    assert hits.gpu == 0
    assert describe_missing(hits.missing) == [
        'missing: vllm:prompt_tokens_cached_by_source_total{source="host"} (hit_tokens.cpu)']


def test_no_scrape_before_the_step_gives_none_with_a_reason() -> None:
    s = series((5.0, vllm_text(device=10)), (6.0, vllm_text(device=20)))
    server, hits = step_server_stats(s, VLLM, 4 * SECOND, 6 * SECOND)
    assert hits.gpu is None
    assert any("no scrape at or before the step start" in m for m in hits.missing)
    assert server.running_max == 0  # gauges only need a scrape inside the step


def test_no_scrapes_at_all() -> None:
    server, hits = step_server_stats(ScrapeSeries([]), VLLM, 0, SECOND)
    assert hits.source == "none" and hits.gpu is None and hits.miss is None
    assert server.scrapes == 0 and server.ttft_ms is None
    assert len(hits.missing) == 6


def test_failed_and_unparseable_scrapes_are_counted_not_used() -> None:
    good0, good1 = vllm_text(device=10), vllm_text(device=25)
    scrapes = [
        Scrape(0, 0, "/metrics", "prometheus", "step-0-start", 200, None, good0),
        Scrape(1, SECOND // 2, "/metrics", "prometheus", "poll", None, "ConnectError: refused", ""),
        Scrape(2, SECOND * 3 // 4, "/metrics", "prometheus", "poll", 200, None, "this is { not prometheus"),
        Scrape(3, SECOND, "/metrics", "prometheus", "step-0-end", 200, None, good1),
    ]
    s = ScrapeSeries(scrapes)
    server, hits = step_server_stats(s, VLLM, 0, SECOND)
    assert hits.gpu == 15
    assert server.scrapes == 4 and server.scrape_errors == 2
    assert any("ignored" in note for note in s.notes)


def test_histogram_step_percentiles() -> None:
    s = series(
        (0.0, vllm_text(ttft={"0.1": 10, "1.0": 10, "+Inf": 10}, ttft_sum=0.5)),
        (1.0, vllm_text(ttft={"0.1": 60, "1.0": 110, "+Inf": 110}, ttft_sum=30.5)),
    )
    server, _ = step_server_stats(s, VLLM, 0, SECOND)
    assert server.ttft_ms is not None
    assert server.ttft_ms.count == 100
    assert server.ttft_ms.p50 == pytest.approx(100.0)  # 50 of 100 in (0, 0.1]
    assert server.ttft_ms.p99 == pytest.approx(100 + 900 * (99 - 50) / 50)
    assert server.ttft_ms.mean == pytest.approx(300.0)
    assert server.itl_ms is None  # no ITL histogram in this exposition
    assert any("vllm:inter_token_latency_seconds" in m for m in server.missing)


def test_step_that_ends_before_it_starts_is_rejected() -> None:
    with pytest.raises(ValueError, match="before it starts"):
        step_quantities(ScrapeSeries([]), VLLM, 10, 5)


def _json(*entries: tuple[int, int, int]) -> str:
    return json.dumps([{"iter": it, "numActiveRequests": 2, "kvCacheStats": {
        "reusedBlocks": reused, "missedBlocks": missed, "tokensPerBlock": 32, "usedNumBlocks": 10,
        "maxNumBlocks": 100}} for it, reused, missed in entries])


def test_trtllm_drained_queue_polled_during_the_step() -> None:
    cat = load_catalog("trtllm", "1.1.0")  # a release whose JSON /metrics is polled
    s = series(
        (0.0, _json((1, 10, 20), (2, 12, 22))),  # before the step: base is the last entry, 12 / 22
        (1.0, "[]"),  # nothing new since: still the base
        (2.0, _json((3, 15, 30))),
        (3.0, "[]"),
        (4.0, _json((4, 20, 31), (5, 21, 35))),  # drained by the end-boundary scrape
        fmt="trtllm-json",
    )
    server, hits = step_server_stats(s, cat, 1 * SECOND, 4 * SECOND)
    assert hits.cached == (21 - 12) * 32
    assert hits.miss == (35 - 22) * 32
    assert hits.gpu is None and hits.cpu is None
    assert hits.hit_rate() == pytest.approx(9 / (9 + 13))
    assert server.kv_usage_max == pytest.approx(0.1)
    assert server.running_max == 2


def test_trtllm_json_counters_from_a_fresh_server() -> None:
    cat = load_catalog("trtllm", "1.1.0")  # a release whose JSON /metrics is polled
    s = series((0.0, "[]"), (1.0, _json((1, 3, 4))), fmt="trtllm-json")
    _, hits = step_server_stats(s, cat, 0, SECOND)
    assert hits.cached == 3 * 32 and hits.miss == 4 * 32


def test_reversed_step_span_is_reported_not_raised() -> None:
    server, hits = step_server_stats(series((0.0, vllm_text(device=1))), VLLM, 10, 5)
    assert hits.gpu is None and server.ttft_ms is None
    assert describe_missing(hits.missing)[0].startswith("missing: step span invalid")


def test_unparseable_base_scrape_never_means_counting_from_zero() -> None:
    scrapes = [
        Scrape(0, 0, "/metrics", "prometheus", "step-0-start", 200, None, "<html>oops</html>"),
        Scrape(1, SECOND, "/metrics", "prometheus", "step-0-end", 200, None, vllm_text(device=5000)),
    ]
    _, hits = step_server_stats(ScrapeSeries(scrapes), VLLM, SECOND // 2, SECOND)
    assert hits.gpu is None  # not 5000: the cumulative value since the server started
    assert any("no scrape at or before the step start" in m for m in hits.missing)

"""The fast path for plain Prometheus text returns exactly what prometheus_client's parser returns, or hands over.

The corpus: the simulator's vLLM and TensorRT-LLM expositions over a run of engine states, the real servers' bodies
under tests/fixtures/metrics, and every body the recorded demo runs under tests/fixtures/runs scraped; each whole and
filtered by each catalog's series, as the summary parses them. Then edge cases, where the fast path either agrees with
the library or hands the body over (None), and bodies the library refuses, which it must always hand over.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scrape_helpers import FIXTURES

from harness.scrape.catalog import catalog_for_engine, load_catalog
from harness.scrape.parse import ParseError, Samples, filter_exposition, library_samples, parse_prometheus
from harness.scrape.rawlog import read_raw_scrapes
from harness.scrape.textparse import parse_plain
from harness.sim.config import EngineConfig, OffloadConfig
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.profile import ComputeSpec, DiskSpec, LinkSpec
from harness.sim.scheduler import EngineCore

RUNS = FIXTURES.parent / "runs"
STRIDE = 7
KEEPS = [frozenset(load_catalog("vllm", "0.32.0").needed_series("prometheus")),
         frozenset(catalog_for_engine("sim", None, sim_flavor="vllm", version=None).needed_series("prometheus")),
         frozenset(catalog_for_engine("sim", None, sim_flavor="trtllm", version=None).needed_series("prometheus"))]


def _same(body: str) -> None:
    """The fast path handles ``body`` and returns the library's samples: names, rows, their order, labels' order
    and the values' exact representation (``-0.0`` is not ``0.0``)."""
    got = parse_plain(body)
    assert got is not None, body[:200]
    want = library_samples(body)
    assert repr(got) == repr(want)


def _engine(store_mode: str) -> EngineCore:
    compute = ComputeSpec(step_overhead_s=0.01, prefill_s_per_token=1e-4, prefill_s_per_token_ctx=1e-8,
                          decode_s_per_seq=1e-4, decode_s_per_ctx_token=1e-7)
    offload = OffloadConfig(spec_name="CPUOffloadingSpec", cpu_bytes=8 * 4000, chunk_blocks=1, eviction_policy="lru",
                            store_mode=store_mode)  # type: ignore[arg-type]
    return EngineCore(EngineConfig(
        model_name="unit", block_size=4, num_gpu_blocks=24, max_num_seqs=16, max_num_batched_tokens=256,
        max_model_len=96, kv_bytes_per_token=1000, enable_prefix_caching=True, compute=compute,
        link=LinkSpec(h2d_bytes_per_s=1e9, d2h_bytes_per_s=1e9, latency_s=1e-5),
        disk=DiskSpec(read_bytes_per_s=2e8, write_bytes_per_s=1e8, read_latency_s=1e-4, write_latency_s=0.0),
        offload=offload, kv_cache_bytes=24 * 4000))


def _simulator_bodies(core: EngineCore, metrics: VllmMetrics | TrtllmMetrics) -> list[str]:
    """The exposition after each of 40 engine steps (shared prefixes: hits, stores and evictions move)."""
    bodies = []
    now = 0.0
    for i in range(40):
        if i % 3 == 0:
            core.add(core.new_request(f"r{i}", [(i % 5) * 1000 + j for j in range(30 + i % 11)], 1 + i % 4, i, now))
        plan = core.schedule(now)
        if plan is None:
            wake = core.next_wakeup()
            now = now + 0.01 if wake is None else max(now, wake)
        else:
            result = core.complete(plan)
            for req in result.emitted:
                if len(req.output_idx) == 1:
                    metrics.on_first_token(req, plan.end - req.arrival, 0.001)
                else:
                    metrics.on_token(plan.duration)
            for req in result.finished:
                metrics.on_finished(req, plan.end - req.arrival, 1.0)
            metrics.on_step(plan, core, 1.0)
            now = plan.end
        bodies.append(metrics.render().decode())
    return bodies


def _check_corpus(bodies: list[str]) -> None:
    for body in bodies:
        _same(body)
        for keep in KEEPS:
            _same(filter_exposition(body, keep))


def test_simulator_vllm_flavour() -> None:
    core = _engine("write_through")
    bodies = _simulator_bodies(core, VllmMetrics(core, "demo-8b", kv_offloading_size_gib=1.5))
    assert "vllm:prompt_tokens_cached_by_source_total" in bodies[-1]
    _check_corpus(bodies)


def test_simulator_trtllm_flavour() -> None:
    core = _engine("on_evict")
    bodies = _simulator_bodies(core, TrtllmMetrics(core, "demo-8b"))
    assert "trtllm_kv_cache_reused_blocks_total" in bodies[-1]
    _check_corpus(bodies)


def test_real_server_fixtures() -> None:
    files = sorted(FIXTURES.glob("*.prom"))
    assert len(files) >= 5
    _check_corpus([f.read_text() for f in files])


def test_every_recorded_scrape_of_the_fixture_runs() -> None:
    bodies = []
    for path in sorted(RUNS.glob("*/metrics/*/scrapes.jsonl.gz")):
        records, _ = read_raw_scrapes(path)
        mine = [str(r["body"]) for r in records if r.get("format", "prometheus") == "prometheus" and r.get("body")]
        bodies += mine[::STRIDE] + mine[-1:]  # every body is alike in form; a stride keeps the test short
    assert len(bodies) > 100
    _check_corpus(bodies)


@pytest.mark.parametrize("body", [
    "",
    "\n\n",
    "# TYPE a counter\na 1\n",  # a counter without _total: the library names the sample a_total
    "# TYPE a_total counter\na_total 1\n",
    "# HELP a some help\n# TYPE a counter\na 2\nb 3\n",  # b: an untyped family of its own
    "# TYPE a gauge\na 1\n# TYPE a counter\na 2\n",  # the family's last type decides
    "# TYPE h histogram\nh_bucket{le=\"1.0\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\nh 7\n",
    "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\n",
    "x{a=\"1\",b=\"two words, {braces} = signs\"} 3\nx{} 4\nx{a=\"\",} 5\nx{a=\"1\"}6\n",
    "x -0\ny -0.0\nz 1e400\nw NaN\nv +Inf\nu -inf\nt 12345678901234567890\ns 0.1\n",
    "# a comment\n#\n# HELP x\n#  TYPE  x  gauge\nx 1\n",
    "# TYPE\n",
    "  x 1  \n\tx 2\n",
    "x 1 1700000000000\n",  # a timestamp: handed over
    'x{a="q\\"uote"} 1\n',  # an escape: handed over
    "x 1_000\n",
    "x 0x10\n",
    "x{__name__=\"y\"} 1\n",
    "x{a=\"1\",a=\"2\"} 1\n",
    "# TYPE x bogus\nx 1\n",
    "# TYPE x\nx 1\n",
    "# TYPE 9x counter\n",
    "# TYPE _total counter\n_total 1\n",
    "x 1 # {trace_id=\"a\"} 1\n",
    f"x {'9' * 400}\n",
    "x{a=\"é\"} 1\n",
    "<html><body>502 Bad Gateway</body></html>",
    "x{a=\"1\" 3\n",
])
def test_edge_cases_agree_or_hand_over(body: str) -> None:
    try:
        want: Samples | None = library_samples(body)
    except ParseError:
        want = None
    got = parse_plain(body)
    if want is None:
        assert got is None  # whatever the library refuses, the library must see
    elif got is not None:
        assert repr(got) == repr(want)


def test_the_plain_subset_is_handled_where_it_should_be() -> None:
    handled = ["# TYPE a counter\na 1\n", "x -0\nt 12345678901234567890\n",
               "x{a=\"1\",b=\"two words, {braces} = signs\"} 3\nx{} 4\nx{a=\"\",} 5\nx{a=\"1\"}6\n"]
    for body in handled:
        _same(body)
    assert parse_plain("# TYPE a counter\na 1\n") == {"a_total": [({}, 1.0)]}
    assert parse_plain("x 1 1700000000000\n") is None


def test_parse_prometheus_hands_what_the_fast_path_does_not_cover_to_the_library(tmp_path: Path) -> None:
    body = 'x{a="q\\"uote"} 1\nx 2 1700000000000\n'
    assert parse_plain(body) is None
    assert parse_prometheus(body) == {"x": [({"a": 'q"uote'}, 1.0), ({}, 2.0)]}
    with pytest.raises(ParseError, match="not valid Prometheus text"):
        parse_prometheus(f"x {'9' * 400}\n")  # the library's int overflows a float: a clear error, no traceback

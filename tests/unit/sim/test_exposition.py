"""The memoising text writer (:mod:`harness.sim.exposition`) writes what ``generate_latest`` writes, byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import GaugeHistogramMetricFamily, Metric, UnknownMetricFamily
from sim_unit_helpers import make_cfg

from harness.sim.exposition import TextWriter
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.scheduler import EngineCore, StepPlan

ODD_NAME = 'm "quoted" \\ back\nslash é'


class _Frozen:
    """One collection of a registry, replayed: both writers see the same samples (process metrics move)."""

    def __init__(self, registry: Any) -> None:
        self.metrics: list[Metric] = list(registry.collect())

    def collect(self) -> Iterator[Metric]:
        return iter(self.metrics)


def _step(core: EngineCore, metrics: VllmMetrics | TrtllmMetrics, now: float) -> float:
    plan: StepPlan | None = core.schedule(now)
    if plan is None:
        wake = core.next_wakeup()
        return now + 0.01 if wake is None else max(now, wake)
    result = core.complete(plan)
    for req in result.emitted:
        if len(req.output_idx) == 1:
            metrics.on_first_token(req, plan.end - req.arrival, 0.001 * len(req.output_idx))
        else:
            metrics.on_token(plan.duration)
    for req in result.finished:
        metrics.on_finished(req, plan.end - req.arrival, 1.0)
    metrics.on_step(plan, core, 1.0)
    return plan.end


def _compare_over_a_run(core: EngineCore, metrics: VllmMetrics | TrtllmMetrics) -> int:
    """Feed requests (shared prefixes, so hits, stores and evictions) and compare at every state; returns the
    number of states compared."""
    writer = TextWriter()
    now = 0.0
    compared = 0
    for i in range(60):
        if i % 3 == 0:
            prompt = [(i % 7) * 1000 + j for j in range(30 + i % 11)]
            core.add(core.new_request(f"r{i}", prompt, 1 + i % 5, i, now))
        now = _step(core, metrics, now)
        frozen = _Frozen(metrics.registry)
        assert writer.render(frozen) == generate_latest(frozen), f"state {i}"  # type: ignore[arg-type]
        compared += 1
    return compared


def test_vllm_flavour_byte_identical(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(24, cpu_chunks=8, fs_root=tmp_path, chunk_blocks=2))
    metrics = VllmMetrics(core, ODD_NAME, kv_offloading_size_gib=1.5)
    assert _compare_over_a_run(core, metrics) == 60
    text = metrics.render().decode()
    assert "vllm:kv_offload_tiering_read_bytes_total" in text and 'model_name="m \\"quoted\\"' in text


def test_vllm_flavour_without_offload_byte_identical() -> None:
    core = EngineCore(make_cfg(16, max_num_seqs=2))
    assert _compare_over_a_run(core, VllmMetrics(core, "plain")) == 60


def test_trtllm_flavour_byte_identical() -> None:
    core = EngineCore(make_cfg(24, cpu_chunks=8, store_mode="on_evict"))
    metrics = TrtllmMetrics(core, ODD_NAME)
    assert _compare_over_a_run(core, metrics) == 60
    assert "trtllm_kv_cache_reused_blocks_total" in metrics.render().decode()


def test_every_metric_type_byte_identical() -> None:
    registry = CollectorRegistry()
    c = Counter("c", "a counter\nwith \\ newline", ["x"], registry=registry)
    g = Gauge("g", "a gauge", registry=registry)
    h = Histogram("h", "a histogram", ["y"], buckets=(0.5, 1.0, 1e7), registry=registry)
    s = Summary("s", "a summary", registry=registry)
    i = Info("i", "an info", registry=registry)
    e = Enum("e", "an enum", states=["a", "b"], registry=registry)
    gh = GaugeHistogramMetricFamily("gh", "a gauge histogram", labels=["z"])
    gh.add_metric(["1"], [("1.0", 2.0), ("+Inf", 3.0)], 4.5)
    unknown = UnknownMetricFamily("u", "untyped", labels=["w"])
    unknown.add_metric(["-"], float("nan"), timestamp=12.345)

    class Extra:
        def collect(self) -> Iterator[Metric]:
            yield gh
            yield unknown

    registry.register(Extra())  # type: ignore[arg-type]
    writer = TextWriter()
    for step in range(5):
        c.labels(x=f"v{step % 2}").inc(step * 1.5)
        g.set(-step * 1e12 if step % 2 else float("inf"))
        h.labels(y='q"').observe(step * 0.4)
        s.observe(step)
        i.info({"k": f"v{step}", "a": "\\"})
        e.state("ab"[step % 2])
        assert writer.render(registry) == generate_latest(registry)

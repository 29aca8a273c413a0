"""TensorRT-LLM-flavoured metrics, imitating the newest table entry (a release with the background stats collector).

- ``GET /metrics``: JSON iteration statistics, one entry per engine step, kept in a bounded queue that is
  drained when read (as the real server does with ``enable_iter_perf_stats``), so a poller gets each entry once
  and an idle server returns ``[]``. Each entry has ``iter``, ``iterLatencyMS``, ``numActiveRequests``,
  ``numQueuedRequests``, ``gpuMemUsage`` and ``kvCacheStats`` (``maxNumBlocks``, ``freeNumBlocks``,
  ``usedNumBlocks``, ``tokensPerBlock``, ``allocTotalBlocks``, ``allocNewBlocks``, ``reusedBlocks``,
  ``missedBlocks``, ``cacheHitRate``; counters cumulative).
- The background collector (``stats_collector``, on by default): from TensorRT-LLM PR #11243 trtllm-serve's
  ``_iteration_stats_collector_loop`` drains that same queue into ``/prometheus/metrics`` whenever
  ``return_perf_metrics`` is on, so a JSON ``/metrics`` read after it drained returns ``[]`` (nvbugs/6102381). The
  simulated collector takes every entry as it is made: JSON ``/metrics`` then always reads ``[]``, and only the
  Prometheus series carry the statistics. ``stats_collector=False`` imitates a release without it (1.0, 1.1).
- ``GET /prometheus/metrics``: Prometheus text with the ``trtllm_`` names of ``tensorrt_llm/metrics/collector.py``
  (counters exposed with ``_total``), including ``trtllm_kv_cache_tokens_per_block`` and ``trtllm_prompt_tokens``.

``reusedBlocks`` counts blocks served from any cache (GPU or host, as TensorRT-LLM counts onboarded blocks as
reused); ``missedBlocks`` the prompt blocks computed.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from harness.sim.exposition import TextWriter
from harness.sim.histogram import FastHistogram
from harness.sim.metrics_vllm import CONTENT_TYPE, ITL_BUCKETS, REQUEST_TIME_BUCKETS, TTFT_BUCKETS
from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore, StepPlan

LABELS = ("model_name",)
QUEUE_MAX = 1000


class _TrtCollector:
    def __init__(self, core: EngineCore, model_name: str, histograms: list[FastHistogram]) -> None:
        self.core = core
        self.lv = [model_name]
        self.histograms = histograms
        self.created = time.time()

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        fam = GaugeMetricFamily(name, doc, labels=LABELS)
        fam.add_metric(self.lv, value)
        return fam

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        fam = CounterMetricFamily(name, doc, labels=LABELS)
        fam.add_metric(self.lv, value, created=self.created)
        return fam

    def collect(self) -> Iterator[Metric]:
        core, st = self.core, self.core.stats
        total = st.reused_blocks + st.missed_blocks
        yield self._gauge("trtllm_kv_cache_hit_rate", "KV cache block hit rate.",
                          st.reused_blocks / total if total else 0.0)
        yield self._gauge("trtllm_kv_cache_utilization", "GPU KV cache utilization.", core.pool.usage)
        off = core.offload
        yield self._gauge("trtllm_kv_cache_host_utilization", "Host KV cache utilization.",
                          off.cpu.usage if off is not None else 0.0)
        yield self._counter("trtllm_kv_cache_reused_blocks", "Reused KV cache blocks.", st.reused_blocks)
        yield self._counter("trtllm_kv_cache_missed_blocks", "Missed KV cache blocks.", st.missed_blocks)
        yield self._gauge("trtllm_kv_cache_tokens_per_block", "Tokens per KV cache block.", core.bs)
        yield self._counter("trtllm_prompt_tokens", "Prompt (input) tokens processed.", st.prompt_tokens)
        yield self._counter("trtllm_kv_cache_onboard_bytes", "Bytes onboarded from host to GPU.",
                            off.stats.load_bytes if off is not None else 0)
        yield self._counter("trtllm_kv_cache_offload_bytes", "Bytes offloaded from GPU to host.",
                            off.stats.store_bytes if off is not None else 0)
        yield self._gauge("trtllm_num_requests_running", "Requests running.", core.num_running)
        yield self._gauge("trtllm_num_requests_waiting", "Requests waiting.", core.num_waiting)
        yield self._counter("trtllm_prompt_cached_tokens", "Prompt tokens served from the KV cache.",
                            st.cached_device + st.cached_host + st.cached_disk)
        for hist in self.histograms:
            yield hist.family(LABELS, self.lv)


class TrtllmMetrics:
    """JSON iteration stats queue plus a Prometheus registry with ``trtllm_`` names."""

    content_type = CONTENT_TYPE

    def __init__(self, core: EngineCore, model_name: str, *, stats_collector: bool = True) -> None:
        self.core = core
        self.queue: deque[dict[str, Any]] = deque(maxlen=QUEUE_MAX)
        self.stats_collector = stats_collector
        self.collected = 0  # entries the simulated background collector drained before any JSON reader
        self.registry = CollectorRegistry()
        self._writer = TextWriter()
        histograms: list[FastHistogram] = []

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> FastHistogram:
            h = FastHistogram(name, doc, buckets)
            histograms.append(h)
            return h

        self.ttft = hist("trtllm_time_to_first_token_seconds", "Time to first token (s).", TTFT_BUCKETS)
        self.tpot = hist("trtllm_time_per_output_token_seconds", "Time per output token (s).", ITL_BUCKETS)
        self.e2e = hist("trtllm_e2e_request_latency_seconds", "End-to-end request latency (s).",
                        REQUEST_TIME_BUCKETS)
        self.queue_time = hist("trtllm_request_queue_time_seconds", "Time in the queue (s).",
                               REQUEST_TIME_BUCKETS)
        self.registry.register(_TrtCollector(core, model_name, histograms))
        self._iter = 0

    def on_first_token(self, req: SimRequest, ttft_s: float, queue_s: float) -> None:
        self.ttft.observe(ttft_s)
        self.queue_time.observe(queue_s)

    def on_token(self, itl_s: float) -> None:
        self.tpot.observe(itl_s)

    def on_finished(self, req: SimRequest, e2e_s: float, time_scale: float) -> None:
        self.e2e.observe(e2e_s)

    def on_step(self, plan: StepPlan, core: EngineCore, time_scale: float) -> None:
        st = core.stats
        pool = core.pool
        total = st.reused_blocks + st.missed_blocks
        self._iter += 1
        if self.stats_collector:  # the entry would be drained at once (see _queue_entry): count it, build nothing
            self.collected += min(len(self.queue) + 1, QUEUE_MAX)
            self.queue.clear()
            return
        self._queue_entry({
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S"),
            "iter": self._iter,
            "iterLatencyMS": plan.duration * time_scale * 1000.0,
            "gpuMemUsage": int(pool.usage * core.cfg.kv_cache_bytes),
            "cpuMemUsage": 0,
            "pinnedMemUsage": 0,
            "maxNumActiveRequests": core.cfg.max_num_seqs,
            "numActiveRequests": core.num_running,
            "numQueuedRequests": core.num_waiting,
            "numCompletedRequests": st.finished["length"],
            "maxBatchSizeRuntime": core.cfg.max_num_seqs,
            "kvCacheStats": {
                "maxNumBlocks": pool.num_blocks,
                "freeNumBlocks": pool.num_free,
                "usedNumBlocks": pool.num_blocks - pool.num_free,
                "tokensPerBlock": core.bs,
                "allocTotalBlocks": st.alloc_new_blocks + st.reused_blocks,
                "allocNewBlocks": st.alloc_new_blocks,
                "reusedBlocks": st.reused_blocks,
                "missedBlocks": st.missed_blocks,
                "cacheHitRate": st.reused_blocks / total if total else 0.0,
            },
        })

    def _queue_entry(self, entry: dict[str, Any]) -> None:
        self.queue.append(entry)
        if self.stats_collector:  # the collector's loop drains the queue before a JSON /metrics poll can
            self.collected += len(self.queue)
            self.queue.clear()

    def drain_json(self) -> bytes:
        """The queued iteration stats as a JSON list; the queue is emptied."""
        items = list(self.queue)
        self.queue.clear()
        return json.dumps(items).encode()

    def render(self) -> bytes:
        """The Prometheus text (what ``generate_latest`` writes, :mod:`harness.sim.exposition`)."""
        return self._writer.render(self.registry)

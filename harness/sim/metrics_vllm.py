"""vLLM-flavoured ``/metrics``: the families, types, help texts and labels of real vLLM 0.32.

Checked against ``shared/reference/vllm-0.32.0-cpu-metrics.prom``. Labels ``engine="0"`` and ``model_name``.
Counters are read from the engine model at scrape time (:class:`harness.sim.scheduler.CoreStats`,
:class:`harness.sim.offload.OffloadStats`), so they cost nothing on the hot path; latency histograms are
observed by the engine runner in wall-clock seconds (what a client of the server would measure).

Semantics (as vLLM): ``prefix_cache_queries/hits`` are GPU prefix-cache tokens; ``external_prefix_cache_*``
the offload tiers' (present with any tier; 0 otherwise); ``prompt_tokens_cached_by_source{source=device|host|
disk}`` split the hits by the tier that supplied them; ``prompt_tokens_by_source{source=local_compute|
local_cache_hit|external_kv_transfer}`` = recomputed / GPU hit / CPU+disk hit. Offload families
(``vllm:kv_offload_*``) appear only with a CPU tier; ``vllm:kv_offload_tiering_*`` (label ``tier``:
``0:primary`` = CPU, ``1:fs`` = disk) only with ``TieringOffloadingSpec``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from harness.sim.config import TIERING_SPEC, EngineConfig
from harness.sim.exposition import TextWriter
from harness.sim.histogram import FastHistogram
from harness.sim.offload import FS, PRIMARY
from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore, StepPlan

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_TIME_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                        120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TOKEN_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)
PREEMPTION_BUCKETS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)
ITERATION_BUCKETS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)

LABELS = ("engine", "model_name")


def cache_config_labels(cfg: EngineConfig, kv_offloading_size_gib: float | None) -> dict[str, str]:
    """Labels of ``vllm:cache_config_info`` (the keys real vLLM 0.32 exposes)."""
    tokens = cfg.num_gpu_blocks * cfg.block_size
    return {
        "_block_size_resolved": "True",
        "block_size": str(cfg.block_size),
        "cache_dtype": "auto",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(cfg.block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(cfg.enable_prefix_caching),
        "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": str(round(tokens / cfg.max_model_len, 2)),
        "kv_cache_memory_bytes": str(cfg.kv_cache_bytes),
        "kv_cache_size_tokens": str(tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None" if kv_offloading_size_gib is None else str(kv_offloading_size_gib),
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "float32",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(cfg.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }


class _CoreCollector:
    """Counters and gauges read from the engine model at scrape time."""

    def __init__(self, core: EngineCore, model_name: str, info: dict[str, str],
                 histograms: list[FastHistogram]) -> None:
        self.core = core
        self.lv = ["0", model_name]
        self.info = info
        self.histograms = histograms
        self.created = time.time()

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        fam = CounterMetricFamily(name, doc, labels=LABELS)
        fam.add_metric(self.lv, value, created=self.created)
        return fam

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        fam = GaugeMetricFamily(name, doc, labels=LABELS)
        fam.add_metric(self.lv, value)
        return fam

    def collect(self) -> Iterator[Metric]:
        core, st, lv = self.core, self.core.stats, self.lv
        yield self._gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                          core.num_running)
        yield self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                          core.num_waiting)
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of "
            "all reasons equals vllm:num_requests_waiting.",
            labels=[*LABELS, "reason"],
        )
        by_reason.add_metric([*lv, "capacity"], len(core.waiting))
        by_reason.add_metric([*lv, "deferred"], len(core.loading))
        yield by_reason
        yield self._gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", core.pool.usage)
        yield self._counter("vllm:prefix_cache_queries",
                            "Prefix cache queries, in terms of number of queried tokens.", st.prefix_queries)
        yield self._counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                            st.prefix_hits)
        yield self._counter(
            "vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number "
            "of queried tokens.", st.external_queries)
        yield self._counter(
            "vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of "
            "cached tokens.", st.external_hits)
        yield self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                            st.preemptions)
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", st.prompt_tokens)
        by_source = CounterMetricFamily("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                                        labels=[*LABELS, "source"])
        for source, value in (("local_compute", st.src_local_compute), ("local_cache_hit", st.src_local_cache_hit),
                              ("external_kv_transfer", st.src_external)):
            by_source.add_metric([*lv, source], value, created=self.created)
        yield by_source
        yield self._counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
                            st.cached_device + st.cached_host + st.cached_disk)
        cached = CounterMetricFamily(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded "
            "to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at "
            "admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
            labels=[*LABELS, "source"],
        )
        for source, value in (("device", st.cached_device), ("host", st.cached_host), ("p2p", 0),
                              ("disk", st.cached_disk), ("external_unspecified", 0)):
            cached.add_metric([*lv, source], value, created=self.created)
        yield cached
        yield self._counter("vllm:generation_tokens", "Number of generation tokens processed.",
                            st.generation_tokens)
        success = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                      labels=["engine", "finished_reason", "model_name"])
        for reason in ("stop", "length", "abort", "error", "repetition"):
            success.add_metric(["0", reason, lv[1]], st.finished.get(reason, 0), created=self.created)
        yield success
        info = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                 labels=[*sorted(self.info), "engine"])
        info.add_metric([*(self.info[k] for k in sorted(self.info)), "0"], 1.0)
        yield info
        for hist in self.histograms:
            yield hist.family(LABELS, lv)
        if core.offload is not None:
            yield from self._offload()

    def _offload(self) -> Iterator[Metric]:
        off = self.core.offload
        assert off is not None
        os_ = off.stats
        yield self._counter("vllm:kv_offload_load_bytes", "Total bytes loaded from offload storage to GPU.",
                            os_.load_bytes)
        yield self._counter("vllm:kv_offload_load_time", "Total time spent loading from offload storage (s).",
                            os_.load_time_s)
        yield self._counter("vllm:kv_offload_store_bytes", "Total bytes stored from GPU to offload storage.",
                            os_.store_bytes)
        yield self._counter("vllm:kv_offload_store_time", "Total time spent storing to offload storage (s).",
                            os_.store_time_s)
        yield self._counter("vllm:kv_offload_allocation_failure",
                            "Number of offload store allocation failures.", os_.allocation_failures)
        total_bytes = CounterMetricFamily("vllm:kv_offload_total_bytes", "Deprecated: offloaded bytes.",
                                          labels=[*LABELS, "transfer_type"])
        total_time = CounterMetricFamily("vllm:kv_offload_total_time", "Deprecated: offload time (s).",
                                         labels=[*LABELS, "transfer_type"])
        for kind, nbytes, secs in (("GPU_to_CPU", os_.store_bytes, os_.store_time_s),
                                   ("CPU_to_GPU", os_.load_bytes, os_.load_time_s)):
            total_bytes.add_metric([*self.lv, kind], nbytes, created=self.created)
            total_time.add_metric([*self.lv, kind], secs, created=self.created)
        yield total_bytes
        yield total_time
        yield self._gauge("vllm:kv_offload_cpu_cache_usage_perc", "CPU offload cache usage. 1 means 100 percent.",
                          off.cpu.pinned_share(off.now))  # as vLLM: chunks pinned by in-flight transfers
        if off.cfg.spec_name != TIERING_SPEC:
            return
        now = self.core.offload.now if self.core.offload is not None else 0.0
        for name, doc, values in (
            ("read_bytes", "Bytes read from the tier.", os_.read_bytes),
            ("read_time", "Time spent reading from the tier (s).", os_.read_time_s),
            ("write_bytes", "Bytes written to the tier.", os_.write_bytes),
            ("write_time", "Time spent writing to the tier (s).", os_.write_time_s),
            ("chunk_queries", "Chunks looked up in the tier.", os_.chunk_queries),
            ("chunk_hits", "Chunks found in the tier.", os_.chunk_hits),
        ):
            fam = CounterMetricFamily(f"vllm:kv_offload_tiering_{name}", doc, labels=[*LABELS, "tier"])
            for tier in (PRIMARY, FS):
                fam.add_metric([*self.lv, tier], values[tier], created=self.created)
            yield fam
        for name, doc, counts in (  # vLLM binds a tier's label set at its first drop: declared, empty until then
            ("backpressure_stores_dropped", "Number of store operations dropped due to back-pressure on a "
             "secondary tier.", os_.stores_dropped),
            ("backpressure_blocks_dropped", "Number of blocks dropped due to back-pressure on a secondary tier.",
             os_.blocks_dropped),
        ):
            fam = CounterMetricFamily(f"vllm:kv_offload_tiering_{name}", doc, labels=[*LABELS, "tier"])
            for tier, count in counts.items():
                if count:
                    fam.add_metric([*self.lv, tier], count, created=self.created)
            yield fam
        fails = CounterMetricFamily("vllm:kv_offload_tiering_cascade_job_failures", "Failed cascade jobs.",
                                    labels=[*LABELS, "tier"])
        fails.add_metric([*self.lv, FS], os_.cascade_failures, created=self.created)
        yield fails
        yield self._counter("vllm:kv_offload_tiering_promotion_allocation_failures",
                            "Promotions that could not allocate primary-tier space.",
                            os_.promotion_allocation_failures)
        yield self._gauge("vllm:kv_offload_tiering_active_promotion_jobs", "Promotion jobs in flight.",
                          off.active_promotions(now))
        yield self._gauge("vllm:kv_offload_tiering_active_cascade_jobs", "Cascade jobs in flight.",
                          off.active_cascades(now))


class VllmMetrics:
    """Prometheus exposition of the vLLM flavour (a private registry per server)."""

    content_type = CONTENT_TYPE

    def __init__(self, core: EngineCore, model_name: str, kv_offloading_size_gib: float | None = None) -> None:
        self.registry = CollectorRegistry()
        self._writer = TextWriter()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        histograms: list[FastHistogram] = []

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> FastHistogram:
            h = FastHistogram(name, doc, buckets)
            histograms.append(h)
            return h

        self.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                        ITL_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds",
                         "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                        REQUEST_TIME_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds",
                          "Histogram of time spent in WAITING phase for request.", REQUEST_TIME_BUCKETS)
        self.inference = hist("vllm:request_inference_time_seconds",
                              "Histogram of time spent in RUNNING phase for request.", REQUEST_TIME_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds",
                            "Histogram of time spent in PREFILL phase for request.", REQUEST_TIME_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds",
                           "Histogram of time spent in DECODE phase for request.", REQUEST_TIME_BUCKETS)
        self.prompt_hist = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                                TOKEN_BUCKETS)
        self.gen_hist = hist("vllm:request_generation_tokens", "Number of generation tokens processed.",
                             TOKEN_BUCKETS)
        self.preempt_hist = hist("vllm:request_num_preemptions",
                                 "Histogram of the number of times a request was preempted.", PREEMPTION_BUCKETS)
        self.computed_hist = hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).", TOKEN_BUCKETS)
        self.iteration = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                              ITERATION_BUCKETS)
        info = cache_config_labels(core.cfg, kv_offloading_size_gib)
        self.registry.register(_CoreCollector(core, model_name, info, histograms))

    def on_first_token(self, req: SimRequest, ttft_s: float, queue_s: float) -> None:
        self.ttft.observe(ttft_s)
        self.queue.observe(queue_s)

    def on_token(self, itl_s: float) -> None:
        self.itl.observe(itl_s)

    def on_finished(self, req: SimRequest, e2e_s: float, time_scale: float) -> None:
        self.e2e.observe(e2e_s)
        self.prompt_hist.observe(req.prompt_len)
        self.gen_hist.observe(req.num_output)
        self.preempt_hist.observe(req.preemptions)
        self.computed_hist.observe(req.recomputed_tokens)
        if req.first_scheduled is not None and req.first_token_at is not None and req.finished_at is not None:
            self.inference.observe((req.finished_at - req.first_scheduled) * time_scale)
            self.prefill.observe((req.first_token_at - req.first_scheduled) * time_scale)
            decode_s = (req.finished_at - req.first_token_at) * time_scale
            self.decode.observe(decode_s)
            if req.num_output > 1:
                self.tpot.observe(decode_s / (req.num_output - 1))

    def on_step(self, plan: StepPlan, core: EngineCore, time_scale: float) -> None:
        self.iteration.observe(plan.num_tokens)

    def render(self) -> bytes:
        """The Prometheus text (what ``generate_latest`` writes, :mod:`harness.sim.exposition`)."""
        return self._writer.render(self.registry)

"""Read a live server's own configuration: what it says it runs, before any arm on it is judged.

vLLM (and the simulator's ``vllm`` flavor): the labels of ``vllm:cache_config_info`` on ``/metrics`` (block size,
``kv_offloading_size`` in GiB, ``kv_offloading_backend``, prefix caching, ``gpu_memory_utilization``, GPU KV
blocks...; the keys vLLM 0.32 exposes), which ``vllm:kv_offload_*`` families exist (an offload connector is
configured) with their ``tier`` labels (``1:fs``: a disk tier), ``process_start_time_seconds``, and ``/v1/models``
(served id, ``root`` = the model it loaded, ``max_model_len``). The labels of every other ``vllm:*_config_info``
family are kept too: vLLM 0.32 exposes no scheduler settings (``max_num_seqs``, ``max_num_batched_tokens``) on
``/metrics``, but a server that does is compared on them.

TensorRT-LLM has no configuration endpoint: ``trtllm-serve`` serves ``/v1/models``, ``/health``, ``/metrics``
(JSON iteration stats, no settings) and ``/version`` (docs/source/commands/trtllm-serve.rst), so only the model and
the version are read; ``kv_cache_config`` (``host_cache_size``, block reuse) cannot be verified on a live server.

Every request goes through :func:`harness.core.net.bounded.fetch` (whole-request deadline, capped body); what cannot be
read is kept as a problem (``/metrics: HTTP 404``), never raised.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.net.bounded import FetchCancelled, FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES, METRICS_MAX_BYTES
from harness.scrape.parse import ParseError, parse_prometheus

READ_DEADLINE_S = 10.0
CACHE_INFO = "vllm:cache_config_info"
CONFIG_INFO_SUFFIX = "_config_info"  # vllm:cache_config_info today; any other *_config_info a server exposes
OFFLOAD_PREFIX = "vllm:kv_offload_"
TIERING_PREFIX = "vllm:kv_offload_tiering_"
START_TIME = "process_start_time_seconds"
_DROP_LABELS = ("engine", "model_name")


@dataclass
class LiveConfig:
    """What one server reported about itself."""

    flavor: str  # vllm | trtllm: whose endpoints were read
    models: list[dict[str, Any]] = field(default_factory=list)  # /v1/models data: id, root, max_model_len
    cache_config: dict[str, str] | None = None  # vllm:cache_config_info labels (None: not exposed)
    config_info: dict[str, dict[str, str]] = field(default_factory=dict)  # every vllm:*_config_info's labels
    offload_families: list[str] = field(default_factory=list)  # vllm:kv_offload_* sample names present
    tiers: list[str] = field(default_factory=list)  # tier labels of vllm:kv_offload_tiering_* (0:primary, 1:fs)
    process_start_time: float | None = None
    version: str | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why

    def model(self, served: str) -> dict[str, Any] | None:
        """The ``/v1/models`` entry of the served id."""
        return next((m for m in self.models if m.get("id") == served), None)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _get(url: str, cap: int, cancel: threading.Event | None) -> tuple[str | None, str | None]:
    """(body, None) or (None, why)."""
    try:
        resp = fetch("GET", url, deadline_s=READ_DEADLINE_S, max_body_bytes=cap, cancel=cancel)
    except FetchCancelled:
        raise
    except FetchError as exc:
        return None, str(exc)
    if resp.status != 200:
        return None, f"HTTP {resp.status}"
    return resp.text(), None


def _models(body: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return []
    keep = ("id", "root", "max_model_len", "owned_by")
    return [{k: m[k] for k in keep if k in m and isinstance(m[k], str | int | float | None)}
            for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def read_vllm_metrics(text: str, live: LiveConfig) -> None:
    """Fill ``live`` from a vLLM Prometheus exposition."""
    try:
        samples = parse_prometheus(text)
    except ParseError as exc:
        live.problems.append(f"/metrics: {exc}")
        return
    info = samples.get(CACHE_INFO)
    if info:
        live.cache_config = {k: v for k, v in info[0][0].items() if k not in _DROP_LABELS}
    live.config_info = {name: {k: v for k, v in rows[0][0].items() if k not in _DROP_LABELS}
                        for name, rows in sorted(samples.items())
                        if name.startswith("vllm:") and name.endswith(CONFIG_INFO_SUFFIX) and rows}
    live.offload_families = sorted(name for name in samples if name.startswith(OFFLOAD_PREFIX))
    live.tiers = sorted({labels["tier"] for name, rows in samples.items() if name.startswith(TIERING_PREFIX)
                         for labels, _v in rows if "tier" in labels})
    start = samples.get(START_TIME)
    if start:
        live.process_start_time = start[0][1]


def read_live_config(base_url: str, metrics_url: str, flavor: str,
                     cancel: threading.Event | None = None) -> LiveConfig:
    """Everything the server at ``base_url`` tells about its configuration (``flavor``: vllm or trtllm)."""
    live = LiveConfig(flavor=flavor)
    body, why = _get(base_url + "/v1/models", API_MAX_BYTES, cancel)
    if body is None:
        live.problems.append(f"/v1/models: {why}")
    else:
        live.models = _models(body)
    if flavor == "trtllm":
        body, why = _get(base_url + "/version", API_MAX_BYTES, cancel)
        live.version = body.strip()[:200] if body is not None else None
        if body is None:
            live.problems.append(f"/version: {why}")
        return live
    body, why = _get(metrics_url, METRICS_MAX_BYTES, cancel)
    if body is None:
        live.problems.append(f"{metrics_url}: {why}")
    else:
        read_vllm_metrics(body, live)
        if live.cache_config is None:
            live.problems.append(f"{metrics_url}: no {CACHE_INFO}")
    return live

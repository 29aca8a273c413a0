"""Build small vLLM-style expositions and in-memory scrape series for the scrape tests."""

from __future__ import annotations

from pathlib import Path

from harness.scrape.series import ScrapeSeries, series_from_bodies

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
SECOND = 1_000_000_000


def vllm_text(*, device: float = 0, host: float = 0, disk: float = 0, compute: float = 0, prompt: float | None = None,
              preempt: float = 0, running: float = 0, kv: float = 0.0, ttft: dict[str, float] | None = None,
              ttft_sum: float = 0.0, extra: str = "", drop: tuple[str, ...] = ()) -> str:
    """A minimal vLLM 0.32 exposition with the hit-quality series."""
    total = device + host + disk + compute if prompt is None else prompt
    lines = [
        "# TYPE vllm:prompt_tokens_cached_by_source_total counter",
        f'vllm:prompt_tokens_cached_by_source_total{{engine="0",model_name="m",source="device"}} {device}',
        f'vllm:prompt_tokens_cached_by_source_total{{engine="0",model_name="m",source="host"}} {host}',
        f'vllm:prompt_tokens_cached_by_source_total{{engine="0",model_name="m",source="disk"}} {disk}',
        "# TYPE vllm:prompt_tokens_by_source_total counter",
        f'vllm:prompt_tokens_by_source_total{{engine="0",model_name="m",source="local_compute"}} {compute}',
        "# TYPE vllm:prompt_tokens_total counter",
        f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {total}',
        "# TYPE vllm:prompt_tokens_cached_total counter",
        f'vllm:prompt_tokens_cached_total{{engine="0",model_name="m"}} {device + host + disk}',
        "# TYPE vllm:num_preemptions_total counter",
        f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempt}',
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}',
    ]
    buckets = ttft or {"0.1": 0, "1.0": 0, "+Inf": 0}
    lines.append("# TYPE vllm:time_to_first_token_seconds histogram")
    for le, count in buckets.items():
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {count}')
    lines.append(f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {buckets["+Inf"]}')
    lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_sum}')
    text = "\n".join(line for line in lines if not any(d in line for d in drop)) + "\n" + extra
    return text


def series(*bodies: tuple[float, str], fmt: str = "prometheus") -> ScrapeSeries:
    """A series from (seconds, body) pairs."""
    return series_from_bodies([(round(t * SECOND), fmt, body) for t, body in bodies])

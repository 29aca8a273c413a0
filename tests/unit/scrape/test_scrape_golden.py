"""Golden tests: real and documented expositions parse to the values in the files."""

from __future__ import annotations

import pytest
from scrape_helpers import FIXTURES

from harness.scrape.catalog import load_catalog
from harness.scrape.parse import parse_prometheus, parse_trtllm_json
from harness.scrape.quantities import exposition_quantities
from harness.scrape.samples import describe_missing, series_from_bodies, step_server_stats

VLLM = FIXTURES / "vllm-0.32.0-cpu-metrics.prom"
RENAMED = FIXTURES / "vllm-0.32.0-renamed-by-source.prom"


def _values(path_text: str) -> dict[str, float | None]:
    values = exposition_quantities({"prometheus": path_text}, load_catalog("vllm", "0.32.0"))
    return {q: v.value for q, v in values.items()}


def test_real_vllm_0_32_exposition_values() -> None:
    text = VLLM.read_text()
    samples = parse_prometheus(text)
    by_source = {s[0]["source"]: s[1] for s in samples["vllm:prompt_tokens_by_source_total"]}
    assert by_source == {"local_compute": 30059.0, "local_cache_hit": 17280.0, "external_kv_transfer": 0.0}
    values = _values(text)
    assert values["hit_tokens.gpu"] == 17280.0  # source="device"
    assert values["hit_tokens.cpu"] == 0.0  # present and zero: not missing
    assert values["hit_tokens.disk"] == 0.0
    assert values["hit_tokens.total"] == 17280.0
    assert values["recomputed_tokens"] == 30059.0
    assert values["prompt_tokens"] == 47339.0
    assert values["prefix_queries"] == 47339.0
    assert values["preemptions"] == 0.0
    assert values["kv_usage"] == 0.0 and values["running"] == 0.0 and values["waiting"] == 0.0
    # hits + recomputed = prompt tokens, as the engine promises
    assert values["hit_tokens.gpu"] + values["recomputed_tokens"] == values["prompt_tokens"]
    # a CPU build has no offload series: they are None, never 0
    for quantity in ("offload.store_bytes", "offload.load_bytes", "cpu_tier_usage", "disk.read_bytes"):
        assert values[quantity] is None


def test_real_vllm_histograms_give_server_percentiles() -> None:
    values = exposition_quantities({"prometheus": VLLM.read_text()}, load_catalog("vllm", "0.32.0"))
    ttft = values["ttft_seconds"].histogram
    assert ttft is not None and ttft.count == 573
    # 573 requests: the median (rank 286.5) lies in (0.02, 0.04] where the cumulative count goes 105 -> 310
    assert ttft.quantile(0.5) == pytest.approx(0.02 + 0.02 * (286.5 - 105) / (310 - 105))
    assert ttft.mean() == pytest.approx(21.577749729156494 / 573)
    itl = values["itl_seconds"].histogram
    assert itl is not None and itl.count == 17420
    assert itl.quantile(0.5) == pytest.approx(0.01 * 8710 / 16665)


def test_real_vllm_step_stats_with_one_scrape_before_and_after() -> None:
    text = VLLM.read_text()
    empty = text.replace(" 17280.0", " 0.0").replace(" 30059.0", " 0.0").replace(" 47339.0", " 0.0")
    series = series_from_bodies([(10, "prometheus", empty), (20, "prometheus", text)])
    server, hits = step_server_stats(series, load_catalog("vllm", "0.32.0"), 10, 20)
    assert (hits.gpu, hits.cpu, hits.disk, hits.miss, hits.prompt, hits.cached) == (17280, 0, 0, 30059, 47339, 17280)
    assert hits.missing == []
    assert server.scrapes == 2 and server.scrape_errors == 0
    # offload series are listed as missing on an offload arm ...
    assert any("vllm:kv_offload_store_bytes_total" in m for m in server.missing)
    # ... and not on a GPU-only arm
    server_gpu, _ = step_server_stats(series, load_catalog("vllm", "0.32.0"), 10, 20, offload=False)
    assert not any("kv_offload" in m for m in server_gpu.missing)
    assert server_gpu.offload_store_bytes is None


def test_renamed_metric_reads_missing_never_zero() -> None:
    text = RENAMED.read_text()
    assert "vllm:prompt_tokens_by_source_total" not in text
    values = _values(text)
    assert values["recomputed_tokens"] is None
    assert values["hit_tokens.gpu"] == 17280.0  # the rest still parses
    series = series_from_bodies([(10, "prometheus", text), (20, "prometheus", text)])
    _server, hits = step_server_stats(series, load_catalog("vllm", "0.32.0"), 10, 20)
    assert hits.miss is None
    assert hits.hit_rate() is None
    lines = describe_missing(hits.missing)
    assert lines == ['missing: vllm:prompt_tokens_by_source_total{source="local_compute"} (recomputed_tokens)']


def test_trtllm_json_iteration_stats_sample() -> None:
    entries = parse_trtllm_json((FIXTURES / "trtllm-iteration-stats.json").read_text())
    assert [e["iter"][0][1] for e in entries] == [1041.0, 1042.0]
    values = exposition_quantities({"trtllm-json": (FIXTURES / "trtllm-iteration-stats.json").read_text()},
                                   load_catalog("trtllm", "1.1.0"))  # 1.3 does not poll JSON /metrics
    assert values["hit_tokens.total"].value == 850 * 32  # reusedBlocks x tokensPerBlock
    assert values["recomputed_tokens"].value == 1850 * 32
    assert values["kv_usage"].value == pytest.approx(2048 / 4096)  # max over the entries
    assert values["running"].value == 7.0
    assert values["waiting"].value == 2.0
    assert values["hit_tokens.gpu"].value is None
    assert "does not split" in (values["hit_tokens.gpu"].missing_text or "")


@pytest.mark.parametrize("name", ["trtllm-prometheus.prom", "trtllm-prometheus-unprefixed.prom"])
def test_trtllm_prometheus_sample(name: str) -> None:
    values = exposition_quantities({"prometheus": (FIXTURES / name).read_text()}, load_catalog("trtllm"))
    assert values["hit_tokens.total"].value == 9600.0
    assert values["offload.load_bytes"].value == 104857600.0
    assert values["offload.store_bytes"].value == 209715200.0
    assert values["cpu_tier_usage"].value == 0.375
    assert values["kv_usage"].value == 0.625
    assert values["running"].value == 7.0 and values["waiting"].value == 3.0
    ttft = values["ttft_seconds"].histogram
    assert ttft is not None and ttft.count == 100
    assert ttft.quantile(0.5) == pytest.approx(0.05 + 0.05 * (50 - 40) / (90 - 40))
    itl = values["itl_seconds"].histogram
    assert itl is not None and itl.quantile(0.99) == pytest.approx(0.025 + 0.025 * (990 - 900) / 100)
    prefixed = name == "trtllm-prometheus.prom"
    assert (values["hit_tokens.total"].source or "").startswith("trtllm_") == prefixed


def test_trtllm_both_endpoints_together() -> None:
    bodies = {"prometheus": (FIXTURES / "trtllm-prometheus.prom").read_text(),
              "trtllm-json": (FIXTURES / "trtllm-iteration-stats.json").read_text()}
    values = exposition_quantities(bodies, load_catalog("trtllm", "1.1.0"))  # both endpoints polled on 1.1
    assert values["hit_tokens.total"].source == "trtllm_prompt_cached_tokens_total"  # Prometheus first
    assert values["recomputed_tokens"].value == 1850 * 32  # only the JSON has it

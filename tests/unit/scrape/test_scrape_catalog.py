"""Catalog selection by engine and version, validation of catalog files, and what reports say was looked for."""

from __future__ import annotations

import pytest

from harness.scrape.catalog import (
    CANONICAL,
    CatalogError,
    all_catalogs,
    catalog_for_engine,
    load_catalog,
    parse_catalog,
    parse_version,
    version_from_image,
)


def test_every_shipped_catalog_is_valid_and_canonical() -> None:
    catalogs = all_catalogs()
    assert {c.engine for c in catalogs} == {"vllm", "trtllm"}
    for cat in catalogs:
        for quantity in cat.quantities:
            assert quantity in CANONICAL
        overlap = set(cat.quantities) & set(cat.not_exposed)
        assert not overlap, f"{cat.name}: {overlap} both mapped and declared not exposed"


def test_version_picks_newest_catalog_at_or_below() -> None:
    assert load_catalog("vllm", "0.32.0").min_version == "0.32.0"
    assert load_catalog("vllm", "v0.33.1").min_version == "0.32.0"
    assert load_catalog("vllm", "0.11.2").min_version == "0.8.0"
    assert load_catalog("vllm", None).min_version == "0.32.0"
    with pytest.raises(CatalogError, match=r"covers version 0\.5"):
        load_catalog("vllm", "0.5.0")
    with pytest.raises(CatalogError, match="no metric catalog for engine 'sglang'"):
        load_catalog("sglang", None)


def test_simulator_speaks_the_flavor_catalog() -> None:
    assert load_catalog("sim", None).engine == "vllm"
    assert load_catalog("sim", None, flavor="trtllm").engine == "trtllm"
    assert catalog_for_engine("sim", None, sim_flavor="trtllm").engine == "trtllm"
    assert catalog_for_engine("vllm", "vllm/vllm-openai:v0.32.0").min_version == "0.32.0"
    assert catalog_for_engine("vllm", "vllm/vllm-openai:v0.10.1").min_version == "0.8.0"


def test_vllm_0_32_names() -> None:
    cat = load_catalog("vllm", "0.32.0")
    gpu = cat.sources("hit_tokens.gpu")[0]
    assert gpu.series == "vllm:prompt_tokens_cached_by_source_total" and gpu.labels == {"source": "device"}
    assert cat.sources("hit_tokens.cpu")[0].labels == {"source": "host"}
    assert cat.sources("hit_tokens.disk")[0].labels == {"source": "disk"}
    recomputed = cat.sources("recomputed_tokens")[0]
    assert recomputed.series == "vllm:prompt_tokens_by_source_total"
    assert recomputed.labels == {"source": "local_compute"}
    expected = 'vllm:prompt_tokens_cached_by_source_total{source="host"} (hit_tokens.cpu)'
    assert cat.looked_for("hit_tokens.cpu") == expected


def test_older_vllm_falls_back_to_renamed_series() -> None:
    cat = load_catalog("vllm", "0.9.0")
    assert [s.series for s in cat.sources("itl_seconds")] == [
        "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]
    assert "not exposed" not in cat.looked_for("hit_tokens.disk")
    assert "no per-tier hit counter" in cat.looked_for("hit_tokens.disk")


def test_trtllm_1_0_says_offload_bytes_and_tier_split_are_not_exposed() -> None:
    cat = load_catalog("trtllm", "1.0.0")
    for quantity in ("offload.store_bytes", "offload.load_bytes", "hit_tokens.cpu", "hit_tokens.gpu"):
        assert cat.sources(quantity) == []
        assert quantity in cat.not_exposed
    assert {s.format for q in cat.quantities.values() for s in q} == {"trtllm-json"}, "no /prometheus/metrics on 1.0"


def test_trtllm_lists_prefixed_and_unprefixed_names() -> None:
    cat = load_catalog("trtllm", "1.1.0")
    assert [s.series for s in cat.sources("kv_usage")][:2] == ["trtllm_kv_cache_utilization", "kv_cache_utilization"]
    json_src = cat.sources("recomputed_tokens")[0]
    assert json_src.format == "trtllm-json" and json_src.multiply_by == "kvCacheStats.tokensPerBlock"


def test_parse_version() -> None:
    assert parse_version("0.32.0") == (0, 32, 0)
    assert parse_version("v1.0.0rc2") == (1, 0, 0)
    with pytest.raises(CatalogError, match="cannot read an engine version"):
        parse_version("latest")
    assert version_from_image("vllm/vllm-openai:v0.32.0") == "0.32.0"
    assert version_from_image("nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4") == "1.0.0"
    assert version_from_image("localhost:5000/vllm") is None
    assert version_from_image(None) is None


def test_bad_catalog_files_give_clear_errors() -> None:
    with pytest.raises(CatalogError, match=r"x\.yaml: quantities: .*unknown canonical quantities"):
        parse_catalog("engine: vllm\nquantities:\n  hit_tokens.gpuu: [{series: a}]\n", "x.yaml")
    with pytest.raises(CatalogError, match="not valid YAML"):
        parse_catalog("engine: [", "y.yaml")
    with pytest.raises(CatalogError, match="expected a mapping"):
        parse_catalog("- 1\n", "z.yaml")
    with pytest.raises(CatalogError, match="not a valid regex"):
        parse_catalog("engine: vllm\nquantities:\n  running: [{series: a, label_regex: {x: '('}}]\n", "r.yaml")

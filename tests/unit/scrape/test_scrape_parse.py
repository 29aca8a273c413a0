"""Parsing scrape bodies: the pre-filter keeps results identical; bad bodies give a clear ParseError."""

from __future__ import annotations

import pytest
from scrape_helpers import FIXTURES

from harness.scrape.catalog import load_catalog
from harness.scrape.parse import ParseError, filter_exposition, parse_prometheus, parse_trtllm_json


def test_prefilter_gives_the_same_samples_as_a_full_parse() -> None:
    text = (FIXTURES / "vllm-0.32.0-cpu-metrics.prom").read_text()
    keep = load_catalog("vllm", "0.32.0").needed_series("prometheus")
    full = parse_prometheus(text)
    filtered = parse_prometheus(text, keep)
    assert set(filtered) <= keep
    for name, rows in filtered.items():
        assert rows == full[name]
    assert "vllm:time_to_first_token_seconds_bucket" in filtered
    assert len(filter_exposition(text, keep)) < len(text) / 2


def test_bad_prometheus_text() -> None:
    with pytest.raises(ParseError, match="not valid Prometheus text"):
        parse_prometheus("<html><body>502 Bad Gateway</body></html>", {"vllm:prompt_tokens_total"})
    with pytest.raises(ParseError):
        parse_prometheus('vllm:x{a="1" 3\n')


def test_trtllm_json_forms() -> None:
    assert parse_trtllm_json("[]") == []
    assert parse_trtllm_json("") == []
    one = parse_trtllm_json('{"iter": 3, "kvCacheStats": {"reusedBlocks": 2}, "flag": true, "name": "x"}')
    assert one == [{"iter": [({}, 3.0)], "kvCacheStats.reusedBlocks": [({}, 2.0)]}]
    lines = parse_trtllm_json('{"iter": 2}\n{"iter": 1}\n')
    assert [e["iter"][0][1] for e in lines] == [1.0, 2.0]
    with pytest.raises(ParseError, match="expected objects"):
        parse_trtllm_json("[1, 2]")
    with pytest.raises(ParseError, match="line 2"):
        parse_trtllm_json('{"iter": 1}\n{oops\n')

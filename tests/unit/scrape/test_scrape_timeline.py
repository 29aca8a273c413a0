"""Canonical samples over time (samples.parquet): raw values and reset-robust increases."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from scrape_helpers import series, vllm_text

from harness.scrape.catalog import load_catalog
from harness.scrape.timeline import quantity_timeline, write_samples


def test_timeline_values_and_increase(tmp_path: Path) -> None:
    s = series((0.0, vllm_text(device=100, running=2)), (1.0, vllm_text(device=150, running=5)),
               (2.0, vllm_text(device=10, running=1)), (3.0, vllm_text(device=30, running=0)))
    frame = quantity_timeline(s, load_catalog("vllm", "0.32.0"))
    gpu = frame[frame["quantity"] == "hit_tokens.gpu"]
    assert gpu["value"].tolist() == [100.0, 150.0, 10.0, 30.0]
    assert gpu["increase"].tolist() == [0.0, 50.0, 60.0, 80.0]
    running = frame[frame["quantity"] == "running"]
    assert running["value"].tolist() == [2.0, 5.0, 1.0, 0.0]
    assert running["increase"].isna().all()
    assert "offload.store_bytes" not in set(frame["quantity"])  # absent series: no rows, never zeros
    path = write_samples(s, load_catalog("vllm", "0.32.0"), tmp_path / "m")
    table = pq.read_table(path)
    assert table.num_rows == len(frame) and table.schema.field("mono_ns").type.bit_width == 64

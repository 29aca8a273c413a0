"""The report shows tier health per arm and step (with a named warning) and host telemetry ("not available" + why)."""

from __future__ import annotations

from pathlib import Path

from harness.config.rules import TierHealthRule
from harness.decision.rules.tier_health import evaluate_tier_health
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.schema.host_telemetry import DiskDeviceStep, HostStep
from harness.schema.summary import Summary
from harness.scrape.catalog import load_catalog
from harness.scrape.samples import series_from_bodies, step_server_stats
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
GIB = 1 << 30


def _summary() -> Summary:
    start = (FIXTURES / "vllm-0.32.0-tier-health-start.prom").read_text(encoding="utf-8")
    end = (FIXTURES / "vllm-0.32.0-tier-health-end.prom").read_text(encoding="utf-8")
    series = series_from_bodies([(10, "prometheus", start), (20, "prometheus", end)])
    summary = sample_summary()
    tiered = next(a for a in summary.arms if a.tier == "tiered")
    step = tiered.steps[-1]
    step.server, _hits = step_server_stats(series, load_catalog("vllm", "0.32.0"), 10, 20)
    tiered.rules.append(evaluate_tier_health(TierHealthRule(), tiered.name, tiered.tier, tiered.steps))
    note = "not available: NVML: the NVML library (NVIDIA driver) is not on this host: no NVIDIA GPU here"
    for arm in summary.arms:
        for st in arm.steps:
            st.host = HostStep(samples=15, mem_total_bytes=64 * GIB, mem_available_min_bytes=40 * GIB,
                               page_cache_max_bytes=6 * GIB, shm_total_bytes=32 * GIB, shm_used_max_bytes=GIB,
                               disks=[DiskDeviceStep(root_dir="/mnt/kv", device="nvme0n1", read_bytes_per_s=2e8,
                                                     write_bytes_per_s=1e8, busy_share=0.25, busy_share_max=0.5)],
                               gpu_note=note)
    return Summary.model_validate_json(summary.model_dump_json())  # what summary.json gives back


def test_html_names_the_tier_and_labels_the_pinned_share() -> None:
    summary = _summary()
    html = render_html(summary)
    assert "Tier health warning" in html and "tier 1:fs dropped 5 stores (40 blocks) under back-pressure" in html
    assert "tier 1:fs failed 2 promotion jobs" in html
    assert "CPU chunks pinned by transfers (max)" in html and "CPU tier max" not in html
    assert "1:fs: 50.0% of 800" in html  # per-tier chunk hit rate
    assert "tier-health" in html and "warning (rules.tier_health.action: warn; not deciding)" in html


def test_html_and_markdown_show_host_telemetry_and_gpu_not_available() -> None:
    summary = _summary()
    html = render_html(summary)
    assert "Host during each step" in html and "40.0\u00a0GiB / 64.0\u00a0GiB" in html
    assert "nvme0n1: read 200.0 MB/s, write 100.0 MB/s, busy 25.0% (max 50.0%)" in html
    assert "not available: NVML: the NVML library (NVIDIA driver) is not on this host" in html
    md = render_markdown(summary)
    assert "### Tier health" in md and "**Warning**: tier 1:fs dropped 5 stores" in md
    assert "### Host during each step" in md and "nvme0n1 busy 25.0% (max 50.0%)" in md
    assert next(line for line in md.splitlines() if line.startswith("| ")).startswith("| arm | tier |")


def test_old_summaries_without_figures_show_no_empty_tables() -> None:
    html = render_html(sample_summary())
    assert "Tier health warning" not in html and "Host telemetry was not sampled" in html
    assert "### Tier health" not in render_markdown(sample_summary())

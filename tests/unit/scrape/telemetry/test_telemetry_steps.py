"""Raw host readings -> per-step figures; the sampler writes readings a rebuild can summarise from disk."""

from __future__ import annotations

import json
from pathlib import Path

from harness.decision.rules.host_contention import host_contention
from harness.rundir.entries import StepEntry
from harness.schema.host_telemetry import DiskDeviceStep, HostStep
from harness.schema.summary import ArmSummary, StepSummary
from harness.schema.tier_health import TierHealth
from harness.scrape.telemetry.sampler import HOST_FILE, HostSampler
from harness.scrape.telemetry.steps import host_step, load_readings, with_host

S = 1_000_000_000
GIB = 1 << 30
ROOT = "/mnt/kv"


def _reading(t: float, *, avail: int = 8 * GIB, busy_ms: int = 0, written: int = 0) -> dict[str, object]:
    return {"mono_ns": int(t * S), "wall_ns": int(t * S),
            "mem": {"MemTotal": 16 * GIB, "MemAvailable": avail, "Cached": 3 * GIB},
            "shm": {"total": 8 * GIB, "used": GIB},
            "disks": {ROOT: {"device": "nvme0n1", "read_bytes": 0, "write_bytes": written, "busy_ms": busy_ms}},
            "gpu_note": "not available: NVML: no NVIDIA GPU here"}


def test_levels_inside_and_counters_bracketing_the_step() -> None:
    rows = [_reading(0), _reading(1, avail=6 * GIB, busy_ms=500, written=100_000_000),
            _reading(2, avail=7 * GIB, busy_ms=1500, written=200_000_000),
            _reading(3, busy_ms=1600, written=300_000_000)]
    h = host_step(rows, int(0.5 * S), int(2.5 * S))
    assert h is not None and h.samples == 2
    assert h.mem_available_min_bytes == 6 * GIB and h.mem_total_bytes == 16 * GIB
    assert h.page_cache_max_bytes == 3 * GIB and (h.shm_used_max_bytes, h.shm_total_bytes) == (GIB, 8 * GIB)
    disk = h.disks[0]
    assert disk.device == "nvme0n1" and disk.note is None
    assert disk.write_bytes_per_s == 100_000_000.0 and disk.read_bytes_per_s == 0.0  # 0..3 s: 300 MB
    assert disk.busy_share is not None and abs(disk.busy_share - 1600 / 3000) < 1e-9
    assert disk.busy_share_max == 1.0
    assert h.gpus == [] and h.gpu_note == "not available: NVML: no NVIDIA GPU here"


def test_unreadable_figures_stay_none_with_reasons() -> None:
    rows = [{"mono_ns": S, "mem": {}, "mem_note": "not available: cannot read /proc/meminfo", "shm": {},
             "disks": {ROOT: {"note": "not available: /mnt/kv is on a tmpfs filesystem"}}}]
    h = host_step(rows, 0, 2 * S)
    assert h is not None and h.mem_available_min_bytes is None and h.page_cache_max_bytes is None
    assert "not available: cannot read /proc/meminfo" in h.notes
    assert h.disks[0].busy_share is None and "tmpfs" in (h.disks[0].note or "")
    assert host_step([], 0, S) is None


def test_sampler_writes_readings_and_attach_rebuilds_from_disk(tmp_path: Path) -> None:
    sampler = HostSampler(tmp_path, 0.05, [str(tmp_path)])
    sampler.start()
    import time

    time.sleep(0.2)
    sampler.stop()
    rows = load_readings(tmp_path)
    assert len(rows) >= 3 and sampler.samples == len(rows)
    first = json.loads((tmp_path / HOST_FILE).read_text().splitlines()[0])
    assert "mem" in first and str(tmp_path) in first["disks"]
    assert first.get("gpus") or str(first.get("gpu_note", "")).startswith("not available:")
    bare = StepSummary(index=0, label="c1")
    (step,) = with_host(tmp_path, [bare], {0: StepEntry(arm="a", step=0, start_ns=rows[0]["mono_ns"],
                                                       end_ns=rows[-1]["mono_ns"])})
    assert bare.host is None  # a copy: the input step is unchanged
    assert step.host is not None and step.host.samples == len(rows)
    assert step.host.mem_available_min_bytes is None or step.host.mem_available_min_bytes > 0


def _base(host: HostStep) -> ArmSummary:
    return ArmSummary(name="baseline", tier="gpu-only", decision="baseline",
                      steps=[StepSummary(index=0, label="c8", host=host)])


def test_fit_screen_warns_on_low_memory_or_busy_disk_with_the_figure() -> None:
    calm = HostStep(mem_total_bytes=64 * GIB, mem_available_min_bytes=40 * GIB,
                    disks=[DiskDeviceStep(root_dir=ROOT, device="nvme0n1", busy_share=0.1)])
    status, text = host_contention(_base(calm)) or ("", "")
    assert status == "pass" and "40.0 GiB of 64.0 GiB" in text and "10% busy" in text
    low = calm.model_copy(update={"mem_available_min_bytes": 2 * GIB})
    status, text = host_contention(_base(low)) or ("", "")
    assert status == "warn" and "2.0 GiB of 64.0 GiB (3%)" in text and "contended" in text
    busy = calm.model_copy(update={"disks": [DiskDeviceStep(root_dir=ROOT, device="nvme0n1", busy_share=0.8)]})
    status, text = host_contention(_base(busy)) or ("", "")
    assert status == "warn" and "nvme0n1 (under /mnt/kv) was 80% busy at step c8" in text
    assert host_contention(ArmSummary(name="b", tier="gpu-only", decision="baseline")) is None
    assert TierHealth().recorded() is False


def test_gpu_figures_per_step() -> None:
    rows = [{"mono_ns": t * S, "gpus": [{"index": 0, "name": "H200", "mem_used": u, "mem_total": 141 * GIB,
                                         "util": util, "pcie_rx": 2e9, "pcie_tx": None}]}
            for t, u, util in ((1, 40 * GIB, 0.5), (2, 50 * GIB, 0.9))]
    h = host_step(rows, 0, 3 * S)
    assert h is not None and h.gpu_note is None
    (gpu,) = h.gpus
    assert gpu.memory_used_max_bytes == 50 * GIB and gpu.utilization_max == 0.9
    assert gpu.utilization_mean is not None and abs(gpu.utilization_mean - 0.7) < 1e-9
    assert gpu.pcie_rx_bytes_per_s_mean == 2e9 and gpu.pcie_tx_bytes_per_s_mean is None

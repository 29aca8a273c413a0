"""Host probes: /proc readers on fixture trees, block-device lookup, NVML absent said plainly (never zeros)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.scrape.telemetry import probes
from harness.scrape.telemetry.probes import Nvml, block_device, read_diskstats, read_meminfo, read_shm

MEMINFO = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    8192000 kB\nCached:" \
          "          4096000 kB\nHugePages_Total:       0\n"
DISKSTATS = "   8       0 sda 100 0 2048 10 200 0 4096 20 0 30 40 0 0 0 0\n" \
            " 259       1 nvme0n1p1 5 0 8 1 6 0 16 1 0 7 8 0 0 0 0\n   7       0 loop0 1 2\n"


def _proc(tmp_path: Path) -> Path:
    (tmp_path / "meminfo").write_text(MEMINFO)
    (tmp_path / "diskstats").write_text(DISKSTATS)
    return tmp_path


def test_meminfo_in_bytes(tmp_path: Path) -> None:
    mem, note = read_meminfo(_proc(tmp_path))
    assert note is None
    assert mem["MemAvailable"] == 8192000 * 1024 and mem["Cached"] == 4096000 * 1024
    assert mem["HugePages_Total"] == 0


def test_missing_proc_is_a_reason_not_zero(tmp_path: Path) -> None:
    mem, note = read_meminfo(tmp_path / "nope")
    assert mem == {} and note is not None and note.startswith("not available:")
    stats, why = read_diskstats(tmp_path / "nope")
    assert stats == {} and why is not None and "diskstats" in why
    total, used, shm_note = read_shm(tmp_path / "no-shm")
    assert total is None and used is None and shm_note is not None


def test_diskstats_bytes_and_busy(tmp_path: Path) -> None:
    stats, note = read_diskstats(_proc(tmp_path))
    assert note is None and "loop0" not in stats
    assert stats["sda"] == (2048 * 512, 4096 * 512, 30)
    assert stats["nvme0n1p1"] == (8 * 512, 16 * 512, 7)


def test_shm_reads_a_real_filesystem(tmp_path: Path) -> None:
    total, used, note = read_shm(tmp_path)
    assert note is None and total is not None and used is not None and 0 <= used <= total


def test_block_device_via_sys_dev_block(tmp_path: Path) -> None:
    dev = os.stat(tmp_path).st_dev
    sys_block = tmp_path / "sys"
    (tmp_path / "devices" / "nvme0n1p1").mkdir(parents=True)
    sys_block.mkdir()
    (sys_block / f"{os.major(dev)}:{os.minor(dev)}").symlink_to(tmp_path / "devices" / "nvme0n1p1")
    name, note = block_device(str(tmp_path / "kv" / "not-yet-created"), sys_block=sys_block)
    assert (name, note) == ("nvme0n1p1", None)  # resolved through the nearest existing parent


def test_no_block_device_names_the_filesystem(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(f"36 25 0:32 / {tmp_path} rw,relatime - tmpfs tmpfs rw\n")
    name, note = block_device(str(tmp_path), proc=proc, sys_block=tmp_path / "empty")
    assert name is None and note is not None
    assert note.startswith("not available:") and "tmpfs" in note


def test_nvml_absent_is_not_available_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = Nvml.open()
    if nvml.handles:
        pytest.skip("this machine has a GPU")
    assert nvml.note is not None and nvml.note.startswith("not available:")
    assert nvml.read() == []
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # not installed
    assert Nvml.open().note == "not available: nvidia-ml-py (pynvml) is not installed"
    assert probes.SECTOR == 512


def test_nvml_reading_with_a_fake_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path (no GPU here): memory, utilisation and PCIe KB/s -> bytes/s; a refused query reads None."""
    import types

    class Err(Exception):
        pass

    fake = types.SimpleNamespace(
        NVMLError=Err, NVML_PCIE_UTIL_RX_BYTES=1, NVML_PCIE_UTIL_TX_BYTES=0,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}", nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=40 << 30, total=141 << 30),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=87),
        nvmlDeviceGetPcieThroughput=lambda h, which: (_ for _ in ()).throw(Err("not supported")) if which == 0
        else 1000)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    nvml = Nvml.open()
    assert nvml.note is None and nvml.names == ["NVIDIA H200"]
    (row,) = nvml.read()
    assert row["mem_used"] == 40 << 30 and row["util"] == 0.87
    assert row["pcie_rx"] is None and row["pcie_tx"] is None  # the pair fails together: not a half reading
    nvml.close()

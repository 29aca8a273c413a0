"""One reading of the host: ``/proc/meminfo``, ``/dev/shm``, the disk-tier block devices, and NVML where it exists.

Every reader returns data or says why it cannot (a plain sentence starting ``not available:``); nothing is ever
reported as 0 because it could not be read. Linux only for memory and disks (``/proc``); NVML is imported lazily
(``nvidia-ml-py``, module ``pynvml``) so machines without a GPU driver pay nothing.

A disk-tier ``root_dir`` is mapped to its block device by ``st_dev`` -> ``/sys/dev/block/MAJ:MIN``; a directory on a
filesystem without one (tmpfs, overlay in a container, NFS) is said so, with the filesystem type from
``/proc/self/mountinfo``. A ``root_dir`` that does not exist yet is resolved through its nearest existing parent.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
SYS_BLOCK = Path("/sys/dev/block")
SHM = Path("/dev/shm")
SECTOR = 512


def read_meminfo(proc: Path = PROC) -> tuple[dict[str, int], str | None]:
    """``MemTotal``, ``MemAvailable``, ``Cached``, ... in bytes, or a reason."""
    try:
        text = (proc / "meminfo").read_text(encoding="ascii")
    except OSError as exc:
        return {}, f"not available: cannot read {proc / 'meminfo'} ({exc.strerror or exc}; not Linux?)"
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out, None


def read_shm(path: Path = SHM) -> tuple[int | None, int | None, str | None]:
    """(size, used) of ``/dev/shm`` in bytes, or a reason."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return None, None, f"not available: {path} ({exc.strerror or exc})"
    total = st.f_blocks * st.f_frsize
    return total, total - st.f_bfree * st.f_frsize, None


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _fs_type(path: Path, proc: Path) -> str | None:
    """The filesystem type of the mount holding ``path`` (longest mount-point prefix in mountinfo)."""
    try:
        lines = (proc / "self" / "mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    best: tuple[int, str] | None = None
    text = str(path.resolve())
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or not rfields:
            continue
        mount = fields[4].replace("\\040", " ")
        if (text == mount or text.startswith(mount.rstrip("/") + "/")) and (best is None or len(mount) > best[0]):
            best = (len(mount), rfields[0])
    return best[1] if best else None


def block_device(root_dir: str, proc: Path = PROC, sys_block: Path = SYS_BLOCK) -> tuple[str | None, str | None]:
    """(device name as in /proc/diskstats, reason when there is none) for the filesystem holding ``root_dir``."""
    path = _existing(Path(root_dir))
    try:
        dev = os.stat(path).st_dev
    except OSError as exc:
        return None, f"not available: cannot stat {path} ({exc.strerror or exc})"
    major, minor = os.major(dev), os.minor(dev)
    link = sys_block / f"{major}:{minor}"
    try:
        name = os.path.basename(os.path.realpath(link)) if link.exists() else None
    except OSError:
        name = None
    if name is None:
        fstype = _fs_type(path, proc) or "unknown"
        return None, (f"not available: {root_dir} is on a {fstype} filesystem with no block device of its own "
                      f"(device {major}:{minor})")
    return name, None


def read_diskstats(proc: Path = PROC) -> tuple[dict[str, tuple[int, int, int]], str | None]:
    """Per device: (bytes read, bytes written, milliseconds busy) since boot, or a reason."""
    try:
        text = (proc / "diskstats").read_text(encoding="ascii")
    except OSError as exc:
        return {}, f"not available: cannot read {proc / 'diskstats'} ({exc.strerror or exc})"
    out: dict[str, tuple[int, int, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 13:
            continue
        try:
            out[parts[2]] = (int(parts[5]) * SECTOR, int(parts[9]) * SECTOR, int(parts[12]))
        except ValueError:
            continue
    return out, None


@dataclass
class Nvml:
    """A lazily initialised NVML session; ``note`` says why there is none."""

    handles: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    note: str | None = None
    module: Any = None

    @classmethod
    def open(cls) -> Nvml:
        """Initialise NVML, or say plainly why GPU telemetry is not available."""
        try:
            import pynvml  # type: ignore[import-untyped]
        except ImportError:
            return cls(note="not available: nvidia-ml-py (pynvml) is not installed")
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = [_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
        except pynvml.NVMLError as exc:
            reason = str(exc) or type(exc).__name__
            if "LibraryNotFound" in type(exc).__name__ or "Library Not Found" in reason:
                reason = "the NVML library (NVIDIA driver) is not on this host: no NVIDIA GPU here"
            elif "DriverNotLoaded" in type(exc).__name__:
                reason = "the NVIDIA driver is not loaded"
            return cls(note=f"not available: NVML: {reason}")
        if not handles:
            return cls(module=pynvml, note="not available: NVML found no GPU")
        return cls(handles=handles, names=names, module=pynvml)

    def read(self) -> list[dict[str, Any]]:
        """One reading per GPU; a field NVML refuses is None."""
        nv = self.module
        out: list[dict[str, Any]] = []
        for i, h in enumerate(self.handles):
            row: dict[str, Any] = {"index": i, "name": self.names[i]}
            row.update(_try(lambda h=h: _mem(nv, h), ("mem_used", "mem_total")))
            row.update(_try(lambda h=h: (nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0,), ("util",)))
            row.update(_try(lambda h=h: (nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) * 1024,
                                         nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) * 1024),
                            ("pcie_rx", "pcie_tx")))
            out.append(row)
        return out

    def close(self) -> None:
        if self.module is not None and self.handles:
            with contextlib.suppress(Exception):  # shutting down a library we are done with must not raise
                self.module.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mem(nv: Any, handle: Any) -> tuple[int, int]:
    info = nv.nvmlDeviceGetMemoryInfo(handle)
    return int(info.used), int(info.total)


def _try(read: Any, names: tuple[str, ...]) -> dict[str, Any]:
    try:
        values = read()
    except Exception:  # NVML raises its own error per unsupported query
        return dict.fromkeys(names)
    return dict(zip(names, values, strict=True))

"""Facts about the host the checks need, read from the OS; replaceable in tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil


class HostFacts(Protocol):
    """What the checks ask of the host."""

    def mem_available_bytes(self) -> int:
        """Memory available to new processes (MemAvailable)."""
        ...

    def mem_total_bytes(self) -> int:
        """Physical memory."""
        ...

    def disk_free_bytes(self, path: Path) -> int:
        """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
        ...

    def gpu_runtime(self) -> tuple[bool, str]:
        """Whether containers can get NVIDIA GPUs here, and why (not)."""
        ...

    def shm_free_bytes(self) -> int | None:
        """Free bytes in the host's ``/dev/shm`` (None when there is none)."""
        ...

    def gpu_memory_bytes(self) -> int | None:
        """The memory of this host's smallest NVIDIA GPU (None when no GPU answers)."""
        ...

    def environ(self) -> Mapping[str, str]:
        """The harness's environment (what ``${NAME}`` in ``engine.env`` resolves from)."""
        ...


def nearest_existing(path: Path) -> Path:
    """The path itself or its closest existing ancestor."""
    p = path
    for _ in range(256):
        if p.exists():
            return p
        if p.parent == p:
            break
        p = p.parent
    return Path("/")


GPU_QUERY_TIMEOUT_S = 10.0


def smallest_gpu_bytes(smi_output: str) -> int | None:
    """The smallest ``memory.total`` (MiB, one GPU per line) of ``nvidia-smi --query-gpu`` output, in bytes; None
    when no line is a number."""
    sizes = [int(line.strip()) for line in smi_output.splitlines()[:64] if line.strip().isdigit()]
    return min(sizes) << 20 if sizes else None


class OsHostFacts:
    """The real host."""

    def mem_available_bytes(self) -> int:
        return int(psutil.virtual_memory().available)

    def mem_total_bytes(self) -> int:
        return int(psutil.virtual_memory().total)

    def disk_free_bytes(self, path: Path) -> int:
        return int(shutil.disk_usage(nearest_existing(path)).free)

    def gpu_runtime(self) -> tuple[bool, str]:
        if shutil.which("nvidia-smi") is None and not os.path.exists("/dev/nvidiactl"):
            return False, "no NVIDIA driver found (nvidia-smi missing, /dev/nvidiactl absent)"
        try:
            from harness.host.docker_host import gpu_runtime_available
        except ImportError:  # the Docker SDK is missing: say what we know
            return True, "NVIDIA driver present (Docker runtime not checked: the docker package is missing)"
        return gpu_runtime_available()

    def shm_free_bytes(self) -> int | None:
        shm = Path("/dev/shm")
        return int(shutil.disk_usage(shm).free) if shm.is_dir() else None

    def gpu_memory_bytes(self) -> int | None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None
        try:
            out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=GPU_QUERY_TIMEOUT_S, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return smallest_gpu_bytes(out)

    def environ(self) -> Mapping[str, str]:
        return os.environ


@dataclass
class FakeHostFacts:
    """Fixed host facts for tests."""

    mem_available: int = 64 << 30
    mem_total: int = 128 << 30
    disk_free: dict[str, int] = field(default_factory=dict)
    default_disk_free: int = 500 << 30
    gpu: tuple[bool, str] = (True, "fake GPU runtime")
    shm_free: int | None = 256 << 30
    env: dict[str, str] = field(default_factory=dict)
    gpu_memory: int | None = None

    def mem_available_bytes(self) -> int:
        return self.mem_available

    def mem_total_bytes(self) -> int:
        return self.mem_total

    def disk_free_bytes(self, path: Path) -> int:
        return self.disk_free.get(str(path), self.default_disk_free)

    def gpu_runtime(self) -> tuple[bool, str]:
        return self.gpu

    def shm_free_bytes(self) -> int | None:
        return self.shm_free

    def gpu_memory_bytes(self) -> int | None:
        return self.gpu_memory

    def environ(self) -> Mapping[str, str]:
        return self.env

"""Lossless size rendering: the bytes an engine computes from a rendered flag equal the bytes the scenario meant.

vLLM's ``--kv-offloading-size`` takes GiB as a float and computes ``cpu_bytes_to_use = size * 2**30``
(``config/vllm.py`` in 0.32.0). ``repr`` of a Python float round-trips exactly, so rendering the scenario's own float
with :func:`gib_flag` gives vLLM the same value the harness counted; ``%g`` (6 significant digits) did not
(``0.0048828125`` became ``0.00488281``, 5242877 bytes instead of 5242880).

Every float an adapter renders on a command line goes through :func:`float_flag` (``--gpu-memory-utilization``,
the simulator's ``--time-scale`` and noise settings): ``%g`` turned ``0.1234567`` into ``0.123457``, so the engine ran
with a value the harness never checked or recorded.
"""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20


def float_flag(number: float) -> str:
    """A float as command-line text that parses back to exactly the same float (integers without a trailing ``.0``,
    as ``%g`` wrote them: ``0.9`` -> ``0.9``, ``1.0`` -> ``1``, ``0.1234567`` -> ``0.1234567``)."""
    value = float(number)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    text = repr(value)
    assert float(text) == value  # repr round-trips by definition; kept as a guard for the contract
    return text


def gib_flag(gib: float) -> str:
    """A GiB float as text that parses back to exactly the same float (see :func:`float_flag`)."""
    return float_flag(gib)


def gib_to_bytes(gib: float) -> int:
    """Bytes vLLM takes for a GiB float (``int(size * 2**30)``, as ``int(cpu_bytes_to_use)`` does)."""
    return int(float(gib) * GIB)


def human_bytes(n: int) -> str:
    """Bytes as exact text plus a readable GiB/MiB figure: ``34359738368 B (32 GiB)``."""
    if n >= GIB:
        readable = f"{n / GIB:.2f}".rstrip("0").rstrip(".") + " GiB"
    else:
        readable = f"{n / MIB:.1f}".rstrip("0").rstrip(".") + " MiB"
    return f"{n} B ({readable})"


def parse_docker_size(text: str) -> int:
    """Docker's size syntax (``16g``, ``512m``, ``1073741824``; binary units, as docker reads them) -> bytes."""
    units = {"b": 1, "k": 1 << 10, "m": MIB, "g": GIB}
    raw = text.strip().lower()
    if raw and raw[-1] in units:
        return int(raw[:-1]) * units[raw[-1]]
    return int(raw)

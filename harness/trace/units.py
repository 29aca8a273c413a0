"""KV-cache sizes: bytes per token from built-in model profiles, and capacity strings like ``64GiB`` or ``10000``.

KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes per element (bf16/fp16: 2).
Per-rank sizes under tensor parallelism are this divided by the TP degree; the total is what a tier must hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MODEL_PROFILES: dict[str, int] = {
    # 2 * 32 layers * 8 KV heads * 128 head dim * 2 bytes = 131072 (128 KiB per token)
    "llama-3.1-8b": 2 * 32 * 8 * 128 * 2,
    # 2 * 80 layers * 8 KV heads * 128 head dim * 2 bytes = 327680 (320 KiB per token)
    "llama-3.1-70b": 2 * 80 * 8 * 128 * 2,
    # 2 * 16 layers * 8 KV heads * 64 head dim * 2 bytes = 32768 (32 KiB per token)
    "llama-3.2-1b": 2 * 16 * 8 * 64 * 2,
    # 2 * 28 layers * 4 KV heads * 128 head dim * 2 bytes = 57344 (56 KiB per token)
    "qwen2.5-7b": 2 * 28 * 4 * 128 * 2,
    # 2 * 80 layers * 8 KV heads * 128 head dim * 2 bytes = 327680 (320 KiB per token)
    "qwen2.5-72b": 2 * 80 * 8 * 128 * 2,
    # 2 * 32 layers * 8 KV heads * 128 head dim * 2 bytes = 131072 (128 KiB per token)
    "mistral-7b": 2 * 32 * 8 * 128 * 2,
}
"""Model name -> KV-cache bytes per token at 16-bit precision (all layers, all KV heads)."""

_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


class CapacityError(ValueError):
    """A capacity string could not be understood; the message says what is accepted."""


@dataclass(frozen=True)
class Capacity:
    """A cache capacity as given: ``blocks`` (a plain number) or ``bytes`` (a number with a byte unit)."""

    text: str
    blocks: int | None = None
    bytes: int | None = None

    def to_blocks(self, block_bytes: int | None) -> int:
        """Capacity in whole blocks; bytes need ``block_bytes`` (KV bytes of one block)."""
        if self.blocks is not None:
            return self.blocks
        if block_bytes is None:
            raise CapacityError(
                f"capacity {self.text!r} is in bytes: pass --kv-bytes-per-token or --model-profile to convert it"
            )
        assert self.bytes is not None
        return self.bytes // block_bytes


def parse_capacity(text: str) -> Capacity:
    """``"10000"`` or ``"10000blocks"`` -> blocks; ``"64GiB"``, ``"1.5TB"``, ``"512MiB"`` -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise CapacityError(f"capacity {text!r}: expected a number of blocks (10000) or a size (64GiB, 500GB)")
    number, unit = match.group(1), match.group(2).lower()
    if unit in ("", "block", "blocks"):
        if "." in number:
            raise CapacityError(f"capacity {text!r}: a number of blocks must be a whole number")
        return Capacity(text=text.strip(), blocks=int(number))
    if unit not in _UNITS:
        known = ", ".join(sorted(_UNITS))
        raise CapacityError(f"capacity {text!r}: unknown unit {unit!r} (use one of {known}, or none for blocks)")
    return Capacity(text=text.strip(), bytes=int(float(number) * _UNITS[unit]))


def parse_capacities(text: str) -> list[Capacity]:
    """Comma-separated capacities, e.g. ``"1000,10000,50000"`` or ``"8GiB,64GiB"``."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise CapacityError(f"capacities {text!r}: give at least one, e.g. 1000,10000 or 8GiB,64GiB")
    return [parse_capacity(p) for p in parts]


def kv_bytes_per_token(bytes_per_token: int | None, model_profile: str | None) -> int | None:
    """Resolve ``--kv-bytes-per-token`` / ``--model-profile`` (at most one); ``None`` when neither is given."""
    if bytes_per_token is not None and model_profile is not None:
        raise CapacityError("give --kv-bytes-per-token or --model-profile, not both")
    if bytes_per_token is not None:
        if bytes_per_token < 1:
            raise CapacityError(f"--kv-bytes-per-token must be >= 1, got {bytes_per_token}")
        return bytes_per_token
    if model_profile is None:
        return None
    key = model_profile.strip().lower()
    if key not in MODEL_PROFILES:
        raise CapacityError(
            f"unknown --model-profile {model_profile!r}; known: {', '.join(sorted(MODEL_PROFILES))} "
            "(or pass --kv-bytes-per-token)"
        )
    return MODEL_PROFILES[key]


def format_bytes(value: float) -> str:
    """Human-readable binary size: ``1.5 GiB``."""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} TiB"

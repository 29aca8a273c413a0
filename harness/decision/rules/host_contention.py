"""The fit screen's "host DRAM or storage already contended" evidence, from the baseline's host telemetry.

The baseline runs before any tier: if host memory is already short, or the device a disk tier will write to is
already busy, while only the GPU serves, an offload tier will compete with whatever else uses them.
"""

from __future__ import annotations

from harness.schema.summary import ArmSummary

MIN_AVAILABLE_SHARE = 0.10  # MemAvailable below this share of MemTotal at any baseline step: contended
MAX_DISK_BUSY = 0.50  # a disk-tier device busy over half of a baseline step: contended


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


def host_contention(base: ArmSummary | None) -> tuple[str, str] | None:
    """(``pass`` | ``warn``, evidence with the figures) from the baseline's steps; None without host telemetry."""
    if base is None:
        return None
    steps = [s for s in base.steps if s.host is not None]
    if not steps:
        return None
    warns: list[str] = []
    facts: list[str] = []
    mem = [(s, s.host.mem_available_min_bytes, s.host.mem_total_bytes) for s in steps
           if s.host is not None and s.host.mem_available_min_bytes is not None and s.host.mem_total_bytes]
    if mem:
        step, low, total = min(mem, key=lambda m: (m[1] or 0) / (m[2] or 1))
        assert low is not None and total is not None
        text = f"memory available fell to {_gib(low)} of {_gib(total)} ({low / total:.0%}) at step {step.label}"
        (warns if low / total < MIN_AVAILABLE_SHARE else facts).append(text)
    else:
        facts.append("host memory not available (" + "; ".join(n for s in steps if s.host for n in s.host.notes)
                     + ")")
    disks = [(s, d) for s in steps if s.host is not None for d in s.host.disks]
    measured = [(s, d) for s, d in disks if d.busy_share is not None]
    if measured:
        step, d = max(measured, key=lambda m: m[1].busy_share or 0.0)
        busy = d.busy_share or 0.0
        text = (f"disk-tier device {d.device} (under {d.root_dir}) was {busy:.0%} busy at step {step.label} "
                f"with no disk tier on")
        (warns if busy > MAX_DISK_BUSY else facts).append(text)
    elif disks:
        facts.append(f"disk-tier device load {disks[0][1].note or 'not available'}")
    if warns:
        return "warn", "baseline: " + "; ".join(warns) + " — the host is already contended"
    return "pass", "baseline: " + "; ".join(facts)

"""How far the simulated engine fell behind the wall clock during a step: its own CPU time, not modelled physics.

The simulator sleeps until each modelled step's end and never runs ahead; on a busy host (two cores shared with the
load generator, the tiered arm's segment-file writes) it can run behind, and every latency it serves grows by the time
lost. It sums that time as ``behind_s`` (``GET /admin/state``, loopback clients only). Read before and after a step,
the difference is what the step lost; :func:`harness.decision.summarize` warns when it is a noticeable share of the
step, so a verdict on a simulated arm never rests silently on the simulator's own slowness. Real engines, and
simulators the harness cannot reach on loopback (in a container), give None.
"""

from __future__ import annotations

import math

import httpx

from harness.engines.spec import LaunchSpec

ADMIN_TIMEOUT_S = 5.0


def sim_behind_s(base_url: str, spec: LaunchSpec | None) -> float | None:
    """The simulator's cumulative ``behind_s``, or None (not a simulator, not reachable, no such figure)."""
    if spec is None or spec.engine != "sim":
        return None
    try:
        resp = httpx.get(base_url.rstrip("/") + "/admin/state", timeout=ADMIN_TIMEOUT_S, trust_env=False)
        if resp.status_code != 200 or len(resp.content) > 1 << 20:
            return None
        value = resp.json().get("behind_s")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def lag_during(before: float | None, after: float | None) -> float | None:
    """The time lost between two readings (None when either is missing or the simulator restarted)."""
    if before is None or after is None or after < before:
        return None
    return after - before

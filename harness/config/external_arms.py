"""The scenario's rules for external arms (``engine.launcher: external``), checked across the engine and all arms.

With ``engine.launcher: external`` every arm has a ``server``, a ``server`` needs that launcher, and two arms may not
name the same server (same scheme, host and port, with ``localhost`` read as ``127.0.0.1``) unless the later one
declares ``shared_url: true`` (which an arm whose server no earlier arm names may not declare). An arm's
``server.cold_start: engine-reset`` needs an engine with a reset endpoint that empties every tier the arm has
(:func:`reset_refusal`).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.config.external import server_key


def check_external_arms(engine: EngineSpec, arms: Sequence[Arm]) -> None:
    """Raise ValueError (naming the field) when the scenario's external arms break the rules above."""
    external = engine.effective_launcher == "external"
    seen: dict[tuple[str, str, int], str] = {}
    for i, arm in enumerate(arms):
        own = arm.engine.get("launcher")
        if own not in (None, engine.launcher) and "external" in (own, engine.launcher):
            raise ValueError(f"arms[{i}].engine.launcher: external arms cannot be mixed with launched ones; set "
                             "engine.launcher for every arm")
        if external and arm.server is None:
            raise ValueError(f"arms[{i}].server: engine.launcher is external, so arm {arm.name!r} needs "
                             "server.base_url (the deployment to drive)")
        if arm.server is None:
            continue
        if not external:
            raise ValueError(f"arms[{i}].server: a server section needs engine.launcher: external")
        key = server_key(arm.server.base_url)
        if arm.server.shared_url and key not in seen:
            raise ValueError(f"arms[{i}].server.shared_url: no earlier arm names {arm.server.base_url}, so there is "
                             "nothing to share; remove shared_url (it declares a server an earlier arm drives)")
        if key in seen and not arm.server.shared_url:
            raise ValueError(f"arms[{i}].server.base_url: {arm.server.base_url} is also arm {seen[key]!r}'s "
                             "server; arms must be distinct servers (declare shared_url: true to reuse it)")
        seen.setdefault(key, arm.name)
        refused = reset_refusal(engine, arm) if arm.server.cold_start == "engine-reset" else None
        if refused is not None:
            raise ValueError(f"arms[{i}].server.cold_start: engine-reset {refused}; remove it (the start is then "
                             "judged as found) or restart the server yourself before the run")


def reset_refusal(engine: EngineSpec, arm: Arm) -> str | None:
    """Why the engine's own reset cannot make this arm's start cold (None: it can). Facts of vLLM 0.32 and
    TensorRT-LLM 1.0 as in :mod:`harness.run.cold_reset`."""
    if engine.kind == "trtllm" or (engine.kind == "sim" and engine.sim_flavor == "trtllm"):
        return ("cannot work with TensorRT-LLM: trtllm-serve has no cache-reset endpoint (it serves /health, "
                "/metrics, /version and /v1/*)")
    if arm.fs_tiers():
        return ("cannot empty this arm's disk tier: vLLM 0.32's reset_external resets the CPU tier but keeps a "
                "TieringOffloadingSpec's secondary tiers (their files survive resets)")
    return None

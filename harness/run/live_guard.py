"""Before an external arm's first step: read its server's configuration, compare it with the scenario, record it.

The record is ``live_config/<arm>.json`` in the run directory (redacted by the run's redactor): what was read
(:class:`~harness.run.live_config.LiveConfig`), every finding (:mod:`harness.run.live_compare`) and the verdict on
the arm (refused, with both values named, or not). The summary turns each record into a ``live-config`` check row
(:func:`harness.decision.live_config.live_config_checks`), so the report shows what was verified, what differs and
what the server does not expose. The baseline is checked the same way, and each later arm is also compared with the
live configurations recorded for the arms before it (the baseline's first)."""

from __future__ import annotations

import time
from typing import Any

from harness.config.external import server_key
from harness.core.net.bounded import FetchCancelled
from harness.decision.live_config import CHECK_NAME, overview
from harness.launch.base import RunningServer
from harness.run.arm_errors import ArmInterrupted
from harness.run.arm_handle import ArmHandle
from harness.run.live_compare import compare, flavor_of, refusal
from harness.run.live_config import LiveConfig, read_live_config
from harness.rundir.live_config import read_record, record_path, write_record


def _live_from(record: dict[str, Any]) -> LiveConfig | None:
    raw = record.get("live")
    if not isinstance(raw, dict):
        return None
    try:
        return LiveConfig(**{k: v for k, v in raw.items() if k in LiveConfig.__dataclass_fields__})
    except TypeError:
        return None


def _earlier(runner: ArmHandle) -> dict[str, LiveConfig]:
    """Live configurations of the arms before this one (baseline first), less those declared as the same server."""
    names = [a.name for a in runner.ctx.scenario.arms]
    before = names[:names.index(runner.arm.name)] if runner.arm.name in names else names
    assert runner.arm.server is not None
    mine = server_key(runner.arm.server.base_url)
    out: dict[str, LiveConfig] = {}
    for name in before:
        record = read_record(record_path(runner.ctx.run.root, name))
        live = _live_from(record) if record is not None else None
        if live is not None and record is not None and server_key(str(record.get("base_url", ""))) != mine:
            out[name] = live
    return out


def verify(runner: ArmHandle, server: RunningServer) -> str | None:
    """Read, compare and record the arm's live configuration; returns why the arm is not judged, or None."""
    ctx, arm = runner.ctx, runner.arm
    assert arm.server is not None
    try:
        live = read_live_config(server.base_url, arm.server.metrics, flavor_of(runner.engine), ctx.cancel)
    except FetchCancelled:
        raise ArmInterrupted from None
    findings = compare(arm, runner.engine, live, _earlier(runner))
    why = refusal(arm.name, findings)
    summary = overview(findings)
    record = {"arm": arm.name, "base_url": arm.server.base_url, "metrics_url": arm.server.metrics,
              "read_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "live": live.as_dict(),
              "findings": [f.as_dict() for f in findings], "refused": why is not None,
              "message": why or summary}
    write_record(ctx.run.root, arm.name, ctx.redactor.deep(record))
    ctx.record_arm(arm.name, CHECK_NAME, refused=why is not None,
                   mismatches=[f.field for f in findings if f.status == "mismatch"],
                   unverified=[f.field for f in findings if f.status == "unverified"])
    ctx.say(f"[{arm.name}] live configuration ({server.base_url}): {summary}")
    if live.problems:
        ctx.say(f"[{arm.name}] could not read: " + "; ".join(live.problems))
    return None if why is None else f"{why} — not judged: the live server is not the configuration the scenario " \
        "declares (one dimension at a time)"

"""Validation results and the line protocol of the in-engine scripts (``KVH-VALIDATE {json}`` per arm)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pydantic import ValidationError

from harness.schema.validation import ArmValidation, ResolvedArm, ResolvedPlatform
from harness.secrets.redact import Redactor

__all__ = ["MARK", "ArmValidation", "not_checked", "parse_output", "script_text"]

MARK = "KVH-VALIDATE "
TAIL_CHARS = 1500


def script_text(name: str) -> str:
    """The source of one in-engine script (sent as ``python3 -c``)."""
    return resources.files("harness.plan.validate.scripts").joinpath(name).read_text(encoding="utf-8")


def _resolved(item: dict[str, Any], redact: Redactor) -> ResolvedArm | None:
    """The arm's resolved configuration, secrets redacted (None when absent or unreadable)."""
    raw = item.get("resolved")
    if not isinstance(raw, dict):
        return None
    try:
        return ResolvedArm.model_validate(json.loads(redact(json.dumps(raw))))
    except (ValidationError, ValueError):
        return None


def _platform_note(platform: object) -> list[str]:
    """A note when the check forced the platform (vLLM detected none where it ran)."""
    try:
        found = ResolvedPlatform.model_validate(platform) if isinstance(platform, dict) else None
    except ValidationError:
        return []
    if found is None or not found.forced:
        return []
    return [f"vLLM detected {found.detected} where the check ran; the platform was forced to {found.used}, the one "
            "the build was made for (a failure only that platform explains is reported as not checked)"]


def parse_output(stdout: str, stderr: str, arms: list[str], *, where: str, redact: Redactor,
                 notes: dict[str, list[str]] | None = None) -> list[ArmValidation]:
    """Turn the script's output into one result per arm (an arm without a line gets the output's tail)."""
    found: dict[str, dict[str, Any]] = {}
    version: str | None = None
    fatal: str | None = None
    platform: list[str] = []
    for line in stdout.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            item = json.loads(line[len(MARK):])
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        if "fatal" in item:
            fatal = str(item["fatal"])
        elif "engine_version" in item:
            version = str(item["engine_version"])
            platform = _platform_note(item.get("platform"))
        elif "arm" in item:
            found[str(item["arm"])] = item
    out = []
    for arm in arms:
        extra = [*(notes or {}).get(arm, []), *platform]
        item = found.get(arm)
        if item is None:
            if fatal is not None:
                out.append(ArmValidation(arm=arm, status="not-checked", message=redact(fatal), where=where,
                                         notes=extra))
                continue
            tail = redact((stderr or stdout)[-TAIL_CHARS:].strip()) or "no output"
            out.append(ArmValidation(arm=arm, status="error", message=f"the check gave no result: {tail}",
                                     where=where, engine_version=version, notes=extra))
            continue
        status = item.get("status", "error")
        details = {k: v for k, v in item.items() if k not in ("arm", "status", "stage", "message", "resolved")}
        known = ("ok", "platform", "rejected", "not-checked")
        out.append(ArmValidation(arm=arm, status=status if status in known else "error",
                                 stage=item.get("stage"), message=redact(str(item.get("message", ""))), where=where,
                                 engine_version=version, notes=extra, details=details,
                                 resolved=_resolved(item, redact)))
    return out


def not_checked(arms: list[str], why: str, where: str) -> list[ArmValidation]:
    """The same 'not checked' result for every arm."""
    return [ArmValidation(arm=a, status="not-checked", message=why, where=where) for a in arms]

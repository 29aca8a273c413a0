"""Validation results and the line protocol of the in-engine scripts (``KVH-VALIDATE {json}`` per arm)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.secrets.redact import Redactor

Status = Literal["ok", "platform", "rejected", "not-checked", "error"]
MARK = "KVH-VALIDATE "
TAIL_CHARS = 1500


class ArmValidation(BaseModel):
    """One arm's verdict from the engine's own code."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    status: Status
    stage: str | None = None
    message: str
    where: str = Field(description="where it ran: the image, or the interpreter")
    engine_version: str | None = None
    notes: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """ok, or ok up to the platform's limit."""
        return self.status in ("ok", "platform")


def script_text(name: str) -> str:
    """The source of one in-engine script (sent as ``python3 -c``)."""
    return resources.files("harness.plan.validate.scripts").joinpath(name).read_text(encoding="utf-8")


def parse_output(stdout: str, stderr: str, arms: list[str], *, where: str, redact: Redactor,
                 notes: dict[str, list[str]] | None = None) -> list[ArmValidation]:
    """Turn the script's output into one result per arm (an arm without a line gets the output's tail)."""
    found: dict[str, dict[str, Any]] = {}
    version: str | None = None
    fatal: str | None = None
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
        elif "arm" in item:
            found[str(item["arm"])] = item
    out = []
    for arm in arms:
        extra = (notes or {}).get(arm, [])
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
        details = {k: v for k, v in item.items() if k not in ("arm", "status", "stage", "message")}
        out.append(ArmValidation(arm=arm, status=status if status in ("ok", "platform", "rejected") else "error",
                                 stage=item.get("stage"), message=redact(str(item.get("message", ""))), where=where,
                                 engine_version=version, notes=extra, details=details))
    return out


def not_checked(arms: list[str], why: str, where: str) -> list[ArmValidation]:
    """The same 'not checked' result for every arm."""
    return [ArmValidation(arm=a, status="not-checked", message=why, where=where) for a in arms]

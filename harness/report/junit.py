"""``junit.xml``: rules, decisions and drills as test cases, so a CI test view shows what failed.

Layout: a ``run`` suite (the verdict, pre-flight checks, fit screen) and one suite per arm (the arm's decision, one
case per rule result, one per drill on that arm). Every suite carries ``simulated``, ``verdict`` and the run's
identity as properties.

Mapping (the exit code carries the verdict; JUnit explains it without failing a build on a hold):

* ``failure`` only where the outcome is bad: the verdict or an arm's decision is ``no-go``/``failed``, and the
  rule breaches and failed drills of such an arm; a pre-flight check at level ``error``.
* ``skipped`` (with the reason as message) for ``hold``: a held arm's decision and its breaches; inconclusive and
  not-applicable rules; a ``skipped`` arm; fit items whose status is unknown.
* dry-run rules never fail or skip: they pass, with ``dry_run=true`` as a property and their outcome in system-out.
* a drill that ended in a harness ``error`` on a failed/no-go arm is an ``error`` element.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.report.fmt import step_label
from harness.summary import ArmSummary, DrillResult, RuleResult, Summary

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_BAD = ("no-go", "failed")


def _x(text: object) -> str:
    """Text XML 1.0 can hold (ElementTree escapes markup; this removes characters XML forbids outright)."""
    return _XML_ILLEGAL.sub("\ufffd", str(text))


class _Suite:
    def __init__(self, root: ET.Element, name: str, props: dict[str, str], time_s: float = 0.0) -> None:
        self.el = ET.SubElement(root, "testsuite", name=_x(name), time=f"{time_s:.3f}")
        props_el = ET.SubElement(self.el, "properties")
        for key, value in props.items():
            ET.SubElement(props_el, "property", name=_x(key), value=_x(value))
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(self, classname: str, name: str, *, outcome: str = "pass", message: str = "", body: str = "",
             out: str = "", props: dict[str, str] | None = None) -> None:
        case = ET.SubElement(self.el, "testcase", classname=_x(classname), name=_x(name), time="0")
        self.counts["tests"] += 1
        if props:
            props_el = ET.SubElement(case, "properties")
            for key, value in props.items():
                ET.SubElement(props_el, "property", name=_x(key), value=_x(value))
        if outcome in ("failure", "error", "skipped"):
            child = ET.SubElement(case, outcome, message=_x(message.splitlines()[0] if message else outcome))
            if outcome != "skipped":
                child.set("type", outcome)
                child.text = _x(body or message)
            self.counts["failures" if outcome == "failure" else "errors" if outcome == "error" else "skipped"] += 1
        if out:
            ET.SubElement(case, "system-out").text = _x(out)

    def close(self) -> dict[str, int]:
        for key, value in self.counts.items():
            self.el.set(key, str(value))
        return self.counts


def _run_props(summary: Summary) -> dict[str, str]:
    return {"simulated": "true" if summary.simulated else "false", "verdict": summary.verdict,
            "recommended_arm": summary.recommended_arm or "", "exit_code": str(summary.exit_code),
            "run_id": summary.run_id, "scenario": summary.scenario, "scenario_hash": summary.scenario_hash,
            "engine": summary.engine, "model": summary.model}


def _rule_case(suite: _Suite, arm: ArmSummary, rule: RuleResult) -> None:
    at = step_label(arm, rule.step)
    name = f"rule {rule.rule}" + (f" @ {at}" if at else "")
    flags = {"kind": rule.kind, "status": rule.status, "critical": str(rule.critical).lower(),
             "dry_run": str(rule.dry_run).lower()}
    text = f"{rule.status}: {rule.message}"
    if rule.dry_run:
        suite.case(arm.name, name, out=f"dry run (reported, never decides): {text}", props=flags)
    elif rule.status == "pass":
        suite.case(arm.name, name, out=rule.message, props=flags)
    elif rule.status == "breach" and arm.decision in _BAD:
        suite.case(arm.name, name, outcome="failure", message=text, props=flags)
    elif rule.status == "breach":
        suite.case(arm.name, name, outcome="skipped", props=flags,
                   message=f"breach did not fail the arm (decision {arm.decision}): {rule.message}")
    else:
        suite.case(arm.name, name, outcome="skipped", message=text, props=flags)


def _decision_case(suite: _Suite, arm: ArmSummary) -> None:
    reasons = " ".join(arm.reasons) or "no reason recorded"
    name = "decision"
    if arm.decision in _BAD:
        body = reasons
        if arm.failure is not None:
            body += f"\n\nfailed during {arm.failure.phase}: {arm.failure.message}"
            if arm.failure.log_tail:
                body += "\n\nlast log lines:\n" + "\n".join(arm.failure.log_tail)
        suite.case(arm.name, name, outcome="failure", message=f"{arm.decision}: {reasons}", body=body)
    elif arm.decision in ("hold", "skipped"):
        suite.case(arm.name, name, outcome="skipped", message=f"{arm.decision}: {reasons}")
    else:
        suite.case(arm.name, name, out=f"{arm.decision}: {reasons}")


def _drill_case(suite: _Suite, drill: DrillResult, decision: str | None) -> None:
    name = f"drill {drill.kind}"
    text = f"{drill.status}: {drill.message}"
    bad = decision in _BAD if decision is not None else False
    if drill.status == "pass":
        suite.case(drill.arm, name, out=drill.message)
    elif drill.status == "fail" and bad:
        suite.case(drill.arm, name, outcome="failure", message=text)
    elif drill.status == "error" and bad:
        suite.case(drill.arm, name, outcome="error", message=text)
    else:
        suite.case(drill.arm, name, outcome="skipped", message=text)


def render_junit(summary: Summary) -> str:
    """The JUnit XML document as text."""
    sim = "[SIMULATED] " if summary.simulated else ""
    root = ET.Element("testsuites", name=_x(f"{sim}kvoffload-harness {summary.scenario} {summary.run_id}"))
    props = _run_props(summary)
    run = _Suite(root, "run", props)
    verdict_text = f"{summary.verdict}: {summary.verdict_reason}"
    if summary.verdict in _BAD:
        run.case("run", "verdict", outcome="failure", message=verdict_text)
    elif summary.verdict == "hold":
        run.case("run", "verdict", outcome="skipped", message=verdict_text)
    else:
        run.case("run", "verdict", out=verdict_text)
    for check in summary.checks:
        name = f"check {check.name}" + (f" ({check.arm})" if check.arm else "")
        if check.level == "error":
            run.case("run.checks", name, outcome="failure", message=f"error: {check.message}")
        else:
            run.case("run.checks", name, out=f"{check.level}: {check.message}")
    for item in summary.fit_screen:
        if item.status == "unknown":
            run.case("run.fit", f"fit {item.name}", outcome="skipped", message=f"unknown: {item.evidence}")
        else:
            run.case("run.fit", f"fit {item.name}", out=f"{item.status}: {item.evidence}")
    decisions = {arm.name: arm.decision for arm in summary.arms}
    for drill in summary.drills:
        if drill.arm not in decisions:
            _drill_case(run, drill, None)
    totals = dict(run.close())
    for arm in summary.arms:
        suite = _Suite(root, f"arm {arm.name}", {**props, "arm": arm.name, "tier": arm.tier,
                                                 "decision": arm.decision},
                       time_s=sum(s.duration_s for s in arm.steps))
        _decision_case(suite, arm)
        for rule in arm.rules:
            _rule_case(suite, arm, rule)
        for drill in summary.drills:
            if drill.arm == arm.name:
                _drill_case(suite, drill, arm.decision)
        for key, value in suite.close().items():
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

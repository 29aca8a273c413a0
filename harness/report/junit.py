"""``junit.xml``: rules, decisions and drills as test cases, so a CI test view shows what failed.

Layout: a ``run`` suite (the verdict, pre-flight checks, fit screen) and one suite per arm (the arm's decision, one
case per rule result, one per drill on that arm). The decision's message gives the reasons deciding rule first; its
system-out starts with the arm's break-even load and effect table (every deciding comparison per step with its
interval, limit and outcome), and its properties carry ``break_even``, ``break_even_status`` and ``deciding_effect``.
Every suite carries ``simulated``, ``verdict`` and the run's identity as properties; a prediction (``harness predict``)
is named ``[PREDICTED] [SIMULATED] ...``, its run suite carries ``predicted``, ``profile`` and ``clock``, and a
``run.prediction`` case holds the profile, its sources and the simulator's fidelity table.

Mapping (the exit code carries the verdict; JUnit explains it without failing a build on a hold):

* ``failure`` only where the outcome is bad: the verdict or an arm's decision is ``no-go``/``failed``, and the
  rule breaches and failed drills of such an arm; a pre-flight check at level ``error``.
* ``skipped`` (with the reason as message) for ``hold``: a held arm's decision and its breaches; unresolved and
  not-applicable rules; a ``skipped`` arm; fit items whose status is unknown. An **unresolved** rule (the evidence
  could not judge it) is never a silent pass: CI test views (Jenkins, GitLab, Azure DevOps, the GitHub JUnit
  report actions) list skipped cases with their message, while test-case properties are mostly not shown at all.
  The message carries the interval and threshold (``unresolved (could not be judged): 1.04x [0.97–1.11] vs
  1.11x: …``); the properties repeat them as data.
* ``slo-unmet`` (every arm, the baseline included, breaks the same budget): the run suite's ``slo`` case fails; the
  verdict and the arms' decisions are skipped (the tier is not to blame), and a breach shared with the baseline is
  skipped, never a failure of the tier.
* dry-run rules never fail or skip: they pass, with ``dry_run=true`` as a property and their outcome in system-out.
* a drill that ended in a harness ``error`` on a failed/no-go arm is an ``error`` element.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.report import prediction
from harness.report.effects import break_even_line, effect_lines, effect_views
from harness.report.fit_words import fit_evidence
from harness.report.fmt import ms, step_label, top_step
from harness.report.fmt_ci import evidence_text, load_time_text, pct_view, quantile_method, ratio_view
from harness.report.headline import headline
from harness.report.noise_floor_words import noise_floor_line
from harness.report.validation import validation_banner, validation_rows
from harness.schema.summary import ArmSummary, DrillResult, RuleResult, Summary

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
    return {"simulated": "true" if summary.simulated else "false", "clock": summary.clock, "verdict": summary.verdict,
            "recommended_arm": summary.recommended_arm or "", "exit_code": str(summary.exit_code),
            "run_id": summary.run_id, "scenario": summary.scenario, "scenario_hash": summary.scenario_hash,
            "engine": summary.engine, "model": summary.model}


def _rule_case(suite: _Suite, arm: ArmSummary, rule: RuleResult) -> None:
    at = step_label(arm, rule.step)
    name = f"rule {rule.rule}" + (f" @ {at}" if at else "")
    flags = {"kind": rule.kind, "status": rule.status, "critical": str(rule.critical).lower(),
             "dry_run": str(rule.dry_run).lower(), **_evidence_props(rule)}
    evidence = evidence_text(rule)
    detail = f"{evidence}: {rule.message}" if evidence else rule.message
    text = f"{rule.status}: {detail}"
    if rule.dry_run:
        suite.case(arm.name, name, out=f"dry run (reported, never decides): {text}", props=flags)
    elif rule.status == "pass":
        suite.case(arm.name, name, out=detail, props=flags)
    elif rule.status == "unresolved":
        suite.case(arm.name, name, outcome="skipped", props=flags,
                   message=f"unresolved (could not be judged, not a pass): {detail}")
    elif rule.status == "breach" and rule.shared_with_baseline:
        suite.case(arm.name, name, outcome="skipped", props=flags,
                   message=f"breach shared with the baseline (the SLO's problem, not the tier's): {detail}")
    elif rule.status == "breach" and arm.decision in _BAD:
        suite.case(arm.name, name, outcome="failure", message=text, props=flags)
    elif rule.status == "breach":
        suite.case(arm.name, name, outcome="skipped", props=flags,
                   message=f"breach did not fail the arm (decision {arm.decision}): {detail}")
    else:
        suite.case(arm.name, name, outcome="skipped", message=text, props=flags)


def _evidence_props(rule: RuleResult) -> dict[str, str]:
    props: dict[str, str] = {}
    if rule.interval is not None:
        iv = rule.interval
        props.update({"interval": ratio_view(iv).text, "interval_resolved": str(iv.resolved).lower(),
                      "interval_confidence": f"{iv.confidence:g}"})
    if rule.threshold is not None:
        props["threshold"] = f"{rule.threshold:g}"
    for key in ("pass_bound", "breach_bound", "floor", "reason_code"):
        value = getattr(rule, key)
        if value is not None:
            props[key] = f"{value:g}" if isinstance(value, float) else str(value)
    if rule.shared_with_baseline:
        props["shared_with_baseline"] = "true"
    return props


def _figures(arm: ArmSummary) -> str:
    """Each step's p99 TTFT/ITL with interval and n (unresolved ones marked), for the decision's system-out."""
    lines = []
    for st in arm.steps:
        early = f"; ended early at {st.duration_s:.0f} s: {st.stop_reason or 'no reason recorded'}" if st.ended_early \
            else ""
        lines.append(f"{st.label}: p99 TTFT {pct_view(st.ttft_ms, 'p99').text}; p99 ITL "
                     f"{pct_view(st.itl_ms, 'p99').text}; {st.requests} requests{early}")
    return "\n".join(lines)


def _top_props(arm: ArmSummary) -> dict[str, str]:
    top = top_step(arm)
    if top is None:
        return {}
    ci = top.ttft_ms.p99_ci
    props = {"top_step": top.label, "ttft_p99": pct_view(top.ttft_ms, "p99").text,
             "ttft_p99_n": str(ci.n if ci is not None else top.ttft_ms.count),
             "ttft_p99_resolved": str(top.ttft_ms.resolved("p99")).lower()}
    if ci is not None:
        props.update({"ttft_p99_lo": "" if ci.lo is None else f"{ci.lo:g}",
                      "ttft_p99_hi": "" if ci.hi is None else f"{ci.hi:g}"})
    return props


def _effects_text(arm: ArmSummary, confidence: float) -> str:
    """The arm's effect table and break-even load, as lines (decision's system-out)."""
    lines = effect_lines(arm, confidence)
    be = break_even_line(arm)
    head = ([be] if be else []) + (["effect sizes (deciding comparisons per step):"] if lines else [])
    return "\n".join([*head, *(f"  {line}" for line in lines)])


def _effect_props(arm: ArmSummary) -> dict[str, str]:
    props: dict[str, str] = {}
    if arm.break_even is not None:
        props.update({"break_even_status": arm.break_even.status, "break_even": arm.break_even.text})
    decided = [v for v in effect_views(arm) if v.deciding]
    if decided:
        props["deciding_effect"] = "; ".join(f"{v.step} {v.measure} {v.ratio} ({v.outcome})" for v in decided)
    return props


def _decision_case(suite: _Suite, arm: ArmSummary, confidence: float = 0.95) -> None:
    reasons = " ".join(arm.reasons) or "no reason recorded"
    name = "decision"
    figures = "\n\n".join(t for t in (_effects_text(arm, confidence), _figures(arm)) if t)
    props = _effect_props(arm) or None
    if arm.decision in _BAD:
        body = reasons
        if arm.failure is not None:
            body += f"\n\nfailed during {arm.failure.phase}: {arm.failure.message}"
            if arm.failure.log_tail:
                body += "\n\nlast log lines:\n" + "\n".join(arm.failure.log_tail)
        suite.case(arm.name, name, outcome="failure", message=f"{arm.decision}: {reasons}", body=body, out=figures,
                   props=props)
    elif arm.decision in ("hold", "skipped", "slo-unmet"):
        suite.case(arm.name, name, outcome="skipped", message=f"{arm.decision}: {reasons}", out=figures, props=props)
    else:
        suite.case(arm.name, name, out=f"{arm.decision}: {reasons}" + (f"\n\n{figures}" if figures else ""),
                   props=props)


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


def _slo_case(run: _Suite, summary: Summary) -> None:
    budgets = ", ".join(f"{k.removesuffix('_ms').replace('_', ' ')} {ms(v)}" for k, v in summary.slo.items()
                        if v is not None) or "none set"
    if summary.verdict == "slo-unmet":
        run.case("run.slo", "slo", outcome="failure",
                 message=f"slo-unmet: every arm, the baseline included, breaks the same budget ({budgets}); the SLO "
                         f"is the problem, not the tier: {summary.verdict_reason}")
    else:
        run.case("run.slo", "slo", out=f"budgets: {budgets}")


def _statistics_case(run: _Suite, summary: Summary) -> None:
    st = summary.statistics
    lines = [f"intervals: {st.confidence:.0%} confidence; percentiles: {quantile_method(summary)}; ratios: "
             f"{st.ratio_method or 'not recorded'}; alpha {st.alpha:g}; multiplicity: {st.multiplicity or 'none'}; "
             f"sequential: {st.sequential or 'off'}"]
    if load_time_text(summary):
        lines.append(f"load time: {load_time_text(summary)}")
    nf = summary.noise_floor
    if nf is not None:
        lines.append(f"noise floor ({nf.arm}): {noise_floor_line(nf)}")
        lines.extend(f"  step {it.step} {it.measure}: {ratio_view(it.interval).text}" for it in nf.items)
    props = {"confidence": f"{st.confidence:g}", "load_saved_share": f"{summary.load_time.saved_share:.3f}"}
    if nf is not None and nf.factor is not None:
        props["noise_floor_factor"] = f"{nf.factor:g}"
    run.case("run.statistics", "statistics", out="\n".join(lines), props=props)


def _validation_case(run: _Suite, summary: Summary) -> None:
    """The engine's own validation: skipped (loud) when some arm was not validated, else what each arm resolved."""
    if summary.simulated:
        return
    banner = validation_banner(summary)
    if banner is not None:
        run.case("run.validation", "engine validation", outcome="skipped", message=banner)
        return
    lines = [f"{arm} ({status}): {text} [{where}]" for arm, status, text, where in validation_rows(summary)]
    run.case("run.validation", "engine validation", out="\n".join(lines))


def render_junit(summary: Summary) -> str:
    """The JUnit XML document as text."""
    root = ET.Element("testsuites", name=_x(f"{prediction.label(summary)}kvoffload-harness {summary.scenario} "
                                           f"{summary.run_id}"))
    props = {**_run_props(summary), **prediction.properties(summary)}
    run = _Suite(root, "run", props)
    if summary.prediction is not None:
        run.case("run.prediction", "PREDICTED", out=prediction.case_text(summary), props=prediction.properties(summary))
    head = headline(summary).text  # the message CI shows first; the verdict's full reasoning follows in the body
    verdict_text = f"{head}\n\n{summary.verdict}: {summary.verdict_reason}"
    if summary.verdict in _BAD:
        run.case("run", "verdict", outcome="failure", message=head, body=verdict_text)
    elif summary.verdict in ("hold", "slo-unmet"):
        run.case("run", "verdict", outcome="skipped", message=head, out=verdict_text)
    else:
        run.case("run", "verdict", out=verdict_text)
    _slo_case(run, summary)
    _validation_case(run, summary)
    _statistics_case(run, summary)
    for check in summary.checks:
        name = f"check {check.name}" + (f" ({check.arm})" if check.arm else "")
        if check.level == "error":
            run.case("run.checks", name, outcome="failure", message=f"error: {check.message}")
        else:
            run.case("run.checks", name, out=f"{check.level}: {check.message}")
    for item in summary.fit_screen:
        if item.status == "unknown":
            run.case("run.fit", f"fit {item.name}", outcome="skipped", message=f"unknown: {fit_evidence(item)}")
        else:
            run.case("run.fit", f"fit {item.name}", out=f"{item.status}: {fit_evidence(item)}")
    decisions = {arm.name: arm.decision for arm in summary.arms}
    for drill in summary.drills:
        if drill.arm not in decisions:
            _drill_case(run, drill, None)
    totals = dict(run.close())
    for arm in summary.arms:
        suite = _Suite(root, f"arm {arm.name}", {**props, "arm": arm.name, "tier": arm.tier,
                                                 "decision": arm.decision, **_top_props(arm)},
                       time_s=sum(s.duration_s for s in arm.steps))
        _decision_case(suite, arm, summary.statistics.confidence)
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

"""The headline every output opens with: the verdict and the arm to ship (or keep), what the tier bought with its
interval, and what stopped a ``go`` with what to do next, in at most :data:`MAX_WORDS` words, from the summary's
findings and effect rows (method names and second views stay in the details).

Which arm it speaks of: for ``go`` the shipped arm (its deciding improvement), then the next tier that is not
``go``; otherwise the first tier arm that broke the chain of ``go`` arms (the one the verdict followed)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.report import words
from harness.schema.findings import Finding, FindingRole, finding_code, harm_rank, hold_rank, rule_role
from harness.schema.summary import ArmSummary, EffectRow, Summary

MAX_WORDS = 60
_SPEAKS = ("go", "hold", "no-go", "slo-unmet", "failed")


@dataclass(frozen=True)
class Headline:
    """``lead`` (the verdict and what to do with the arms, e.g. ``GO: ship cpu-16g (16 GiB CPU tier).``) and
    ``body`` (the sentences after it)."""

    lead: str
    body: str

    @property
    def text(self) -> str:
        return f"{self.lead} {self.body}".strip()

    @property
    def word_count(self) -> int:
        return len(self.text.split())


def breaking_arm(summary: Summary) -> ArmSummary | None:
    """The first tier arm after the chain of ``go`` arms that is not ``go`` (skipped arms passed over)."""
    for arm in summary.arms[1:]:
        if arm.decision in ("go", "skipped"):
            continue
        return arm if arm.decision in _SPEAKS else None
    return None


def shown_gain(arm: ArmSummary) -> EffectRow | None:
    """The arm's improvement to quote: the deciding one when shown, else its largest shown improvement."""
    shown = [r for r in arm.effects if r.test == "improvement" and r.outcome == "improvement shown"]
    deciding = [r for r in shown if r.deciding]
    if deciding:
        return deciding[0]
    return max(shown, key=lambda r: r.interval.lo or 0.0) if shown else None


_LEGACY_ROLE: dict[str, FindingRole] = {"no-go": "veto", "hold": "hold", "slo-unmet": "shared"}


def legacy_finding(arm: ArmSummary) -> Finding | None:
    """For a summary written before findings (schema < 7): the rule the decision stage would have put first, by
    its own roles and ranks (``harness/schema/findings.py``: a veto for no-go, a hold for hold, a shared budget for
    slo-unmet); None when none plays that role."""
    if arm.failure is not None and arm.decision == "failed":
        return Finding(code="harness-failed" if arm.failure.phase == "harness" else "arm-failed", role="failure",
                       phase=arm.failure.phase)
    role = _LEGACY_ROLE.get(arm.decision)
    candidates = [(i, r) for i, r in enumerate(arm.rules) if not r.dry_run and role is not None
                  and rule_role(r) == role]
    if role is None or not candidates:
        return None
    rank = harm_rank if role == "veto" else hold_rank
    i, r = min(candidates, key=lambda c: (rank(c[1]), c[0]))
    return Finding(code=finding_code(r, role), role=role, rule=r.rule, kind=r.kind, status=r.status, step=r.step,
                   rule_index=i, interval=r.interval, reason_code=r.reason_code,
                   bound=r.breach_bound if r.status == "breach" else r.pass_bound, floor=r.floor)


def evidence_row(arm: ArmSummary, f: Finding) -> EffectRow | None:
    """The effect row behind a finding: the same rule and step; for earns its keep (no step) the open comparison
    cheapest to settle towards an improvement, else the one nearest its limit."""
    if f.rule is None:
        return None
    rows = [r for r in arm.effects if r.rule == f.rule]
    if f.step is not None:
        return next((r for r in rows if r.step == f.step), None)
    towards = [r for r in rows if r.settle_plan is not None and r.settle_plan.way == "show-improvement"
               and r.settle_plan.factor is not None]
    if towards:
        return min(towards, key=lambda r: r.settle_plan.factor if r.settle_plan and r.settle_plan.factor else 0.0)
    judged = [r for r in rows if r.interval.ratio is not None and r.outcome != "host-contended"]
    if not judged:
        return None
    return max(judged, key=lambda r: (r.interval.ratio or 0.0) / (r.limit or 1.0))


def _lead(summary: Summary) -> str:
    word = words.VERDICT_WORDS.get(summary.verdict, summary.verdict.upper())
    keep = summary.recommended_arm
    if summary.verdict == "go" and keep:
        shipped = next((a for a in summary.arms if a.name == keep), None)
        tier = f" ({words.tier_words(shipped)})" if shipped is not None else ""
        return f"{word}: ship {keep}{tier}."
    if summary.verdict == "failed":
        return f"{word}: no verdict; the run did not finish."
    if summary.verdict == "slo-unmet":
        return f"{word}: no arm meets the SLO, the baseline included."
    base = summary.arms[0].name if summary.arms else "the baseline"
    kept = keep if keep and keep != base else f"the GPU-only baseline ({base})"
    return f"{word}: keep {kept}" + (" for now." if summary.verdict == "hold" else ".")


def _gain_sentence(arm: ArmSummary, baseline: str, *, subject: str) -> tuple[str, str] | None:
    """(``It raised output throughput 1.41x (1.27–1.54) over the baseline at c8``, the breadth clause)."""
    row = shown_gain(arm)
    if row is None:
        return None
    core = f"{subject} {words.gain_words(row)} over {words.versus_words(row, baseline)} at {row.label}"
    be = arm.break_even
    breadth = ""
    if be is not None and be.status == "helps-everywhere" and len(be.steps) > 1:
        breadth = f", with a gain at every load tested ({words.steps_words(be.steps)})"
    elif be is not None and be.improvement_steps and len(be.improvement_steps) < len(be.steps):
        breadth = f", a gain shown at {words.steps_words(be.improvement_steps)}"
    contended = [r.label for r in arm.effects if r.outcome == "host-contended" and r.deciding is False
                 and r.test == "improvement"]
    labels = list(dict.fromkeys(contended))
    if labels:
        breadth += f"; {', '.join(labels)} not compared (host too busy)"
    return core, breadth


def _stop_sentence(summary: Summary, arm: ArmSummary, *, shipped: bool) -> tuple[str, str]:
    """(``cpu-16g-disk is hold: <what stopped it>.``, ``Next: <action>.``)."""
    baseline = summary.arms[0].name if summary.arms else ""
    f = arm.findings[0] if arm.findings else legacy_finding(arm)
    keep = summary.recommended_arm or baseline
    if f is None:
        first = arm.reasons[0] if arm.reasons else arm.decision
        return f"{arm.name} is {arm.decision}: {first[:80]}.", ""
    row = evidence_row(arm, f)
    label = f"The {words.tier_words(arm)} on top ({arm.name})" if shipped else arm.name
    stop = f"{label} is {arm.decision}: {words.stop_words(f, arm, row, baseline)}."
    return stop, f"Next: {words.next_words(f, row, keep)}."


def headline(summary: Summary) -> Headline:
    """The headline, shortened part by part (breadth, then the next action of a shipped verdict's next tier,
    then the stop's figures) until it fits :data:`MAX_WORDS`."""
    lead = _lead(summary)
    baseline = summary.arms[0].name if summary.arms else ""
    if not summary.arms:
        return Headline(lead, "No arm ran, so nothing was compared. Next: see the details for why, then "
                              "harness run --resume RUN_DIR.")
    if summary.verdict == "failed":
        why = "The baseline did not run to the end" if summary.arms[0].decision == "failed" else \
            "An arm was stopped by a failure of the harness itself"
        return Headline(lead, f"{why}. Next: fix what the details name, then harness run --resume RUN_DIR.")
    if summary.verdict == "slo-unmet":
        return Headline(lead, _slo_unmet(summary.arms[0]))
    shipped = next((a for a in summary.arms if a.name == summary.recommended_arm), None) \
        if summary.verdict == "go" else None
    breaker = breaking_arm(summary)
    gain_arm = shipped if shipped is not None else breaker
    parts: list[tuple[str, int]] = []  # (text, drop priority: higher is dropped first; 0 never)
    if gain_arm is not None and gain_arm.decision != "failed":
        gain = _gain_sentence(gain_arm, baseline, subject="It" if shipped is not None else gain_arm.name)
        if gain is not None:
            parts += [(gain[0], 0), (gain[1], 2), (".", 0)]
    if breaker is not None:
        stop, nxt = _stop_sentence(summary, breaker, shipped=shipped is not None)
        parts += [(" " + stop, 0), (" " + nxt if nxt else "", 3 if shipped is not None else 1)]
    if not parts:
        parts = [(_nothing_judged(summary), 0)]
    body = _fit(lead, parts)
    return Headline(lead, body)


def _slo_unmet(baseline: ArmSummary) -> str:
    """Every arm breaks a budget the baseline breaks too: name the baseline's first broken budget and its step."""
    broken = next((r for r in baseline.rules if r.kind == "budget" and r.status == "breach" and not r.dry_run), None)
    steps = {s.index: s.label for s in baseline.steps}
    which = ""
    if broken is not None:
        at = f" at {steps[broken.step]}" if broken.step in steps else ""
        which = f" ({broken.rule}{at})"
    return (f"Every arm breaks the same latency budget{which}, so the tier is not to blame. Next: revisit the SLO, "
            "the load or the hardware.")


def _nothing_judged(summary: Summary) -> str:
    """The body when no tier arm speaks: none was run, or none got past being skipped."""
    tiers = summary.arms[1:]
    if not tiers:
        return "Only the baseline ran; no tier arm was compared with it."
    if all(a.decision == "skipped" for a in tiers):
        return "Every tier arm was skipped; none was compared with the baseline."
    return "No tier arm was judged against the baseline; the details name why."


def _fit(lead: str, parts: list[tuple[str, int]]) -> str:
    """The parts joined, dropping the highest-priority optional ones until lead + body fit the word limit."""
    kept = list(parts)
    while True:
        body = "".join(text for text, _ in kept).strip()
        if len(f"{lead} {body}".split()) <= MAX_WORDS:
            return body
        optional = [p for p in kept if p[1] > 0 and p[0]]
        if not optional:
            return _truncate(lead, body)
        kept.remove(max(optional, key=lambda p: p[1]))


def _truncate(lead: str, body: str) -> str:
    room = max(MAX_WORDS - len(lead.split()) - 1, 1)
    tokens = body.split()
    return body if len(tokens) <= room else " ".join(tokens[:room]) + "…"

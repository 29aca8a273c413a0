"""Human rendering of the power section of ``harness plan`` (:class:`~harness.plan.power.model.PowerPlan`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.plan.power.model import PercentileResolution, PowerPlan, RuleResolution, StepPower


def _ranks(n: int | None, res: PercentileResolution | RuleResolution) -> str:
    if res.ranks is None or res.sample_percentiles is None or not n:
        return ""
    lo, hi = res.sample_percentiles
    return (f" [ranks {res.ranks[0]}..{res.ranks[1]} of {n}: the true p{res.percentile:g} lies between sample "
            f"percentiles {lo:g} and {hi:g}]")


def _percentile(n: int | None, res: PercentileResolution) -> str:
    if res.resolved is None:
        return f"p{res.percentile:g} needs {res.needed}"
    if not res.resolved:
        return f"p{res.percentile:g} no (needs {res.needed})"
    return f"p{res.percentile:g} yes"


def _name(res: RuleResolution) -> str:
    if res.kind == "earns_keep":
        return f"earns-its-keep {res.measure}"
    return f"{res.kind} {res.rule}"


def _needs(res: RuleResolution) -> str:
    level = f"at {res.confidence:.1%}" + (f" (one-sided {res.alpha_each:.3g})" if res.alpha_each is not None else "")
    what = "" if res.kind == "earns_keep" else f" {res.measure}"
    return f"{_name(res)}{what} {level}: {res.needed}"


def _rule(step: StepPower, res: RuleResolution) -> str:
    head = _name(res)
    if not res.resolved:
        fixes = [f"{res.duration_needed_s:g} s would"] if res.duration_needed_s is not None else []
        if res.lower_percentile is not None:
            fixes.append(f"p{res.lower_percentile:g} resolves")
        return f"{head}: cannot resolve (needs {res.needed})" + (f"; {', or '.join(fixes)}" if fixes else "")
    text = f"{head}: resolved" + _ranks(step.expected_requests, res)
    if res.kind == "regression" and res.detectable_ratio is not None:
        text += (f"; lognormal: flags a true ratio >= {res.detectable_ratio:.2f}x (limit {res.limit:.2f}x), an "
                 f"unchanged arm passes only if the limit is >= {res.pass_limit:.2f}x")
    elif res.kind == "earns_keep" and res.detectable_ratio is not None:
        text += f"; lognormal: shows an improvement >= {res.detectable_ratio:.2f}x (needs {res.limit:.2f}x)"
    elif res.note and res.kind == "earns_keep":
        text += f" ({res.note})"
    return text


def _step_head(step: StepPower) -> str:
    rate = f"~{step.rps:g} req/s ({step.source}: {step.source_detail})" if step.rps is not None else \
        f"rate {step.source_detail}" if step.source == "none" else step.source_detail
    dur = f" x {step.duration_s:g} s" if step.duration_s is not None and step.rps is not None else ""
    n = f" = ~{step.expected_requests} requests per arm" if step.expected_requests is not None else \
        " -> requests unknown"
    if step.source == "requests":
        n = f": {step.expected_requests} requests per arm"
    return f"step {step.index} ({step.label}): {rate}{dur}{n}"


def print_power(power: PowerPlan | None, console: Console) -> None:
    """Print the power section (nothing when the plan has none)."""
    if power is None:
        return

    def say(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)

    console.print("\n[bold]Power[/] (before the run: can the planned steps decide?)")
    if power.steps and power.steps[0].rules:
        say("  requests each step needs per arm: " + "; ".join(_needs(r) for r in power.steps[0].rules))
    if not power.known:
        say(f"  steps {', '.join(s.label for s in power.steps)}: requests per step unknown (no throughput figure); "
            f"to estimate them: {power.how_to_estimate}")
        return
    for step in power.steps:
        say("  " + _step_head(step))
        n = step.expected_requests
        if n is None:
            continue
        say(f"    resolves at {power.confidence:.0%}: " + ", ".join(_percentile(n, p) for p in step.percentiles)
            + next((_ranks(n, p) for p in reversed(step.percentiles) if p.resolved), ""))
        if step.window is not None and step.window.requests is not None:
            w = step.window
            say(f"    budget window {w.window_s:g} s: ~{w.requests:g} requests; "
                + "; ".join(f"bounding p{b.percentile:g} needs {b.needed}: " + ("yes" if b.bounds else "no")
                            for b in w.percentiles))
        for res in step.rules:
            say("    " + _rule(step, res))
    sig = ", ".join(f"{m} {v:g}" for m, v in power.sigma.items())
    say(f"  distribution-free: {power.method}")
    say(f"  assumption (detectable ratios only): {power.assumption}; sigma {sig} — {power.sigma_source}; "
        f"power {power.power:.0%}")
    for note in power.notes:
        say(f"  note: {note}")
    if power.how_to_estimate:
        say(f"  throughput unknown for some steps: {power.how_to_estimate}")

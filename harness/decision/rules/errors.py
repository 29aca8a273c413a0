"""Rollback rules, as pure functions over measured values. Each is three-valued (breach / pass / unresolved).

* **Budget** — :mod:`harness.decision.rules.budget`: windowed percentile latency against a budget, each window judged
  with its interval; a sustained breach needs resolved windows.
* **Regression** — :mod:`harness.decision.evidence`: the arm against the baseline at the same step, an interval on the
  ratio of the rule's percentiles (paired by request), Mann-Whitney as a second view.
* **Earns its keep** — :mod:`harness.decision.rules.keep`: an improvement's interval must clear ``min_improvement``,
  the family of steps x measures controlled.
* **Cause** — :mod:`harness.decision.rules.causal`: own-tier hits and the fit screen.
* **Errors** — here: the newest tier must not bring failures.
* **Host contention** — :mod:`harness.decision.rules.load_host`: a step the host slowed never decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scipy.stats import binomtest, fisher_exact

from harness.decision.rules.budget import WindowValue, evaluate_budget
from harness.decision.rules.keep import evaluate_earns_keep
from harness.decision.rules.load_host import REASON, contended_text
from harness.schema.summary import RuleResult, StepSummary

__all__ = ["WindowValue", "evaluate_budget", "evaluate_earns_keep", "evaluate_errors"]


def evaluate_errors(max_rate: float, arm_steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary],
                    prev_name: str, alpha: float = 0.05, contended: Mapping[int, str] | None = None) -> RuleResult:
    """The newest tier must not bring failures. A step is a breach when its error rate is shown to exceed ``max_rate``
    (one-sided exact binomial test) and to exceed the arm-before's at the same step (one-sided Fisher exact test),
    each at ``alpha`` over the steps (Bonferroni); a rate over ``max_rate`` that is not shown is unresolved.
    Host-contended steps (``contended``: step index -> why, :mod:`harness.decision.rules.load_host`) are named and
    never judged; with no clean step the rule is unresolved (host contention)."""
    prev = {s.index: s for s in prev_steps}
    contended = contended or {}
    aside = {i: why for i, why in contended.items() if any(s.index == i and s.requests for s in arm_steps)}
    tail = f" ({contended_text(aside)})" if aside else ""
    if aside and not any(s.requests and s.index not in contended for s in arm_steps):
        return RuleResult(rule="error-rate", kind="errors", status="unresolved", critical=True, reason_code=REASON,
                          message=f"host contention: no step is clean to judge failures on{tail}; rerun on a "
                          "quieter host")
    each = alpha / max(1, len(arm_steps))
    worst: tuple[float, str] | None = None
    unsure: list[str] = []
    for step in arm_steps:
        if step.requests == 0 or step.index in contended:
            continue
        rate = step.errors / step.requests
        other = prev.get(step.index)
        o_err, o_n = (other.errors, other.requests) if other is not None and other.requests else (0, 0)
        other_rate = o_err / o_n if o_n else 0.0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(step.errors_by_kind.items())) or "unclassified"
        text = (f"step {step.index} ({step.label}): {step.errors} of {step.requests} requests failed ({rate:.1%}; "
                f"{kinds}) vs {other_rate:.1%} on {prev_name}")
        if rate <= max_rate:
            continue
        p_limit = float(binomtest(step.errors, step.requests, max_rate, alternative="greater").pvalue)
        p_prev = float(fisher_exact([[step.errors, step.requests - step.errors], [o_err, o_n - o_err]],
                                    alternative="greater").pvalue) if o_n else 0.0
        if p_limit < each and p_prev < each:
            if worst is None or rate > worst[0]:
                worst = (rate, f"{text} (exact tests p={p_limit:.2g} vs the limit, p={p_prev:.2g} vs {prev_name})")
        else:
            unsure.append(f"{text}, not shown at {each:.2g} (p={p_limit:.2g} vs the limit, p={p_prev:.2g} vs "
                          f"{prev_name})")
    if worst is not None:
        return RuleResult(rule="error-rate", kind="errors", status="breach", critical=True,
                          message=f"the tier brings failures: {worst[1]}; limit {max_rate:.1%}{tail}")
    if unsure:
        return RuleResult(rule="error-rate", kind="errors", status="unresolved", critical=True,
                          message=f"error rate over {max_rate:.1%} but not shown to come from the tier: "
                          + "; ".join(unsure) + tail)
    return RuleResult(rule="error-rate", kind="errors", status="pass",
                      message=f"no step's error rate rose above {max_rate:.1%}{tail}")

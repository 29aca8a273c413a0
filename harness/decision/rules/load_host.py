"""Host contention on the load side: a step whose figures are partly the host's, never charged to the engine.

Two figures are measured per step by the run itself: how far a simulated engine fell behind the wall clock
(``StepSummary.sim_behind_s``, :mod:`harness.run.sim_lag`: the simulator's own CPU on this host, not modelled
physics; every latency it served grew by about that share) and the load generator's health (``StepSummary.client``,
:mod:`harness.load.health`: a process near a full core, send lag, first tokens left waiting in the client). A step
over its budget (``rules.host_contention``: ``max_sim_behind_share`` of the step's duration, or a saturated client
with ``client_saturation``) is **host-contended**:

* it never decides a verdict: a comparison at that step (either side contended) is reported with the figures and
  the budget and does not count; the clean steps decide, or, with no clean step, the rule is unresolved with reason
  ``host-contended`` (a hold: what the run measured cannot be told from the host's own load);
* an A/A step of the baseline or its re-run that is host-contended sets no noise floor
  (:mod:`harness.decision.noise_floor`).

The baseline's host DRAM and disk at the fit screen are :mod:`harness.decision.rules.host_contention`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from harness.config.rules import HostContentionSpec
from harness.schema.summary import HostContended, RuleResult, StepSummary

REASON: Final = "host-contended"


def judge_step(spec: HostContentionSpec, step: StepSummary) -> HostContended | None:
    """The step against its host-contention budget (None: within it, or nothing measured)."""
    share = (step.sim_behind_s / step.duration_s if step.sim_behind_s is not None and step.duration_s > 0
             else None)
    over_sim = share is not None and share > spec.max_sim_behind_share
    saturated = spec.client_saturation and step.client.saturated
    if not over_sim and not saturated:
        return None
    parts = []
    if over_sim and share is not None and step.sim_behind_s is not None:
        near = abs(share - spec.max_sim_behind_share) < 0.001  # enough digits to tell the two apart
        parts.append(f"the simulator fell {step.sim_behind_s:.2f} s behind the wall clock in {step.duration_s:.0f} s "
                     f"({share:.2%} > budget {spec.max_sim_behind_share:.0%})" if near else
                     f"the simulator fell {step.sim_behind_s:.2f} s behind the wall clock in {step.duration_s:.0f} s "
                     f"({share:.1%}; budget {spec.max_sim_behind_share:.0%})")
    if saturated:
        parts.append(step.client.note or "the load generator was saturated")
    return HostContended(sim_behind_s=round(step.sim_behind_s, 3) if step.sim_behind_s is not None else None,
                         sim_behind_share=round(share, 4) if share is not None else None,
                         max_sim_behind_share=spec.max_sim_behind_share, client_saturated=saturated,
                         message="; ".join(parts))


def judged_steps(spec: HostContentionSpec, steps: Sequence[StepSummary]) -> list[StepSummary]:
    """The steps, each with its ``host_contended`` judged from its figures (copies; the inputs are unchanged)."""
    return [step.model_copy(update={"host_contended": judge_step(spec, step)}) for step in steps]


def contended_pairs(mine: Sequence[StepSummary], mine_name: str,
                    *others: tuple[str, Sequence[StepSummary]]) -> dict[int, str]:
    """Step index -> why a comparison of ``mine`` with the ``others`` (name, steps) at that step is host-contended
    (any side over its budget), naming the arm, the step, the figures and the budget."""
    by_name = [(name, {s.index: s for s in steps}) for name, steps in others]
    out: dict[int, str] = {}
    for step in mine:
        sides = [(mine_name, step)] + [(name, theirs.get(step.index)) for name, theirs in by_name]
        said = list(dict.fromkeys(f"{name} step {s.index} ({s.label}): {s.host_contended.message}"
                                  for name, s in sides if s is not None and s.host_contended is not None))
        if said:
            out[step.index] = "; ".join(said)
    return out


def set_aside(per_step: Sequence[tuple[RuleResult, int | None]], contended: Mapping[int, str]) -> list[RuleResult]:
    """A rule's per-step results with the host-contended steps set aside: with a clean step left they are
    ``not-applicable`` (reported, never deciding); with none, ``unresolved`` (the rule cannot be judged on this host
    as it was). Each keeps its figures and says why, with reason code ``host-contended``."""
    clean = any(step is None or step not in contended for _, step in per_step)
    out = []
    for result, step in per_step:
        why = contended.get(step) if step is not None else None
        if why is None:
            out.append(result)
        elif clean:
            out.append(result.model_copy(update={
                "status": "not-applicable", "reason_code": REASON,
                "message": f"host-contended, not deciding ({why}): {result.message}"}))
        else:
            out.append(result.model_copy(update={
                "status": "unresolved", "reason_code": REASON,
                "message": f"host contention: no step is clean to judge it on ({why}); what it measured cannot be "
                           f"charged to the engine — rerun on a quieter host: {result.message}"}))
    return out


def clean_steps(steps: Sequence[StepSummary], contended: Mapping[int, str]) -> list[StepSummary]:
    """The steps not host-contended."""
    return [s for s in steps if s.index not in contended]


def contended_text(contended: Mapping[int, str]) -> str:
    """``host-contended, not judged: cpu step 2 (c32): ...``: the steps a rule left out, with why."""
    return "; ".join(f"host-contended, not judged: {why}" for _, why in sorted(contended.items()))

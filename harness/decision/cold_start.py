"""Proof of state in the decision: an arm whose start was shown warm cannot be ``go``.

Every arm's start is checked before any load (:mod:`harness.run.cold_start`, journaled in ``arms.jsonl`` as
``cold-start``; the latest start of the arm counts, as a resumed arm restarts on a fresh server). Its ``proof``:

* ``warm`` (hit counters above zero, a warm disk tier, a probe or reset canary that hit): a tier arm gets the
  ``cold-start`` rule as a breach of kind ``causal``: a hold, never a veto, because its hits may come from a state
  the plan did not make, so no improvement can be credited to the tier; a warm baseline is a run warning.
* ``not-proven`` (the hit counters not exposed or ``/metrics`` unreadable, so nothing that could fail was read; an
  older record whose probe alone "passed"): reported as not proven, with what the harness did (a fresh process, an
  emptied disk tier, an engine reset), and it does **not decide**. A harness-started server is fresh and its tier
  emptied by construction, and the harness cannot call a start warm without evidence; holding every arm of an engine
  that exposes no hit counter would make such engines undecidable for a check they cannot take. The report must not
  call such a start proven.
* ``proven``: shown in the arm's cold-start block; nothing to decide.

Carrying caches over *between steps* (the summary's ``caches_carry_over_between_steps``) is deliberate and concerns
steps inside one arm; it never makes a warm *arm start* acceptable, since arms are compared as fresh servers.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from harness.rundir.entries import ArmEvent
from harness.schema.cold_start import ColdStart
from harness.schema.summary import RuleResult

EVENT = "cold-start"  # the journal event :mod:`harness.run.cold_start` writes
CALIBRATION_EVENT = "tokenizer"  # arms.jsonl: the tokenizer calibration each arm's requests were planned with


def cold_start_of(events: Sequence[ArmEvent], arm: str) -> ColdStart | None:
    """The arm's latest cold-start record (None: none journaled, or one this harness cannot read)."""
    found: ColdStart | None = None
    for event in events:
        if event.arm != arm or event.event != EVENT:
            continue
        try:
            found = ColdStart.model_validate(event.extra("cold_start") or {})
        except ValidationError:
            found = ColdStart(proof="not-proven", reasons=["the journaled cold-start record could not be read"])
    return found


def cold_start_rule(proof: ColdStart | None) -> RuleResult | None:
    """A breach (hold) for a start shown warm; None otherwise: proven and not proven starts are shown in the arm's
    cold-start block and do not decide."""
    if proof is None or proof.proof != "warm":
        return None
    return RuleResult(rule="cold-start", kind="causal", status="breach",
                      message="the arm did not start cold, so its hits and latencies may come from state the plan did "
                      "not make: " + "; ".join(proof.reasons))


def baseline_warning(name: str, proof: ColdStart | None) -> str | None:
    """The baseline is never held, but every tier is compared with it: a warm baseline is a run warning."""
    if proof is None or proof.proof != "warm":
        return None
    return (f"the baseline {name} did not start cold; every comparison with it is suspect: "
            + "; ".join(proof.reasons))

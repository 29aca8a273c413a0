"""Proof of state and of use in ``summary.json``: an arm's cold start, and predicted against measured tier hits.

:class:`ColdStart` is what the harness saw and did at the arm's start, before any load. ``proof`` is the status a
reader acts on:

* ``proven`` — a check that could have failed passed: the engine's hit counters read zero on a server the harness
  started (and every disk tier of the arm held nothing), or, for an attached server reset through the engine's own
  endpoint, a canary prompt the counters saw hit before the reset saw no hit after it (:class:`EngineReset`);
* ``warm`` — a check failed (counters above zero, a disk tier holding files, a probe or canary that hit);
* ``not-proven`` — nothing that could fail was read (the counters not exposed or ``/metrics`` unreadable, a reset
  that failed on a server whose counters could not be read). A probe with a unique prompt alone never proves: it
  sees no cached tokens on a warm server too.

``actions`` says what the harness did to make the start cold (``fresh-process``: it started the server;
``emptied-disk-tier``: it emptied the arm's disk-tier directories first; ``engine-reset``: it asked an attached
server to empty its caches), whatever the proof (None in a record from before it was recorded). ``cold`` is kept
for older readers: ``True`` only when proven, ``False`` when warm, ``None`` otherwise; a record written before
``proof`` existed gets it from ``cold`` and ``checked`` (:meth:`ColdStart._derive_proof`).

:class:`HitPrediction` is each step's hit share per tier as the request plan predicts it (the exact LRU curve over
the plan's block hashes at the capacities the arm resolved to) next to what the server's counters measured;
:class:`HitCheck` is the fit screen's reading of it: each tier share further from its prediction than
:class:`HitBound` allows, as figures (:class:`TierGap`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.schema.base import SchemaModel as _Model

ProofStatus = Literal["proven", "not-proven", "warm"]
ColdAction = Literal["fresh-process", "emptied-disk-tier", "engine-reset"]


class DiskTierState(_Model):
    """One disk-tier directory at the arm's start: entries other than the harness's own marker."""

    root_dir: str
    entries: int = 0  # files and directories, found by a bounded walk
    bytes: int = 0
    truncated: bool = False  # the walk stopped at its bound: there may be more
    error: str | None = None  # could not be read


class ColdProbe(_Model):
    """The one probe request: a prompt no other request shares, sent before the warm-up."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (None: the server did not say)
    hit_tokens_delta: float | None = None  # the server's hit counters' increase over the probe (None: not exposed)
    error: str | None = None


class CanaryCheck(_Model):
    """One prompt no other request shares, sent twice before an engine reset and once after it: the repeat must move
    the hit counters (they see a cached prefix), the send after the reset must not (the reset emptied it)."""

    prompt_tokens: int | None = None
    repeat_hit_tokens: float | None = None  # the counters' increase over the repeat before the reset (> 0 expected)
    repeat_cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens of the repeat (None: not said)
    after_reset_hit_tokens: float | None = None  # their increase over the send after the reset (0 expected)
    after_reset_cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens of that send
    error: str | None = None


class EngineReset(_Model):
    """An attached server's caches emptied through the engine's own endpoint (vLLM ``POST /reset_prefix_cache``),
    with the reply, the counters read before and after, and the canary that shows whether it worked."""

    endpoint: str  # path and query string, as sent
    attempts: int = 0  # requests sent (a reply of success false is retried a few times)
    status: int | None = None  # HTTP status of the last reply (None: no reply)
    body: str | None = None  # the last reply's body, cut short
    success: bool | None = None  # the reply's ``success`` (None: the reply did not say)
    error: str | None = None  # why the reset is not shown done (None: done)
    seconds: float = 0.0
    counters_before: dict[str, float | None] = Field(default_factory=dict)
    counters_after: dict[str, float | None] = Field(default_factory=dict)  # re-read after the reply
    canary: CanaryCheck | None = None


class ColdStart(_Model):
    """What the arm's start looked like (see the module docstring)."""

    cold: bool | None = None  # older readers' view of proof: True proven, False warm, None not proven
    proof: ProofStatus | None = None  # None only while validating an older record: derived below
    actions: list[ColdAction] | None = None  # what the harness did to make the start cold (None: not recorded)
    reasons: list[str] = Field(default_factory=list)  # why not proven or warm, or what could not be checked
    counters: dict[str, float | None] = Field(default_factory=dict)  # canonical quantity -> value at the start
    disk_tiers: list[DiskTierState] = Field(default_factory=list)
    probe: ColdProbe | None = None
    reset: EngineReset | None = None  # the engine's own reset of an attached server (opt-in)
    checked: list[str] = Field(default_factory=list)  # the checks that ran: counters, disk-tier, probe, engine-reset

    @model_validator(mode="after")
    def _derive_proof(self) -> ColdStart:
        """``cold`` follows ``proof``. An older record has no ``proof``: warm when it said not cold, proven only where
        its counters were read, not proven otherwise (its probe alone proved nothing)."""
        if self.proof is None:
            if self.cold is False:
                self.proof = "warm"
            elif self.cold is True and "counters" in self.checked:
                self.proof = "proven"
            else:
                self.proof = "not-proven"
        self.cold = COLD_BY_PROOF[self.proof]
        return self


COLD_BY_PROOF: dict[str, bool | None] = {"proven": True, "warm": False, "not-proven": None}


class TierShares(_Model):
    """Shares of a step's prompt tokens by where their KV came from (sum about 1)."""

    gpu: float | None = None
    cpu: float | None = None
    disk: float | None = None
    miss: float | None = None


class PredictedStep(_Model):
    """One step: predicted and measured hit shares."""

    index: int
    label: str = ""
    requests: int = 0
    predicted: TierShares = Field(default_factory=TierShares)
    measured: TierShares = Field(default_factory=TierShares)


class HitPrediction(_Model):
    """Predicted against measured hit shares of one arm, with the capacities the prediction used."""

    model: str  # the approximation, in words
    mode: str  # inclusive | exclusive
    block_tokens: int  # the plan's hash block, the prediction's granularity
    gpu_tokens: int
    cpu_tokens: int = 0
    disk_tokens: int = 0
    sources: list[str] = Field(default_factory=list)  # where each capacity came from
    steps: list[PredictedStep] = Field(default_factory=list)


HitTier = Literal["gpu", "cpu", "disk"]


class HitBound(_Model):
    """How far a tier's measured share of a step's prompt tokens may lie from the prediction before the fit screen
    flags it: ``max(relative x predicted, floor, z x sqrt(p (1 - p) / requests))`` with ``p`` the predicted share
    (the relative part for large shares, the floor for small ones, the binomial standard error of a share over the
    step's requests for small steps). Chosen from the agreement measured on the demo (docs/statistics.md)."""

    relative: float
    floor: float
    z: float


class TierGap(_Model):
    """One tier at one step whose measured share lies beyond its bound (shares of the step's prompt tokens)."""

    step: int
    label: str = ""
    tier: HitTier
    requests: int = 0
    predicted: float
    measured: float
    bound: float  # the largest |measured - predicted| allowed at this step and tier


class HitCheck(_Model):
    """The fit screen's ``hit-prediction-agrees`` item as data: the arm, the bound, the steps compared and every
    tier share beyond its bound (none: the item passes)."""

    arm: str
    bound: HitBound
    steps: int = 0  # steps with a prediction
    gaps: list[TierGap] = Field(default_factory=list)

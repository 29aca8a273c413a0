"""Proof of state and of use in ``summary.json``: an arm's cold start, and predicted against measured tier hits.

:class:`ColdStart` is what the harness saw at the arm's start, before any load: the server's prefix-cache and
external (offload-tier) hit counters, what its disk tiers held, and one probe request with a unique prompt that must
see no cached tokens. ``cold`` is ``True`` only when every check that could run passed, ``False`` when one failed
(``reasons`` say which, with the figures), ``None`` when nothing could be checked (an older run directory).

:class:`HitPrediction` is each step's hit share per tier as the request plan predicts it (the exact LRU curve over
the plan's block hashes at the capacities the arm resolved to) next to what the server's counters measured.
"""

from __future__ import annotations

from pydantic import Field

from harness.schema.base import SchemaModel as _Model


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


class ColdStart(_Model):
    """What the arm's start looked like (see the module docstring)."""

    cold: bool | None = None
    reasons: list[str] = Field(default_factory=list)  # why not cold, or what could not be checked
    counters: dict[str, float | None] = Field(default_factory=dict)  # canonical quantity -> value at the start
    disk_tiers: list[DiskTierState] = Field(default_factory=list)
    probe: ColdProbe | None = None
    checked: list[str] = Field(default_factory=list)  # the checks that ran: counters, disk-tier, probe


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

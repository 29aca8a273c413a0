"""The ``prediction`` part of ``summary.json``: a run that is a prediction (``harness predict``), not a measurement.

A prediction is the user's scenario mapped onto the simulated engine with a named hardware profile. Its summary is
the same contract as any run's (``simulated`` is true) plus this part, which says what was predicted and on what
grounds: the profile (its model, GPU and the sources every figure rests on), the simulator's fidelity table (what is
checked against vLLM's code, what against published figures, what is modelled only), the clock that ran it, every
change the mapping made to the user's scenario and every warning it raised. Reports mark such a run PREDICTED.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.schema.base import SchemaModel as _Model

PREDICTED: Literal["PREDICTED"] = "PREDICTED"


class SourceNote(_Model):
    """One of the profile's source notes (``part``: general, model, gpu, compute, link, disk, scheduler, host)."""

    part: str
    text: str


class FidelityItem(_Model):
    """One row of the simulator's fidelity table (``harness/sim/fidelity.yaml``)."""

    part: str
    reference: str
    how: str
    tolerance: str
    result: str
    status: Literal["vllm-code", "published", "modelled"]
    status_text: str  # "checked against vLLM's code", "checked against published figures", "modelled only"


class PredictionProfile(_Model):
    """The hardware profile the prediction ran on."""

    name: str
    description: str = ""
    model: str  # the model the profile's figures describe
    gpu: str
    gpu_kv_blocks: int | None = None  # the GPU KV cache the profile gives, in blocks (at the run's utilisation)
    block_size: int | None = None
    sources: list[SourceNote] = Field(default_factory=list)


class Prediction(_Model):
    """What was predicted, on which profile and with what fidelity."""

    marking: Literal["PREDICTED"] = PREDICTED
    profile: PredictionProfile
    fidelity: list[FidelityItem] = Field(default_factory=list)
    clock: Literal["real", "virtual"] = "virtual"
    scenario_file: str | None = None  # the user's scenario, as given
    scenario: str  # its name
    engine: str  # the engine it names (vllm, trtllm or sim)
    model: str  # engine.model as the user wrote it
    mapping: list[str] = Field(default_factory=list)  # each change made to the user's scenario, with its field
    warnings: list[str] = Field(default_factory=list)  # said loudly in every report (e.g. a model the profile is not)

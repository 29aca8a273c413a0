"""The ``value:`` section: what the tier is worth to a fleet — demand at the SLO and what GPUs, host memory and NVMe
cost. Optional; without it the report shows capacity alone and no money or GPU count is ever computed.

Exactly one demand (``requests_per_s`` or ``output_tokens_per_s``, at the SLO) and a GPU-hour cost are required;
the per-GiB-month costs of host memory and NVMe are needed only for the arms that have such a tier (without them the
tier's cost, and its value per GiB, are reported as unknown with the reason). See
:mod:`harness.decision.value` and docs/report.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.config.base import StrictModel

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12
DemandUnit = Literal["requests/s", "output tokens/s"]


class ValueSpec(StrictModel):
    """Demand at the SLO and unit costs; every number positive."""

    requests_per_s: float | None = Field(default=None, gt=0, le=1e9, description="demand at the SLO, requests/s "
                                         "(give this or output_tokens_per_s)")
    output_tokens_per_s: float | None = Field(default=None, gt=0, le=1e12, description="demand at the SLO, output "
                                              "tokens/s (give this or requests_per_s)")
    gpu_hour_cost: float = Field(gt=0, le=1e6, description="what one GPU costs per hour")
    host_memory_gib_month_cost: float | None = Field(default=None, gt=0, le=1e6, description="what one GiB of host "
                                                     "memory costs per month (arms with a CPU tier)")
    nvme_gib_month_cost: float | None = Field(default=None, gt=0, le=1e6, description="what one GiB of NVMe costs "
                                              "per month (arms with a disk tier)")
    currency: str = Field(default="USD", min_length=1, max_length=8, pattern=r"^[A-Za-z$€£¥₹]+$",
                          description="a label for the costs (no conversion is made)")

    @model_validator(mode="after")
    def _one_demand(self) -> ValueSpec:
        given = [n for n in ("requests_per_s", "output_tokens_per_s") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one demand at the SLO: requests_per_s or output_tokens_per_s"
                             + (" (not both)" if given else ""))
        return self

    @property
    def demand(self) -> float:
        """The demand, in :attr:`demand_unit`."""
        if self.requests_per_s is not None:
            return self.requests_per_s
        return self.output_tokens_per_s or 0.0  # the validator requires one of the two

    @property
    def demand_unit(self) -> DemandUnit:
        """``requests/s`` or ``output tokens/s``."""
        return "requests/s" if self.requests_per_s is not None else "output tokens/s"

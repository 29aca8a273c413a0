"""``summary.json``: the run's outcome as data. The rollout writes it; every report is rendered from it.

Field names follow ``shared/DESIGN.md``: ``verdict``, ``recommended_arm``, per arm ``name``, ``tier``, ``decision``
(``baseline|go|hold|no-go|failed``), ``reasons`` (sentences with the numbers), and per step ``concurrency``,
``requests``, ``errors``, ``ttft_ms`` / ``itl_ms`` / ``e2e_ms`` percentiles, ``output_tokens_per_s``, ``hit_tokens``
by source. A value that could not be measured is ``null`` and named in ``missing``; it is never 0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
Decision = Literal["baseline", "go", "hold", "no-go", "failed", "skipped"]
Verdict = Literal["go", "hold", "no-go", "failed"]
EXIT_CODES: dict[str, int] = {"go": 0, "no-go": 1, "hold": 3, "failed": 4}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Percentiles(_Model):
    """Latency percentiles in milliseconds (None when there were no samples)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    count: int = 0


class HitTokens(_Model):
    """Prompt tokens by where their KV came from, over one step (counter deltas from the server)."""

    gpu: int | None = None
    cpu: int | None = None
    disk: int | None = None
    miss: int | None = None  # recomputed
    prompt: int | None = None
    cached: int | None = None  # hit tokens from any tier (the only figure when an engine does not split by tier)
    source: Literal["server", "client", "none"] = "server"
    missing: list[str] = Field(default_factory=list)  # series looked for and not found

    def hit_rate(self) -> float | None:
        """Share of prompt tokens served from any cache tier, or None if unknown."""
        parts = [self.gpu, self.cpu, self.disk, self.miss]
        if any(p is None for p in parts):
            if self.cached is not None and self.miss is not None and self.cached + self.miss > 0:
                return self.cached / (self.cached + self.miss)
            return None
        total = sum(p for p in parts if p is not None)
        return None if total == 0 else (total - (self.miss or 0)) / total


class ServerStep(_Model):
    """Server-side figures for one step (from scraped metrics); None = series missing."""

    ttft_ms: Percentiles | None = None
    itl_ms: Percentiles | None = None
    kv_usage_max: float | None = None
    cpu_tier_usage_max: float | None = None
    preemptions: float | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    offload_store_bytes: float | None = None
    offload_load_bytes: float | None = None
    disk_read_bytes: float | None = None
    disk_write_bytes: float | None = None
    scrapes: int = 0
    scrape_errors: int = 0
    missing: list[str] = Field(default_factory=list)


class ClientHealth(_Model):
    """The load generator's own state during a step."""

    cpu_percent: float | None = None
    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    saturated: bool = False
    note: str | None = None


class HitClassLatency(_Model):
    """TTFT for requests of one hit class (from per-request cached_tokens)."""

    hit_class: str  # mostly-cached | partial | recomputed
    requests: int
    ttft_ms: Percentiles


class StepSummary(_Model):
    """One load level inside an arm."""

    index: int
    label: str
    concurrency: int | None = None
    rate_rps: float | None = None
    duration_s: float = 0.0
    requests: int = 0
    errors: int = 0
    error_rate: float = 0.0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    ttft_ms: Percentiles = Field(default_factory=Percentiles)
    itl_ms: Percentiles = Field(default_factory=Percentiles)
    e2e_ms: Percentiles = Field(default_factory=Percentiles)
    output_tokens_per_s: float | None = None
    request_rate: float | None = None
    goodput: float | None = None  # share of requests inside all SLOs
    hit_tokens: HitTokens = Field(default_factory=HitTokens)
    client_cached_tokens: int | None = None  # sum of usage.cached_tokens
    ttft_by_hit_class: list[HitClassLatency] = Field(default_factory=list)
    server: ServerStep = Field(default_factory=ServerStep)
    client: ClientHealth = Field(default_factory=ClientHealth)


class WindowPoint(_Model):
    """Windowed percentiles over time inside an arm (for rollback rules and the timeline chart)."""

    step: int
    start_s: float  # seconds since the arm's first step started
    end_s: float
    requests: int
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    breached: list[str] = Field(default_factory=list)  # rule labels breached in this window


class RuleResult(_Model):
    """One rule's outcome for one arm."""

    rule: str
    kind: Literal["budget", "regression", "earns_keep", "drill", "errors"]
    status: Literal["pass", "breach", "inconclusive", "not-applicable"]
    critical: bool = False
    dry_run: bool = False
    step: int | None = None
    message: str


class LaunchRecord(_Model):
    """How the arm's server was started (secrets redacted)."""

    command: str
    image: str | None = None
    image_digest: str | None = None
    launcher: str
    config_files: dict[str, str] = Field(default_factory=dict)
    env_keys: list[str] = Field(default_factory=list)
    compose_file: str | None = None


class ArmFailure(_Model):
    """Why an arm failed (start-up error, death mid-step, harness error) with the server's last log lines."""

    phase: Literal["start", "readiness", "step", "drill", "harness"]
    message: str
    log_tail: list[str] = Field(default_factory=list)


class DrillPhase(_Model):
    """Errors, TTFT p99 and hit sources in one phase of a drill."""

    phase: Literal["before", "during", "after"]
    requests: int = 0
    errors: int = 0
    ttft_p99_ms: float | None = None
    hit_tokens: HitTokens = Field(default_factory=HitTokens)


class DrillResult(_Model):
    """One tier drill."""

    kind: str
    arm: str
    status: Literal["pass", "fail", "skipped", "error"]
    message: str
    phases: list[DrillPhase] = Field(default_factory=list)
    details: dict[str, float | int | str | None] = Field(default_factory=dict)


class ArmSummary(_Model):
    """One arm's outcome."""

    name: str
    tier: Literal["gpu-only", "cpu", "tiered"]
    decision: Decision
    reasons: list[str] = Field(default_factory=list)
    cpu_tier_bytes: int = 0
    disk_tier_dirs: list[str] = Field(default_factory=list)
    launch: LaunchRecord | None = None
    steps: list[StepSummary] = Field(default_factory=list)
    rules: list[RuleResult] = Field(default_factory=list)
    windows: list[WindowPoint] = Field(default_factory=list)
    failure: ArmFailure | None = None


class CheckItem(_Model):
    """A pre-flight check result (from ``harness plan``)."""

    name: str
    level: Literal["ok", "warn", "error"]
    message: str
    arm: str | None = None


class FitItem(_Model):
    """One item of the 'is offload the wrong optimisation?' screen."""

    name: str
    status: Literal["pass", "warn", "unknown"]
    evidence: str


class Summary(_Model):
    """The whole run."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    scenario: str
    scenario_hash: str
    engine: str
    model: str
    simulated: bool
    verdict: Verdict
    recommended_arm: str | None
    exit_code: int
    verdict_reason: str
    started_at: str
    finished_at: str
    caches_carry_over_between_steps: bool = True
    slo: dict[str, float | None] = Field(default_factory=dict)
    arms: list[ArmSummary]
    fit_screen: list[FitItem] = Field(default_factory=list)
    checks: list[CheckItem] = Field(default_factory=list)
    drills: list[DrillResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    missing_metrics: list[str] = Field(default_factory=list)
    host: dict[str, str | int | float | None] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)  # name -> path relative to the run directory

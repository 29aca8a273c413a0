"""``summary.json``: the run's outcome as data. The rollout writes it; every report is rendered from it.

Field names follow ``shared/DESIGN.md``: ``verdict``, ``recommended_arm``, per arm ``name``, ``tier``, ``decision``
(``baseline|go|hold|no-go|failed``), ``reasons`` (sentences with the numbers), and per step ``concurrency``,
``requests``, ``errors``, ``ttft_ms`` / ``itl_ms`` / ``e2e_ms`` percentiles, ``output_tokens_per_s``, ``hit_tokens``
by source. A value that could not be measured is ``null`` and named in ``missing``; it is never 0.

Its parts stand beside it: figures with intervals (:mod:`.intervals`), windows (:mod:`.windows`), a step's steady
state (:mod:`.steady`), capacity at SLO (:mod:`.capacity`), tier health (:mod:`.tier_health`) and host telemetry
(:mod:`.host_telemetry`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from harness.core.exit_codes import VERDICT_EXIT_CODES
from harness.schema.base import SchemaModel as _Model
from harness.schema.capacity import CapacitySection
from harness.schema.cold_start import ColdStart, HitCheck, HitPrediction
from harness.schema.findings import Finding, ReasonCode, RuleKind, RuleStatus, SettlePlan
from harness.schema.host_telemetry import HostStep
from harness.schema.intervals import Percentiles, RatioCI
from harness.schema.prediction import Prediction
from harness.schema.steady import SteadyState
from harness.schema.tier_health import TierHealth
from harness.schema.validation import ValidationRecord
from harness.schema.value import ValueSection
from harness.schema.windows import WindowPoint

# 4: per tier arm ``effects`` (the deciding comparisons per step) and ``break_even``; additive, so summaries of
# versions 1-3 read as before (the new fields default to empty), while a harness that reads 3 refuses a 4 by its
# version (every part forbids unknown fields) instead of by an unknown field.
# 5: the run's ``value`` (what the tier is worth, with the scenario's ``value:``), per arm ``cold_start`` (proof of
# state at the arm's start) and ``hit_prediction`` (predicted vs measured tier hits), ``records_missing``; additive.
# 6: the bounds every comparison needs (``RuleResult.pass_bound`` / ``breach_bound``, ``reason_code``), per step
# ``sim_behind_s`` and ``host_contended``, the noise floor's host-contended A/A steps; per step ``steady_state``
# (the transient cut by MSER-5 and the window the comparisons use) and, on every ratio interval, the samples it
# compared (``n``, ``n_versus``) and whether it was ``paired``; additive. Ratios are now computed on the steady-state
# samples, unpaired in closed-loop steps, by a block bootstrap.
# 7: per arm ``findings`` (its reasons as data: a code, the role in the decision, the rule, step, interval and bound;
# harness.schema.findings) and, per open comparison, ``settle_plan`` (what more load would settle it, as figures);
# additive: older summaries read with no findings.
# 8: the decision card's figures as measured: per tier arm ``marginal`` value against the arm without its newest
# tier and the capacity's ``capacity_basis`` (search or step goodput), ``pair_confidence`` beside ``confidence``;
# ``cold_start.proof`` (proven / not-proven / warm), its ``actions`` and an engine ``reset``; the fit screen's
# ``hit_check`` (a relative bound on predicted tier hits); ``break_even.not_counted`` (why a step counted neither
# way); additive: older summaries read, their cold-start proof worked out from the old record.
SCHEMA_VERSION = 8
Decision = Literal["baseline", "go", "hold", "no-go", "slo-unmet", "failed", "skipped"]
Verdict = Literal["go", "hold", "no-go", "slo-unmet", "failed"]
EXIT_CODES = VERDICT_EXIT_CODES  # the one verdict -> exit status mapping, under the name the decision reads


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
    # vLLM's kv_offload_cpu_cache_usage_perc: the share of CPU-tier chunks pinned by in-flight transfers, NOT fullness
    cpu_tier_pinned_max: float | None = Field(default=None, validation_alias=AliasChoices(
        "cpu_tier_pinned_max", "cpu_tier_usage_max"))  # older summaries called it cpu_tier_usage_max
    cpu_tier_fill_max: float | None = None  # how full the host tier is, where the engine says (TensorRT-LLM)
    preemptions: float | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    offload_store_bytes: float | None = None
    offload_load_bytes: float | None = None
    disk_read_bytes: float | None = None
    disk_write_bytes: float | None = None
    # the GPU KV cache the server reported (vllm:cache_config_info num_gpu_blocks / block_size); None: not exposed
    num_gpu_blocks: int | None = None
    gpu_block_size: int | None = None
    scrapes: int = 0
    scrape_errors: int = 0
    missing: list[str] = Field(default_factory=list)
    tier_health: TierHealth = Field(default_factory=TierHealth)


class LoadProcessHealth(_Model):
    """One load process's own state during a step (a local worker, or a worker on another machine)."""

    rank: int = 0
    host: str = ""
    remote: bool = False  # joined the master from outside (``harness load-worker``)
    requests: int = 0
    cpu_percent: float | None = None  # 100 = one core
    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    saturated: bool = False


class ClientHealth(_Model):
    """The load generator's own state during a step, and the processes and machines that drove it."""

    cpu_percent: float | None = None
    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    saturated: bool = False
    note: str | None = None
    processes: int = 1  # load processes that sent this step's requests
    machines: int = 1  # distinct hosts among them
    remote_processes: int = 0
    per_process: list[LoadProcessHealth] = Field(default_factory=list)
    layout_note: str | None = None  # why this step used more processes than the one before (processes: auto)
    plan_fingerprint: str | None = None  # the request plan the step ran (the same whatever the process count)


class HitClassLatency(_Model):
    """TTFT for requests of one hit class (from per-request cached_tokens)."""

    hit_class: str  # mostly-cached | partial | recomputed
    requests: int
    ttft_ms: Percentiles


class HostContended(_Model):
    """A step over its host-contention budget (``rules.host_contention``): its figures are partly the host's (a
    simulator behind the wall clock, a saturated load generator), so it never decides a verdict and, in the A/A
    re-run, never sets the noise floor. Each figure is given with its budget."""

    sim_behind_s: float | None = None  # the simulator's time lost to its own CPU during the step
    sim_behind_share: float | None = None  # sim_behind_s / the step's duration
    max_sim_behind_share: float | None = None  # the budget it was held against
    client_saturated: bool = False  # the load generator was saturated (ClientHealth.note says how)
    message: str = ""  # the figures and the budgets, as a sentence


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
    first_token_delay_ms: Percentiles | None = None  # client delay, first token's arrival to parse (None: not recorded)
    host: HostStep | None = None  # host telemetry while the step ran (None: not sampled)
    planned_duration_s: float | None = None  # the step's fixed horizon
    ended_early: bool = False  # a sequential step stopped once its decision was settled
    stop_reason: str | None = None
    steady_state: SteadyState | None = None  # the transient cut and the comparisons' window (None: not computed)
    sim_behind_s: float | None = None  # the simulator's time lost to its own CPU in the step (None: not measured)
    host_contended: HostContended | None = None  # over the host-contention budget (None: within it, or unmeasured)




class RuleResult(_Model):
    """One rule's outcome for one arm."""

    rule: str
    kind: RuleKind
    status: RuleStatus
    critical: bool = False
    dry_run: bool = False
    step: int | None = None
    message: str
    interval: RatioCI | None = None  # the evidence, where the rule compares arms
    threshold: float | None = None  # what the interval was compared with
    shared_with_baseline: bool = False  # a budget breach the baseline shares (the SLO's problem, not the tier's)
    # The bounds a comparison's interval is held against, the step's noise floor included. Regression: pass when the
    # upper end <= pass_bound (max_ratio / floor), breach when the lower end > breach_bound (max_ratio x floor).
    # Earns its keep: pass when some lower end >= pass_bound (min_improvement x floor), breach (does not earn its
    # keep) when every upper end < breach_bound (the same figure).
    pass_bound: float | None = None
    breach_bound: float | None = None
    floor: float | None = None  # the noise floor inside those bounds (1 = none measured)
    # why a comparison could not decide: ``floor-above-tolerance`` (the noise floor exceeds the rule's tolerance, so
    # a pass would need a shown improvement), ``host-contended`` (a step over its host-contention budget)
    reason_code: ReasonCode | None = None


EffectOutcome = Literal["improvement shown", "short of the limit", "worse shown", "harm shown", "within limit",
                        "not settled", "not judged", "host-contended"]


class EffectRow(_Model):
    """One deciding comparison of a tier arm at one step, as the rule that made it measured it.

    ``test`` ``improvement`` (earns its keep): the arm against the arm without its newest tier, > 1 = better; it
    is shown when the interval's lower end reaches ``limit`` (``min_improvement`` x the step's noise floor).
    ``harm`` (a regression rule): the arm's percentile over the baseline's, > 1 = worse; harm is shown when the
    lower end exceeds ``limit`` (``max_ratio`` x floor), within the limit when the upper end is at most
    ``pass_limit`` (``max_ratio`` / floor). The interval is the rule's own (its family's confidence). Outcome
    ``host-contended``: a step over its host-contention budget, shown and never deciding."""

    rule: str
    test: Literal["improvement", "harm"]
    measure: str
    step: int
    label: str = ""
    concurrency: int | None = None
    rate_rps: float | None = None
    versus: str
    interval: RatioCI
    limit: float | None = None
    pass_limit: float | None = None
    limit_text: str = ""  # how the limit was made: "min_improvement 1.05 x noise floor 1.018"
    floor: float = 1.0  # the step's noise floor (A/A) the limit includes; 1 = none measured
    outcome: EffectOutcome
    deciding: bool = False  # the comparison that decided the arm (its first reason)
    n: int | None = None  # this arm's requests in the comparison
    n_versus: int | None = None
    source: str = ""  # where the figure came from (records, step, method)
    settle: str | None = None  # a comparison the evidence did not settle: what more load would, as measured
    settle_plan: SettlePlan | None = None  # the same as data (None for a settled comparison)
    reason_code: ReasonCode | None = None  # as RuleResult.reason_code: why the comparison could not decide


NotCountedReason = Literal["inside-noise-floor", "not-settled", "neither-shown", "not-judged", "host-contended"]


class NotCountedStep(_Model):
    """A step the break-even counts neither as improving nor as hurting, and why: ``inside-noise-floor`` (an
    improvement, a harm or a measure worse than the arm before that would have counted without the step's noise
    floor: ``row`` is that comparison, ``side`` which it would have been, ``needed`` the end its interval had to
    pass: ``lo >= needed`` for an improvement, ``hi < needed`` (``1 / floor``) for worse, ``lo > needed`` for harm);
    ``not-settled`` (an interval straddles its limit); ``neither-shown`` (every interval settled short of an
    improvement and within the harm limit); ``not-judged`` (too few requests); ``host-contended``."""

    step: int
    label: str = ""
    reason: NotCountedReason
    floor: float = 1.0  # the step's noise floor (A/A)
    side: Literal["improvement", "worse", "harm"] | None = None  # inside-noise-floor: what it would have shown
    needed: float | None = None
    row: EffectRow | None = None


class BreakEven(_Model):
    """Where along the rising steps a tier arm starts to pay, from its per-step comparisons (:class:`EffectRow`).

    ``improvement_from``: the row at the lowest step where an improvement is shown; ``harm_up_to``: the row at the
    highest step where harm is shown (a regression rule's breach, or a measure shown worse than the arm without the
    tier beyond the noise floor)."""

    status: Literal["helps-everywhere", "crossover", "helps-from", "harm-only", "never-shown", "mixed"]
    improvement_from: EffectRow | None = None
    harm_up_to: EffectRow | None = None
    improvement_steps: list[str] = Field(default_factory=list)  # step labels, in load order
    harm_steps: list[str] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)  # every step compared, in load order
    text: str = ""
    not_counted: list[NotCountedStep] = Field(default_factory=list)  # steps counted neither way, why, in load order


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

    phase: Literal["start", "readiness", "live-config", "step", "drill", "harness"]
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
    findings: list[Finding] = Field(default_factory=list)  # the reasons as data, deciding first (schema 7)
    cpu_tier_bytes: int = 0
    disk_tier_dirs: list[str] = Field(default_factory=list)
    launch: LaunchRecord | None = None
    steps: list[StepSummary] = Field(default_factory=list)
    rules: list[RuleResult] = Field(default_factory=list)
    windows: list[WindowPoint] = Field(default_factory=list)
    failure: ArmFailure | None = None
    effects: list[EffectRow] = Field(default_factory=list)  # the deciding comparisons per step (tier arms)
    break_even: BreakEven | None = None  # where the tier starts to pay (tier arms with compared steps)
    cold_start: ColdStart | None = None  # proof of state at the arm's start (None: not recorded)
    hit_prediction: HitPrediction | None = None  # predicted vs measured tier hits per step


class NoiseFloorItem(_Model):
    """The baseline against its own re-run (A/A) at one step and measure."""

    step: int
    measure: str
    interval: RatioCI
    host_contended: bool = False  # the baseline's or the re-run's step was host-contended: it sets no floor


class NoiseFloor(_Model):
    """Run-to-run drift measured by re-running the baseline at the end (A/A); effects inside it do not decide."""

    arm: str  # the re-run arm's name
    items: list[NoiseFloorItem] = Field(default_factory=list)
    steps: list[StepSummary] = Field(default_factory=list)  # the re-run's own step figures
    factor: float | None = None  # the largest A/A distance from 1 (as a ratio >= 1) over every step
    per_step: dict[int, float] = Field(default_factory=dict)  # step index -> that step's largest A/A distance
    message: str = ""
    host_contended: dict[int, str] = Field(default_factory=dict)  # step index -> why its A/A sets no floor (figures)


class LoadTime(_Model):
    """Load seconds used by measured steps against their fixed horizon (sequential steps end early)."""

    planned_s: float = 0.0
    used_s: float = 0.0
    steps_ended_early: int = 0
    steps: int = 0

    @property
    def saved_share(self) -> float:
        return 0.0 if self.planned_s <= 0 else max(0.0, 1.0 - self.used_s / self.planned_s)


class Statistics(_Model):
    """How the figures' intervals and the rules' tests were computed."""

    confidence: float = 0.95
    alpha: float = 0.05
    quantile_method: str = ""
    ratio_method: str = ""
    multiplicity: str = ""
    sequential: str | None = None


class CheckItem(_Model):
    """A pre-flight check result (from ``harness plan``)."""

    name: str
    level: Literal["ok", "warn", "error"]
    message: str
    arm: str | None = None


class FitItem(_Model):
    """One item of the 'is offload the wrong optimisation?' screen. ``evidence``: its sentence; an item made as
    data (``hit_check``: hit-prediction-agrees) has none, and the report stage makes its words from the figures."""

    name: str
    status: Literal["pass", "warn", "unknown"]
    evidence: str = ""
    hit_check: HitCheck | None = None  # hit-prediction-agrees: the bound and each tier share beyond it


class Summary(_Model):
    """The whole run."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    scenario: str
    scenario_hash: str
    engine: str
    model: str
    simulated: bool
    clock: Literal["real", "virtual"] = Field(default="real", description="virtual: the simulated engine and the load "
                                              "ran on one discrete-event clock in the harness process (no HTTP, no "
                                              "sleeping); real: servers and load in real time")
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
    validation: ValidationRecord | None = Field(default=None, description="the engine's own check of every arm "
                                                "before launch and what it resolved (None: not recorded)")
    drills: list[DrillResult] = Field(default_factory=list)
    noise_floor: NoiseFloor | None = None
    capacity: CapacitySection | None = None  # steps.search: informs, never changes the verdict
    value: ValueSection | None = None  # the scenario's value: section (GPUs needed and saved); informs only
    prediction: Prediction | None = None  # `harness predict`: a PREDICTED run on a named simulator profile
    load_time: LoadTime = Field(default_factory=LoadTime)
    statistics: Statistics = Field(default_factory=Statistics)
    warnings: list[str] = Field(default_factory=list)
    records_missing: list[str] = Field(default_factory=list, description="request records the journal counts but "
                                       "that cannot be read: the verdict is then failed (harness report exits 4)")
    missing_metrics: list[str] = Field(default_factory=list)
    host: dict[str, str | int | float | None] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)  # name -> path relative to the run directory

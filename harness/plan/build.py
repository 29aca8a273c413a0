"""``harness plan``: the arms, their exact launch commands and rendered configs, check results, estimated time.

The estimated time is on the clock the run will run on (:attr:`Plan.clock`): wall seconds on the real clock, modelled
seconds on the virtual clock (``engine.sim_clock: virtual``), where readiness is immediate and nothing sleeps, so
the wall time is the CPU time the simulator needs, not the estimate.

Secrets never appear in the plan: a secret flag's value is shown as ``***`` (:mod:`harness.secrets.flags`), and the
scenario's redactor (:mod:`harness.config.secret_values`) masks any other known secret in configs and check messages.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.config.scenario import Scenario
from harness.config.secret_values import scenario_redactor
from harness.config.steps import StepLevel
from harness.engines import build_launch_spec
from harness.engines.shm import shm_need
from harness.engines.spec import LaunchSpec
from harness.host.facts import HostFacts
from harness.plan.capacity import search_plan_lines
from harness.plan.checks.runner import Mode, has_errors, run_checks
from harness.plan.load_layout import describe_load, host_cores
from harness.plan.power import PowerInput, PowerPlan, plan_power, power_checks
from harness.plan.validate.runner import ValidateOptions, validate_scenario, validation_items
from harness.schema.summary import CheckItem
from harness.schema.validation import ArmValidation
from harness.secrets.flags import mask_argv, masked_command_line

# Typical seconds from launch to ready, for the estimate only.
READINESS_ESTIMATE_S = {"sim": 3.0, "vllm": 120.0, "trtllm": 180.0}


class ArmPlan(BaseModel):
    """One arm as it will be launched."""

    model_config = ConfigDict(extra="forbid")
    name: str
    tier: str
    offload: dict[str, Any]
    cpu_tier_bytes: int
    disk_tier_dirs: list[str]
    launcher: str
    command: str
    argv: list[str]
    image: str | None
    config_files: dict[str, str] = Field(default_factory=dict)
    env_keys: list[str] = Field(default_factory=list)
    volumes: list[str] = Field(default_factory=list, description="HOST:CONTAINER[:ro] (purpose), docker only")
    shm: str | None = Field(default=None, description="the /dev/shm the arm needs and gets, with the figures")
    container: list[str] = Field(default_factory=list, description="container settings: shm_size, ipc, ulimits")
    entrypoint_note: str | None = None
    server_url: str | None = Field(default=None, description="launcher external: the existing server the arm is "
                                   "measured on (no command: the harness does not start it)")
    error: str | None = None


class Plan(BaseModel):
    """The whole plan."""

    model_config = ConfigDict(extra="forbid")
    scenario: str
    source_file: str | None = None
    engine: str
    model: str
    simulated: bool
    arms: list[ArmPlan]
    steps: list[str]
    search: list[str] = Field(default_factory=list, description="the capacity search per arm (steps.search)")
    load: str | None = Field(default=None, description="load processes and machines per step (the load section)")
    checks: list[CheckItem]
    estimated_duration_s: float = Field(description="seconds the run should take on its clock (see clock)")
    clock: Literal["real", "virtual"] = Field(default="real", description="the clock of estimated_duration_s: "
                                              "wall seconds (real) or modelled seconds (virtual: not wall time)")
    duration_note: str | None = None
    validation: list[ArmValidation] | None = Field(default=None, description="the engine's own verdict per arm "
                                                   "(harness plan --validate)")
    power: PowerPlan | None = Field(default=None, description="requests per step and window, resolvable "
                                    "percentiles, smallest detectable effects (harness.plan.power)")
    ok: bool


def arm_launch_specs(scenario: Scenario, host_port: int | None = None) -> dict[str, LaunchSpec | str]:
    """Each arm's launch spec, or the reason it cannot be built."""
    out: dict[str, LaunchSpec | str] = {}
    for arm in scenario.arms:
        try:
            out[arm.name] = build_launch_spec(scenario.engine_for(arm), arm, host_port=host_port)
        except ValueError as exc:
            out[arm.name] = str(exc)
    return out


def run_clock(scenario: Scenario) -> Literal["real", "virtual"]:
    """The clock the run's durations are on: ``virtual`` (modelled seconds) for ``engine.sim_clock: virtual``."""
    return "virtual" if scenario.engine.kind == "sim" and scenario.engine.sim_clock == "virtual" else "real"


def estimate_duration_s(scenario: Scenario) -> tuple[float, str | None]:
    """Seconds the run should take on its clock (:func:`run_clock`): readiness + warm-up + steps + drains (and the
    capacity search) per arm, the baseline's A/A re-run (``rules.noise_floor.rerun_baseline``: its steps, no search),
    and the drills. On the virtual clock these are modelled seconds and readiness takes none."""
    instant = scenario.engine.effective_launcher == "external" or run_clock(scenario) == "virtual"  # one poll / none
    per_arm = (0.0 if instant else READINESS_ESTIMATE_S.get(scenario.engine.kind, 120.0)) + \
        scenario.steps.planned_duration_s()
    per_arm += 2.0 * len(scenario.steps.levels)  # step-boundary scrapes and drains, typical
    search = scenario.steps.search
    per_search = 0.0 if search is None else search.worst_case_s() + 2.0 * search.max_probes  # every other re-run
    rerun = per_arm if scenario.rules.noise_floor.rerun_baseline else 0.0  # the A/A re-run searches nothing
    drills = sum(d.before_s + d.during_s + d.after_s for d in scenario.drills)
    note = None
    if any(level.duration_s is None for level in scenario.steps.levels):
        note = "levels bounded only by a request count are not included in the estimate"
    return (per_arm + per_search) * len(scenario.arms) + rerun + drills, note


def step_text(level: StepLevel) -> str:
    """``c16 for 60 s``, ``c16 for 500 req``, ``c16 for 60 s or 500 req, whichever comes first``."""
    bounds = ([f"{level.duration_s:g} s"] if level.duration_s else []) + \
        ([f"{level.requests:,} req"] if level.requests else [])
    tail = ", whichever comes first" if len(bounds) > 1 else ""
    return f"{level.label} for {' or '.join(bounds)}{tail}"


def container_settings(spec: LaunchSpec) -> list[str]:
    """The container settings of a docker launch, as ``docker run`` would spell them."""
    out = [f"--shm-size {spec.shm_size}"] if spec.shm_size else []
    out += [f"--ipc {spec.ipc_mode}"] if spec.ipc_mode else []
    out += [f"--ulimit {k}={v}" for k, v in spec.ulimits.items()]
    return out


def build_plan(scenario: Scenario, *, host: HostFacts | None = None, mode: Mode = "plan",
               allow_unpinned: bool = False, validate: ValidateOptions | None = None,
               power: PowerInput | None = None) -> Plan:
    """Everything ``harness plan`` shows; with ``validate``, the engine's own verdict per arm too."""
    checks = run_checks(scenario, host=host, mode=mode, allow_unpinned=allow_unpinned)
    validation = validate_scenario(scenario, validate) if validate is not None else None
    checks += validation_items(scenario, validation or [])
    power_plan = plan_power(scenario, power)
    checks += power_checks(power_plan)
    specs = arm_launch_specs(scenario)
    redact = scenario_redactor(scenario)
    arms: list[ArmPlan] = []
    for arm in scenario.arms:
        spec = specs[arm.name]
        engine = scenario.engine_for(arm)
        base = {"name": arm.name, "tier": arm.tier, "offload": arm.offload.model_dump(),
                "cpu_tier_bytes": arm.cpu_tier_bytes(), "disk_tier_dirs": [t.root_dir for t in arm.fs_tiers()],
                "launcher": engine.effective_launcher, "image": engine.image}
        if isinstance(spec, str):
            arms.append(ArmPlan(**base, command="", argv=[], error=redact(spec)))
            checks.append(CheckItem(name="launch-spec", level="error", arm=arm.name, message=spec))
            continue
        if engine.effective_launcher == "external":  # an existing deployment: nothing is launched or sized here
            server = arm.server.base_url if arm.server is not None else None
            arms.append(ArmPlan(**{**base, "image": None}, command="", argv=[], server_url=server))
            continue
        volumes = [f"{v.host_path}:{v.container_path}{':ro' if v.read_only else ''} ({v.purpose})"
                   for v in spec.volumes] if engine.effective_launcher == "docker" else []
        docker = engine.effective_launcher == "docker"
        shm = shm_need(engine, arm)
        arms.append(ArmPlan(**base, command=masked_command_line(spec.argv()), argv=mask_argv(spec.argv()),
                            config_files={c.name: redact(c.content) for c in spec.config_files},
                            env_keys=sorted(spec.env), volumes=volumes,
                            shm=shm.why if shm.tier_bytes or docker else None,
                            container=container_settings(spec) if docker else [],
                            entrypoint_note=spec.entrypoint_note))
    duration, note = estimate_duration_s(scenario)
    return Plan(scenario=scenario.name, source_file=scenario.source_file, engine=scenario.engine.kind,
                model=scenario.engine.model,
                simulated=scenario.engine.kind == "sim", arms=arms,
                steps=[step_text(lvl) for lvl in scenario.steps.levels],
                search=search_plan_lines(scenario),
                load=describe_load(scenario.load, host_cores()),
                checks=[c.model_copy(update={"message": redact(c.message)}) for c in checks],
                estimated_duration_s=duration, clock=run_clock(scenario), duration_note=note, validation=validation,
                power=power_plan, ok=not has_errors(checks))

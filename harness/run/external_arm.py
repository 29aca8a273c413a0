"""External arms in a rollout: attach to the user's server instead of starting one, and the drills that would
restart it or lose its cache done with the user's commands (or skipped with the reason).

Attaching records a launch entry (``launcher: external``, the URLs, no command), waits until ``/v1/models`` lists
the served model within ``server.readiness_timeout_s`` (default ``engine.readiness_timeout_s``) and never writes a
compose file or a pid file, nor claims or empties a disk-tier directory: those live on the user's machine.
"""

from __future__ import annotations

import time

from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.launch.base import LaunchContext, RunningServer
from harness.launch.external import CommandResult, ExternalServer
from harness.launch.readiness import wait_ready
from harness.launch.registry import launcher_for
from harness.run.arm_handle import ArmHandle

NOT_MANAGED = "the harness does not manage this server"


def is_external(server: RunningServer | None) -> bool:
    """True for a server the harness attached to rather than started."""
    return isinstance(server, ExternalServer)


def attach(runner: ArmHandle) -> tuple[LaunchSpec, RunningServer]:
    """The arm's existing deployment, attached to (not waiting for it to be ready, :func:`wait_attached_ready`
    does)."""
    ctx, arm, engine = runner.ctx, runner.arm, runner.engine
    config = arm.server
    assert config is not None
    spec = build_launch_spec(engine, arm)
    timeout = config.readiness_timeout_s or engine.readiness_timeout_s
    spec = spec.model_copy(update={"readiness_timeout_s": timeout, "env": {}})
    lctx = LaunchContext(run_id=ctx.run_id, log_path=ctx.run.log(arm.name),
                         work_dir=ctx.run.root / "launch" / arm.name, secrets=ctx.secrets)
    return spec, launcher_for("external", server=config).start(spec, lctx)


def wait_attached_ready(runner: ArmHandle, spec: LaunchSpec, server: RunningServer) -> None:
    """Record the launch entry of the attached server, then wait until it is ready; raises LaunchError (phase
    ``readiness``) when it is not."""
    ctx, arm = runner.ctx, runner.arm
    config = arm.server
    assert config is not None
    identity = server.identity()
    what = f"external server at {config.base_url} (metrics {config.metrics}; not started, stopped or changed " \
        "by the harness)"
    ctx.record_arm(arm.name, "starting", command=what, external=identity)
    ctx.say(f"[{arm.name}] using the {what}")
    ctx.manifest["launches"].append({"arm": arm.name, "engine": spec.engine, "command": what, "argv": [],
                                     "image": None, "image_digest": None, "identity": identity, "env_keys": [],
                                     "volumes": [], "config_files": {}, "simulated": spec.simulated,
                                     "external": True,
                                     "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    ctx.save_manifest()
    waited = wait_ready(server, spec.readiness_timeout_s, cancel=ctx.cancel)
    ctx.record_arm(arm.name, "ready", seconds=round(waited, 3), identity=identity)
    ctx.say(f"[{arm.name}] ready after {waited:.1f} s at {server.base_url}")


def skip_reason(runner: ArmHandle, drill_kind: str) -> str | None:
    """Why a drill cannot run on this external arm (None: it can, or the arm is not external)."""
    config = runner.arm.server
    if config is None or not is_external(runner.server):
        return None
    if drill_kind == "restart" and not config.restart_command:
        return f"{NOT_MANAGED}: give server.restart_command to restart it for this drill"
    if drill_kind == "cache_loss" and not config.clear_cache_command:
        return f"{NOT_MANAGED}: give server.clear_cache_command to empty its offload tiers for this drill"
    if drill_kind == "storage_pressure":
        return f"{NOT_MANAGED}: storage pressure would write into its disk tier or change its settings"
    return None


def restart(runner: ArmHandle) -> CommandResult:
    """Run ``restart_command``, then wait until the server is ready again; raises LaunchError when it is not."""
    server = runner.server
    assert isinstance(server, ExternalServer) and runner.spec is not None
    result = server.run_command("restart_command", runner.ctx.cancel)
    runner.ctx.say(f"[{runner.arm.name}] {runner.ctx.redactor(result.message)}")
    if result.ok:
        wait_ready(server, runner.spec.readiness_timeout_s, cancel=runner.ctx.cancel)
    return result


def clear_cache(runner: ArmHandle) -> CommandResult:
    """Run ``clear_cache_command`` (the cache_loss drill's disruption)."""
    server = runner.server
    assert isinstance(server, ExternalServer)
    result = server.run_command("clear_cache_command", runner.ctx.cancel)
    runner.ctx.say(f"[{runner.arm.name}] {runner.ctx.redactor(result.message)}")
    return result


"""Start an arm's fresh server: claim and empty its disk tiers, build and record the launch, start, wait for ready.

A fresh arm starts with an empty disk tier (caches never carry over between arms or runs); a restart drill keeps it
(``keep_disk_tier``). Only directories the harness marked as its own are ever emptied (:mod:`harness.plan.checks.
disk_tier`). The command is recorded (secret flag values masked) before the start, so a launch that fails because
the engine refuses its config keeps its command; a compose file or shell script reproducing it is written next to
the run's other files. External deployments never come here (:mod:`harness.run.external_arm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.engine import EngineSpec
from harness.config.env_refs import resolve_env
from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.host import disk_tier
from harness.launch.base import LaunchContext, LaunchError, RunningServer
from harness.launch.readiness import wait_ready
from harness.launch.registry import launcher_for
from harness.run.arm_handle import ArmHandle
from harness.run.manifest import launch_entry
from harness.run.ports import free_port, port_is_free
from harness.secrets.flags import masked_command_line


@dataclass(frozen=True)
class FreshServer:
    """A server just started for the arm, not ready yet: the runner keeps ``spec`` and ``server`` before the wait for
    readiness, so a failure (or a forced stop) during the wait still stops it."""

    spec: LaunchSpec
    server: RunningServer
    manifest_entry: dict[str, Any]  # its launch entry in the manifest, completed once the server says who it is


def host_port(engine: EngineSpec) -> int:
    """The engine's configured port when it is free, else any free port."""
    if engine.port and port_is_free(engine.port, engine.host if ":" not in engine.host else "::1"):
        return engine.port
    return free_port()


def _prepare_disk_tiers(runner: ArmHandle, *, keep: bool) -> None:
    for tier in runner.arm.fs_tiers():
        try:
            disk_tier.claim(Path(tier.root_dir), runner.ctx.run_id)
            if not keep:
                removed = disk_tier.clear_contents(Path(tier.root_dir))
                if removed:
                    runner.ctx.say(f"[{runner.arm.name}] emptied disk tier {tier.root_dir} ({removed} entries "
                                   "from an earlier arm or run)")
        except (disk_tier.DiskTierError, OSError) as exc:
            raise LaunchError(f"disk tier: {exc}", phase="start") from None


def write_compose(runner: ArmHandle, spec: LaunchSpec) -> None:
    """A compose file reproducing a container launch; for a local process, a shell script with its command."""
    path = runner.ctx.run.compose(runner.arm.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if spec.image:
        from harness.launch.compose import write_compose as write_compose_file

        write_compose_file(spec, f"harness-{runner.arm.name}", path.parent, filename=path.name)
        return
    from harness.launch.compose import render_script

    path.with_suffix(".sh").write_text(render_script(spec), encoding="utf-8")


def start_fresh(runner: ArmHandle, *, keep_disk_tier: bool = False, port: int | None = None) -> FreshServer:
    """Start the arm's server (not waiting for it to be ready, :func:`wait_fresh_ready` does); raises LaunchError."""
    ctx, arm, engine = runner.ctx, runner.arm, runner.engine
    _prepare_disk_tiers(runner, keep=keep_disk_tier)
    spec = build_launch_spec(engine, arm, host_port=port or host_port(engine))
    spec = spec.model_copy(update={"env": resolve_env(spec.env)})
    launcher = launcher_for(engine.effective_launcher, allow_unpinned=ctx.allow_unpinned
                            or ctx.scenario.checks.allow_unpinned)
    lctx = LaunchContext(run_id=ctx.run_id, log_path=ctx.run.log(arm.name),
                         work_dir=ctx.run.root / "launch" / arm.name, secrets=ctx.secrets)
    shown = masked_command_line(spec.argv())
    ctx.record_arm(arm.name, "starting", command=shown)
    ctx.say(f"[{arm.name}] starting {spec.engine} ({engine.effective_launcher}): {shown}")
    entry = launch_entry(spec, {})
    ctx.manifest["launches"].append(entry)
    ctx.save_manifest()
    write_compose(runner, spec)
    return FreshServer(spec, launcher.start(spec, lctx), entry)


def wait_fresh_ready(runner: ArmHandle, fresh: FreshServer) -> None:
    """Record the started server's identity, then wait until it is ready; raises LaunchError."""
    ctx, arm, spec, server = runner.ctx, runner.arm, fresh.spec, fresh.server
    identity = server.identity()
    fresh.manifest_entry.update(launch_entry(spec, identity))
    ctx.save_manifest()
    waited = wait_ready(server, spec.readiness_timeout_s, cancel=ctx.cancel)
    ctx.record_arm(arm.name, "ready", seconds=round(waited, 3), identity=identity)
    ctx.say(f"[{arm.name}] ready after {waited:.1f} s at {server.base_url}")

"""Start an arm's fresh server: claim and empty its disk tiers, build and record the launch, start, wait for ready.

A fresh arm starts with an empty disk tier (caches never carry over between arms or runs); a restart drill keeps it
(``keep_disk_tier``). Only directories the harness marked as its own are ever emptied (:mod:`harness.plan.checks.
disk_tier`). The command is recorded (secret flag values masked) before the start, so a launch that fails because
the engine refuses its config keeps its command; a compose file or shell script reproducing it is written next to
the run's other files. External deployments never come here (:mod:`harness.run.external_arm`).

An engine whose disk-tier layout the harness does not know (vLLM's fs tier) writes into the tier inside a recorded
*session* (:mod:`harness.host.tier_ledger`): opened just before the launch, ended when the server is stopped (the
server is wrapped so that its ``stop`` ends it). Only what appeared in a session (or has the simulator's exact
layout) is ever emptied; anything else in the directory fails the arm.
"""

from __future__ import annotations

from collections.abc import Callable
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


class TierSessionServer:
    """A started server whose ``stop`` (and ``kill``) also ends its disk-tier sessions; everything else is the
    server's own."""

    def __init__(self, inner: RunningServer, end_sessions: Callable[[], None]) -> None:
        self._inner = inner
        self._end = end_sessions

    @property
    def spec(self) -> LaunchSpec:
        return self._inner.spec

    @spec.setter
    def spec(self, value: LaunchSpec) -> None:
        self._inner.spec = value

    @property
    def base_url(self) -> str:
        return self._inner.base_url

    def alive(self) -> bool:
        return self._inner.alive()

    def exit_description(self) -> str | None:
        return self._inner.exit_description()

    def log_tail(self, lines: int = 40) -> list[str]:
        return self._inner.log_tail(lines)

    def identity(self) -> dict[str, str]:
        return self._inner.identity()

    def stop(self, timeout_s: float = 20.0) -> None:
        try:
            self._inner.stop(timeout_s=timeout_s)
        finally:
            if not self._inner.alive():
                self._end()

    def __getattr__(self, name: str) -> Any:  # kill() and launcher-specific extras
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def _begin_sessions(runner: ArmHandle) -> Callable[[], None]:
    """Sessions for the arm's disk tiers (an engine whose tier layout the harness does not know); returns what ends
    them."""
    ends: list[Callable[[], None]] = []
    try:
        for tier in runner.arm.fs_tiers():
            ends.append(disk_tier.begin_session(Path(tier.root_dir), runner.engine.kind, runner.ctx.run_id))
    except (disk_tier.DiskTierError, OSError) as exc:
        for end in ends:
            end()
        raise LaunchError(f"disk tier: {exc}", phase="start") from None

    def end_all() -> None:
        for end in ends:
            end()

    return end_all


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
    if engine.kind == "sim" or not arm.fs_tiers():  # the simulator's tier layout is known exactly: no session
        return FreshServer(spec, launcher.start(spec, lctx), entry)
    end_sessions = _begin_sessions(runner)
    try:
        server = launcher.start(spec, lctx)
    except BaseException:
        end_sessions()
        raise
    return FreshServer(spec, TierSessionServer(server, end_sessions), entry)


def wait_fresh_ready(runner: ArmHandle, fresh: FreshServer) -> None:
    """Record the started server's identity, then wait until it is ready; raises LaunchError."""
    ctx, arm, spec, server = runner.ctx, runner.arm, fresh.spec, fresh.server
    identity = server.identity()
    fresh.manifest_entry.update(launch_entry(spec, identity))
    ctx.save_manifest()
    waited = wait_ready(server, spec.readiness_timeout_s, cancel=ctx.cancel)
    ctx.record_arm(arm.name, "ready", seconds=round(waited, 3), identity=identity)
    ctx.say(f"[{arm.name}] ready after {waited:.1f} s at {server.base_url}")

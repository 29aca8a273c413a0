"""Would ``harness sim serve`` start with an arm's flags? The simulator's own parser and start-up checks, run on the
flags :class:`~harness.engines.sim.SimAdapter` gives it, without serving anything.

The flags parse through the ``serve`` command's click context (typer's own parser: the types and defaults the
command line has), then :func:`harness.sim.cli.resolve_serve` builds the engine configuration exactly as a started
simulator does: the profile (``--profile`` / ``--profile-file``, read by :func:`harness.sim.profile.load_profile`),
the KV-cache arithmetic, the offload flags. ``harness plan`` uses it so that a profile file or a flag the simulator
would refuse is refused before any server starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.core.term import safe_text
from harness.engines.sim import SimAdapter
from harness.sim.cli import StartupError, UsageError, resolve_serve, sim_app
from harness.sim.profile import ProfileError, load_profile

# where it listens and writes (decided at launch), and a refusal asked for on purpose (--fail-start: a fault a test
# or a drill injects, which the run shows as the engine's own start-up failure)
_NOT_CHECKED = {"host", "port", "ground_truth", "fail_start"}


@dataclass(frozen=True)
class SimRefusal:
    """Why the simulator would not start: the message it prints and the flag at fault (``--profile-file``...)."""

    message: str
    flag: str | None


def _serve_params(args: list[str]) -> dict[str, Any] | SimRefusal:
    group: Any = typer.main.get_command(sim_app)  # typer's own click: no public type to check against
    command = group.commands["serve"]
    try:
        ctx = command.make_context("serve", list(args))
    except Exception as exc:  # click's usage errors (an unknown flag, a value of the wrong type)
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return SimRefusal(f"its flags do not parse: {safe_text(text)}", None)
    params = {k: v for k, v in ctx.params.items() if k not in _NOT_CHECKED}
    if params.get("served_model_name") is not None:
        params["served_model_name"] = list(params["served_model_name"])
    return params


def sim_refusal(engine: EngineSpec, arm: Arm) -> SimRefusal | None:
    """Why ``harness sim serve`` would refuse to start for ``arm`` (None when it would start)."""
    try:
        spec = SimAdapter().launch_spec(engine, arm)
    except ValueError:
        return None  # no flags to check: the plan's launch-spec error already says why
    params = _serve_params(list(spec.args))
    if isinstance(params, SimRefusal):
        return params
    try:
        resolve_serve(params)
    except UsageError as exc:
        return SimRefusal(safe_text(str(exc)), exc.param)
    except StartupError as exc:
        return SimRefusal(safe_text(str(exc)), None)
    return None


def sim_profile_data(engine: EngineSpec, base: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """The arm's simulator profile as the simulator reads it (:func:`harness.sim.profile.load_profile`), as plain
    data, and its label; None and why when the simulator would refuse it. A relative ``sim_profile_file`` missing
    from the working directory is looked up beside the scenario (``base``) too."""
    if engine.sim_profile_file:
        path = Path(engine.sim_profile_file).expanduser()
        if not path.is_absolute() and not path.exists() and base is not None:
            path = base / path
        label = f"simulator profile file {engine.sim_profile_file}"
        source: dict[str, Any] = {"path": path}
    else:
        label, source = f"simulator profile {engine.sim_profile}", {"name": engine.sim_profile}
    try:
        profile = load_profile(**source)
    except ProfileError as exc:
        return None, f"{label} ({safe_text(str(exc))})"
    return profile.model_dump(), label

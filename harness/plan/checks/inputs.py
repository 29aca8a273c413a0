"""Checks of what a scenario refers to outside itself: environment variables in ``engine.env`` and the trace file.

* ``env-refs``: every ``${NAME}`` in ``engine.env`` (and in an arm's ``engine.env`` override) is set in the
  harness's environment, or has a default (``${NAME:-default}``): an error in run (before any server starts),
  a warning in plan (plan may run on another machine than the run, as the GPU-runtime check assumes).
* ``trace``: ``harness plan`` reads ``workload.trace`` with the reader ``harness run`` replays it with
  (:func:`harness.workload.replay.load_trace`: the same file checks, line caps, JSON depth limit and length checks),
  so plan and run agree on the same file. ``harness run`` reads it before any server starts (its workload check),
  so this check runs in plan mode only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from harness.config.env_refs import parse_reference, unset_references
from harness.config.scenario import Scenario
from harness.host.facts import HostFacts
from harness.schema.summary import CheckItem
from harness.workload.replay import TraceLoadError, load_trace


def check_env_refs(scenario: Scenario, host: HostFacts, mode: Literal["plan", "run"]) -> list[CheckItem]:
    """A ``${NAME}`` in ``engine.env`` whose variable is not set: a warning in plan (the run may happen on
    another host, as with the GPU runtime), an error in run; names only, never values. Nothing when the scenario
    refers to no variable."""
    sources: list[tuple[str, str | None, dict[str, str]]] = [("engine.env", None, scenario.engine.env)]
    sources += [(f"arms[{i}].engine.env", arm.name, scenario.engine_for(arm).env)
                for i, arm in enumerate(scenario.arms) if "env" in arm.engine]
    environ = host.environ()
    refs = sorted({ref.name for _, _, env in sources for value in env.values()
                   if (ref := parse_reference(value)) is not None})
    out: list[CheckItem] = []
    for field, arm, env in sources:
        for key, name in unset_references(env, environ):
            out.append(CheckItem(name="env-refs", level="error" if mode == "run" else "warn", arm=arm,
                                 message=f"{field}.{key}: ${{{name}}} is not set in the harness's environment; "
                                 f"export {name}, or write ${{{name}:-default}} for a default"))
    if refs and not out:
        out.append(CheckItem(name="env-refs", level="ok", message="engine.env: the harness's environment sets "
                             + ", ".join(refs)))
    return out


def check_trace(scenario: Scenario, mode: Literal["plan", "run"]) -> list[CheckItem]:
    """Plan mode: read ``workload.trace`` as the run will; an error with the file and line when it cannot."""
    source = scenario.workload.trace
    if source is None or mode != "plan":
        return []
    base = Path(scenario.source_file).resolve().parent if scenario.source_file else Path.cwd()
    try:
        loaded = load_trace(source, max_model_len=scenario.engine.max_model_len, base_dir=base)
    except TraceLoadError as exc:
        return [CheckItem(name="trace", level="error", message=f"workload.trace: {exc}")]
    skipped = f"; {len(loaded.bad_lines)} bad line(s) skipped" if loaded.bad_lines else ""
    return [CheckItem(name="trace", level="warn" if loaded.bad_lines else "ok",
                      message=f"workload.trace: {loaded.path}: {len(loaded.requests)} request(s) to replay{skipped}")]

"""``sim-start``: every simulated arm's ``harness sim serve`` flags pass the simulator's own start-up checks.

The flags the simulator adapter gives each arm go through the ``serve`` command's parser and
:func:`harness.sim.cli.resolve_serve` (:mod:`harness.engines.sim_start`): the profile file (``engine.sim_profile_file``,
read as the simulator reads it: a bounded regular file of valid YAML that the profile model accepts), the KV-cache
arithmetic (memory left for the cache, ``max_model_len``), the offload flags and ``engine.sim_args``. What the
simulator would refuse is an error in ``plan`` and ``run``, before any server starts. Simulated arms only; an
external server is not started here.
"""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.engines.sim_start import sim_refusal
from harness.schema.summary import CheckItem

NAME = "sim-start"


def check_sim_start(scenario: Scenario) -> list[CheckItem]:
    """One error per simulated arm the simulator would refuse; one ok line when every one would start."""
    if scenario.engine.kind != "sim" or scenario.engine.effective_launcher == "external":
        return []
    refused: dict[str, list[str]] = {}  # message -> the arms it refuses (one line when every arm shares it)
    for i, arm in enumerate(scenario.arms):
        refusal = sim_refusal(scenario.engine_for(arm), arm)
        if refusal is None:
            continue
        if refusal.flag == "--profile-file":
            field = f"arms[{i}].engine.sim_profile_file" if "sim_profile_file" in arm.engine else \
                "engine.sim_profile_file"
            message = f"{field}: the simulator refuses it: {refusal.message}"
        else:
            message = f"the simulator would refuse to start: {refusal.message}"
        refused.setdefault(message, []).append(arm.name)
    out = [CheckItem(name=NAME, level="error", message=message,
                     arm=None if len(names) == len(scenario.arms) else ", ".join(names))
           for message, names in refused.items()]
    if not out:
        source = scenario.engine.sim_profile_file or f"profile {scenario.engine.sim_profile}"
        out.append(CheckItem(name=NAME, level="ok", message=f"every arm's simulator flags pass its start-up checks "
                             f"({source})"))
    return out

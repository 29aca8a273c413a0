"""``manifest.json``: versions, host, scenario hash, the clock (``real``, or ``virtual`` for a simulated engine on the
virtual clock) and the exact launch commands (environment NAMES only).

Commands are recorded with each secret flag's value replaced by ``***`` (:mod:`harness.secrets.flags`), so a
reviewer sees which flag was set; the run's redactor masks anything else when the manifest is saved.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from importlib import metadata
from typing import Any

import psutil

from harness.config.scenario import Scenario
from harness.core.version import __version__
from harness.engines.spec import LaunchSpec
from harness.secrets.flags import mask_argv, masked_command_line

_PACKAGES = ("httpx", "openai", "locust", "docker", "pandas", "pyarrow", "jinja2", "typer", "pydantic",
             "prometheus-client", "aiohttp", "numpy", "scipy")


def package_versions() -> dict[str, str]:
    """Versions of the harness and the libraries that shape its measurements."""
    out = {"harness": __version__, "python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def host_facts() -> dict[str, str | int | float | None]:
    """The host the run used."""
    vm = psutil.virtual_memory()
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "mem_total_bytes": int(vm.total), "mem_available_bytes": int(vm.available),
            "python": sys.version.split()[0]}


def launch_entry(spec: LaunchSpec, identity: dict[str, str]) -> dict[str, Any]:
    """What the manifest records about one launch (never env values, secret flag values masked)."""
    return {"arm": spec.arm, "engine": spec.engine, "command": masked_command_line(spec.argv()),
            "argv": mask_argv(spec.argv()),
            "image": spec.image, "image_digest": identity.get("image_digest") or spec.image_digest,
            "identity": identity, "env_keys": sorted(spec.env), "volumes": [v.model_dump() for v in spec.volumes],
            "config_files": {c.name: c.content for c in spec.config_files}, "simulated": spec.simulated,
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run_clock(scenario: Scenario) -> str:
    """``virtual`` for a simulated engine on the virtual clock, else ``real``."""
    return "virtual" if scenario.engine.kind == "sim" and scenario.engine.sim_clock == "virtual" else "real"


def new_manifest(run_id: str, scenario: Scenario, scenario_hash: str, scenario_path: str) -> dict[str, Any]:
    """The manifest at the start of a run; launches are added as arms start."""
    return {"run_id": run_id, "scenario": scenario.name, "scenario_file": scenario_path,
            "scenario_hash": scenario_hash, "engine": scenario.engine.kind, "model": scenario.engine.model,
            "simulated": scenario.engine.kind == "sim", "clock": run_clock(scenario),
            "versions": package_versions(), "host": host_facts(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "launches": [], "resumed": []}

"""Compose files that reproduce one arm's container by hand: ``docker-compose -p PROJECT -f FILE up``.

The rendered file is valid for docker-compose v1 (1.27+) and Compose v2: no ``version`` key, services at
``services``, GPUs through ``deploy.resources.reservations.devices``. Values are never written, so a file in a run
directory carries no secret: each environment variable becomes a ``${NAME}`` passthrough (names only), and a secret
flag's value (``--api-key``, ``--hf-token``; rule in :mod:`harness.secrets.flags`) becomes a ``${NAME}`` reference
to the variable that held it (else the flag's name, ``--hf-token`` -> ``HF_TOKEN``); the header names the variables
to export. :func:`render_script` does the same for a local process, as a ``/bin/sh`` script.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.engines.spec import LaunchSpec
from harness.host.docker_host import publish_host
from harness.host.labels import ARM_LABEL
from harness.launch.docker import ENGINE_LABEL
from harness.secrets.flags import mask_embedded, reference_name, value_slots

SERVICE = "engine"
CONFIG_DIR = "config"
HEALTH_INTERVAL_S = 10


def render_compose(spec: LaunchSpec, project: str, *, config_dir: str = CONFIG_DIR) -> str:
    """The compose file (YAML text) for one arm; config files are expected under ``./<config_dir>/``."""
    if not spec.image:
        raise ValueError(f"arm {spec.arm!r} has no image: a compose file needs engine.image")
    service: dict[str, Any] = {
        "image": spec.image if not spec.image_digest or "@" in spec.image else f"{spec.image}@{spec.image_digest}",
        "entrypoint": [_escape(a) for a in spec.entrypoint],
        "command": _command_with_references(spec.args),
        "init": True,
        "ports": [_port(spec)],
        "labels": {ARM_LABEL: spec.arm, ENGINE_LABEL: spec.engine},
        "healthcheck": _healthcheck(spec),
    }
    if spec.env:
        service["environment"] = {name: f"${{{name}}}" for name in sorted(spec.env)}
    volumes = [f"{v.host_path}:{v.container_path}{':ro' if v.read_only else ''}" for v in spec.volumes]
    volumes += [f"./{config_dir}/{c.name}:{c.container_path}:ro" for c in spec.config_files]
    if volumes:
        service["volumes"] = volumes
    if spec.shm_size:
        service["shm_size"] = spec.shm_size
    if spec.ipc_mode:
        service["ipc"] = spec.ipc_mode
    if spec.ulimits:
        service["ulimits"] = dict(spec.ulimits)
    gpu = _gpu_reservation(spec.gpus)
    if gpu is not None:
        service["deploy"] = {"resources": {"reservations": {"devices": [gpu]}}}
    doc: dict[str, Any] = {
        "x-kvoffload-harness": {"project": project, "arm": spec.arm, "engine": spec.engine,
                                "simulated": spec.simulated},
        "services": {SERVICE: service},
    }
    header = (f"# Reproduces arm {spec.arm!r} ({spec.engine}) as the harness launched it.\n"
              f"# Run: docker-compose -p {project} -f <this file> up   (or: docker compose ...)\n"
              "# Values are not recorded: export these variables first: "
              f"{' '.join(variables_to_export(spec)) or '(none)'}\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)


def write_compose(spec: LaunchSpec, project: str, directory: Path, *, filename: str | None = None) -> Path:
    """Write the compose file and the arm's rendered config files (under ``config/``) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for cfg in spec.config_files:
        target = directory / CONFIG_DIR / cfg.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(cfg.content, encoding="utf-8")
    path = directory / (filename or f"compose-{spec.arm}.yaml")
    path.write_text(render_compose(spec, project), encoding="utf-8")
    return path


def _escape(text: str) -> str:
    """Compose interpolates ``$``: a literal dollar is written ``$$``."""
    return text.replace("$", "$$")


def _with_references(args: list[str], quote: Callable[[str], str], ref: Callable[[str], str]) -> list[str]:
    """Each argument quoted for its reader, a secret flag's value replaced by a reference to its variable."""
    slots = value_slots(args)
    out = []
    for i, arg in enumerate(args):
        if i in slots:
            prefix, flag, value = slots[i]
            out.append((quote(prefix) if prefix else "") + ref(reference_name(flag, value)))
        else:
            out.append(quote(mask_embedded(arg)))  # secrets inside a JSON or URL value: masked
    return out


def _command_with_references(args: list[str]) -> list[str]:
    return _with_references(args, _escape, lambda name: f"${{{name}}}")


def variables_to_export(spec: LaunchSpec) -> list[str]:
    """The environment variables a reproduction of this launch reads (env names and secret flag references)."""
    flags = [reference_name(flag, value) for _, flag, value in value_slots(spec.argv()).values()]
    return sorted({*spec.env, *flags})


def render_script(spec: LaunchSpec) -> str:
    """A ``/bin/sh`` script reproducing a local-process launch: names only, secret flag values as references."""
    env = " ".join(f'{name}="${{{name}}}"' for name in sorted(spec.env))
    words = _with_references(spec.argv(), shlex.quote, lambda name: f'"${{{name}}}"')
    return ("#!/bin/sh\n# Reproduces this arm's local-process launch. Values are not recorded: export these "
            f"variables first: {' '.join(variables_to_export(spec)) or '(none)'}\n"
            + (f"{env} " if env else "") + " ".join(words) + "\n")


def _port(spec: LaunchSpec) -> str:
    bind = publish_host(spec.host)
    bind = f"[{bind}]" if ":" in bind else bind
    host_port = str(spec.host_port) if spec.host_port else ""
    return f"{bind}:{host_port}:{spec.container_port}"


def _healthcheck(spec: LaunchSpec) -> dict[str, Any]:
    url = f"http://127.0.0.1:{spec.container_port}{spec.readiness_path}"
    probe = f"import urllib.request; urllib.request.urlopen('{url}', timeout=5)"
    return {
        "test": ["CMD", "python3", "-c", _escape(probe)],
        "interval": f"{HEALTH_INTERVAL_S}s",
        "timeout": "5s",
        "retries": 3,
        "start_period": f"{int(spec.readiness_timeout_s)}s",
    }


def _gpu_reservation(gpus: str | None) -> dict[str, Any] | None:
    from harness.host.docker_host import device_requests

    requests = device_requests(gpus)
    if not requests:
        return None
    req = requests[0]
    device: dict[str, Any] = {"driver": "nvidia"}
    if req.get("DeviceIDs"):
        device["device_ids"] = list(req["DeviceIDs"])
    else:
        count = int(req.get("Count", -1))
        device["count"] = "all" if count < 0 else count
    device["capabilities"] = ["gpu"]
    return device

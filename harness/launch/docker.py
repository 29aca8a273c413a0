"""The Docker launcher: one arm's :class:`LaunchSpec` -> a labelled container, its logs copied (redacted) to disk.

The same code path serves vLLM, TensorRT-LLM and the simulator image. Ports are published on loopback only;
environment values reach the container but only their names are recorded; ``init=True`` so SIGTERM reaches the
server. A container that cannot start (for example a GPU request on a host without the NVIDIA runtime, which leaves
the container in ``Created`` state) is removed before :class:`LaunchError` is raised.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from pathlib import Path
from typing import Any

from docker import DockerClient
from docker.errors import DockerException, NotFound
from docker.models.containers import Container
from docker.types import Ulimit

from harness.engines.spec import LaunchSpec
from harness.host.docker_host import (
    GPU_DRIVER_ERROR,
    NO_GPU_RUNTIME,
    DockerUnavailable,
    ResolvedImage,
    connect,
    device_requests,
    publish_host,
    resolve_image,
)
from harness.host.labels import ARM_LABEL, OWNER_LABEL, RUN_LABEL
from harness.host.markers import write_marker
from harness.launch.base import LaunchContext, LaunchError
from harness.launch.containers import OWNER_VALUE, owner_labels, remove_labelled_containers
from harness.launch.errors import engine_error
from harness.launch.logpump import LogPump
from harness.secrets.redact import Redactor, secret_values

ENGINE_LABEL = "io.kvoffload-harness.engine"
LOG_LINES_KEPT = 2000  # in memory, for log_tail and the start-up error (vLLM's failure log is ~260 lines)
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_.-]+")


class DockerLauncher:
    """Starts servers as Docker containers through the Docker SDK."""

    kind = "docker"

    def __init__(self, client: DockerClient | None = None, *, allow_unpinned: bool = False, pull: bool = True) -> None:
        self._client = client
        self.allow_unpinned = allow_unpinned
        self.pull = pull

    @property
    def client(self) -> DockerClient:
        """The Docker client (connected on first use)."""
        if self._client is None:
            try:
                self._client = connect()
            except DockerUnavailable as exc:
                raise LaunchError(str(exc), phase="start") from exc
        return self._client

    def start(self, spec: LaunchSpec, ctx: LaunchContext) -> DockerServer:
        """Create and start the container; it is not yet ready. Raises LaunchError when it cannot start."""
        if not spec.image:
            raise LaunchError(f"arm {spec.arm!r}: the docker launcher needs engine.image", phase="start")
        try:
            image = resolve_image(self.client, spec.image, expected_digest=spec.image_digest,
                                  allow_unpinned=self.allow_unpinned, pull=self.pull)
            options = container_options(spec, ctx)
        except ValueError as exc:
            raise LaunchError(f"arm {spec.arm!r}: {exc}", phase="start") from exc
        try:
            container = self.client.containers.create(image.image_id, **options)
        except DockerException as exc:
            raise LaunchError(f"arm {spec.arm!r}: docker could not create the container: {_api_message(exc)}",
                              phase="start") from exc
        try:
            container.start()
        except DockerException as exc:
            message = _api_message(exc)
            _remove_quietly(container)
            if GPU_DRIVER_ERROR in message:
                raise LaunchError(f"arm {spec.arm!r}: {NO_GPU_RUNTIME}. Docker said: {message}",
                                  phase="start") from exc
            raise LaunchError(f"arm {spec.arm!r}: docker could not start the container: {message}",
                              phase="start") from exc
        except BaseException:  # interrupted between create and start: never leave the container behind
            _remove_quietly(container)
            raise
        try:
            return DockerServer(spec, ctx, container, image)
        except BaseException:
            _remove_quietly(container)
            raise

    def cleanup(self, run_id: str | None = None) -> list[str]:
        """Remove containers (any state) of one run, or (no run id) of runs whose harness process is gone."""
        return remove_labelled_containers(self.client, run_id=run_id)


class DockerServer:
    """A started container: address, liveness, logs, stop-and-remove."""

    def __init__(self, spec: LaunchSpec, ctx: LaunchContext, container: Container, image: ResolvedImage) -> None:
        self.spec = spec
        self.ctx = ctx
        self.container = container
        self.image = image
        self._removed = False
        self._state: dict[str, Any] = {}
        self._port = self._published_port()
        redactor = Redactor([*ctx.secrets, *secret_values(spec.env, include_process_env=False)])
        self._pump = LogPump(ctx.log_path, redactor, self._open_log_stream, keep_lines=LOG_LINES_KEPT)
        self._pump.start()

    @property
    def base_url(self) -> str:
        """Where the harness reaches the server (loopback, the published port)."""
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        return f"http://{host}:{self._port}"

    def alive(self) -> bool:
        """True while the container runs."""
        return self._refresh().get("Status") == "running"

    def exit_description(self) -> str | None:
        """How the container ended (exit code, OOM kill, error), or None while it runs."""
        state = self._refresh()
        if state.get("Status") == "running":
            return None
        parts = [f"container {state.get('Status', 'gone')}"]
        if state.get("ExitCode") is not None:
            parts.append(f"exit code {state['ExitCode']}")
        if state.get("OOMKilled"):
            parts.append("killed by the kernel OOM killer")
        if state.get("Error"):
            parts.append(str(state["Error"]))
        description = ", ".join(parts)
        if state.get("ExitCode") not in (None, 0) and state.get("Status") != "removed":
            self._pump.drain(2.0)
            cause = engine_error(self._pump.tail(LOG_LINES_KEPT))
            if cause:
                description += f" ({cause})"
        return description

    def log_tail(self, lines: int = 40) -> list[str]:
        """The last log lines (redacted); waits briefly for the last ones when the container has ended."""
        if self._removed or self._refresh().get("Status") not in ("running", None):
            self._pump.drain(2.0)
        return self._pump.tail(lines)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop (SIGTERM, SIGKILL after ``timeout_s``) and remove; the final logs are copied first. Idempotent."""
        if self._removed:
            return
        try:
            self._refresh()
            if self._state.get("Status") in ("running", "restarting", "paused"):
                self.container.stop(timeout=max(1, int(timeout_s)))
        except NotFound:
            pass
        except DockerException:
            pass  # a stop that timed out or failed: the forced removal below still ends it
        self._pump.finish(timeout_s=5.0)
        if not self._pump.copied_any():
            self._pump.copy_all(self._read_all_logs)
        self._refresh()  # keep how it ended (exit code) for exit_description
        _remove_quietly(self.container)
        self._removed = True
        self._state = {**self._state, "Status": "removed"}

    def identity(self) -> dict[str, str]:
        """What the manifest records: container id and name, image reference, id and digest."""
        return {
            "launcher": "docker",
            "container_id": str(self.container.id),
            "container_name": str(self.container.name or ""),
            "image": self.image.ref,
            "image_id": self.image.image_id,
            "image_digest": self.image.digest,
        }

    # --- internals ---------------------------------------------------------------------------------------------
    def _refresh(self) -> dict[str, Any]:
        if self._removed:
            return self._state
        try:
            self.container.reload()
            self._state = dict(self.container.attrs.get("State") or {})
        except NotFound:
            self._state = {"Status": "removed"}
        except DockerException:
            pass  # keep the last state seen; the daemon may be busy
        return self._state

    def _published_port(self) -> int:
        if self.spec.host_port:
            return self.spec.host_port
        try:
            self.container.reload()
            bindings = (self.container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
            entries = bindings.get(f"{self.spec.container_port}/tcp") or []
            return int(entries[0]["HostPort"])
        except (DockerException, LookupError, ValueError, TypeError) as exc:
            raise LaunchError(f"arm {self.spec.arm!r}: cannot read the published port: {exc}") from exc

    def _open_log_stream(self) -> Any:
        return self.container.logs(stream=True, follow=True, stdout=True, stderr=True)

    def _read_all_logs(self) -> bytes:
        try:
            return bytes(self.container.logs(stdout=True, stderr=True))
        except DockerException:
            return b""


def container_options(spec: LaunchSpec, ctx: LaunchContext) -> dict[str, Any]:
    """Keyword arguments for ``containers.create`` reproducing the spec (also writes rendered config files).

    Raises ValueError for a spec the launcher cannot honour (non-loopback host, bad gpus value, missing paths).
    """
    bind = publish_host(spec.host)
    volumes: dict[str, dict[str, str]] = {}
    for vol in spec.volumes:
        host = Path(vol.host_path).expanduser()
        if not host.is_absolute():
            raise ValueError(f"volume {vol.host_path!r} must be an absolute host path")
        if not host.exists():
            if vol.purpose == "config":
                raise ValueError(f"volume {vol.host_path!r} (config) does not exist")
            _make_owned_dir(host, ctx.run_id if vol.purpose == "disk-tier" else None)
        volumes[str(host)] = {"bind": vol.container_path, "mode": "ro" if vol.read_only else "rw"}
    if spec.config_files:
        ctx.work_dir.mkdir(parents=True, exist_ok=True)
    for cfg in spec.config_files:
        local = ctx.work_dir / cfg.name
        local.write_text(cfg.content, encoding="utf-8")
        volumes[str(local.resolve())] = {"bind": cfg.container_path, "mode": "ro"}
    options: dict[str, Any] = {
        "name": container_name(ctx.run_id, spec.arm),
        "entrypoint": spec.entrypoint,
        "command": spec.args,
        "environment": dict(spec.env),
        "labels": {RUN_LABEL: ctx.run_id, ARM_LABEL: spec.arm, OWNER_LABEL: OWNER_VALUE, ENGINE_LABEL: spec.engine,
                   **owner_labels()},
        "ports": {f"{spec.container_port}/tcp": (bind, spec.host_port or None)},
        "volumes": volumes,
        "device_requests": device_requests(spec.gpus),
        "shm_size": spec.shm_size,
        "init": True,
        "detach": True,
    }
    if spec.ipc_mode:  # docker refuses shm_size with ipc host: the adapters set one or the other
        options["ipc_mode"] = spec.ipc_mode
    if spec.ulimits:
        options["ulimits"] = [Ulimit(name=k, soft=v, hard=v) for k, v in spec.ulimits.items()]
    return options


def container_name(run_id: str, arm: str) -> str:
    """A unique, valid container name for one arm of one run."""
    base = _NAME_BAD.sub("-", f"kvoffload-{run_id}-{arm}").strip("-.")[:100]
    return f"{base}-{secrets.token_hex(3)}"


def _make_owned_dir(path: Path, marker_run_id: str | None) -> None:
    """Create a missing volume directory; a disk tier's (``marker_run_id`` given) gets the harness's marker."""
    try:
        path.mkdir(parents=True)
        if marker_run_id is not None:
            write_marker(path, marker_run_id)
    except FileExistsError:
        return  # made meanwhile by someone else: not ours to mark
    except OSError as exc:
        raise ValueError(f"cannot create the volume directory {path}: {exc.strerror or exc}") from None


def _remove_quietly(container: Container) -> None:
    try:
        container.remove(force=True, v=True)
    except NotFound:
        pass
    except DockerException:
        with contextlib.suppress(DockerException):  # one retry: the daemon may refuse while it still stops
            container.remove(force=True, v=True)


def _api_message(exc: DockerException) -> str:
    explanation = getattr(exc, "explanation", None)
    text = explanation.decode() if isinstance(explanation, bytes) else str(explanation or exc)
    return " ".join(text.split())

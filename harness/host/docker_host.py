"""The Docker host: connecting to the daemon, checking for a GPU runtime, resolving and pinning images.

Used by the Docker launcher, ``harness cleanup`` and the plan checks. Nothing here starts a container.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from dataclasses import dataclass

import docker
from docker import DockerClient
from docker.errors import DockerException, ImageNotFound
from docker.types import DeviceRequest
from docker.utils import parse_repository_tag

NVIDIA_TOOLKIT_URL = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
NO_GPU_RUNTIME = (
    "no NVIDIA container runtime on this host: install the NVIDIA Container Toolkit "
    f"({NVIDIA_TOOLKIT_URL}), run `nvidia-ctk runtime configure --runtime=docker` and restart dockerd; "
    "or run this scenario on a GPU host"
)
GPU_DRIVER_ERROR = "could not select device driver"
DEFAULT_API_TIMEOUT_S = 60
_DIGEST_REF = re.compile(r"@sha256:[0-9a-f]{64}$")
_DEVICE_IDS = re.compile(r"^(?:device=)?([A-Za-z0-9-]+(?:,[A-Za-z0-9-]+)*)$")


class DockerUnavailable(Exception):
    """The Docker daemon cannot be reached (SDK missing a socket, daemon down, permissions)."""


def connect(timeout_s: int = DEFAULT_API_TIMEOUT_S) -> DockerClient:
    """A client for the daemon named by the environment (DOCKER_HOST or the default socket), checked with a ping."""
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except DockerException as exc:
        raise DockerUnavailable(f"cannot reach the Docker daemon: {_first_line(exc)}") from exc
    except OSError as exc:  # pragma: no cover - socket errors the SDK does not wrap
        raise DockerUnavailable(f"cannot reach the Docker daemon: {exc}") from exc
    return client


def docker_available(client: DockerClient | None = None) -> tuple[bool, str]:
    """Whether a Docker daemon answers, with a one-line explanation either way."""
    try:
        c = client or connect()
        version = c.version()
    except (DockerUnavailable, DockerException, OSError) as exc:
        reason = str(exc) if isinstance(exc, DockerUnavailable) else f"cannot reach the Docker daemon: {exc}"
        return False, f"{_first_line(reason)} (is dockerd running and DOCKER_HOST right?)"
    return True, f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')})"


def gpu_runtime_available(client: DockerClient | None = None) -> tuple[bool, str]:
    """Whether containers can get NVIDIA GPUs here: the daemon knows an NVIDIA runtime or hook, and GPUs answer.

    Docker's ``--gpus`` needs the NVIDIA Container Toolkit: either an ``nvidia`` runtime registered with the daemon
    or ``nvidia-container-runtime-hook`` on the daemon's PATH. ``nvidia-smi -L`` (when present) must list a GPU.
    """
    ok, why = docker_available(client)
    if not ok:
        return False, why
    try:
        info = (client or connect()).info()
    except (DockerUnavailable, DockerException, OSError) as exc:
        return False, f"docker info failed: {_first_line(str(exc))}"
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    hook = shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-ctk")
    if "nvidia" not in runtimes and not hook:
        listed = ", ".join(runtimes) or "none"
        return False, f"{NO_GPU_RUNTIME} (docker info lists runtimes: {listed}; no nvidia-container-runtime-hook)"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, "the NVIDIA container runtime is installed but nvidia-smi is not: is the NVIDIA driver installed?"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"nvidia-smi -L failed: {exc}"
    gpus = [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
    if out.returncode != 0 or not gpus:
        detail = _first_line(out.stderr or out.stdout) or f"exit code {out.returncode}"
        return False, f"nvidia-smi lists no GPU: {detail}"
    runtime = "nvidia runtime" if "nvidia" in runtimes else "nvidia-container-runtime-hook"
    return True, f"{len(gpus)} GPU(s) via the {runtime}: {gpus[0]}"


def device_requests(gpus: str | None) -> list[DeviceRequest] | None:
    """Docker device requests for a spec's ``gpus`` value: None (no GPU), 'all', a count, or device ids.

    Follows ``docker run --gpus``: ``all`` and ``N`` are counts; ``0,1``, ``device=2`` or GPU UUIDs are ids.
    """
    if gpus is None:
        return None
    value = gpus.strip()
    if value.lower() == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if value.isdigit():
        count = int(value)
        return None if count == 0 else [DeviceRequest(count=count, capabilities=[["gpu"]])]
    match = _DEVICE_IDS.match(value)
    if match and ("," in value or value.startswith("device=") or value.startswith("GPU-")):
        return [DeviceRequest(device_ids=match.group(1).split(","), capabilities=[["gpu"]])]
    raise ValueError(f"gpus {gpus!r}: use 'all', a count such as '2', or device ids such as '0,1' or 'device=3'")


def is_pinned(image: str) -> bool:
    """True when an image reference names a digest or a version tag (not ``latest`` and not missing)."""
    if _DIGEST_REF.search(image):
        return True
    _, tag = parse_repository_tag(image)
    return tag is not None and tag != "latest"


@dataclass(frozen=True)
class ResolvedImage:
    """An image present on the host, with what the manifest records about it."""

    ref: str
    image_id: str
    digest: str     # the repository digest when the image came from a registry, else the image id
    pulled: bool


def resolve_image(client: DockerClient, ref: str, *, expected_digest: str | None = None,
                  allow_unpinned: bool = False, pull: bool = True) -> ResolvedImage:
    """Find ``ref`` locally or pull it; refuse unpinned references and digests that differ from ``expected``.

    Raises ValueError with a message fit for the user.
    """
    if not allow_unpinned and not is_pinned(ref):
        raise ValueError(f"image {ref!r} is not pinned: name a version tag (e.g. vllm/vllm-openai:v0.32.0) or a "
                         "digest, or set checks.allow_unpinned: true")
    pulled = False
    try:
        image = client.images.get(ref)
    except ImageNotFound:
        if not pull:
            raise ValueError(f"image {ref!r} is not on this host") from None
        repo, tag = parse_repository_tag(ref)
        try:
            if tag and tag.startswith("sha256:"):
                image = client.images.pull(f"{repo}@{tag}")
            else:
                image = client.images.pull(repo, tag=tag or "latest")
        except DockerException as exc:
            raise ValueError(f"image {ref!r} is not on this host and pulling it failed: {_first_line(str(exc))}") \
                from exc
        pulled = True
    except DockerException as exc:
        raise ValueError(f"cannot inspect image {ref!r}: {_first_line(str(exc))}") from exc
    image_id = str(image.id)
    repo_digests = [str(d) for d in image.attrs.get("RepoDigests") or []]
    digests = [d.split("@", 1)[1] for d in repo_digests if "@" in d]
    if expected_digest is not None and expected_digest not in digests and expected_digest != image_id:
        found = ", ".join([*digests, image_id])
        raise ValueError(f"image {ref!r} has digest(s) {found}, not the expected {expected_digest}")
    digest = expected_digest if expected_digest is not None else (digests[0] if digests else image_id)
    return ResolvedImage(ref=ref, image_id=image_id, digest=digest, pulled=pulled)


def _first_line(text: object) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def publish_host(host: str) -> str:
    """The loopback address to publish on; refuses anything else (servers are never exposed off the host)."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"engine.host {host!r} must be a loopback address such as 127.0.0.1") from None
    if not addr.is_loopback:
        raise ValueError(f"engine.host {host!r} is not loopback: the docker launcher publishes ports on "
                         "127.0.0.1 (or ::1) only")
    return str(addr)

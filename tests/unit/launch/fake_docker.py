"""A fake Docker SDK client: enough of ``DockerClient`` for the launcher and cleanup, recording every call."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Iterator
from typing import Any

from docker.errors import APIError, ImageNotFound, NotFound

_ids = itertools.count(1)


class FakeResponse:
    """What APIError expects as a response."""

    def __init__(self, status: int, reason: str = "Server Error") -> None:
        self.status_code = status
        self.reason = reason
        self.url = "http+docker://localhost/v1.41/containers/x/start"


class FakeStream:
    """A log stream: yields chunks, can be closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            if self.closed:
                return
            yield chunk

    def close(self) -> None:
        self.closed = True


class FakeContainer:
    def __init__(self, client: FakeClient, image: str, **options: Any) -> None:
        self.client = client
        self.id = f"c{next(_ids):063d}"
        self.name = options.get("name")
        self.options = options
        self.labels: dict[str, str] = dict(options.get("labels") or {})
        self.status = "created"
        self.exit_code: int | None = None
        self.oom = False
        self.calls: list[str] = []
        self.log_chunks: list[bytes] = list(client.log_chunks)
        self.image_ref = image

    @property
    def attrs(self) -> dict[str, Any]:
        ports = {}
        for key, (host, port) in ({} if self.client.hide_ports else self.options.get("ports") or {}).items():
            ports[key] = [{"HostIp": host, "HostPort": str(port or 49153)}]
        return {"State": {"Status": self.status, "ExitCode": self.exit_code, "OOMKilled": self.oom, "Error": ""},
                "NetworkSettings": {"Ports": ports}}

    def _check(self) -> None:
        if self not in self.client.created:
            raise NotFound("No such container")

    def reload(self) -> None:
        self._check()

    def start(self) -> None:
        self.calls.append("start")
        if self.client.start_error is not None:
            raise APIError("500 Server Error", response=FakeResponse(500),  # type: ignore[arg-type]
                           explanation=self.client.start_error)
        self.status = "running"

    def stop(self, timeout: float | None = None) -> None:
        self._check()
        self.calls.append(f"stop:{timeout}")
        self.status = "exited"
        self.exit_code = 143

    def remove(self, force: bool = False, v: bool = False) -> None:
        self._check()
        self.calls.append(f"remove:force={force}")
        self.client.created.remove(self)
        self.client.removed.append(self)

    def logs(self, stream: bool = False, follow: bool = False, **_: Any) -> Any:
        if stream:
            return FakeStream(self.log_chunks)
        return b"".join(self.log_chunks)


class FakeImage:
    def __init__(self, image_id: str, repo_digests: list[str]) -> None:
        self.id = image_id
        self.attrs = {"RepoDigests": repo_digests}


class FakeImages:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.local: dict[str, FakeImage] = {}
        self.pulls: list[tuple[str, str | None]] = []
        self.pullable: dict[str, FakeImage] = {}

    def get(self, ref: str) -> FakeImage:
        if ref in self.local:
            return self.local[ref]
        for image in self.local.values():
            if image.id == ref:
                return image
        raise ImageNotFound(f"No such image: {ref}")

    def pull(self, repo: str, tag: str | None = None) -> FakeImage:
        self.pulls.append((repo, tag))
        ref = f"{repo}:{tag}" if tag else repo
        if ref not in self.pullable:
            raise APIError(f"pull access denied for {repo}, repository does not exist")
        self.local[ref] = self.pullable[ref]
        return self.local[ref]


class FakeContainers:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def create(self, image: str, **options: Any) -> FakeContainer:
        container = FakeContainer(self.client, image, **options)
        self.client.created.append(container)
        return container

    def list(self, all: bool = False, filters: dict[str, Any] | None = None) -> list[FakeContainer]:
        self.client.list_filters.append(filters or {})
        wanted = (filters or {}).get("label", [])
        out = []
        for c in self.client.created:
            if not all and c.status != "running":
                continue
            if builtins.all(_label_matches(c.labels, w) for w in wanted):
                out.append(c)
        return out


def _label_matches(labels: dict[str, str], wanted: str) -> bool:
    key, _, value = wanted.partition("=")
    return key in labels and (not value or labels[key] == value)


class FakeClient:
    def __init__(self) -> None:
        self.created: list[FakeContainer] = []
        self.removed: list[FakeContainer] = []
        self.list_filters: list[dict[str, Any]] = []
        self.start_error: str | None = None
        self.hide_ports = False
        self.log_chunks: list[bytes] = []
        self.runtimes: dict[str, Any] = {"runc": {}}
        self.images = FakeImages(self)
        self.containers = FakeContainers(self)

    def add_image(self, ref: str, image_id: str = "sha256:" + "a" * 64, repo_digests: list[str] | None = None) -> None:
        self.images.local[ref] = FakeImage(image_id, repo_digests or [])

    def ping(self) -> bool:
        return True

    def version(self) -> dict[str, str]:
        return {"Version": "20.10.24", "ApiVersion": "1.41"}

    def info(self) -> dict[str, Any]:
        return {"Runtimes": self.runtimes}

"""The harness's containers: the labels that name a container's run and owner, finding them, and removing one run's
(or every stale) container. ``harness cleanup`` (:mod:`harness.run.cleanup`) and the Docker launcher use it."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the docker SDK is imported when a container is touched, so the CLI starts fast
    from docker import DockerClient
    from docker.models.containers import Container

from harness.host.labels import HOST_LABEL, OWNER_LABEL, PID_LABEL, RUN_LABEL, UID_LABEL
from harness.host.leftovers import container_leftovers, select
from harness.host.owner import current

OWNER_VALUE = "harness"


def owner_labels() -> dict[str, str]:
    """The labels naming this process as a container's owner (set at launch)."""
    me = current()
    return {HOST_LABEL: me.host, UID_LABEL: str(me.uid), PID_LABEL: me.text()}


def labelled_containers(client: DockerClient, run_id: str | None = None) -> list[Container]:
    """Containers (any state) labelled as the harness's, optionally of one run only."""
    labels = [f"{OWNER_LABEL}={OWNER_VALUE}"]
    if run_id is not None:
        labels.append(f"{RUN_LABEL}={run_id}")
    return list(client.containers.list(all=True, filters={"label": labels}))


def remove_container(container: Container) -> None:
    from docker.errors import NotFound

    with contextlib.suppress(NotFound):  # gone meanwhile
        container.remove(force=True, v=True)


def remove_labelled_containers(client: DockerClient, run_id: str | None = None, *,
                               dry_run: bool = False) -> list[str]:
    """Force-remove one run's containers (any owner), or, without ``run_id``, those whose harness process is gone;
    returns a line for each removed (or, dry run, found)."""
    items = container_leftovers(labelled_containers(client, run_id), remove_container)
    chosen = select(items, run_id=run_id, all_stale=run_id is None, force=True).remove
    for item in chosen if not dry_run else []:
        item.remove()
    return [f"{item.what} of run {item.run_id}" for item in chosen]

"""``harness cleanup``: remove what an interrupted run left behind, found by the labels the harness set.

Only containers carrying ``io.kvoffload-harness.owner=harness`` are touched (and, with ``--run-id``, only those of
that run), in any state: running, exited, or ``Created`` by a start that failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # the docker SDK is imported when cleanup runs, so the CLI starts fast
    from docker import DockerClient
    from docker.models.containers import Container

from harness.launch.base import ARM_LABEL, OWNER_LABEL, RUN_LABEL

OWNER_VALUE = "harness"


def labelled_containers(client: DockerClient, run_id: str | None = None) -> list[Container]:
    """Containers (any state) labelled as the harness's, optionally of one run only."""
    labels = [f"{OWNER_LABEL}={OWNER_VALUE}"]
    if run_id is not None:
        labels.append(f"{RUN_LABEL}={run_id}")
    return list(client.containers.list(all=True, filters={"label": labels}))


def describe(container: Container) -> str:
    """One line naming a container: name, short id, run, arm and state."""
    labels = container.labels or {}
    return (f"{container.name or '?'} ({str(container.id)[:12]}, run {labels.get(RUN_LABEL, '?')}, "
            f"arm {labels.get(ARM_LABEL, '?')}, {container.status})")


def remove_labelled_containers(client: DockerClient, run_id: str | None = None, *,
                               dry_run: bool = False) -> list[str]:
    """Force-remove the harness's containers; returns a description of each removed (or, dry run, found)."""
    from docker.errors import NotFound

    done: list[str] = []
    for container in labelled_containers(client, run_id):
        line = describe(container)
        if not dry_run:
            try:
                container.remove(force=True, v=True)
            except NotFound:
                continue  # gone meanwhile
        done.append(line)
    return done


def cleanup_command(
    run_id: Annotated[str | None, typer.Option("--run-id", help="only what this run left (default: every run)")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be removed; remove nothing")] = False,
) -> None:
    """Remove servers left by interrupted runs: containers (found by the harness's labels) and local processes
    (found by the pid files the process launcher keeps)."""
    from docker.errors import DockerException

    from harness.launch.docker_host import DockerUnavailable, connect
    from harness.launch.pidfiles import kill_leftovers

    procs = kill_leftovers(run_id, dry_run=dry_run)
    verb_p = "Would stop" if dry_run else "Stopped"
    for line in procs:
        typer.echo(f"{verb_p} {line}")
    try:
        client = connect()
    except DockerUnavailable as exc:
        typer.echo(f"Docker: {exc}; no containers checked.")
        return
    try:
        found = remove_labelled_containers(client, run_id, dry_run=dry_run)
    except DockerException as exc:
        typer.echo(f"Docker: listing or removing containers failed: {exc}", err=True)
        raise typer.Exit(4) from exc
    scope = f"run {run_id}" if run_id else "any run"
    if not found:
        typer.echo(f"No harness containers of {scope} found.")
        return
    verb = "Would remove" if dry_run else "Removed"
    typer.echo(f"{verb} {len(found)} container(s) of {scope}:")
    for line in found:
        typer.echo(f"  {line}")

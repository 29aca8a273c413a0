"""``harness cleanup``: remove what interrupted (killed) runs left behind, and never anything of a live run.

What it looks at: local server processes (this user's pid files, :mod:`harness.host.pidfiles`), containers labelled
``io.kvoffload-harness.owner=harness`` (any state), load-runner temporary directories, and per-step temporary
directories (``harness-step-*``: a step's spec with the server URL, model and paths; labelled with their harness
process and run id, :mod:`harness.host.tempdirs`; removed only once that process is gone, never a live run's).
Each is live, stale, unknown or gone (:mod:`harness.host.leftovers`). With no option it only lists them and removes
nothing; ``--all-stale`` removes every stale piece (the harness process that started it is gone); ``--run-id ID``
removes one run's pieces, and refuses (exit 2) while that run's harness still runs unless ``--force`` is given.
``--dry-run`` shows what either would remove. Containers without owner labels, or from another host or user, are
removed only with ``--run-id``. Servers of external arms (``engine.launcher: external``) have neither a pid file nor
labels: never touched."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Annotated

import typer

from harness.core.exit_codes import ExitCode
from harness.core.term import safe_text
from harness.host import pidfiles, tempdirs
from harness.host.leftovers import Leftover, Selection, container_leftovers, select
from harness.host.owner import process_alive
from harness.host.state import StateDirError, user_dir
from harness.launch.containers import labelled_containers, remove_container
from harness.load.runners import dir_owner, runner_dirs


def _process_leftovers(run_id: str | None) -> list[Leftover]:
    return [Leftover("process", r.run_id, r.state, r.describe(), r.why, functools.partial(pidfiles.stop, r),
                     removable=r.local) for r in pidfiles.records(run_id)]


def _runner_dir_leftovers() -> list[Leftover]:
    out = []
    for path in runner_dirs():
        owner = dir_owner(path)
        if owner is None:
            state, why = "unknown", "it has no owner record (an older harness made it)"
        elif process_alive(*owner):
            state, why = "live", f"its harness process {owner[0]} is running"
        else:
            state, why = "stale", f"its harness process {owner[0]} is gone"
        out.append(Leftover("runner-dir", "", state, f"load-runner temp dir {path}", why,
                            functools.partial(shutil.rmtree, path, ignore_errors=True)))
    return out


def _remove_step_dir(path: Path) -> None:
    tempdirs.remove_if_stale(path)  # checks again that its harness is gone


def _step_dir_leftovers(run_id: str | None) -> list[Leftover]:
    out = []
    for item in tempdirs.step_dirs():
        if run_id is not None and item.run_id != run_id:
            continue
        state = item.state
        why = {"unknown": "it has no owner record (an older harness made it)",
               "live": f"its harness process {item.pid} is running",
               "stale": f"its harness process {item.pid} is gone"}[state]
        out.append(Leftover("step-dir", item.run_id if state != "unknown" else "", state,
                            f"step temp dir {item.path}", why,
                            functools.partial(_remove_step_dir, item.path), removable=state == "stale"))
    return out


def _container_leftovers(run_id: str | None) -> tuple[list[Leftover], str | None]:
    from docker.errors import DockerException

    from harness.host.docker_host import DockerUnavailable, connect

    try:
        client = connect()
    except DockerUnavailable as exc:
        return [], f"Docker: {exc}; no containers checked."
    try:
        return container_leftovers(labelled_containers(client, run_id), remove_container), None
    except DockerException as exc:
        typer.echo(f"Docker: listing containers failed: {safe_text(str(exc))}", err=True)
        raise typer.Exit(ExitCode.FAILED) from exc


def _show(items: list[Leftover]) -> None:
    """Every leftover, grouped by run (load-runner directories last)."""
    runs = sorted({i.run_id for i in items if i.run_id})
    for run in runs:
        pieces = [i for i in items if i.run_id == run]
        states = {i.state for i in pieces}
        head = next((s for s in ("live", "stale", "unknown") if s in states), "gone")
        why = next(i.why for i in pieces if i.state == head)
        note = {"live": "left alone", "stale": "removable with --all-stale",
                "unknown": "removed only with --run-id", "gone": "only records left"}[head]
        typer.echo(f"  run {safe_text(run)}: {head}: {why}; {note}")
        for i in pieces:
            typer.echo(f"    {safe_text(i.what)}" + (f" [{i.state}]" if i.state != head else ""))
    notes = {"live": "left alone", "stale": "removable with --all-stale", "unknown": "left alone"}
    for i in items:
        if not i.run_id:
            typer.echo(f"  {safe_text(i.what)}: {i.state}: {i.why}; {notes.get(i.state, '')}")


def _act(chosen: Selection, *, dry_run: bool, run_id: str | None) -> None:
    if chosen.refused:
        owner = chosen.refused[0].why
        typer.echo(f"run {safe_text(run_id or '')} is still running ({owner} on this host); nothing was removed. "
                   "Stop that run first (Ctrl-C in its terminal), or pass --force to stop its servers anyway.",
                   err=True)
        raise typer.Exit(ExitCode.BAD_INPUT)
    verbs = {"process": ("Would stop", "Stopped"), "container": ("Would remove", "Removed"),
             "runner-dir": ("Would remove", "Removed"), "step-dir": ("Would remove", "Removed")}
    acted = 0
    for item in chosen.remove:
        if item.state == "gone":  # a record of a server that already exited: dropped quietly
            if not dry_run:
                item.remove()
            continue
        verb = verbs[item.kind][0 if dry_run else 1]
        if not dry_run:
            item.remove()
        acted += 1
        run = f" of run {safe_text(item.run_id)}" if item.run_id else ""
        typer.echo(f"{verb} {safe_text(item.what)}{run}")
    scope = f"run {safe_text(run_id)}" if run_id else "stale runs"
    if not acted:
        typer.echo(f"Nothing to remove for {scope}.")


def cleanup_command(
    run_id: Annotated[str | None, typer.Option("--run-id", help="remove what this run left (refused while its "
                                               "harness still runs, unless --force)")] = None,
    all_stale: Annotated[bool, typer.Option("--all-stale", help="remove what every run whose harness process is "
                                            "gone left")] = False,
    force: Annotated[bool, typer.Option("--force", help="with --run-id: also when that run's harness still "
                                        "runs (ends the run)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show what would be removed; remove nothing")] = False,
) -> None:
    """Remove servers left by interrupted runs: local processes (from the pid files the process launcher keeps),
    containers (found by the harness's labels), load-runner and per-step temp dirs. Without --run-id or --all-stale
    it only lists what it finds, live and stale, and removes nothing."""
    if force and run_id is None:
        typer.echo("--force needs --run-id: it names the one run whose live servers may be stopped", err=True)
        raise typer.Exit(ExitCode.BAD_INPUT)
    if run_id is not None and all_stale:
        typer.echo("give either --run-id or --all-stale, not both", err=True)
        raise typer.Exit(ExitCode.BAD_INPUT)
    try:
        where = user_dir()
        items = _process_leftovers(run_id)
    except StateDirError as exc:
        typer.echo(f"cleanup: {exc}", err=True)
        raise typer.Exit(ExitCode.BAD_INPUT) from exc
    items += [] if run_id is not None else _runner_dir_leftovers()
    items += _step_dir_leftovers(run_id)
    containers, note = _container_leftovers(run_id)
    items += containers
    if note:
        typer.echo(note)
    if run_id is None and not all_stale:
        shown = [i for i in items if i.state != "gone"]
        if not shown:
            typer.echo(f"Nothing left by harness runs (state: {Path(where)}).")
            return
        typer.echo(f"Left by harness runs (state: {Path(where)}):")
        _show(shown)
        typer.echo("Nothing was removed. Remove what is stale: harness cleanup --all-stale; one run: harness "
                   "cleanup --run-id RUN (add --dry-run to see first).")
        return
    _act(select(items, run_id=run_id, all_stale=all_stale, force=force), dry_run=dry_run, run_id=run_id)

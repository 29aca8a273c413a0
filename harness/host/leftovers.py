"""What runs left behind, and whether each piece may be removed: ``harness cleanup``'s selection, kept free of I/O
where it decides (unit-tested with fake containers).

Every leftover is ``live`` (the harness process that started it still runs: never touched unless its run is named
and ``--force`` given), ``stale`` (that process is gone), ``unknown`` (no owner labels, another host or another
user: never touched unless its run is named) or ``gone`` (a record of a server that already exited).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.host.labels import ARM_LABEL, HOST_LABEL, PID_LABEL, RUN_LABEL, UID_LABEL
from harness.host.owner import parse_pid_start, process_alive, this_host

Alive = Callable[..., bool]  # process_alive's signature: (pid, start, since_boot=None, boot="")


@dataclass(frozen=True)
class Leftover:
    """One server process, container or temporary directory (load runners, a step's spec) a run left."""

    kind: str        # process | container | runner-dir | step-dir
    run_id: str      # "" for a load-runner directory (it belongs to a harness process, not a run)
    state: str       # live | stale | unknown | gone
    what: str        # one line naming it
    why: str         # its owner, in words
    remove: Callable[[], None]
    removable: bool = True  # False: a record of another host's server (its pid means nothing here)


@dataclass(frozen=True)
class Selection:
    """What a cleanup removes, and the live pieces that stopped it (``--run-id`` of a live run, no ``--force``)."""

    remove: list[Leftover]
    refused: list[Leftover]


def container_owner(labels: Mapping[str, str], *, host: str | None = None, uid: int | None = None,
                    alive: Alive = process_alive) -> tuple[str, str]:
    """(state, why) of a harness-labelled container from its owner labels."""
    here, me = host or this_host(), os.getuid() if uid is None else uid
    owner = parse_pid_start(labels.get(PID_LABEL, ""))
    if owner is None or HOST_LABEL not in labels or UID_LABEL not in labels:
        return "unknown", "it has no owner labels (an older harness made it, or someone by hand)"
    if labels[HOST_LABEL] != here:
        return "unknown", f"a harness on host {labels[HOST_LABEL][:100]!r} started it"
    if labels[UID_LABEL] != str(me):
        return "unknown", f"another user's (uid {labels[UID_LABEL][:20]}) harness started it"
    if alive(*owner):
        return "live", f"its harness process {owner[0]} is running"
    return "stale", f"its harness process {owner[0]} is gone"


def describe_container(container: Any) -> str:
    """One line naming a container: name, short id, arm and state."""
    labels = container.labels or {}
    return (f"container {container.name or '?'} ({str(container.id)[:12]}, arm {labels.get(ARM_LABEL, '?')}, "
            f"{container.status})")


def container_leftovers(containers: Iterable[Any], remove: Callable[[Any], None], *, host: str | None = None,
                        uid: int | None = None, alive: Alive = process_alive) -> list[Leftover]:
    """Harness-labelled containers as leftovers (``remove(container)`` removes one)."""
    out = []
    for c in containers:
        labels = dict(c.labels or {})
        status, why = container_owner(labels, host=host, uid=uid, alive=alive)
        out.append(Leftover("container", str(labels.get(RUN_LABEL, "?"))[:200], status, describe_container(c), why,
                            functools.partial(remove, c)))
    return out


def select(items: Iterable[Leftover], *, run_id: str | None, all_stale: bool, force: bool) -> Selection:
    """With ``run_id``: that run's pieces (refused while its harness is live, unless ``force``); with
    ``all_stale``: every stale piece and dead record; otherwise nothing."""
    items = list(items)
    if run_id is not None:
        mine = [i for i in items if i.run_id == run_id and i.removable]
        live = [i for i in mine if i.state == "live"]
        if live and not force:
            return Selection([], live)
        return Selection(mine, [])
    if all_stale:
        return Selection([i for i in items if i.state in ("stale", "gone") and i.removable], [])
    return Selection([], [])

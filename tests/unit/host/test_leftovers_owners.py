"""Container selection of ``harness cleanup``: only containers whose harness process is gone (on this host, of this
user) are stale; owner-less, other-host and other-user containers are removed only when their run is named; a live
run's containers only with --force."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.host.labels import HOST_LABEL, OWNER_LABEL, PID_LABEL, RUN_LABEL, UID_LABEL
from harness.host.leftovers import container_leftovers, container_owner, select

HOST, UID = "node-a", 1000
LIVE_PID, DEAD_PID = 111, 222


def alive(pid: int, start: float, *_boot: object) -> bool:
    return pid == LIVE_PID and start == 5.0


@dataclass
class Box:
    """A fake container: labels, name, id, status; records removal."""

    name: str
    labels: dict[str, str]
    id: str = "0123456789abcdef"
    status: str = "running"
    removed: list[str] = field(default_factory=list)


def labels(run: str, *, host: str = HOST, uid: int = UID, pid: int = DEAD_PID) -> dict[str, str]:
    return {OWNER_LABEL: "harness", RUN_LABEL: run, HOST_LABEL: host, UID_LABEL: str(uid), PID_LABEL: f"{pid}:5.000"}


def test_owner_states() -> None:
    assert container_owner(labels("r", pid=LIVE_PID), host=HOST, uid=UID, alive=alive)[0] == "live"
    state, why = container_owner(labels("r"), host=HOST, uid=UID, alive=alive)
    assert state == "stale" and f"{DEAD_PID} is gone" in why
    state, why = container_owner(labels("r", host="node-b"), host=HOST, uid=UID, alive=alive)
    assert state == "unknown" and "node-b" in why
    state, why = container_owner(labels("r", uid=7), host=HOST, uid=UID, alive=alive)
    assert state == "unknown" and "uid 7" in why
    state, why = container_owner({OWNER_LABEL: "harness", RUN_LABEL: "r"}, host=HOST, uid=UID, alive=alive)
    assert state == "unknown" and "no owner labels" in why
    garbled = {**labels("r"), PID_LABEL: "not-a-pid"}
    assert container_owner(garbled, host=HOST, uid=UID, alive=alive)[0] == "unknown"


def _items(boxes: list[Box], gone: list[str]) -> list:  # type: ignore[type-arg]
    return container_leftovers(boxes, lambda b: gone.append(b.name), host=HOST, uid=UID, alive=alive)


def test_selection_rules() -> None:
    boxes = [Box("live", labels("r-live", pid=LIVE_PID)), Box("stale", labels("r-stale")),
             Box("other-host", labels("r-other", host="node-b")), Box("bare", {OWNER_LABEL: "harness",
                                                                                RUN_LABEL: "r-bare"})]
    gone: list[str] = []
    items = _items(boxes, gone)
    assert select(items, run_id=None, all_stale=False, force=False).remove == []  # the default lists only
    chosen = select(items, run_id=None, all_stale=True, force=False)
    assert [i.what.split()[1] for i in chosen.remove] == ["stale"]
    for run in ("r-other", "r-bare", "r-stale"):
        assert [i.run_id for i in select(items, run_id=run, all_stale=False, force=False).remove] == [run]
    refused = select(items, run_id="r-live", all_stale=False, force=False)
    assert refused.remove == [] and [i.run_id for i in refused.refused] == ["r-live"]
    forced = select(items, run_id="r-live", all_stale=False, force=True)
    assert [i.run_id for i in forced.remove] == ["r-live"]
    forced.remove[0].remove()
    assert gone == ["live"]

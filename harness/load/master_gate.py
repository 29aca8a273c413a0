"""The master's gate: a step's fixed set of workers, their set-up and their clocks (gevent-patched processes only).

Once the master has counted the step's workers, :class:`WorkerGate` fixes the set: a worker that connects later is
refused (acknowledged, then told to quit, so locust never hands it users) and the refusal is said in the step's
layout note. Each worker of the set gets the step's spec and its rank and answers ``READY`` with the fingerprint of
the plan it built; an error, a missing fingerprint or a different one refuses the step before any request is sent.
Then each worker's monotonic clock is measured against the master's (:mod:`harness.load.clocks`). The gate also
notes when each worker was last heard from (any message, locust's heartbeats included) and its last progress beat,
for the master's watch (:mod:`harness.load.master_watch`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import gevent
from locust.rpc import Message

from harness.load import protocol as msg_type
from harness.load.clocks import PINGS, ClockOffset, describe, estimate

REFUSE_QUIT_DELAY_S = 1.0  # the late worker's handshake returns before it is told to quit
CLOCK_ROUND_S = 2.0
SETUP_RESEND_S = 1.0


class WorkerGate:
    """Admission, set-up and clocks of one step's workers (``ranks``: worker id -> rank, once fixed)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.ranks: dict[str, int] = {}
        self.fixed = False
        self.refused: list[str] = []
        self.ready: dict[str, dict[str, Any]] = {}
        self.samples: defaultdict[str, list[tuple[int, int, int]]] = defaultdict(list)
        self.offsets: dict[str, ClockOffset] = {}
        self.last_seen: dict[str, float] = {}
        self.beats: dict[str, dict[str, Any]] = {}
        self._pending_seq: dict[str, int] = {}
        self._handle = runner.handle_message
        runner.handle_message = self._gated
        runner.register_message(msg_type.READY, self._on_ready)
        runner.register_message(msg_type.CLOCK, self._on_clock)
        runner.register_message(msg_type.BEAT, self._on_beat)

    # --- admission -------------------------------------------------------------------------------------------
    def fix(self, ranks: dict[str, int]) -> None:
        """From now on only these workers take part."""
        self.ranks = dict(ranks)
        self.fixed = True
        now = time.monotonic()
        self.last_seen = dict.fromkeys(ranks, now)

    def _gated(self, client_id: str, msg: Any) -> None:
        if self.fixed and client_id not in self.ranks:
            if msg.type == "client_ready" and client_id not in self.refused:
                self._refuse(client_id)
            return  # a refused worker's stats and heartbeats are not locust's business
        if client_id in self.last_seen:
            self.last_seen[client_id] = time.monotonic()
        self._handle(client_id, msg)

    def _refuse(self, client_id: str) -> None:
        self.refused.append(client_id)
        server = self.runner.server
        server.send_to_client(Message("ack", {"index": -1}, client_id))  # type: ignore[no-untyped-call]
        quit_msg = Message("quit", None, client_id)  # type: ignore[no-untyped-call]
        gevent.spawn_later(REFUSE_QUIT_DELAY_S, _quiet_send, server, quit_msg)

    def refusal_note(self) -> str | None:
        """The layout note for workers refused mid-step (None: none came)."""
        if not self.refused:
            return None
        shown = ", ".join(self.refused[:4]) + (f" and {len(self.refused) - 4} more" if len(self.refused) > 4 else "")
        return (f"{len(self.refused)} load worker(s) connected after the step's workers were fixed and were refused "
                f"(they ran nothing): {shown}")

    # --- set-up ----------------------------------------------------------------------------------------------
    def _on_ready(self, environment: Any, msg: Any, **_: Any) -> None:
        if msg.node_id in self.ranks:
            self.ready[msg.node_id] = dict(msg.data or {})

    def set_up(self, spec_json: dict[str, Any], timeout_s: float, stopping: Any) -> str | None:
        """Send every worker its spec and rank; wait for every ``READY``. Returns an error, or None."""
        nprocs = len(self.ranks)
        deadline = time.monotonic() + timeout_s
        sent_at: dict[str, float] = {}
        while len(self.ready) < nprocs and time.monotonic() < deadline and not stopping.is_set():
            gone = [cid for cid in self.ranks if cid not in self.ready and cid not in self.runner.clients]
            if gone:
                return f"load worker(s) {', '.join(self.named(c) for c in sorted(gone))} left before the step started"
            now = time.monotonic()
            for cid, rank in self.ranks.items():
                # sent again until answered: a message that reaches a worker that has only just connected, before
                # its handler is registered, is dropped by locust (a worker without its set-up once stalled a step)
                if cid not in self.ready and now - sent_at.get(cid, -SETUP_RESEND_S) >= SETUP_RESEND_S:
                    self.runner.send_message(msg_type.SETUP, {"spec": spec_json, "rank": rank, "nprocs": nprocs},
                                             client_id=cid)
                    sent_at[cid] = now
            gevent.sleep(0.05)
        silent = sorted(cid for cid in self.ranks if cid not in self.ready)
        if silent and not stopping.is_set():
            return (f"load worker(s) {', '.join(self.named(c) for c in silent)} did not confirm the step's set-up "
                    f"within {timeout_s:g} s")
        return None

    def check_plans(self, planned: str) -> str | None:
        """Refuse the step when a worker could not plan it, reports no fingerprint, or another one."""
        problems = []
        for cid in sorted(self.ready, key=lambda c: self.ranks[c]):
            data = self.ready[cid]
            fp = data.get("plan_fingerprint")
            if data.get("error"):
                problems.append(f"{self.named(cid)} could not plan the step: {str(data['error'])[:300]}")
            elif not isinstance(fp, str) or not fp:
                problems.append(f"{self.named(cid)} reported no plan fingerprint (another harness version?)")
            elif fp != planned:
                problems.append(f"{self.named(cid)} planned different requests than the master (plan fingerprint "
                                f"{fp[:12]}, the master's {planned[:12]})")
        if not problems:
            return None
        return ("load worker(s) refused, no request was sent: " + "; ".join(problems) +
                ": run the same harness version, with the same trace file, on every machine")

    def broadcast(self, kind: str, data: dict[str, Any]) -> None:
        """One message to every worker of the step (never to a refused one)."""
        for cid in self.ranks:
            _quiet_send(self.runner.server, Message(kind, data, cid))  # type: ignore[no-untyped-call]

    def named(self, cid: str) -> str:
        """``rank R (worker id)``."""
        return f"rank {self.ranks.get(cid, '?')} ({cid})"

    # --- clocks ----------------------------------------------------------------------------------------------
    def _on_clock(self, environment: Any, msg: Any, **_: Any) -> None:
        back = time.perf_counter_ns()
        data = msg.data or {}
        cid = msg.node_id
        try:
            seq, sent, worker = int(data["seq"]), int(data["t"]), int(data["w"])
        except (KeyError, TypeError, ValueError):
            return
        if self._pending_seq.get(cid) == seq:
            self.samples[cid].append((sent, worker, back))
            self._pending_seq.pop(cid, None)

    def sync_clocks(self, stopping: Any) -> list[str]:
        """Measure every worker's clock (:data:`PINGS` rounds); returns the layout notes worth making."""
        for seq in range(PINGS):
            for cid in self.ranks:
                self._pending_seq[cid] = seq
                self.runner.send_message(msg_type.CLOCK, {"seq": seq, "t": time.perf_counter_ns()}, client_id=cid)
            deadline = time.monotonic() + CLOCK_ROUND_S
            while self._pending_seq and time.monotonic() < deadline and not stopping.is_set():
                gevent.sleep(0.001)
            self._pending_seq.clear()
        notes = []
        for cid, rank in sorted(self.ranks.items(), key=lambda kv: kv[1]):
            clock = estimate(self.samples.get(cid, []))
            if clock is None:
                notes.append(f"{self.named(cid)}: its clock could not be measured; its records are taken as they are")
                continue
            self.offsets[cid] = clock
            note = describe(rank, cid, clock)
            if note:
                notes.append(note)
        return notes

    def offset_ns(self, cid: str) -> int:
        """What to add to this worker's monotonic readings (0: the same clock, or not measured)."""
        clock = self.offsets.get(cid)
        return clock.offset_ns if clock is not None else 0

    # --- progress --------------------------------------------------------------------------------------------
    def _on_beat(self, environment: Any, msg: Any, **_: Any) -> None:
        if msg.node_id in self.ranks:
            self.beats[msg.node_id] = dict(msg.data or {})

    def progress(self, cid: str, now: float) -> str:
        """What the master last heard from this worker, in words."""
        beat = self.beats.get(cid)
        seen = now - self.last_seen.get(cid, now)
        if beat is None:
            return f"{self.named(cid)}: no progress report at all, last message {seen:.1f} s ago"
        return (f"{self.named(cid)}: {beat.get('done', '?')} of {beat.get('expected', '?')} users done, "
                f"{beat.get('requests', '?')} requests, last message {seen:.1f} s ago")


def _quiet_send(server: Any, message: Any) -> None:
    try:
        server.send_to_client(message)
    except Exception:  # the refused worker may be gone already
        return

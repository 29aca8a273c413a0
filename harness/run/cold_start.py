"""Proof of state: at an arm's start, before the token calibration and the warm-up, show that the server is cold.

The record (``ColdStart``, journaled in ``arms.jsonl`` as ``cold-start`` and read back by
:mod:`harness.decision.cold_start`) carries ``proof``: ``proven``, ``warm`` or ``not-proven``, and ``actions``: what
the harness did to make the start cold (``fresh-process`` and ``emptied-disk-tier`` for a server it started,
``engine-reset`` for an attached server it reset). A check proves only what it can fail at:

* **counters** — the server's prefix-cache and offload-tier hit counters (the catalog's ``hit_tokens.*``) read zero.
  This is the check that proves a start: without it (no series exposed, ``/metrics`` unreadable) the start is
  ``not-proven``, whatever the harness did; a series the server does not expose is named, never read as 0;
* **disk tier** — every fs tier directory of the arm holds no file but the harness's own marker (a fresh arm's tier
  is emptied before the start, :mod:`harness.run.arm_server`; this reads it, read-only, after the server is up); a
  tier that could not be read leaves the start ``not-proven``;
* **probe** — one request whose prompt starts with a random nonce sees no cached tokens
  (``usage.prompt_tokens_details.cached_tokens`` where the server reports it) and does not move the hit counters.
  Nothing can share a block with it, so it sees 0 on a warm server too: it can only show a broken server warm,
  never a start cold.

An attached server whose arm asks for ``server.cold_start: engine-reset`` is reset through the engine's own endpoint
and proven by a canary instead (:mod:`harness.run.cold_reset`; its counters never read zero again). An arm that
fails a check is *marked* ``warm`` with the reasons, not stopped: the decision holds a tier arm
(:mod:`harness.decision.cold_start`). The readers are in :mod:`harness.run.cold_readers`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.decision.cold_start import EVENT
from harness.engines.spec import MetricsEndpoint
from harness.launch.external import scrape_target
from harness.run.cold_readers import (
    TIMEOUT_S,
    Counters,
    counters_from,
    disk_tier_state,
    probe_answer,
    probe_prompt,
    read_counters,
    send_probe,
    total_hits,
)
from harness.run.cold_reset import ResetSeen, judge_canary, reset_cold_start
from harness.schema.cold_start import ColdAction, ColdProbe, ColdStart, DiskTierState, ProofStatus

if TYPE_CHECKING:
    from harness.launch.base import RunningServer
    from harness.run.arm_handle import ArmHandle

__all__ = ["TIMEOUT_S", "check_cold_start", "counters_from", "disk_tier_state", "judge", "judge_reset",
           "measure_cold_start", "probe_answer", "probe_prompt", "prove_cold", "start_actions", "terminal_line",
           "total_hits"]


def judge(counters: Mapping[str, float | None], counters_error: str | None, tiers: list[DiskTierState],
          probe: ColdProbe | None) -> ColdStart:
    """The record, from what was seen (pure: the unit tests call it). ``proof`` is ``proven`` only where the hit
    counters were read at zero and every disk tier was read empty; a probe can only fail it (module docstring)."""
    reasons: list[str] = []
    failed = False
    checked: list[str] = []
    counters_zero = False
    if counters_error is not None:
        reasons.append(f"hit counters not read: {counters_error}")
    else:
        shown = {q: v for q, v in counters.items() if v is not None}
        if shown:
            checked.append("counters")
        else:
            reasons.append("the server exposes none of the hit counters, so nothing shows its caches empty")
        hot = {q: v for q, v in shown.items() if v > 0}
        counters_zero = bool(shown) and not hot
        if hot:
            failed = True
            reasons.append("the server's hit counters were not zero at the arm's start: "
                           + ", ".join(f"{q} {v:.0f}" for q, v in sorted(hot.items())))
        absent = sorted(q for q, v in counters.items() if v is None)
        if absent:
            reasons.append("not exposed, not checked: " + ", ".join(absent))
    tiers_read = True
    for tier in tiers:
        checked.append("disk-tier")
        if tier.error is not None:
            tiers_read = False
            reasons.append(f"disk tier {tier.root_dir} could not be read: {tier.error}")
        elif tier.entries:
            failed = True
            more = " or more (walk stopped)" if tier.truncated else ""
            reasons.append(f"disk tier {tier.root_dir} held {tier.entries}{more} files ({tier.bytes} bytes) at the "
                           "arm's start: a fresh arm must start with an empty tier (warm disk tier)")
    if probe is not None:
        failed = _judge_probe(probe, checked, reasons) or failed
    proof: ProofStatus = "warm" if failed else ("proven" if counters_zero and tiers_read else "not-proven")
    return ColdStart(proof=proof, reasons=reasons, counters=dict(counters), disk_tiers=tiers, probe=probe,
                     checked=sorted(set(checked)))


def _judge_probe(probe: ColdProbe, checked: list[str], reasons: list[str]) -> bool:
    """True when the probe saw cached tokens or moved the counters (it can show a start warm, never cold)."""
    if probe.error is not None:
        reasons.append(f"probe request failed: {probe.error}")
        return False
    checked.append("probe")
    failed = False
    if probe.cached_tokens:
        failed = True
        reasons.append(f"the probe (a prompt no other request shares) saw {probe.cached_tokens} cached tokens")
    if probe.hit_tokens_delta:
        failed = True
        reasons.append(f"the hit counters rose by {probe.hit_tokens_delta:.0f} tokens over the probe")
    return failed


def judge_reset(seen: ResetSeen) -> ColdStart:
    """The record of an attached server's reset start (pure): proven, warm or not proven by the canary
    (:func:`harness.run.cold_reset.judge_canary`) when the reset is shown done; otherwise the start as found (the
    counters read before anything was sent, :func:`judge`) with the reset's failure recorded first."""
    record = seen.record
    if record.error is None:
        proof, reasons = judge_canary(record)
        return ColdStart(proof=proof, actions=["engine-reset"], reasons=reasons, counters=dict(seen.before),
                         reset=record, checked=["canary", "engine-reset"])
    found = judge(seen.before, seen.before_error, [], None)
    found.reasons.insert(0, f"the engine's reset ({record.endpoint}) failed: {record.error}")
    found.reset = record
    found.checked = sorted({*found.checked, "engine-reset"})
    return found


def check_cold_start(api_url: str, metrics: tuple[str, list[MetricsEndpoint]], engine: EngineSpec, arm: Arm,
                     model: str, cancel: threading.Event | None = None) -> ColdStart:
    """Run the three checks on a server that just became ready (``metrics``: where its metrics are read, as
    :func:`harness.launch.external.scrape_target` gives it)."""
    return measure_cold_start(lambda: read_counters(*metrics, engine, cancel),
                              [disk_tier_state(t.root_dir) for t in arm.fs_tiers()],
                              lambda: send_probe(api_url, model, cancel))


def measure_cold_start(read: Callable[[], Counters], tiers: list[DiskTierState],
                       probe: Callable[[], ColdProbe]) -> ColdStart:
    """The three checks from their readers: the counters (read before and after the probe), the disk tiers' state
    and the probe request (the real clock reads them over HTTP, the virtual clock in the harness process)."""
    counters, error = read()
    probed = probe()
    if error is None and probed.error is None:
        after, error_after = read()
        before_total, after_total = total_hits(counters), total_hits(after)
        if error_after is None and before_total is not None and after_total is not None:
            probed.hit_tokens_delta = max(0.0, after_total - before_total)
    return judge(counters, error, tiers, probed)


def start_actions(arm: Arm) -> list[ColdAction]:
    """What the harness did to make this arm's start cold before the server came up: a server it started is a fresh
    process, and a fresh arm's disk tiers were emptied first (:mod:`harness.run.arm_server`); an attached server
    gets neither (its reset, when asked for, is recorded by :mod:`harness.run.cold_reset`)."""
    if arm.server is not None:
        return []
    actions: list[ColdAction] = ["fresh-process"]
    if arm.fs_tiers():
        actions.append("emptied-disk-tier")
    return actions


def prove_cold(runner: ArmHandle, server: RunningServer, measured: ColdStart | None = None) -> ColdStart:
    """Check the arm's just-started server (``measured``: already checked, by :func:`measure_cold_start`; an
    attached server whose scenario asks for ``cold_start: engine-reset`` is reset first, :mod:`harness.run.
    cold_reset`), journal the record (``cold-start``) and say what it shows."""
    assert runner.spec is not None
    attached = runner.arm.server
    target = scrape_target(server.base_url, runner.spec, attached)
    if measured is not None:
        proof = measured
    elif attached is not None and attached.cold_start == "engine-reset":
        proof = judge_reset(reset_cold_start(server.base_url, target, runner.engine, runner.spec.served_model_name,
                                             runner.ctx.cancel))
    else:
        proof = check_cold_start(server.base_url, target, runner.engine, runner.arm, runner.spec.served_model_name,
                                 runner.ctx.cancel)
    before = start_actions(runner.arm)
    proof.actions = [*before, *(a for a in proof.actions or [] if a not in before)]
    if proof.proof == "warm" and attached is not None:  # an existing server: say how to get a cold one
        reset = "" if attached.cold_start == "engine-reset" else ", or set server.cold_start: engine-reset,"
        proof.reasons.append("an external server counts hits since its own start and keeps its tiers: restart it "
                             f"(and empty its disk tier) before the run{reset} for a cold start")
    runner.ctx.record_arm(runner.arm.name, EVENT, cold_start=proof.model_dump(mode="json"))
    runner.ctx.say(f"[{runner.arm.name}] {terminal_line(proof)}")
    return proof


def terminal_line(proof: ColdStart) -> str:
    """The one line the terminal shows for the record (its status first, then what shows it)."""
    done = f"; harness actions: {', '.join(proof.actions)}" if proof.actions else "; no harness action"
    if proof.proof == "warm":
        return "NOT A COLD START (a tier arm is held): " + "; ".join(proof.reasons)
    if proof.proof == "not-proven":
        return f"cold start NOT PROVEN (does not decide{done}): " + "; ".join(proof.reasons)
    return f"cold start proven ({', '.join(proof.checked)}{done})"

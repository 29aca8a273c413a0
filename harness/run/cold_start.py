"""Proof of state: at an arm's start, before the token calibration and the warm-up, show that the server is cold.

Three checks, each recorded with its figures in ``arms.jsonl`` (event ``cold-start``, read back by
:mod:`harness.decision.cold_start`):

* **counters** — the server's prefix-cache and offload-tier hit counters (the catalog's ``hit_tokens.*``) read zero;
  a series the server does not expose is named as not checked, never read as 0;
* **disk tier** — every fs tier directory of the arm holds no file but the harness's own marker (a fresh arm's tier
  is emptied before the start, :mod:`harness.run.arm_server`; this reads it, read-only, after the server is up);
* **probe** — one request whose prompt starts with a random nonce (so nothing can share a block with it) sees no
  cached tokens: ``usage.prompt_tokens_details.cached_tokens`` where the server reports it, and the hit counters'
  increase over the probe.

An arm that fails one is *marked* (``cold: false`` with the reasons), not stopped: the decision holds it
(:mod:`harness.decision.cold_start`). The probe is one small request (``PROBE_WORDS`` words, one output token).
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.core.net.bounded import FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES, METRICS_MAX_BYTES
from harness.decision.cold_start import EVENT
from harness.engines.spec import MetricsEndpoint
from harness.host.labels import DISK_TIER_MARKER
from harness.launch.external import scrape_target
from harness.schema.cold_start import ColdProbe, ColdStart, DiskTierState
from harness.scrape.catalog import CatalogError, catalog_for_engine
from harness.scrape.parse import ParseError
from harness.scrape.quantities import exposition_quantities
from harness.workload.text import filler, key_words
from harness.workload.tokens import server_root

if TYPE_CHECKING:
    from harness.launch.base import RunningServer
    from harness.run.arm_handle import ArmHandle

HIT_QUANTITIES = ("hit_tokens.gpu", "hit_tokens.cpu", "hit_tokens.disk", "hit_tokens.total")
PROBE_WORDS = 96  # a few blocks at any block size the engines use, still one cheap request
MAX_WALK_ENTRIES = 10_000  # the disk-tier walk stops here (and says so)
TIMEOUT_S = 10.0


def read_counters(base_url: str, endpoints: Iterable[MetricsEndpoint], engine: EngineSpec,
                  cancel: threading.Event | None = None) -> tuple[dict[str, float | None], str | None]:
    """The hit counters' values now (None: not exposed), and why they could not be read at all (None: read)."""
    bodies: dict[str, str] = {}
    for ep in endpoints:
        try:
            resp = fetch("GET", base_url.rstrip("/") + ep.path, deadline_s=TIMEOUT_S, max_body_bytes=METRICS_MAX_BYTES,
                         cancel=cancel)
        except FetchError as exc:
            return {}, f"metrics {ep.path}: {exc}"
        if resp.status != 200:
            return {}, f"metrics {ep.path}: HTTP {resp.status}"
        bodies.setdefault(ep.format, resp.text())
    return counters_from(bodies, engine)


def counters_from(bodies: dict[str, str], engine: EngineSpec) -> tuple[dict[str, float | None], str | None]:
    """The hit counters in metrics bodies (by format), as :func:`read_counters` reads them."""
    try:
        catalog = catalog_for_engine(engine.kind, engine.image, sim_flavor=engine.sim_flavor,
                                     version=engine.version)
        values = exposition_quantities(bodies, catalog, HIT_QUANTITIES)
    except (CatalogError, ParseError) as exc:  # ParseError is a ValueError too; both named for the reader
        return {}, f"metrics could not be read: {exc}"
    return {q: v.value for q, v in values.items()}, None


def total_hits(counters: Mapping[str, float | None]) -> float | None:
    """Hit tokens from any tier: the total series, else the sum of the per-tier ones exposed (None: none)."""
    if counters.get("hit_tokens.total") is not None:
        return counters["hit_tokens.total"]
    parts = [v for q, v in counters.items() if q != "hit_tokens.total" and v is not None]
    return sum(parts) if parts else None


def disk_tier_state(root_dir: str, max_entries: int = MAX_WALK_ENTRIES) -> DiskTierState:
    """Files under a disk-tier directory (the marker excepted), by a bounded walk that follows no link."""
    state = DiskTierState(root_dir=root_dir)
    top = Path(root_dir)
    if not top.exists():
        return state
    seen = 0
    try:
        for here, dirs, files in os.walk(top, followlinks=False):
            for name in files:
                path = Path(here) / name
                if path.parent == top and name == DISK_TIER_MARKER:
                    continue
                seen += 1
                if seen > max_entries:
                    state.truncated = True
                    return state
                state.entries += 1
                try:
                    state.bytes += path.lstat().st_size
                except OSError:
                    continue
            dirs.sort()
    except OSError as exc:
        state.error = f"{type(exc).__name__}: {exc}"
    return state


def probe_prompt(nonce_bits: tuple[int, int] | None = None) -> str:
    """A prompt that begins with a nonce (random unless ``nonce_bits``, two 48-bit numbers, are given): no other
    request shares even its first block."""
    first, second = nonce_bits if nonce_bits is not None else (secrets.randbits(48), secrets.randbits(48))
    nonce = key_words(first) + key_words(second)
    return " ".join(nonce + filler(PROBE_WORDS - len(nonce)))


def send_probe(base_url: str, model: str, cancel: threading.Event | None = None) -> ColdProbe:
    """One non-streamed completion of one token on :func:`probe_prompt`."""
    body = {"model": model, "prompt": probe_prompt(), "max_tokens": 1, "stream": False, "temperature": 0}
    try:
        resp = fetch("POST", server_root(base_url) + "/v1/completions", deadline_s=TIMEOUT_S,
                     max_body_bytes=API_MAX_BYTES, json_body=body, cancel=cancel)
        if resp.status != 200:
            return ColdProbe(error=f"HTTP {resp.status}")
        answer: Any = resp.json()
    except (FetchError, ValueError) as exc:
        return ColdProbe(error=f"{type(exc).__name__}: {exc}")
    return probe_answer(answer)


def probe_answer(answer: Any) -> ColdProbe:
    """The probe's record from the server's JSON answer (its usage)."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt = usage.get("prompt_tokens")
    return ColdProbe(prompt_tokens=prompt if isinstance(prompt, int) else None,
                     cached_tokens=cached if isinstance(cached, int) else None)


def judge(counters: Mapping[str, float | None], counters_error: str | None, tiers: list[DiskTierState],
          probe: ColdProbe | None) -> ColdStart:
    """The record, from what was seen (pure: the unit tests call it)."""
    reasons: list[str] = []
    failed = False
    checked: list[str] = []
    if counters_error is not None:
        reasons.append(f"hit counters not checked: {counters_error}")
    else:
        shown = {q: v for q, v in counters.items() if v is not None}
        if shown:
            checked.append("counters")
        hot = {q: v for q, v in shown.items() if v > 0}
        if hot:
            failed = True
            reasons.append("the server's hit counters were not zero at the arm's start: "
                           + ", ".join(f"{q} {v:.0f}" for q, v in sorted(hot.items())))
        absent = sorted(q for q, v in counters.items() if v is None)
        if absent:
            reasons.append("not exposed, not checked: " + ", ".join(absent))
    for tier in tiers:
        checked.append("disk-tier")
        if tier.error is not None:
            reasons.append(f"disk tier {tier.root_dir} could not be read: {tier.error}")
        elif tier.entries:
            failed = True
            more = " or more (walk stopped)" if tier.truncated else ""
            reasons.append(f"disk tier {tier.root_dir} held {tier.entries}{more} files ({tier.bytes} bytes) at the "
                           "arm's start: a fresh arm must start with an empty tier (warm disk tier)")
    if probe is not None:
        if probe.error is not None:
            reasons.append(f"probe request failed: {probe.error}")
        else:
            checked.append("probe")
            if probe.cached_tokens:
                failed = True
                reasons.append(f"the probe (a prompt no other request shares) saw {probe.cached_tokens} cached "
                               "tokens")
            if probe.hit_tokens_delta:
                failed = True
                reasons.append(f"the hit counters rose by {probe.hit_tokens_delta:.0f} tokens over the probe")
    cold = False if failed else (True if checked else None)
    return ColdStart(cold=cold, reasons=reasons, counters=dict(counters), disk_tiers=tiers, probe=probe,
                     checked=sorted(set(checked)))


def check_cold_start(api_url: str, metrics: tuple[str, list[MetricsEndpoint]], engine: EngineSpec, arm: Arm,
                     model: str, cancel: threading.Event | None = None) -> ColdStart:
    """Run the three checks on a server that just became ready (``metrics``: where its metrics are read, as
    :func:`harness.launch.external.scrape_target` gives it)."""
    return measure_cold_start(lambda: read_counters(*metrics, engine, cancel),
                              [disk_tier_state(t.root_dir) for t in arm.fs_tiers()],
                              lambda: send_probe(api_url, model, cancel))


Counters = tuple[dict[str, float | None], str | None]


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


def prove_cold(runner: ArmHandle, server: RunningServer, measured: ColdStart | None = None) -> ColdStart:
    """Check the arm's just-started server (``measured``: already checked, by :func:`measure_cold_start`), journal
    the record (``cold-start``) and say what it shows."""
    assert runner.spec is not None
    proof = measured if measured is not None else check_cold_start(
        server.base_url, scrape_target(server.base_url, runner.spec, runner.arm.server), runner.engine, runner.arm,
        runner.spec.served_model_name, runner.ctx.cancel)
    if proof.cold is False and runner.arm.server is not None:  # an existing server: say how to get a cold one
        proof.reasons.append("an external server counts hits since its own start and keeps its tiers: restart it "
                             "(and empty its disk tier) before the run for a cold start")
    runner.ctx.record_arm(runner.arm.name, EVENT, cold_start=proof.model_dump(mode="json"))
    name = runner.arm.name
    if proof.cold is False:
        runner.ctx.say(f"[{name}] NOT A COLD START (the arm will be held): " + "; ".join(proof.reasons))
    elif proof.cold is None:
        runner.ctx.say(f"[{name}] cold start could not be checked: " + "; ".join(proof.reasons))
    else:
        runner.ctx.say(f"[{name}] cold start proven ({', '.join(proof.checked)})")
    return proof

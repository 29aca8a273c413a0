"""What the cold-start proof reads on a server: its hit counters, its disk-tier directories, and one completion of a
prompt no other request shares (the probe and the reset's canary, :mod:`harness.run.cold_start` and
:mod:`harness.run.cold_reset`). Reading only: nothing here judges.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.config.engine import EngineSpec
from harness.core.net.bounded import FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES, METRICS_MAX_BYTES
from harness.engines.spec import MetricsEndpoint
from harness.host.labels import DISK_TIER_MARKER
from harness.schema.cold_start import ColdProbe, DiskTierState
from harness.scrape.catalog import CatalogError, catalog_for_engine
from harness.scrape.parse import ParseError
from harness.scrape.quantities import exposition_quantities
from harness.workload.text import filler, key_words
from harness.workload.tokens import server_root

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


Counters = tuple[dict[str, float | None], str | None]
"""The hit counters (canonical quantity -> value, None: not exposed) and why they could not be read (None: read)."""


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


def probe_prompt(nonce_bits: tuple[int, int] | None = None, words: int = PROBE_WORDS) -> str:
    """A prompt of ``words`` words that begins with a nonce (random unless ``nonce_bits``, two 48-bit numbers, are
    given): no other request shares even its first block."""
    first, second = nonce_bits if nonce_bits is not None else (secrets.randbits(48), secrets.randbits(48))
    nonce = key_words(first) + key_words(second)
    return " ".join(nonce + filler(words - len(nonce)))


def send_probe(base_url: str, model: str, cancel: threading.Event | None = None, *,
               prompt: str | None = None) -> ColdProbe:
    """One non-streamed completion of one token on ``prompt`` (default: a fresh :func:`probe_prompt`)."""
    body = {"model": model, "prompt": prompt if prompt is not None else probe_prompt(), "max_tokens": 1,
            "stream": False, "temperature": 0}
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

"""Raw scrapes read back as a time-ordered series, and the observations that bracket a step.

``load_scrapes`` tolerates a truncated file; bodies are parsed lazily (only the scrapes a step needs) and cached.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.rundir.layout import SCRAPES_FILE
from harness.scrape.catalog import Catalog
from harness.scrape.parse import ParseError, Samples, parse_prometheus, parse_trtllm_json
from harness.scrape.rawlog import read_raw_scrapes


@dataclass(frozen=True)
class Scrape:
    """One raw scrape record."""

    wall_ns: int
    mono_ns: int
    endpoint: str
    format: str
    tag: str
    status: int | None
    error: str | None
    body: str

    @property
    def ok(self) -> bool:
        """The endpoint answered 2xx."""
        return self.error is None


@dataclass
class ScrapeSeries:
    """All scrapes of one arm (ordered by monotonic time) plus notes about unreadable parts."""

    scrapes: list[Scrape]
    notes: list[str] = field(default_factory=list)
    _parsed: dict[tuple[int, str], list[Samples] | None] = field(default_factory=dict, repr=False)

    def parsed(self, index: int, keep: frozenset[str] | None, key: str) -> list[Samples] | None:
        """The samples of scrape ``index`` (one per TensorRT-LLM entry); None if the body does not parse."""
        cache_key = (index, key)
        if cache_key not in self._parsed:
            scrape = self.scrapes[index]
            result: list[Samples] | None
            try:
                if scrape.format == "trtllm-json":
                    result = parse_trtllm_json(scrape.body)
                else:
                    result = [parse_prometheus(scrape.body, keep)]
            except ParseError as exc:
                self.notes.append(f"scrape of {scrape.endpoint} at mono {scrape.mono_ns} ignored: {exc}")
                result = None
            self._parsed[cache_key] = result
        return self._parsed[cache_key]

    def parse_failed(self, index: int) -> bool:
        """Whether scrape ``index`` was parsed and failed."""
        return any(k[0] == index and v is None for k, v in self._parsed.items())


def _scrape_from(raw: dict[str, Any]) -> Scrape | None:
    try:
        return Scrape(wall_ns=int(raw.get("wall_ns") or 0), mono_ns=int(raw["mono_ns"]),
                      endpoint=str(raw.get("endpoint") or "/metrics"), format=str(raw.get("format") or "prometheus"),
                      tag=str(raw.get("tag") or ""), status=raw.get("status"),
                      error=raw.get("error"), body=str(raw.get("body") or ""))
    except (KeyError, TypeError, ValueError):
        return None


def load_scrapes(metrics_dir: Path) -> ScrapeSeries:
    """The scrapes under ``metrics_dir`` (or a ``scrapes.jsonl.gz`` path); an absent file gives an empty series."""
    path = metrics_dir if metrics_dir.name.endswith(".gz") else metrics_dir / SCRAPES_FILE
    if not path.exists():
        return ScrapeSeries([], [f"no scrapes file at {path}"])
    raw, notes = read_raw_scrapes(path)
    scrapes = [s for s in (_scrape_from(r) for r in raw) if s is not None]
    if len(scrapes) < len(raw):
        notes.append(f"{path.name}: skipped {len(raw) - len(scrapes)} record(s) without a monotonic time")
    scrapes.sort(key=lambda s: s.mono_ns)
    return ScrapeSeries(scrapes, notes)


def series_from_bodies(bodies: Iterable[tuple[int, str, str]], endpoint: str = "/metrics") -> ScrapeSeries:
    """A series built in memory from ``(mono_ns, format, body)`` (tests, one-off expositions)."""
    scrapes = [Scrape(wall_ns=mono, mono_ns=mono, endpoint=endpoint, format=fmt, tag="", status=200, error=None,
                      body=body) for mono, fmt, body in bodies]
    scrapes.sort(key=lambda s: s.mono_ns)
    return ScrapeSeries(scrapes)


@dataclass(frozen=True)
class Observation:
    """One timestamped set of samples (a Prometheus scrape, or one TensorRT-LLM iteration entry)."""

    mono_ns: int
    samples: Samples


@dataclass(frozen=True)
class Window:
    """The observations of one format that bracket a step."""

    observations: list[Observation]  # base (at/before start) first when known, through the end boundary
    has_base: bool  # an observation at/before the start exists (else counters start from the first one)
    known_before: bool  # the state at the start is known: a base, or only empty TensorRT-LLM polls before it
    scrape_indices: list[int]


def window_for(series: ScrapeSeries, catalog: Catalog, fmt: str, start_ns: int, end_ns: int) -> Window:
    """Observations of format ``fmt`` from the last at/before ``start_ns`` to the first at/after ``end_ns``.

    Only the scrapes in that span are parsed. For TensorRT-LLM's drained queue the base is the last entry of the
    latest non-empty scrape at/before the start (an empty ``[]`` poll means nothing changed).
    """
    keep = frozenset(catalog.needed_series("prometheus")) if fmt == "prometheus" else None
    key = f"{catalog.name}:{fmt}"
    good = [i for i, s in enumerate(series.scrapes) if s.format == fmt and s.ok]
    before = [i for i in good if series.scrapes[i].mono_ns <= start_ns]
    inside = [i for i in good if start_ns < series.scrapes[i].mono_ns < end_ns]
    after = next((i for i in good if series.scrapes[i].mono_ns >= end_ns and series.scrapes[i].mono_ns > start_ns),
                 None)
    obs: list[Observation] = []
    indices: list[int] = []
    has_base = False
    empty_before = False  # a readable, empty TensorRT-LLM poll before the start: no iterations yet
    for i in reversed(before):
        parsed = series.parsed(i, keep, key)
        if parsed:
            obs.append(Observation(series.scrapes[i].mono_ns, parsed[-1]))
            indices.append(i)
            has_base = True
            break
        empty_before = empty_before or parsed is not None
    for i in [*inside, *([after] if after is not None else [])]:
        parsed = series.parsed(i, keep, key)
        if parsed is None:
            continue
        indices.append(i)
        obs.extend(Observation(series.scrapes[i].mono_ns, samples) for samples in parsed)
    return Window(obs, has_base, has_base or (fmt == "trtllm-json" and empty_before), indices)

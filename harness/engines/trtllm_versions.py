"""The TensorRT-LLM version table (``trtllm-versions.yaml``): which flags, YAML keys, endpoints and stats source a
release has.

The release is named by ``engine.version`` or the image tag (``nvcr.io/nvidia/tensorrt-llm/release:1.0.0`` -> 1.0.0).
:func:`choose_release` decides which entry applies and how loudly to say so:

* listed exactly: that entry (``ok``);
* a pre-release of a listed version (``1.3.0rc2``): its base entry, with a warning that an rc may differ;
* between two entries, or newer than the newest: the newest entry at or below it, with a warning naming the entry
  used and saying its facts are unconfirmed for that version;
* older than the oldest entry: refused (:class:`UnknownRelease`, a ``ValueError``): nothing is known of it;
* no release named at all: the oldest entry (the most conservative: it renders the fewest keys), with a warning.

Each entry also says where the harness reads server statistics (``stats_source``) and whether that release's
trtllm-serve runs a background iteration-stats collector that drains the queue JSON ``/metrics`` reads
(``collector_drains_json``): where it does, polling JSON ``/metrics`` as well would starve one of the two readers.

Every fact an entry states carries its status as data (``facts``, :class:`FactStatus`): ``confirmed`` with the file,
the 40-hex commit of NVIDIA/TensorRT-LLM and the version its ``tensorrt_llm/version.py`` says there (which must be the
entry's version), or ``unconfirmed`` with the reason, plus the stored evidence (``seen``: names of the table's
``evidence``) that shows the fact without being tied to the release. The loader refuses an entry whose facts lack a
status, a status naming no fact, or a top-level ``confirmed`` that disagrees with its facts (true only when every
fact is confirmed). :func:`fact_counts` gives the figures the ``trtllm-release`` plan check says out loud.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.config.engine import EngineSpec

TABLE_FILE = "trtllm-versions.yaml"
TABLE_PATH = "harness/engines/trtllm-versions.yaml"
# A release number, then what follows it: ``rc2`` / ``a1`` / ``b1`` / ``.dev3`` mark a pre-release.
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?([0-9A-Za-z.+_-]*)")
_PRERELEASE_RE = re.compile(r"^[.-]?(rc|a|alpha|b|beta|dev|pre)\.?\d*", re.IGNORECASE)
# The comment lines of a rendered extra-options YAML that carry the chosen entry's facts to the in-image check.
COMMIT_PATTERN = r"^[0-9a-f]{40}$"
StatsSource = Literal["json", "json+prometheus", "prometheus"]
Match = Literal["exact", "prerelease", "between", "newer", "unnamed"]


class UnknownRelease(ValueError):
    """A release older than every table entry: its flags, keys and endpoints are not known."""


class Endpoints(BaseModel):
    """HTTP endpoints of one release (None: the release has none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    health: str = "/health"
    metrics_json: str | None = "/metrics"
    prometheus: str | None = None


class Evidence(BaseModel):
    """A stored source version that shows facts but cannot be tied to a release: the file, its commit, what it shows."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(min_length=1, description="path in NVIDIA/TensorRT-LLM")
    commit: str = Field(pattern=COMMIT_PATTERN, description="the commit of the stored version read")
    shows: str = Field(min_length=1, description="what that version says, and why its release is not known")


class Confirmation(BaseModel):
    """Where a fact was read in the source of the release itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file: str = Field(min_length=1, description="path in NVIDIA/TensorRT-LLM")
    commit: str = Field(pattern=COMMIT_PATTERN, description="the 40-hex commit the file was read at")
    version_seen: str = Field(min_length=1, description="what tensorrt_llm/version.py says at that commit")


class FactStatus(BaseModel):
    """One fact's status: ``confirmed`` (file, commit, version seen) or ``unconfirmed`` (why), never both."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    confirmed: Confirmation | None = None
    unconfirmed: str | None = Field(default=None, min_length=1)
    seen: list[str] = Field(default_factory=list, description="names of the table's evidence that show the fact")

    @model_validator(mode="after")
    def _one_status(self) -> FactStatus:
        if (self.confirmed is None) == (self.unconfirmed is None):
            raise ValueError("a fact is either confirmed: {file, commit, version_seen} or unconfirmed: reason "
                             "(exactly one)")
        return self

    @property
    def is_confirmed(self) -> bool:
        """Read in the release's own source."""
        return self.confirmed is not None


@dataclass(frozen=True)
class FactCounts:
    """How many of an entry's facts are confirmed from the release's source."""

    confirmed: int
    total: int

    @property
    def unconfirmed(self) -> int:
        """Facts not (yet) read in the release's own source."""
        return self.total - self.confirmed


class Release(BaseModel):
    """One TensorRT-LLM release range of the table."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str
    confirmed: bool = Field(default=False, description="true only when every fact is confirmed")
    sources: list[str] = Field(default_factory=list)
    cli_flags: list[str]
    config_flag: str
    llm_args: list[str]
    kv_cache_config: list[str]
    kv_cache_defaults: dict[str, int] = Field(default_factory=dict, description="the engine's value of a "
                                              "kv_cache_config key left unset (secondary_offload_min_priority: 30)")
    needs: dict[str, bool] = Field(default_factory=dict)
    endpoints: Endpoints
    stats_source: StatsSource = Field(description="which endpoints the harness scrapes for server statistics")
    collector_drains_json: bool = Field(description="trtllm-serve runs a background iteration-stats collector (for "
                                        "Prometheus) that drains the queue JSON /metrics reads")
    stats_note: str = Field(min_length=1, description="why this stats source, with its evidence")
    facts: dict[str, FactStatus] = Field(description="each fact's status, keyed by fact_names()")

    @model_validator(mode="after")
    def _stats_consistent(self) -> Release:
        if self.polls_json and self.collector_drains_json:
            raise ValueError(f"release {self.version}: stats_source {self.stats_source} polls JSON /metrics, but its "
                             "collector drains that queue (collector_drains_json): one reader would starve")
        if self.polls_json and not self.endpoints.metrics_json:
            raise ValueError(f"release {self.version}: stats_source {self.stats_source} needs endpoints.metrics_json")
        if self.polls_prometheus and not self.endpoints.prometheus:
            raise ValueError(f"release {self.version}: stats_source {self.stats_source} needs endpoints.prometheus")
        return self

    @model_validator(mode="after")
    def _facts_complete(self) -> Release:
        stray = sorted(set(self.kv_cache_defaults) - set(self.kv_cache_config))
        if stray:
            raise ValueError(f"release {self.version}: kv_cache_defaults.{stray[0]} is not one of its kv_cache_config "
                             "keys")
        names = self.fact_names()
        missing = [n for n in names if n not in self.facts]
        if missing:
            raise ValueError(f"release {self.version}: fact {missing[0]} has no status ({len(missing)} missing); "
                             "give it confirmed: {file, commit, version_seen} or unconfirmed: reason")
        extra = sorted(set(self.facts) - set(names))
        if extra:
            raise ValueError(f"release {self.version}: facts.{extra[0]} names no fact the entry states")
        for name, status in self.facts.items():
            if status.confirmed is not None and status.confirmed.version_seen != self.version:
                raise ValueError(f"release {self.version}: fact {name} is confirmed at a commit whose version file "
                                 f"says {status.confirmed.version_seen}, not {self.version}")
        every = all(s.is_confirmed for s in self.facts.values())
        if self.confirmed != every:
            raise ValueError(f"release {self.version}: confirmed is {str(self.confirmed).lower()} but "
                             f"{'every' if every else 'not every'} fact is confirmed")
        return self

    def fact_names(self) -> list[str]:
        """Every fact the entry states, in table order: the flag list, the config flag, each key, each endpoint."""
        return ["cli_flags", "config_flag",
                *(f"llm_args.{k}" for k in self.llm_args),
                *(f"needs.{k}" for k in self.needs),
                *(f"kv_cache_config.{k}" for k in self.kv_cache_config),
                *(f"kv_cache_defaults.{k}" for k in self.kv_cache_defaults),
                *(f"endpoints.{k}" for k in Endpoints.model_fields),
                "stats_source", "collector_drains_json"]

    @property
    def unconfirmed_facts(self) -> list[str]:
        """The facts not read in the release's own source, in table order."""
        return [n for n in self.fact_names() if not self.facts[n].is_confirmed]

    @property
    def polls_json(self) -> bool:
        """The harness scrapes JSON ``/metrics`` for this release."""
        return "json" in self.stats_source

    @property
    def polls_prometheus(self) -> bool:
        """The harness scrapes ``/prometheus/metrics`` for this release."""
        return "prometheus" in self.stats_source

    def key(self) -> tuple[int, ...]:
        """The version as a comparable tuple."""
        return version_key(self.version) or (0,)


@dataclass(frozen=True)
class ReleaseChoice:
    """The entry used for an engine, and what to tell the user about that choice."""

    release: Release
    requested: str | None  # the release as named (``1.3.0rc2``), None when nothing names one
    named_by: str | None  # "engine.version" or "image tag"
    match: Match
    upper: str | None  # the next entry's version (this entry covers releases below it); None for the newest
    message: str

    @property
    def level(self) -> Literal["ok", "warn"]:
        """``ok`` for a release listed exactly, ``warn`` otherwise."""
        return "ok" if self.match == "exact" else "warn"


def parse_release(text: str | None) -> tuple[tuple[int, ...], str] | None:
    """``1.1.0rc5`` -> ((1, 1, 0), "rc5"); None when the text names no release."""
    match = _VERSION_RE.search(text or "")
    if not match:
        return None
    return tuple(int(g) for g in match.groups(default="0")[:3]), match.group(4) or ""


def version_key(text: str | None) -> tuple[int, ...] | None:
    """``1.1.0rc5`` -> (1, 1, 0); None when the text names no release."""
    parsed = parse_release(text)
    return parsed[0] if parsed else None


def is_prerelease(suffix: str) -> bool:
    """Whether what follows the release number marks a pre-release (``rc2``, ``a1``, ``.dev0``)."""
    return bool(_PRERELEASE_RE.match(suffix))


class VersionTable(BaseModel):
    """The whole file: the stored evidence facts cite, and the entries."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    evidence: dict[str, Evidence] = Field(default_factory=dict)
    releases: list[Release] = Field(min_length=1)

    @model_validator(mode="after")
    def _evidence_named(self) -> VersionTable:
        for rel in self.releases:
            for name, status in rel.facts.items():
                unknown = [e for e in status.seen if e not in self.evidence]
                if unknown:
                    raise ValueError(f"release {rel.version}: facts.{name}.seen names {unknown[0]!r}, which is not "
                                     "in evidence")
        return self


def load_table(raw: object) -> VersionTable:
    """The parsed table (raises pydantic's ValidationError, a ValueError, naming what is wrong)."""
    return VersionTable.model_validate(raw)


@cache
def table() -> VersionTable:
    """The shipped table, validated."""
    text = resources.files("harness.engines").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    return load_table(yaml.safe_load(text))


@cache
def releases() -> tuple[Release, ...]:
    """Every entry, oldest first."""
    return tuple(sorted(table().releases, key=Release.key))


def fact_counts(release: Release) -> FactCounts:
    """How many of the entry's facts are confirmed from the release's own source, of how many."""
    names = release.fact_names()
    return FactCounts(confirmed=sum(release.facts[n].is_confirmed for n in names), total=len(names))


def engine_release_text(engine: EngineSpec) -> tuple[str | None, str | None]:
    """(the release the scenario names, what names it): ``engine.version``, else the image tag."""
    if engine.version:
        return engine.version, "engine.version"
    if engine.image and "@" not in engine.image and ":" in engine.image.rsplit("/", 1)[-1]:
        return engine.image.rsplit(":", 1)[1], "image tag"
    return None, None


def _shown(text: str, named_by: str | None) -> str:
    return f"TensorRT-LLM {text} ({named_by})" if named_by else f"TensorRT-LLM {text}"


def choose_release(engine: EngineSpec) -> ReleaseChoice:
    """The table entry for an engine and the sentence saying how it was chosen.

    Raises :class:`UnknownRelease` (a ValueError) for a release older than the oldest entry.
    """
    table = releases()
    text, named_by = engine_release_text(engine)
    parsed = parse_release(text)
    unconfirmed_for = "its flags, LlmArgs keys, endpoints and stats source are UNCONFIRMED for"
    if parsed is None or text is None:
        what = f" ({named_by} {text!r} names no release number)" if text else " (no image tag, no engine.version)"
        oldest = table[0]
        return ReleaseChoice(oldest, text, named_by, "unnamed", _upper(oldest),
                             f"no TensorRT-LLM release named{what}: using the oldest table entry, {oldest.version} "
                             f"(the fewest keys); {unconfirmed_for} whatever release actually runs; pin the image "
                             f"tag or set engine.version")
    want, suffix = parsed
    fitting = [r for r in table if r.key() <= want]
    if not fitting:
        raise UnknownRelease(f"{_shown(text, named_by)} predates the TensorRT-LLM version table (oldest entry "
                             f"{table[0].version}): its flags, LlmArgs keys and endpoints are not known, so the "
                             f"harness refuses it; pin {table[0].version} or later, or add an entry for it to "
                             f"{TABLE_PATH}")
    chosen = fitting[-1]
    upper = _upper(chosen)
    base = ".".join(str(p) for p in want)
    notes: list[str] = []
    match: Match = "exact"
    if chosen.key() != want:
        if upper is None:
            match = "newer"
            notes.append(f"{base} is newer than every table entry: using the newest, {chosen.version}; "
                         f"{unconfirmed_for} {base}")
        else:
            match = "between"
            notes.append(f"{base} is not in the table: using entry {chosen.version}, the newest entry at or below "
                         f"{base}; {unconfirmed_for} {base}")
    if suffix:
        kind = "a pre-release (rc)" if is_prerelease(suffix) else f"not a plain release (suffix {suffix!r})"
        if match == "exact":
            match = "prerelease"
            notes.append(f"{text} is {kind} of {base}: using its base entry, {chosen.version}; it may differ "
                         f"from the final {base} release (flags, LlmArgs keys, metrics)")
        else:
            notes.append(f"{text} is {kind}, which may differ from {base} itself")
    if match == "exact":
        return ReleaseChoice(chosen, text, named_by, match, upper,
                             f"{_shown(text, named_by)}: table entry {chosen.version} ({TABLE_PATH}); "
                             f"stats from {stats_text(chosen)}")
    return ReleaseChoice(chosen, text, named_by, match, upper,
                         f"{_shown(text, named_by)}: " + "; ".join(notes) + f"; stats from {stats_text(chosen)}; "
                         f"check it with `harness plan --validate` in the image, then add an entry to {TABLE_PATH}")


def release_for(engine: EngineSpec) -> tuple[Release, str]:
    """The table entry for an engine and a sentence on how it was chosen (raises :class:`UnknownRelease`)."""
    choice = choose_release(engine)
    return choice.release, choice.message


def _upper(release: Release) -> str | None:
    later = [r for r in releases() if r.key() > release.key()]
    return later[0].version if later else None


def stats_text(release: Release) -> str:
    """Where the harness reads server statistics for a release, in words."""
    eps = release.endpoints
    if release.stats_source == "json":
        return f"JSON {eps.metrics_json}"
    if release.stats_source == "prometheus":
        return (f"{eps.prometheus} only (JSON {eps.metrics_json or '/metrics'} not polled: this release's stats "
                "collector drains its queue)")
    return f"JSON {eps.metrics_json} and {eps.prometheus}"


def release_facts(choice: ReleaseChoice) -> dict[str, object]:
    """What the chosen entry assumes, sent with each arm to the in-image check (which compares it with the image)."""
    rel = choice.release
    return {"entry": rel.version, "covers_below": choice.upper, "requested": choice.requested,
            "return_perf_metrics": "return_perf_metrics" in rel.llm_args,
            "tokens_per_block": "tokens_per_block" in rel.kv_cache_config,
            "prometheus_route": rel.endpoints.prometheus, "stats_source": rel.stats_source,
            "collector_drains_json": rel.collector_drains_json}

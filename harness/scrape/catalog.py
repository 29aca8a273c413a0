"""Metric catalogs: which real series an engine release exposes for each canonical quantity.

Metric names are data (``harness/engines/catalogs/<engine>-<version>.yaml``): one file per engine and first release it
applies to. Each canonical quantity (``hit_tokens.gpu``, ``ttft_seconds``, ...) lists the series looked for, in order;
the first one present in the scrapes wins. When none is present the quantity is ``None`` and the names that were
looked for are reported as missing: a renamed metric never reads as 0.

A source may scale a value (``scale``), multiply or divide it by another series of the same scrape (TensorRT-LLM's
``reusedBlocks`` x ``tokensPerBlock``), and subtract other series (``minus``: recomputed = prompt - hits).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.engines.spec import MetricsFormat
from harness.engines.trtllm_versions import releases as trtllm_releases
from harness.engines.trtllm_versions import version_key

Kind = Literal["counter", "gauge", "histogram"]
Aggregate = Literal["sum", "max", "mean"]

CANONICAL: dict[str, tuple[Kind, str]] = {
    "hit_tokens.gpu": ("counter", "prompt tokens whose KV was already in the GPU prefix cache"),
    "hit_tokens.cpu": ("counter", "prompt tokens whose KV was promoted from the CPU tier"),
    "hit_tokens.disk": ("counter", "prompt tokens whose KV was promoted from the disk tier"),
    "hit_tokens.total": ("counter", "prompt tokens served from any cache tier"),
    "recomputed_tokens": ("counter", "prompt tokens computed (cache misses)"),
    "prompt_tokens": ("counter", "prompt tokens processed"),
    "prefix_queries": ("counter", "prompt tokens looked up in the prefix cache"),
    "offload.store_bytes": ("counter", "bytes written from GPU to the offload tier"),
    "offload.load_bytes": ("counter", "bytes read from the offload tier into GPU"),
    "offload.store_time_s": ("counter", "seconds spent storing to the offload tier"),
    "offload.load_time_s": ("counter", "seconds spent loading from the offload tier"),
    "disk.read_bytes": ("counter", "bytes read from the disk tier"),
    "disk.write_bytes": ("counter", "bytes written to the disk tier"),
    "preemptions": ("counter", "requests preempted"),
    "cpu_tier_pinned": ("gauge", "share of CPU-tier chunks pinned by in-flight transfers (not how full it is)"),
    "cpu_tier_usage": ("gauge", "how full the CPU (host) tier is (fraction)"),
    "kv_usage": ("gauge", "GPU KV-cache usage (fraction)"),
    "running": ("gauge", "requests running"),
    "waiting": ("gauge", "requests waiting"),
    "tier.stores_dropped": ("counter", "stores a secondary tier dropped under back-pressure (per tier)"),
    "tier.blocks_dropped": ("counter", "blocks a secondary tier dropped under back-pressure (per tier)"),
    "tier.promotion_failures": ("counter", "promotion jobs (tier -> CPU) that failed (per tier)"),
    "tier.cascade_failures": ("counter", "cascade jobs (CPU -> tier) that failed (per tier)"),
    "tier.promotion_allocation_failures": ("counter", "promotions that could not allocate CPU-tier space"),
    "tier.chunk_queries": ("counter", "offloaded chunks looked up (per tier)"),
    "tier.chunk_hits": ("counter", "offloaded chunks found (per tier)"),
    "offload.allocation_failures": ("counter", "offload store allocations that failed"),
    "offload.lookup_sync_delay_seconds": ("histogram", "time spent in one offload lookup call"),
    "offload.lookup_async_delay_seconds": ("histogram", "time from a deferred offload lookup to its resolution"),
    "ttft_seconds": ("histogram", "server-side time to first token"),
    "itl_seconds": ("histogram", "server-side inter-token latency"),
    "e2e_seconds": ("histogram", "server-side end-to-end request latency"),
    "queue_seconds": ("histogram", "server-side time in queue"),
}
CATALOG_PACKAGE = "harness.engines"
CATALOG_DIR = "catalogs"
_VERSION_RE = re.compile(r"^v?(\d+(?:\.\d+)*)")


class CatalogError(ValueError):
    """A catalog file is malformed or no catalog matches the engine."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Term(_Model):
    """One series selector: a sample name and label matchers; values of all matching samples are aggregated."""

    series: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict, description="exact label values")
    label_regex: dict[str, str] = Field(default_factory=dict, description="label values matched in full by a regex")

    @field_validator("label_regex")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for key, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"label_regex[{key!r}] is not a valid regex: {exc}") from None
        return value

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a sample's labels satisfy this selector."""
        for key, want in self.labels.items():
            if labels.get(key) != want:
                return False
        return all(re.fullmatch(p, labels.get(k, "")) for k, p in self.label_regex.items())

    def display(self) -> str:
        """The selector as PromQL-like text, e.g. ``name{source="host"}``."""
        parts = [f'{k}="{v}"' for k, v in sorted(self.labels.items())]
        parts += [f'{k}=~"{v}"' for k, v in sorted(self.label_regex.items())]
        return f"{self.series}{{{','.join(parts)}}}" if parts else self.series


class Source(Term):
    """One way to read a canonical quantity."""

    format: MetricsFormat = "prometheus"
    scale: float = 1.0
    multiply_by: str | None = Field(default=None, description="another series of the same scrape (no labels)")
    divide_by: str | None = None
    aggregate: Aggregate = "sum"
    minus: list[Term] = Field(default_factory=list, description="series subtracted (counters only)")
    split_by: str | None = Field(default=None, description="a label whose values each get a figure (e.g. tier)")
    note: str | None = None

    def display(self) -> str:
        """Human text naming every series this source needs."""
        text = super().display()
        if self.multiply_by:
            text += f" x {self.multiply_by}"
        if self.divide_by:
            text += f" / {self.divide_by}"
        for term in self.minus:
            text += f" - {term.display()}"
        return text

    def needed_series(self) -> set[str]:
        """Every sample name this source reads (for pre-filtering expositions)."""
        names = {self.series, *(t.series for t in self.minus)}
        names |= {n for n in (self.multiply_by, self.divide_by) if n}
        return names


class Catalog(_Model):
    """The metric names of one engine release range."""

    engine: str
    min_version: str = "0"
    description: str = ""
    confirmed: bool = False
    quantities: dict[str, list[Source]] = Field(default_factory=dict)
    not_exposed: dict[str, str] = Field(default_factory=dict, description="quantity -> why the engine lacks it")
    when_absent: dict[str, str] = Field(default_factory=dict, description="quantity -> why it is not available "
                                        "when none of its series is present (reported with the names looked for)")
    offload_only: list[str] = Field(default_factory=list, description="quantities that exist only with offload on")
    name: str = ""

    @field_validator("quantities", "not_exposed", "when_absent")
    @classmethod
    def _known(cls, value: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(value) - set(CANONICAL))
        if unknown:
            raise ValueError(f"unknown canonical quantities {unknown}; known: {', '.join(CANONICAL)}")
        return value

    def kind(self, quantity: str) -> Kind:
        """Counter, gauge or histogram."""
        return CANONICAL[quantity][0]

    def sources(self, quantity: str) -> list[Source]:
        """The sources tried for a quantity, in order (empty when the engine does not expose it)."""
        if quantity not in CANONICAL:
            raise KeyError(f"unknown canonical quantity {quantity!r}")
        return self.quantities.get(quantity, [])

    def looked_for(self, quantity: str) -> str:
        """What a report says was looked for: the series names, or why the engine lacks the quantity."""
        sources = self.sources(quantity)
        if not sources:
            why = self.not_exposed.get(quantity, "no series known")
            return f"{quantity} ({self.name or self.engine}: {why})"
        absent = self.when_absent.get(quantity)
        return f"{' or '.join(s.display() for s in sources)} ({quantity}{'; ' + absent if absent else ''})"

    def needed_series(self, fmt: MetricsFormat) -> set[str]:
        """Sample names (histogram bases expanded) read from expositions of one format."""
        names: set[str] = set()
        for quantity, sources in self.quantities.items():
            for src in sources:
                if src.format != fmt:
                    continue
                for name in src.needed_series():
                    names.add(name)
                    if self.kind(quantity) == "histogram":
                        names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
        return names


def parse_version(text: str) -> tuple[int, ...]:
    """``v0.32.0`` / ``0.32.0rc1`` / ``1.0`` -> a comparable tuple; a clear error for anything else."""
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise CatalogError(f"cannot read an engine version from {text!r} (expected e.g. 0.32.0 or v0.32.0)")
    return tuple(int(p) for p in match.group(1).split("."))


def _catalog_files() -> list[tuple[str, str]]:
    root = resources.files(CATALOG_PACKAGE).joinpath(CATALOG_DIR)
    return sorted((entry.name, entry.read_text(encoding="utf-8")) for entry in root.iterdir()
                  if entry.name.endswith(".yaml"))


def parse_catalog(text: str, name: str) -> Catalog:
    """Validate one catalog document (``name`` is used in error messages)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"catalog {name}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise CatalogError(f"catalog {name}: expected a mapping at the top level")
    raw.setdefault("name", name.removesuffix(".yaml"))
    try:
        return Catalog.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CatalogError(f"catalog {name}: {where}: {first['msg']}") from None


@cache
def all_catalogs() -> tuple[Catalog, ...]:
    """Every shipped catalog."""
    return tuple(parse_catalog(text, name) for name, text in _catalog_files())


def load_catalog(engine: str, version: str | None = None, *, flavor: str | None = None) -> Catalog:
    """The catalog for an engine release: the newest whose ``min_version`` is at or below ``version``.

    ``version=None`` picks the newest catalog. The simulator (``sim``) speaks the vLLM names in its ``vllm`` flavor
    (the default) and the TensorRT-LLM names in its ``trtllm`` flavor.
    """
    if engine == "sim":
        engine = flavor or "vllm"
    candidates = sorted((c for c in all_catalogs() if c.engine == engine), key=lambda c: parse_version(c.min_version))
    if not candidates:
        known = sorted({c.engine for c in all_catalogs()})
        raise CatalogError(f"no metric catalog for engine {engine!r}; known: {', '.join(known)}")
    if version is None:
        return candidates[-1]
    want = parse_version(version)
    fitting = [c for c in candidates if parse_version(c.min_version) <= want]
    if not fitting:
        raise CatalogError(f"no {engine} metric catalog covers version {version}; the oldest starts at "
                           f"{candidates[0].min_version}")
    return fitting[-1]


def version_from_image(image: str | None) -> str | None:
    """The release in an image tag (``vllm/vllm-openai:v0.32.0`` -> ``0.32.0``), or None if the tag is not one."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", tag)
    return match.group(1) if match else None


def catalog_for_engine(kind: str, image: str | None = None, *, sim_flavor: str = "vllm",
                       version: str | None = None) -> Catalog:
    """The catalog for a scenario's engine (``EngineSpec.kind``, ``.image``, ``.sim_flavor``, ``.version``).

    TensorRT-LLM's catalog follows its version table (:mod:`harness.engines.trtllm_versions`), so it reads the
    endpoints the launch scrapes: ``engine.version`` else the image tag, and with neither the table's oldest entry
    (not the newest catalog); ``version`` is ignored for other engines.
    """
    if kind == "trtllm":
        return load_catalog(kind, _trtllm_catalog_version(image, version))
    return load_catalog(kind, None if kind == "sim" else version_from_image(image), flavor=sim_flavor)


def _trtllm_catalog_version(image: str | None, version: str | None) -> str:
    table = trtllm_releases()
    want = version_key(version) or version_key(version_from_image(image))
    if want is None:
        return table[0].version
    fitting = [r for r in table if r.key() <= want]
    return (fitting[-1] if fitting else table[0]).version

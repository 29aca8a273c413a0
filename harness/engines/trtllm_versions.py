"""The TensorRT-LLM version table (``trtllm-versions.yaml``): which flags, YAML keys and endpoints a release has.

The entry for an engine is the newest whose ``version`` is at or below the release named by the image tag
(``nvcr.io/nvidia/tensorrt-llm/release:1.0.0`` -> 1.0.0) or ``engine.version``; with neither, the oldest entry (the
most conservative: it renders the fewest keys) and :func:`release_for` says so.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

from harness.config.engine import EngineSpec

TABLE_FILE = "trtllm-versions.yaml"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class Endpoints(BaseModel):
    """HTTP endpoints of one release (None: the release has none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    health: str = "/health"
    metrics_json: str | None = "/metrics"
    prometheus: str | None = None


class Release(BaseModel):
    """One TensorRT-LLM release range of the table."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: str
    confirmed: bool = False
    sources: list[str] = Field(default_factory=list)
    cli_flags: list[str]
    config_flag: str
    llm_args: list[str]
    kv_cache_config: list[str]
    needs: dict[str, bool] = Field(default_factory=dict)
    endpoints: Endpoints
    unconfirmed: list[str] = Field(default_factory=list)

    def key(self) -> tuple[int, ...]:
        """The version as a comparable tuple."""
        return version_key(self.version) or (0,)


def version_key(text: str | None) -> tuple[int, ...] | None:
    """``1.1.0rc5`` -> (1, 1, 0); None when the text names no release."""
    match = _VERSION_RE.search(text or "")
    if not match:
        return None
    return tuple(int(g) for g in match.groups(default="0"))


@cache
def releases() -> tuple[Release, ...]:
    """Every entry, oldest first."""
    text = resources.files("harness.engines").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    return tuple(sorted((Release.model_validate(r) for r in raw["releases"]), key=Release.key))


def engine_release_text(engine: EngineSpec) -> str | None:
    """The release the scenario names: ``engine.version``, else the image tag."""
    if engine.version:
        return engine.version
    if engine.image and ":" in engine.image.rsplit("/", 1)[-1]:
        return engine.image.rsplit(":", 1)[1]
    return None


def release_for(engine: EngineSpec) -> tuple[Release, str]:
    """The table entry for an engine and a sentence on how it was chosen."""
    table = releases()
    text = engine_release_text(engine)
    want = version_key(text)
    if want is None:
        return table[0], (f"no TensorRT-LLM release named (image tag or engine.version): using the oldest table "
                          f"entry, {table[0].version}")
    fitting = [r for r in table if r.key() <= want]
    if not fitting:
        return table[0], f"release {text} predates the table: using its oldest entry, {table[0].version}"
    chosen = fitting[-1]
    exact = "" if chosen.key() == want else f" (newest entry at or below {text})"
    return chosen, f"TensorRT-LLM {text}: table entry {chosen.version}{exact}"

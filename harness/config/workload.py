"""The ``workload`` section: request classes, reuse structure and trace replay (identical in every arm)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.config.base import StrictModel
from harness.config.text import Name, PathText


class TokenRange(StrictModel):
    """An inclusive token-length range, drawn uniformly."""

    min: int = Field(ge=1, le=10_000_000)
    max: int = Field(ge=1, le=10_000_000)

    @model_validator(mode="after")
    def _ordered(self) -> TokenRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class RequestClass(StrictModel):
    """A class of requests (e.g. short chat, long document question) with a mixing weight.

    ``prompt_tokens`` is the whole prompt (shared prefix included; a prefix longer than the drawn length is
    cut); for a multi-turn session it is the new user text of each turn, and the history grows on top of it.
    """

    name: Name = Field(min_length=1, max_length=64)
    weight: float = Field(gt=0, le=1_000_000)
    prompt_tokens: TokenRange
    output_tokens: TokenRange
    reuse: Literal["system_prompt", "rag", "session", "document", "unique", "any"] = Field(
        default="any", description="which reuse structure the class draws its prefix from")


class SystemPrompts(StrictModel):
    """N distinct system prompts of L tokens, picked with Zipf popularity."""

    families: int = Field(default=8, ge=1, le=1_000_000)
    tokens: int = Field(default=1024, ge=1, le=1_000_000)
    zipf_s: float = Field(default=1.1, ge=0, le=10)


class RagScaffold(StrictModel):
    """A template plus K of M documents."""

    template_tokens: int = Field(default=256, ge=0, le=1_000_000)
    documents: int = Field(default=32, ge=1, le=1_000_000)
    docs_per_request: int = Field(default=3, ge=1, le=1000)
    doc_tokens: int = Field(default=1024, ge=1, le=1_000_000)
    zipf_s: float = Field(default=1.0, ge=0, le=10)

    @model_validator(mode="after")
    def _k_of_m(self) -> RagScaffold:
        if self.docs_per_request > self.documents:
            raise ValueError(f"docs_per_request ({self.docs_per_request}) exceeds documents "
                             f"({self.documents})")
        return self


class Sessions(StrictModel):
    """Multi-turn sessions: each turn appends to the history."""

    turns: int = Field(default=4, ge=1, le=10_000)
    think_time_s: float = Field(default=0.0, ge=0, le=3600)


class Documents(StrictModel):
    """Repeated long document prefixes."""

    count: int = Field(default=16, ge=1, le=1_000_000)
    tokens: int = Field(default=4096, ge=1, le=10_000_000)
    zipf_s: float = Field(default=1.0, ge=0, le=10)


class ReuseSpec(StrictModel):
    """How prompts share prefixes."""

    system_prompts: SystemPrompts | None = Field(default_factory=SystemPrompts)
    rag: RagScaffold | None = None
    sessions: Sessions | None = None
    documents: Documents | None = None
    unique_fraction: float = Field(default=0.0, ge=0, le=1,
                                   description="share of requests with no shared prefix")


class TraceSource(StrictModel):
    """Replay of a Mooncake-format JSONL trace."""

    path: PathText = Field(min_length=1)
    format: Literal["mooncake"] = "mooncake"
    mode: Literal["timestamps", "closed_loop"] = "timestamps"
    speed: float = Field(default=1.0, gt=0, le=10_000, description="mode timestamps: the timestamps are divided "
                         "by it")
    on_bad_line: Literal["skip", "stop"] = "stop"
    max_requests: int | None = Field(default=None, ge=1)
    block_tokens: int = Field(default=512, ge=1, le=1_000_000, description="tokens per hash_ids block "
                              "(512 in the published Mooncake traces)")
    share_across_steps: bool = Field(default=False, description="false: every step replays the trace with "
                                     "fresh block contents (sharing only inside the step); true: the same "
                                     "blocks in every step, so later steps find earlier steps' prefixes "
                                     "cached")

    @model_validator(mode="after")
    def _speed_paces_timestamps(self) -> TraceSource:
        if self.mode == "closed_loop" and self.speed != 1.0:
            raise ValueError("speed scales the timestamps (mode: timestamps); mode: closed_loop ignores them: "
                             "remove speed")
        return self


class WorkloadSpec(StrictModel):
    """The traffic: synthetic classes with a reuse structure, or a trace to replay."""

    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    api: Literal["chat", "completions"] = "chat"
    classes: list[RequestClass] = Field(default_factory=list)
    reuse: ReuseSpec = Field(default_factory=ReuseSpec)
    trace: TraceSource | None = None
    ignore_eos: bool = Field(default=True, description="ask for exactly the planned output length")
    temperature: float = Field(default=0.0, ge=0, le=2)
    hash_block_tokens: int = Field(default=512, ge=1, le=1_000_000, description="block size of the chained "
                                   "prefix hashes written with every request record (for the trace analyser)")

    @model_validator(mode="after")
    def _source(self) -> WorkloadSpec:
        if self.trace is None and not self.classes:
            raise ValueError("give request classes (workload.classes) or a trace (workload.trace)")
        if self.trace is not None and (self.classes or self.reuse != ReuseSpec()):
            raise ValueError("a trace replays its own requests and prefixes: workload.classes and workload.reuse "
                             "are not used with workload.trace; remove them (or the trace)")
        names = [c.name for c in self.classes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"request class names must be unique; repeated: {', '.join(dupes)}")
        configured = {"system_prompt": self.reuse.system_prompts, "rag": self.reuse.rag,
                      "session": self.reuse.sessions, "document": self.reuse.documents}
        for cls in self.classes:
            if cls.reuse in configured and configured[cls.reuse] is None:
                section = {"system_prompt": "system_prompts", "rag": "rag", "session": "sessions",
                           "document": "documents"}[cls.reuse]
                raise ValueError(f"request class {cls.name!r} draws its prefix from {cls.reuse!r} but "
                                 f"workload.reuse.{section} is not configured")
        self._reuse_drawn()
        return self

    def _reuse_drawn(self) -> None:
        """Refuse a reuse structure no request class draws from: ``reuse`` naming it, ``any`` (not sessions), and
        for system prompts also ``session`` (a session opens with one)."""
        if self.trace is not None:
            return
        drawn = {c.reuse for c in self.classes}
        sections: dict[str, tuple[str, StrictModel | None]] = {
            "system_prompt": ("system_prompts", SystemPrompts()), "rag": ("rag", None),
            "session": ("sessions", None), "document": ("documents", None)}
        for structure, (section, default) in sections.items():
            value = getattr(self.reuse, section)
            # any never draws sessions; a session opens with a system prompt when they are configured
            takers = {"session"} if structure == "session" else {structure, "any"} | (
                {"session"} if structure == "system_prompt" else set())
            if value is not None and value != default and not drawn & takers:
                raise ValueError(f"workload.reuse.{section} is configured but no request class draws from it "
                                 f"(reuse: {' or '.join(sorted(takers))}): remove it, or name it in a class's reuse")

    def class_names(self) -> list[str]:
        """Names of the request classes, in scenario order."""
        return [c.name for c in self.classes]

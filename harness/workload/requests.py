"""One planned request: what to send, what it shares, and when (the unit of a step's plan)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.workload.text import chain_hashes
from harness.workload.tokens import TokenCalibration

Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """A request as planned, before it is sent (identical in every arm for the same scenario and seed)."""

    key: str  # unique inside a step's plan
    user: int  # closed loop: the user that sends it; open loop: the arrival number
    seq: int  # position in the user's (or the arrival) sequence
    request_class: str
    prefix_family: str | None
    session_id: str | None
    turn: int | None
    api: str  # chat | completions
    messages: tuple[Message, ...]  # chat: the messages; completions: one ("prompt", text) entry
    prompt_tokens_target: int
    output_tokens_target: int
    offset_s: float | None  # open loop: planned send time after the step start
    think_s: float  # closed loop: pause after this user's previous request ended
    hash_ids: tuple[int, ...]
    trace_line: int | None = None

    @property
    def prompt_text(self) -> str:
        """The completions prompt, or the chat contents joined (for logging)."""
        return "\n".join(content for _, content in self.messages)

    def body(self, model: str, *, ignore_eos: bool, temperature: float) -> dict[str, Any]:
        """The OpenAI-compatible streaming request body."""
        body: dict[str, Any] = {"model": model, "max_tokens": self.output_tokens_target, "stream": True,
                                "stream_options": {"include_usage": True}, "temperature": temperature}
        if self.api == "completions":
            body["prompt"] = self.messages[0][1]
        else:
            body["messages"] = [{"role": role, "content": content} for role, content in self.messages]
        if ignore_eos:
            body["ignore_eos"] = True
        return body

    def to_json(self) -> dict[str, Any]:
        """Every field, for plan serialisation and fingerprints."""
        return {"key": self.key, "user": self.user, "seq": self.seq, "class": self.request_class,
                "family": self.prefix_family, "session": self.session_id, "turn": self.turn, "api": self.api,
                "messages": [list(m) for m in self.messages],
                "prompt_tokens_target": self.prompt_tokens_target,
                "output_tokens_target": self.output_tokens_target, "offset_s": self.offset_s,
                "think_s": self.think_s, "hash_ids": list(self.hash_ids), "trace_line": self.trace_line}

    def to_line(self) -> bytes:
        """Canonical JSON line (sorted keys, no spaces)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


@dataclass(frozen=True, slots=True)
class Shape:
    """Where a draft request goes and what it is (filled into a :class:`PlannedRequest`)."""

    key: str
    user: int
    seq: int
    request_class: str
    prefix_family: str | None = None
    session_id: str | None = None
    turn: int | None = None
    offset_s: float | None = None
    think_s: float = 0.0
    trace_line: int | None = None


def finalize(shape: Shape, api: str, messages: list[tuple[str, list[str]]], output_tokens: int, *,
             calib: TokenCalibration, hash_block_tokens: int) -> PlannedRequest:
    """Join the words, count the target tokens and hash the blocks of a drafted request."""
    if api == "completions":
        words = [w for _, ws in messages for w in ws]
        units = words
        joined: tuple[Message, ...] = (("prompt", " ".join(words)),)
        overhead = calib.overhead(api)
        content_words = len(words)
    else:
        units = []
        for role, ws in messages:
            units.append(f"<|{role}|>")
            units.extend(ws)
        units.append("<|assistant|>")
        joined = tuple((role, " ".join(ws)) for role, ws in messages)
        overhead = calib.overhead(api, len(messages))
        content_words = sum(len(ws) for _, ws in messages)
    block = max(1, round(hash_block_tokens / calib.tokens_per_word))
    return PlannedRequest(
        key=shape.key, user=shape.user, seq=shape.seq, request_class=shape.request_class,
        prefix_family=shape.prefix_family, session_id=shape.session_id, turn=shape.turn, api=api,
        messages=joined, prompt_tokens_target=calib.tokens_for(content_words) + overhead,
        output_tokens_target=output_tokens, offset_s=shape.offset_s, think_s=shape.think_s,
        hash_ids=tuple(chain_hashes(units, block)), trace_line=shape.trace_line)

"""OpenAI-compatible request parsing and response formatting, shaped like vLLM's.

Streaming (``stream: true``) sends ``data: {json}\\n\\n`` per token: chat chunks carry
``choices[0].delta.content`` (preceded by one ``{"role": "assistant", "content": ""}`` chunk, as vLLM sends),
completion chunks ``choices[0].text``. The chunk with the last token carries ``finish_reason`` ("length"); with
``stream_options.include_usage`` one more chunk has empty ``choices`` and ``usage``; then ``data: [DONE]``.
Every body has ``"system_fingerprint": "harness-sim"``; ids are ``chatcmpl-sim-<hex>`` / ``cmpl-sim-<hex>``.
``usage.prompt_tokens_details.cached_tokens`` is always reported (GPU + CPU + disk hit tokens).

Defaults: ``max_tokens`` 16 for completions (vLLM's default); for chat ``min(max_model_len - prompt,
CHAT_DEFAULT_MAX_TOKENS)`` -- vLLM would generate until EOS or the context is full; the simulator has no EOS.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from harness.sim.tokenizer import VOCAB, PromptError, render_chat, tokenize_prompt

FINGERPRINT = "harness-sim"
COMPLETION_DEFAULT_MAX_TOKENS = 16
CHAT_DEFAULT_MAX_TOKENS = 1024
DONE = b"data: [DONE]\n\n"
TOKEN_TEXT: tuple[str, ...] = tuple(" " + w for w in VOCAB)


class ApiError(Exception):
    """An error answered as JSON with an HTTP status."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type

    def body(self) -> bytes:
        return json.dumps({"error": {"message": self.message, "type": self.err_type, "param": None,
                                     "code": self.status}}).encode()


def error_response(status: int, message: str, err_type: str) -> web.Response:
    """A JSON error response (``{"error": {"message", "type", "param", "code"}}``)."""
    return web.Response(status=status, body=ApiError(status, message, err_type).body(),
                        content_type="application/json")


@dataclass
class ParsedRequest:
    kind: str  # "chat" | "completion"
    prompt_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    seed: int | None


def _opt_int(body: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(400, f"'{key}' must be an integer")
        return value
    return None


def parse_request(body: Any, kind: str, served_names: tuple[str, ...], max_model_len: int) -> ParsedRequest:
    """Validate a completions/chat body; raises :class:`ApiError` (400/404) like vLLM."""
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model not in served_names:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError")
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, "the simulator supports n=1 only")
    try:
        if kind == "chat":
            messages = body.get("messages")
            if not isinstance(messages, list):
                raise ApiError(400, "'messages' must be a list")
            prompt_ids = render_chat(messages)
        else:
            if "prompt" not in body:
                raise ApiError(400, "'prompt' is required")
            prompt_ids = tokenize_prompt(body["prompt"])
    except PromptError as exc:
        raise ApiError(400, str(exc)) from exc
    if not prompt_ids:
        raise ApiError(400, "The prompt cannot be empty.")
    plen = len(prompt_ids)
    max_tokens = _opt_int(body, "max_completion_tokens", "max_tokens") if kind == "chat" else _opt_int(
        body, "max_tokens")
    if max_tokens is None:
        default = CHAT_DEFAULT_MAX_TOKENS if kind == "chat" else COMPLETION_DEFAULT_MAX_TOKENS
        max_tokens = min(default, max_model_len - plen)
        max_tokens = max(max_tokens, 1)
    if max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.")
    if plen + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{plen + max_tokens} tokens ({plen} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
        )
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options") or {}
    include_usage = bool(isinstance(opts, dict) and opts.get("include_usage"))
    seed = _opt_int(body, "seed")
    return ParsedRequest(kind, prompt_ids, max_tokens, stream, include_usage, seed)


_ID_PREFIX = os.urandom(4).hex()
_ids = itertools.count(1)


def new_request_id(kind: str) -> str:
    """``chatcmpl-sim-<hex>`` / ``cmpl-sim-<hex>``, unique within and across processes."""
    head = "chatcmpl-sim-" if kind == "chat" else "cmpl-sim-"
    return f"{head}{_ID_PREFIX}{next(_ids):08x}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


class ChunkFormatter:
    """Pre-rendered SSE chunk templates for one streamed request (cheap per token)."""

    def __init__(self, kind: str, request_id: str, created: int, model: str) -> None:
        self.kind = kind
        head = (f'{{"id":"{request_id}","object":"{"chat.completion.chunk" if kind == "chat" else "text_completion"}"'
                f',"created":{created},"model":{json.dumps(model)},"system_fingerprint":"{FINGERPRINT}",')
        self._head = head
        if kind == "chat":
            self._pre = 'data: ' + head + '"choices":[{"index":0,"delta":{"content":"'
            self._post = '"},"logprobs":null,"finish_reason":null}]}\n\n'
            self._post_last = '"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'
        else:
            self._pre = 'data: ' + head + '"choices":[{"index":0,"text":"'
            self._post = '","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
            self._post_last = '","logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'

    def role_chunk(self) -> str:
        return ('data: ' + self._head
                + '"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                  '"finish_reason":null}]}\n\n')

    def token(self, idx: int, last: bool) -> str:
        return self._pre + TOKEN_TEXT[idx] + (self._post_last if last else self._post)

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> str:
        u = json.dumps(usage(prompt_tokens, completion_tokens, cached_tokens))
        return "data: " + self._head + '"choices":[],"usage":' + u + "}\n\n"


def full_response(kind: str, request_id: str, created: int, model: str, output_idx: list[int],
                  prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """A non-streamed chat/completion body."""
    text = "".join(TOKEN_TEXT[i] for i in output_idx)
    if kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None, "tool_calls": []},
            "logprobs": None, "finish_reason": "length", "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        obj = "text_completion"
    return {
        "id": request_id, "object": obj, "created": created, "model": model,
        "system_fingerprint": FINGERPRINT, "choices": [choice],
        "usage": usage(prompt_tokens, len(output_idx), cached_tokens),
    }

"""SSE decoding: token chunks, usage, cached tokens, and every malformed or incomplete case."""

from __future__ import annotations

import json

from harness.load.sse import SseDecoder


def chat_chunk(content: str | None, **extra: object) -> bytes:
    delta = {"content": content} if content is not None else {"role": "assistant"}
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}],
           **extra}
    return b"data: " + json.dumps(obj).encode() + b"\n"


def feed(decoder: SseDecoder, lines: list[bytes], start: int = 1000) -> bool:
    ended = False
    for i, line in enumerate(lines):
        ended = decoder.feed_line(line, start + i)
        if ended:
            break
    return ended


def test_chat_stream_with_usage_and_cached_tokens() -> None:
    dec = SseDecoder("chat")
    usage = {"prompt_tokens": 40, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 32}}
    lines = [chat_chunk(None), b"\n", b": keep-alive comment\n", chat_chunk("Hel"), b"\r\n", chat_chunk("lo"), b"\n",
             b'data: {"id":"chatcmpl-1","choices":[],"usage":' + json.dumps(usage).encode() + b"}\n", b"\n",
             b"data: [DONE]\n", b"\n"]
    assert feed(dec, lines)
    st = dec.state
    assert st.done and st.error_kind is None
    assert st.chunk_ns == [1003, 1005]  # data-line arrival times; the role-only chunk is not a token
    assert st.first_token_ns == 1003
    assert (st.prompt_tokens, st.completion_tokens, st.cached_tokens) == (40, 2, 32)
    assert st.response_id == "chatcmpl-1"


def test_completions_stream_and_multiline_data() -> None:
    dec = SseDecoder("completions")
    lines = [b'data: {"id":"cmpl-9","choices":[{"text":" a","finish_reason":null}]}\n', b"\n",
             b'data: {"id":"cmpl-9",\n', b'data: "choices":[{"text":" b","finish_reason":"length"}]}\n', b"\n",
             b"event: message\n", b"id: 3\n", b"retry: 10\n", b"data:[DONE]\n", b"\n"]
    assert feed(dec, lines)
    assert len(dec.state.chunk_ns) == 2 and dec.state.finish_reason == "length"
    assert dec.state.completion_tokens is None  # no usage: the caller counts chunks


def test_malformed_lines_end_the_stream() -> None:
    dec = SseDecoder("chat")
    assert feed(dec, [chat_chunk("x"), b"\n", b"<html>oops</html>\n"])
    assert dec.state.error_kind == "malformed_stream"
    assert "not an SSE line: <html>oops</html>" in (dec.state.error_detail or "")

    dec = SseDecoder("chat")
    assert feed(dec, [b"data: {broken json\n", b"\n"])
    assert dec.state.error_kind == "malformed_stream" and "not JSON" in (dec.state.error_detail or "")

    dec = SseDecoder("chat")
    assert feed(dec, [b"data: [1, 2]\n", b"\n"])
    assert dec.state.error_kind == "malformed_stream" and "not a JSON object" in (dec.state.error_detail or "")


def test_error_events_are_server_errors() -> None:
    dec = SseDecoder("chat")
    assert feed(dec, [b'data: {"error": {"message": "engine dead", "code": 500}}\n', b"\n"])
    assert dec.state.error_kind == "http_5xx" and "engine dead" in (dec.state.error_detail or "")
    dec = SseDecoder("chat")
    assert feed(dec, [b'data: {"error": {"message": "too long", "code": 400}}\n', b"\n"])
    assert dec.state.error_kind == "http_4xx"


def test_a_stream_without_done_is_incomplete() -> None:
    dec = SseDecoder("chat")
    assert not feed(dec, [chat_chunk("a"), b"\n", chat_chunk("b")])
    st = dec.finish()
    assert st.error_kind == "incomplete"
    assert st.chunk_ns == [1000, 1002]  # the pending event is dispatched at the end
    assert "2 token chunk(s)" in (st.error_detail or "")


def test_done_is_not_incomplete() -> None:
    dec = SseDecoder("completions")
    feed(dec, [b"data: [DONE]\n", b"\n"])
    assert dec.finish().error_kind is None

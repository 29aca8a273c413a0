"""One request on the virtual clock as its client sees it: sent, streamed token by token, ended; then one record.

The server's answer is the served simulator's, without the wire: response headers at once (``first_byte_ns`` is
the send time), one SSE chunk per token at the end of the engine step that made it (the chat role chunk carries no
token), the usage chunk and ``[DONE]`` with the last token. A request the server refuses is an ``http_4xx`` /
``http_5xx`` with the server's error body; a client-side end (``timeout``, ``stalled``, ``cancelled``) carries the
same detail text as :mod:`harness.load.client`. :meth:`VirtualExchange.record` builds the
:class:`~harness.rundir.records.RequestRecord` exactly as :class:`harness.load.driver.StepDriver` does.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.load.sse import excerpt
from harness.load.step import StepRun
from harness.rundir.records import ErrorKind, RequestRecord
from harness.sim.api import ApiError
from harness.sim.request import ReqState, SimRequest
from harness.workload.requests import PlannedRequest


class VirtualExchange:
    """One request's client-side observations (and the engine's listener for it)."""

    __slots__ = ("arrival_ns", "chunk_ns", "end_ns", "error_detail", "error_kind", "first_token_ns", "http_status",
                 "item", "last_token_ns", "on_end", "planned_ns", "req", "response", "user")

    def __init__(self, item: PlannedRequest, user: int, planned_ns: int, send_ns: int,
                 on_end: Callable[[VirtualExchange], None]) -> None:
        self.item = item
        self.user = user
        self.planned_ns = planned_ns
        self.arrival_ns = send_ns  # sent and arrived at once: no wire
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.chunk_ns: list[int] = []
        self.end_ns: int | None = None
        self.http_status: int | None = None
        self.error_kind: ErrorKind | None = None
        self.error_detail: str | None = None
        self.req: SimRequest | None = None
        self.response: tuple[int, int, int] | None = None  # usage: prompt, completion, cached tokens
        self.on_end = on_end

    @property
    def done(self) -> bool:
        """The client is finished with this request."""
        return self.end_ns is not None

    @property
    def last_activity_ns(self) -> int:
        """When the client last heard from the server (headers at send, then each chunk)."""
        return self.last_token_ns if self.last_token_ns is not None else self.arrival_ns

    def token(self, now_ns: int) -> None:
        """An SSE chunk with one token arrived."""
        if self.end_ns is None:
            self.chunk_ns.append(now_ns)

    def ended(self, req: SimRequest) -> None:
        """The server ended the stream: ``[DONE]`` after the last token, or a cut stream when the engine died."""
        if self.end_ns is not None:
            return
        if req.state == ReqState.FINISHED:
            self.response = (req.prompt_len, req.num_output, req.cached_tokens)
        else:
            self.error_kind = "incomplete"
            self.error_detail = f"the stream ended without [DONE] after {len(self.chunk_ns)} token chunk(s)"
        self.end_ns = self.last_token_ns if self.last_token_ns is not None else self.arrival_ns
        self.on_end(self)

    def refused(self, exc: ApiError, now_ns: int) -> None:
        """The server answered with an error status instead of a stream."""
        self.http_status = exc.status
        self.error_kind = "http_5xx" if exc.status >= 500 else "http_4xx"
        self.error_detail = f"HTTP {exc.status}: {excerpt(exc.body())}"[:300]
        self.end_ns = now_ns

    def fail(self, kind: ErrorKind, detail: str, now_ns: int) -> None:
        """The client ended the request (timeout, silence, a halt): the first failure wins."""
        if self.end_ns is not None:
            return
        self.error_kind = kind
        self.error_detail = detail[:300]
        self.end_ns = now_ns
        self.on_end(self)

    def record(self, spec: StepRun, tag: str, t0_ns: int, wall0_ns: int) -> RequestRecord:
        """The request's record (fields as :meth:`harness.load.driver.StepDriver._record` fills them)."""
        item = self.item
        prompt = completion = cached = None
        if self.response is not None:
            prompt, completion, cached = self.response
        output = completion
        if output is None and self.error_kind is None:
            output = len(self.chunk_ns)
        first = self.chunk_ns[0] if self.chunk_ns else None
        return RequestRecord(
            arm=spec.arm, step=spec.step_index, step_label=spec.step_label, concurrency=spec.level.concurrency,
            rate_rps=spec.level.rate_rps, user=self.user, request_id=f"{spec.arm}/{tag}/{item.key}",
            request_class=item.request_class, prefix_family=item.prefix_family, session_id=item.session_id,
            turn=item.turn, api=item.api, planned_send_ns=self.planned_ns, send_ns=self.arrival_ns,
            send_wall_ns=wall0_ns + (self.arrival_ns - t0_ns), first_byte_ns=self.arrival_ns,
            first_token_ns=first, end_ns=self.end_ns, chunk_ns=list(self.chunk_ns),
            prompt_tokens_target=item.prompt_tokens_target, output_tokens_target=item.output_tokens_target,
            prompt_tokens=prompt, output_tokens=output, cached_tokens=cached,
            http_status=self.http_status if self.http_status is not None else 200, error_kind=self.error_kind,
            error_detail=self.error_detail, response_id=self.req.request_id if self.req is not None and (
                self.chunk_ns or self.response is not None) else None,
            hash_ids=list(item.hash_ids), hash_block_tokens=spec.workload.hash_block_tokens, drill=spec.drill,
            drill_phase=spec.drill_phase, attempt=spec.attempt, first_token_parsed_ns=first,
            first_token_source="parsed" if first is not None else None)

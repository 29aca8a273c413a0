"""Trace replay: Mooncake JSONL -> prompts whose blocks reproduce exactly the trace's prefix sharing.

Each ``hash_ids`` entry becomes one block of ``block_tokens`` tokens whose content is named by the id (a key,
then filler; see :mod:`harness.workload.text`), so two requests share exactly the blocks their ``hash_ids`` share
and nothing after the first different id. The last block holds the rest of ``input_length`` (chat framing
tokens are taken from it, so the prompt still has ``input_length`` tokens).

Pacing: ``mode: timestamps`` sends each request at its timestamp (divided by ``speed``; an open-loop level
with ``rate_rps`` rescales the timestamps to that mean rate instead); ``mode: closed_loop`` ignores the
timestamps: the level's users take the requests in file order (user ``u`` of ``N`` takes requests
``u, u+N, u+2N, ...``), or Poisson arrivals at the level's ``rate_rps`` do.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from harness.config.workload import TraceSource, WorkloadSpec
from harness.trace.mooncake import BadLine, TraceFormatError, TraceRequest, read_mooncake
from harness.workload.requests import PlannedRequest, Shape, finalize
from harness.workload.synthesis import stream_rng
from harness.workload.text import segment, stable_key
from harness.workload.tokens import TokenCalibration

MAX_LISTED_LINES = 10


class TraceLoadError(ValueError):
    """A trace that cannot be replayed; the message names the file and the bad lines."""


@dataclass
class LoadedTrace:
    """A validated trace ready to replay."""

    path: Path
    requests: list[TraceRequest]
    bad_lines: list[BadLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last timestamp."""
        if not self.requests:
            return 0.0
        return (self.requests[-1].timestamp_ms - self.requests[0].timestamp_ms) / 1000.0

    def mean_rate_rps(self) -> float | None:
        """Mean arrival rate over the trace (None for fewer than two distinct timestamps)."""
        span = self.span_s
        return (len(self.requests) - 1) / span if span > 0 else None


def _check(req: TraceRequest, block: int, max_model_len: int | None) -> str | None:
    if req.input_length < 1:
        return "'input_length' must be at least 1 token"
    if req.output_length < 1:
        return "'output_length' must be at least 1 token"
    blocks = math.ceil(req.input_length / block)
    if len(req.hash_ids) != blocks:
        return (f"{len(req.hash_ids)} hash_ids for input_length {req.input_length}; expected {blocks} "
                f"(one per {block}-token block)")
    if max_model_len is not None and req.input_length + req.output_length > max_model_len:
        return (f"input_length + output_length = {req.input_length + req.output_length} exceeds the server's "
                f"max_model_len {max_model_len}")
    return None


def _describe(bad: list[BadLine]) -> str:
    shown = "; ".join(f"line {b.line_no}: {b.reason}" for b in bad[:MAX_LISTED_LINES])
    more = f" (and {len(bad) - MAX_LISTED_LINES} more)" if len(bad) > MAX_LISTED_LINES else ""
    return shown + more


def load_trace(source: TraceSource, *, max_model_len: int | None = None,
               base_dir: Path | None = None) -> LoadedTrace:
    """Read and check a trace; bad lines are skipped (and listed) or stop the load (``on_bad_line``)."""
    path = Path(source.path)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:  # read_mooncake refuses FIFOs, devices, huge files, over-long lines; too deep JSON is a bad line
        raw = read_mooncake(path, on_bad_line="skip")
    except TraceFormatError as exc:
        raise TraceLoadError(f"cannot read the trace: {exc}") from None
    except OSError as exc:
        raise TraceLoadError(f"{path}: cannot read the trace ({exc.strerror or exc})") from None
    bad = list(raw.bad_lines)
    good: list[TraceRequest] = []
    for req in raw.requests:
        reason = _check(req, source.block_tokens, max_model_len)
        if reason is None:
            good.append(req)
        else:
            bad.append(BadLine(req.line_no, reason))
    bad.sort(key=lambda b: b.line_no)
    if bad and source.on_bad_line == "stop":
        raise TraceLoadError(f"{path}: {len(bad)} bad line(s): {_describe(bad)}. Fix them, or set "
                             "workload.trace.on_bad_line: skip to replay the rest")
    loaded = LoadedTrace(path=path, requests=good, bad_lines=bad)
    if bad:
        loaded.warnings.append(f"{path}: skipped {len(bad)} bad line(s): {_describe(bad)}")
    if any(good[i].timestamp_ms < good[i - 1].timestamp_ms for i in range(1, len(good))):
        good.sort(key=lambda r: r.timestamp_ms)
        loaded.warnings.append(f"{path}: timestamps were not in order; requests replayed in timestamp order")
    if source.max_requests is not None:
        del good[source.max_requests:]
    if not good:
        raise TraceLoadError(f"{path}: no requests to replay" + (f" ({len(bad)} bad line(s))" if bad else ""))
    return loaded


class TraceGenerator:
    """Request streams replaying one trace inside one step."""

    def __init__(self, trace: LoadedTrace, workload: WorkloadSpec, calib: TokenCalibration, tag: str) -> None:
        assert workload.trace is not None
        self.trace = trace
        self.source: TraceSource = workload.trace
        self.wl = workload
        self.calib = calib
        self.salt = "trace" if self.source.share_across_steps else tag

    def request(self, index: int, shape: Shape) -> PlannedRequest:
        """Trace request ``index`` as a planned request (blocks named by its hash_ids)."""
        req = self.trace.requests[index]
        api = self.wl.api
        content_words = self.calib.words_for(req.input_length - self.calib.overhead(api))
        block_words = self.calib.words_for(self.source.block_tokens)
        words: list[str] = []
        last = len(req.hash_ids) - 1
        for j, h in enumerate(req.hash_ids):
            want = block_words if j < last else max(1, content_words - last * block_words)
            words.extend(segment(stable_key(self.wl.seed, self.salt, "blk", h), want))
        shape = replace(shape, prefix_family=f"blk:{req.hash_ids[0]}", trace_line=req.line_no)
        return finalize(shape, api, [("user", words)], req.output_length, calib=self.calib,
                        hash_block_tokens=self.wl.hash_block_tokens)

    def user_stream(self, user: int, users: int, think_s: float) -> Iterator[PlannedRequest]:
        """Closed loop: requests ``user, user + users, ...`` in file order."""
        for seq, index in enumerate(range(user, len(self.trace.requests), users)):
            yield self.request(index, Shape(key=f"t{index}", user=user, seq=seq, request_class="trace",
                                            think_s=think_s))

    def arrival_stream(self, rate_rps: float | None) -> Iterator[PlannedRequest]:
        """Open loop: ``timestamps`` mode sends each request at its (scaled) timestamp; ``closed_loop`` mode
        with a rate level sends the requests in file order at Poisson arrivals of that rate."""
        reqs = self.trace.requests
        if self.source.mode == "closed_loop" and rate_rps is not None:
            rng = stream_rng(self.wl.seed, self.salt, "trace-arrivals")
            offsets = np.cumsum(rng.exponential(1.0 / rate_rps, size=len(reqs))).tolist()
        else:
            scale = 1.0 / self.source.speed
            mean = self.trace.mean_rate_rps()
            if rate_rps is not None and mean is not None:
                scale = mean / rate_rps
            t0 = reqs[0].timestamp_ms
            offsets = [(req.timestamp_ms - t0) / 1000.0 * scale for req in reqs]
        for index, offset in enumerate(offsets):
            yield self.request(index, Shape(key=f"t{index}", user=index, seq=index, request_class="trace",
                                            offset_s=float(offset)))

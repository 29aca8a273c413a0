"""The columnar block trace that every analysis works on.

A trace of ``n`` requests is held as flat numpy arrays: per-request ``timestamps_ms``, ``input_tokens``,
``output_tokens`` and ``offsets`` (``n + 1`` entries) into one flat ``block_ids`` array, so request ``i``'s
blocks are ``block_ids[offsets[i]:offsets[i + 1]]``.  All blocks hold ``block_tokens`` tokens except that a
request's last block may be partial; tokens beyond a request's blocks are never cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.trace.mooncake import TraceRequest

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


@dataclass(frozen=True)
class BlockTrace:
    """Requests as flat arrays (see the module docstring); ``source`` names the file or generator."""

    timestamps_ms: F64
    input_tokens: I64
    output_tokens: I64
    offsets: I64
    block_ids: I64
    block_tokens: int
    source: str = ""

    def __post_init__(self) -> None:
        n = self.timestamps_ms.shape[0]
        if self.input_tokens.shape[0] != n or self.output_tokens.shape[0] != n:
            raise ValueError("per-request arrays differ in length")
        if self.offsets.shape[0] != n + 1 or int(self.offsets[0]) != 0:
            raise ValueError("offsets must have n + 1 entries starting at 0")
        if int(self.offsets[-1]) != self.block_ids.shape[0]:
            raise ValueError("offsets[-1] must equal the number of blocks")
        if self.block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")

    @property
    def n_requests(self) -> int:
        return int(self.timestamps_ms.shape[0])

    @property
    def n_blocks(self) -> int:
        return int(self.block_ids.shape[0])

    @property
    def blocks_per_request(self) -> I64:
        return np.diff(self.offsets)

    def in_time_order(self) -> BlockTrace:
        """The same trace with requests sorted by timestamp; ties keep file order (stable sort)."""
        order = np.argsort(self.timestamps_ms, kind="stable")
        if self.n_requests == 0 or bool(np.all(order[1:] > order[:-1])):
            return self
        lengths = self.blocks_per_request[order]
        offsets = np.zeros(self.n_requests + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # flat index of every block in the new order: its request's old start plus its position in the request
        shift = np.repeat(self.offsets[:-1][order] - offsets[:-1], lengths)
        flat = np.arange(self.n_blocks, dtype=np.int64) + shift
        return BlockTrace(
            timestamps_ms=self.timestamps_ms[order],
            input_tokens=self.input_tokens[order],
            output_tokens=self.output_tokens[order],
            offsets=offsets,
            block_ids=self.block_ids[flat],
            block_tokens=self.block_tokens,
            source=self.source,
        )

    def request_of_block(self) -> I64:
        """For every flat block, the index of its request."""
        return np.repeat(np.arange(self.n_requests, dtype=np.int64), self.blocks_per_request)

    def block_token_weights(self) -> I64:
        """Tokens in every flat block: ``block_tokens``, less for a request's partial last block, >= 0."""
        req = self.request_of_block()
        pos = np.arange(self.n_blocks, dtype=np.int64) - self.offsets[:-1][req]
        left = self.input_tokens[req] - pos * self.block_tokens
        weights: I64 = np.clip(left, 0, self.block_tokens)
        return weights


def _i64(values: Any) -> I64:
    arr: I64 = np.asarray(values, dtype=np.int64)
    return arr


def from_requests(requests: Sequence[TraceRequest], block_tokens: int, source: str = "") -> BlockTrace:
    """Columnar form of a list of :class:`TraceRequest` (file order kept)."""
    n = len(requests)
    lengths = np.fromiter((len(r.hash_ids) for r in requests), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    ids = np.fromiter(chain.from_iterable(r.hash_ids for r in requests), dtype=np.int64, count=total)
    return BlockTrace(
        timestamps_ms=np.fromiter((r.timestamp_ms for r in requests), dtype=np.float64, count=n),
        input_tokens=np.fromiter((r.input_length for r in requests), dtype=np.int64, count=n),
        output_tokens=np.fromiter((r.output_length for r in requests), dtype=np.int64, count=n),
        offsets=offsets,
        block_ids=_i64(ids),
        block_tokens=block_tokens,
        source=source,
    )


def from_lists(
    timestamps_ms: Sequence[float],
    hash_ids: Sequence[Sequence[int]],
    block_tokens: int,
    input_tokens: Sequence[int] | None = None,
    output_tokens: Sequence[int] | None = None,
    source: str = "",
) -> BlockTrace:
    """Build a trace from plain lists; ``input_tokens`` defaults to full blocks."""
    n = len(hash_ids)
    lengths = np.array([len(h) for h in hash_ids], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [h for ids in hash_ids for h in ids]
    inputs = lengths * block_tokens if input_tokens is None else _i64(list(input_tokens))
    outputs = np.zeros(n, dtype=np.int64) if output_tokens is None else _i64(list(output_tokens))
    return BlockTrace(
        timestamps_ms=np.asarray(list(timestamps_ms), dtype=np.float64),
        input_tokens=_i64(inputs),
        output_tokens=outputs,
        offsets=offsets,
        block_ids=_i64(flat) if flat else np.zeros(0, dtype=np.int64),
        block_tokens=block_tokens,
        source=source,
    )

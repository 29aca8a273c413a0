"""Trace analysis: prefix reuse, reuse distances, the exact LRU curve and tier splits, as one JSON document.

``harness analyze-trace --json`` prints :func:`analyze`'s ``document``.  Fields (ratios are 0..1; ``null`` where
the KV bytes per token are unknown, i.e. neither ``--kv-bytes-per-token`` nor ``--model-profile`` was given):

- ``schema``: ``"harness.trace-analysis/1"``.
- ``trace``: ``path``, ``format`` (``mooncake``/``records``/``prompts``), ``bad_lines`` (count skipped with
  ``--on-bad-line skip``), ``bad_line_numbers`` (first 20).
- ``block_tokens``, ``kv_bytes_per_token``, ``block_bytes`` (= block_tokens x kv_bytes_per_token).
- ``requests``; ``blocks`` (block accesses, the sum of all requests' block counts); ``unique_blocks``;
  ``prompt_tokens``; ``output_tokens``; ``duration_s`` (first to last timestamp).
- ``infinite_cache_hit_ratio``: share of blocks that are prefix hits with an unbounded cache.
- ``reused_prefix_token_share``: share of prompt tokens inside reused prefixes (the same, in tokens; tokens
  beyond a request's blocks count as not reused).
- ``requests_with_reuse``: share of requests whose first block is a hit with an unbounded cache.
- ``reuse_distance``: over every access to a block seen before (``count``): ``time_s`` (seconds since the
  block's previous access, 0 inside one request), ``blocks`` (LRU stack distance: distinct blocks touched since,
  itself included = the smallest LRU capacity that still holds it) and ``bytes`` (the same x ``block_bytes``).
  Each has ``p50``, ``p90``, ``p99``, ``max`` and ``histogram``: a list of ``{"le": upper bound or null for
  infinity, "count": n}`` (counts per bin, not cumulative).
- ``curve``: the exact LRU prefix-cache hit curve.  ``max_capacity_blocks`` / ``max_capacity_bytes``: the
  smallest capacity reaching the infinite-cache hits; ``points``: log-spaced capacities, each
  ``{"capacity_blocks", "capacity_bytes", "hit_blocks", "hit_ratio", "token_hit_ratio"}``, exact at those points
  (the curve is a step function between them).
- ``capacities``: one entry per ``--capacities`` value: ``given`` (as typed), ``capacity_blocks``,
  ``capacity_bytes``, ``hit_ratio`` (blocks), ``token_hit_ratio``, ``share_of_achievable`` (hits over the
  infinite-cache hits).
- ``capacity_for_share``: ``[{"share", "capacity_blocks", "capacity_bytes"}]``: the smallest capacity whose hits
  reach that share of the achievable (infinite-cache) block hits.
- ``tiers``: ``null`` or ``{"mode": "inclusive"|"exclusive", "rows": [...]}``, one row per CPU tier size:
  ``gpu``/``cpu``/``disk`` (each ``{"given", "blocks", "bytes"}``), ``hit_ratio`` and ``token_hit_ratio`` split
  into ``gpu``/``cpu``/``disk``/``miss`` (summing to 1), ``gpu_only_hit_ratio``, ``cpu_adds_hit_ratio``,
  ``cpu_adds_token_hit_ratio``, ``total_hit_ratio``.  See :mod:`harness.trace.tiers` for the model.
- ``warnings``: human sentences (skipped lines, lengths that disagree with the block count, unknown bytes).

Model: requests in timestamp order (ties keep file order); a request's hits are the longest leading run of its
blocks that are cached when it arrives; then all its blocks become most recently used in request order; LRU
eviction per block.  See :mod:`harness.trace.lru_curve`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.trace.blocks import BlockTrace
from harness.trace.lru_curve import LruCurve, StackDistances, curve_from_depths, stack_distances
from harness.trace.tiers import TierSpec, tier_splits
from harness.trace.units import Capacity

SCHEMA = "harness.trace-analysis/1"
DEFAULT_SHARES = (0.5, 0.8, 0.9, 0.95, 0.99)
TIME_BINS_S = (0.0, 0.1, 1.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0)
MAX_LISTED_BAD_LINES = 20


@dataclass(frozen=True)
class AnalysisOptions:
    """What to compute beyond the always-present statistics."""

    kv_bytes_per_token: int | None = None
    capacities: tuple[Capacity, ...] = ()
    shares: tuple[float, ...] = DEFAULT_SHARES
    tiers: TierSpec | None = None
    curve_points: int = 64


@dataclass
class TraceAnalysis:
    """The JSON ``document`` plus the full curve (for plots)."""

    document: dict[str, Any]
    curve: LruCurve
    block_bytes: int | None
    warnings: list[str] = field(default_factory=list)


def _quantiles(values: NDArray[Any]) -> dict[str, float | None]:
    if values.size == 0:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    qs = np.quantile(values, [0.5, 0.9, 0.99], method="inverted_cdf")
    return {"p50": float(qs[0]), "p90": float(qs[1]), "p99": float(qs[2]), "max": float(values.max())}


def _histogram(values: NDArray[Any], edges: list[float]) -> list[dict[str, float | int | None]]:
    """Counts per bin ``(edges[i-1], edges[i]]`` (the first bin is ``<= edges[0]``), plus an open last bin."""
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="left")
    counts = np.bincount(idx, minlength=len(edges) + 1)
    bins: list[dict[str, float | int | None]] = [
        {"le": edge, "count": int(c)} for edge, c in zip(edges, counts[: len(edges)], strict=True)
    ]
    bins.append({"le": None, "count": int(counts[len(edges)])})
    return bins


def _distribution(values: NDArray[Any], edges: list[float]) -> dict[str, Any]:
    return {**_quantiles(values), "histogram": _histogram(values, edges)}


def _pow2_edges(top: int) -> list[float]:
    edges: list[float] = []
    edge = 1
    while edge < top:  # bounded: log2(top) steps
        edges.append(float(edge))
        edge *= 2
    edges.append(float(edge))
    return edges


def reuse_distances(trace: BlockTrace, sd: StackDistances, block_bytes: int | None) -> dict[str, Any]:
    """The ``reuse_distance`` document (time, stack distance in blocks and in bytes)."""
    reused = np.flatnonzero(sd.prev >= 0)
    req = trace.request_of_block()
    dt_s = (trace.timestamps_ms[req[reused]] - trace.timestamps_ms[req[sd.prev[reused]]]) / 1000.0
    blocks = sd.distance[reused]
    block_edges = _pow2_edges(int(blocks.max()) if blocks.size else 1)
    doc: dict[str, Any] = {
        "count": int(reused.size),
        "time_s": _distribution(dt_s, list(TIME_BINS_S)),
        "blocks": _distribution(blocks, block_edges),
        "bytes": None,
    }
    if block_bytes is not None:
        doc["bytes"] = _distribution(blocks * block_bytes, [e * block_bytes for e in block_edges])
    return doc


def _log_capacities(top: int, points: int) -> list[int]:
    if top <= 0:
        return [0]
    grid = np.unique(np.rint(np.geomspace(1, top, num=max(2, points))).astype(np.int64))
    return [0, *(int(c) for c in grid)]


def curve_document(curve: LruCurve, block_bytes: int | None, points: int) -> dict[str, Any]:
    """The ``curve`` document: exact values at log-spaced capacities."""

    def nbytes(blocks: int) -> int | None:
        return blocks * block_bytes if block_bytes is not None else None

    return {
        "max_capacity_blocks": curve.max_capacity,
        "max_capacity_bytes": nbytes(curve.max_capacity),
        "points": [
            {
                "capacity_blocks": c,
                "capacity_bytes": nbytes(c),
                "hit_blocks": curve.blocks_at(c),
                "hit_ratio": curve.block_ratio_at(c),
                "token_hit_ratio": curve.token_ratio_at(c),
            }
            for c in _log_capacities(curve.max_capacity, points)
        ],
    }


def _capacity_rows(curve: LruCurve, caps: tuple[Capacity, ...], block_bytes: int | None) -> list[dict[str, Any]]:
    best = curve.blocks_at(curve.max_capacity)
    rows = []
    for cap in caps:  # bounded: the capacities given
        blocks = cap.to_blocks(block_bytes)
        rows.append(
            {
                "given": cap.text,
                "capacity_blocks": blocks,
                "capacity_bytes": blocks * block_bytes if block_bytes is not None else None,
                "hit_ratio": curve.block_ratio_at(blocks),
                "token_hit_ratio": curve.token_ratio_at(blocks),
                "share_of_achievable": curve.blocks_at(blocks) / best if best else 0.0,
            }
        )
    return rows


def _length_warnings(trace: BlockTrace) -> list[str]:
    nblocks = trace.blocks_per_request
    too_long = trace.input_tokens > nblocks * trace.block_tokens
    too_short = trace.input_tokens <= (nblocks - 1) * trace.block_tokens
    out = []
    if bool(too_long.any()):
        out.append(
            f"{int(too_long.sum())} request(s) have more prompt tokens than their blocks hold at "
            f"{trace.block_tokens} tokens per block; the extra tokens count as never reused"
        )
    if bool(too_short.any()):
        out.append(
            f"{int(too_short.sum())} request(s) have fewer prompt tokens than their block count implies at "
            f"{trace.block_tokens} tokens per block (is --block-tokens right?)"
        )
    return out


def analyze(
    trace: BlockTrace, options: AnalysisOptions | None = None, *, fmt: str = "mooncake", bad_lines: tuple[int, ...] = ()
) -> TraceAnalysis:
    """Analyse a (non-empty) trace.  ``bad_lines``: line numbers skipped while reading, for the report."""
    opts = options or AnalysisOptions()
    ordered = trace.in_time_order()
    block_bytes = ordered.block_tokens * opts.kv_bytes_per_token if opts.kv_bytes_per_token else None
    sd = stack_distances(ordered)
    weights = ordered.block_token_weights()
    total_tokens = int(ordered.input_tokens.sum())
    curve = curve_from_depths(sd.prefix_depth, weights, sd.cold, total_tokens)
    first_hit = sd.prefix_depth[ordered.offsets[:-1][ordered.blocks_per_request > 0]] < sd.cold
    warnings = _length_warnings(ordered)
    if bad_lines:
        warnings.insert(0, f"skipped {len(bad_lines)} bad line(s), first at line {bad_lines[0]}")
    if block_bytes is None:
        warnings.append("KV bytes per token unknown: pass --kv-bytes-per-token or --model-profile for byte figures")
    stamps = ordered.timestamps_ms
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "trace": {
            "path": ordered.source,
            "format": fmt,
            "bad_lines": len(bad_lines),
            "bad_line_numbers": list(bad_lines[:MAX_LISTED_BAD_LINES]),
        },
        "block_tokens": ordered.block_tokens,
        "kv_bytes_per_token": opts.kv_bytes_per_token,
        "block_bytes": block_bytes,
        "requests": ordered.n_requests,
        "blocks": ordered.n_blocks,
        "unique_blocks": int(np.count_nonzero(sd.prev < 0)),
        "prompt_tokens": total_tokens,
        "output_tokens": int(ordered.output_tokens.sum()),
        "duration_s": float(stamps[-1] - stamps[0]) / 1000.0 if stamps.size else 0.0,
        "infinite_cache_hit_ratio": curve.block_ratio_at(curve.max_capacity),
        "reused_prefix_token_share": curve.token_ratio_at(curve.max_capacity),
        "requests_with_reuse": float(first_hit.sum()) / ordered.n_requests if ordered.n_requests else 0.0,
        "reuse_distance": reuse_distances(ordered, sd, block_bytes),
        "curve": curve_document(curve, block_bytes, opts.curve_points),
        "capacities": _capacity_rows(curve, opts.capacities, block_bytes),
        "capacity_for_share": [
            {
                "share": share,
                "capacity_blocks": curve.capacity_for_share(share),
                "capacity_bytes": curve.capacity_for_share(share) * block_bytes if block_bytes else None,
            }
            for share in opts.shares
        ],
        "tiers": tier_splits(curve, opts.tiers, block_bytes) if opts.tiers is not None else None,
        "warnings": warnings,
    }
    return TraceAnalysis(document=doc, curve=curve, block_bytes=block_bytes, warnings=warnings)

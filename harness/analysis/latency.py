"""Latencies from raw timestamps: TTFT, end-to-end, and inter-token gaps from chunk arrival times (vectorised).

All inputs are ``time.perf_counter_ns()`` readings. Per-request ITL is the gaps between consecutive chunk arrivals;
the gaps of many requests are taken straight from the Arrow list buffers (no Python loop per request).

TTFT is ``first_token_ns - send_ns``: the first token's arrival (see :mod:`harness.rundir.records`). Where the record
has the parse time too, ``ttft_parsed_ms`` is the TTFT as the parser saw it and ``first_token_client_delay_ms`` the
client's own delay between the bytes' arrival and their parsing (NaN for older records, which have only one time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bool = npt.NDArray[np.bool_]
DERIVED = ("ok", "ttft_ms", "e2e_ms", "itl_ms_mean", "n_chunks", "output_tokens_eff", "send_lag_ms", "hit_ratio",
           "ttft_parsed_ms", "first_token_client_delay_ms")


def ns_column(df: pd.DataFrame, name: str) -> tuple[I64, Bool]:
    """An integer column as (int64 values with 0 for missing, validity mask), whatever pandas dtype it has."""
    if name not in df.columns:
        return np.zeros(len(df), dtype=np.int64), np.zeros(len(df), dtype=bool)
    col = df[name]
    if col.dtype == object:  # Python ints and None: convert exactly (no trip through float64)
        col = pd.Series(pd.array(col.tolist(), dtype=pd.Int64Dtype()))
    numeric = pd.to_numeric(col, errors="coerce")
    valid = ~numeric.isna().to_numpy(dtype=bool)
    if pd.api.types.is_integer_dtype(numeric.dtype):
        return numeric.to_numpy(dtype=np.int64, na_value=0), valid
    return np.nan_to_num(numeric.to_numpy(dtype=np.float64, na_value=np.nan)).astype(np.int64), valid


def float_column(df: pd.DataFrame, name: str) -> F64:
    """A numeric column as float64 with NaN for missing."""
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def list_column(df: pd.DataFrame, name: str) -> pa.ChunkedArray:
    """A list-of-int64 column as an Arrow chunked array (zero-copy when the column is Arrow-backed)."""
    col = df[name]
    if isinstance(col.dtype, pd.ArrowDtype):
        arr = col.array.__arrow_array__()
        return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    values = [None if v is None or (isinstance(v, float) and np.isnan(v)) else list(v) for v in col.tolist()]
    return pa.chunked_array([pa.array(values, type=pa.list_(pa.int64()))])


@dataclass(frozen=True)
class ChunkStats:
    """Per request: number of chunks, first and last chunk time (0 where there are none)."""

    count: I64
    first: I64
    last: I64


@dataclass(frozen=True)
class Gaps:
    """Inter-token gaps of many requests: the request row they belong to, when they ended, and their length (ms)."""

    row: npt.NDArray[np.int64]
    at_ns: I64
    ms: npt.NDArray[np.float64]

    def select_rows(self, keep: Bool) -> Gaps:
        """Only the gaps of rows where ``keep`` is true, renumbered to the kept rows' positions."""
        mask = keep[self.row]
        new_pos = np.cumsum(keep) - 1
        return Gaps(row=new_pos[self.row[mask]], at_ns=self.at_ns[mask], ms=self.ms[mask])


def _chunk_parts(arr: pa.Array) -> tuple[I64, I64, Bool]:
    """(offsets rebased to 0, values, list validity) of one list chunk."""
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = values[offsets[0]:offsets[-1]] if len(offsets) else values[:0]
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return offsets - (offsets[0] if len(offsets) else 0), values, valid


def chunk_stats(df: pd.DataFrame) -> ChunkStats:
    """Chunk count and first/last arrival per request."""
    if "chunk_ns" not in df.columns or len(df) == 0:
        zero = np.zeros(len(df), dtype=np.int64)
        return ChunkStats(zero, zero.copy(), zero.copy())
    counts, firsts, lasts = [], [], []
    for arr in list_column(df, "chunk_ns").chunks:
        offsets, values, valid = _chunk_parts(arr)
        length = np.where(valid, np.diff(offsets), 0)
        has = length > 0
        first = np.zeros(len(length), dtype=np.int64)
        last = np.zeros(len(length), dtype=np.int64)
        first[has] = values[offsets[:-1][has]]
        last[has] = values[offsets[1:][has] - 1]
        counts.append(length)
        firsts.append(first)
        lasts.append(last)
    return ChunkStats(np.concatenate(counts), np.concatenate(firsts), np.concatenate(lasts))


def chunk_gaps(df: pd.DataFrame) -> Gaps:
    """Every gap between consecutive chunk arrivals of every request (rows are positions in ``df``)."""
    rows_out, at_out, ms_out = [], [], []
    base = 0
    chunks = list_column(df, "chunk_ns").chunks if "chunk_ns" in df.columns and len(df) else []
    for arr in chunks:
        offsets, values, valid = _chunk_parts(arr)
        lengths = np.diff(offsets)
        row_of_value = np.repeat(np.arange(base, base + len(lengths), dtype=np.int64), lengths)
        base += len(lengths)
        if len(values) < 2:
            continue
        keep = row_of_value[1:] == row_of_value[:-1]  # both ends in the same request
        keep &= valid[row_of_value[1:] - (base - len(lengths))]
        rows_out.append(row_of_value[1:][keep])
        at_out.append(values[1:][keep])
        ms_out.append((values[1:] - values[:-1])[keep] / 1e6)
    if not rows_out:
        empty_i = np.zeros(0, dtype=np.int64)
        return Gaps(empty_i, empty_i.copy(), np.zeros(0, dtype=np.float64))
    return Gaps(np.concatenate(rows_out), np.concatenate(at_out), np.concatenate(ms_out))


def derive_latencies(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with ``ok``, ``ttft_ms``, ``e2e_ms``, ``itl_ms_mean``, ``n_chunks``, ``output_tokens_eff``,
    ``send_lag_ms``, ``hit_ratio`` (cached/prompt tokens), ``ttft_parsed_ms`` and ``first_token_client_delay_ms``
    added. Missing timestamps give NaN, never 0.
    """
    out = df.copy()
    send, send_ok = ns_column(df, "send_ns")
    first_tok, first_ok = ns_column(df, "first_token_ns")
    parsed, parsed_ok = ns_column(df, "first_token_parsed_ns")
    end, end_ok = ns_column(df, "end_ns")
    planned, planned_ok = ns_column(df, "planned_send_ns")
    stats = chunk_stats(df)
    has_kind = "error_kind" in df.columns
    ok = df["error_kind"].isna().to_numpy(dtype=bool) if has_kind else np.ones(len(df), dtype=bool)
    out["ok"] = ok
    out["ttft_ms"] = np.where(send_ok & first_ok, (first_tok - send) / 1e6, np.nan)
    out["ttft_parsed_ms"] = np.where(send_ok & parsed_ok, (parsed - send) / 1e6, np.nan)
    out["first_token_client_delay_ms"] = np.where(first_ok & parsed_ok, (parsed - first_tok) / 1e6, np.nan)
    out["e2e_ms"] = np.where(send_ok & end_ok, (end - send) / 1e6, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["itl_ms_mean"] = np.where(stats.count >= 2, (stats.last - stats.first) / 1e6 / (stats.count - 1), np.nan)
        prompt = float_column(df, "prompt_tokens")
        cached = float_column(df, "cached_tokens")
        out["hit_ratio"] = np.where(prompt > 0, cached / prompt, np.nan)
    out["n_chunks"] = stats.count
    tokens = float_column(df, "output_tokens")
    out["output_tokens_eff"] = np.where(np.isnan(tokens), stats.count.astype(np.float64), tokens)
    out["send_lag_ms"] = np.where(send_ok & planned_ok, (send - planned) / 1e6, np.nan)
    return out


def ensure_derived(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` itself if it already has the derived columns, else :func:`derive_latencies` of it."""
    return df if all(c in df.columns for c in DERIVED) else derive_latencies(df)

"""Request sequences for the differential replay: chunk keys in prefix order, GPU hits, prompt chunks.

A :class:`ReplayRequest` names every full chunk of the request's final token sequence (prompt and all but the last
output token, what vLLM may store when the request finishes) by the hash of the chunk's last block, as the
simulator does; ``prompt_chunks`` of them lie in the prompt (what a lookup may hit and ``offload_prompt_only``
stores); ``gpu_blocks`` is its GPU prefix hit in blocks (capped so the last prompt token is computed).

GPU hits come from the simulator's own GPU block pool (:class:`~harness.sim.cache.gpu.GpuBlockPool`) serving the
requests one after another: allocate, register the full blocks, release. They are input to both replays, so the
two sides differ only in their offload tiers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.sim.blocks import chain_hashes
from harness.sim.cache.gpu import GpuBlockPool


@dataclass(frozen=True)
class ReplayRequest:
    """One request of a sequence (see the module docstring)."""

    id: str
    chunks: tuple[int, ...]
    prompt_chunks: int
    gpu_blocks: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "chunks": list(self.chunks), "prompt_chunks": self.prompt_chunks,
                "gpu_blocks": self.gpu_blocks}


@dataclass(frozen=True)
class ReplaySequence:
    """Requests in arrival order; ``block_tokens`` tokens per GPU block, ``blocks_per_chunk`` blocks per chunk."""

    name: str
    block_tokens: int
    blocks_per_chunk: int
    requests: tuple[ReplayRequest, ...]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def distinct_chunks(self) -> int:
        return len({key for r in self.requests for key in r.chunks})

    @property
    def longest_prompt_chunks(self) -> int:
        return max((r.prompt_chunks for r in self.requests), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "block_tokens": self.block_tokens, "blocks_per_chunk": self.blocks_per_chunk,
                "requests": [r.to_json() for r in self.requests]}


def _gpu_hits(block_lists: Sequence[Sequence[int]], max_hits: Sequence[int], gpu_blocks: int) -> list[int]:
    """GPU prefix hits (blocks, at most ``max_hits``) of requests served one at a time by the simulator's GPU pool;
    every full block a request computed stays cached until the pool evicts it."""
    pool = GpuBlockPool(gpu_blocks)
    hits: list[int] = []
    for blocks, cap in zip(block_lists, max_hits, strict=True):
        cached = pool.lookup_prefix(blocks, cap)
        hits.append(len(cached))
        pool.acquire(cached)
        need = min(len(blocks) - len(cached), pool.num_free)
        new = pool.allocate(need) or []
        bids = cached + new
        for bid, h in zip(bids, blocks, strict=False):
            pool.register(bid, h)
        pool.release(bids)
    return hits


def _chunk_keys(block_hashes: Sequence[int], k: int) -> tuple[int, ...]:
    return tuple(block_hashes[c * k + k - 1] for c in range(len(block_hashes) // k))


def output_ids(request_id: str, n: int) -> list[int]:
    """Stand-in output token ids of a request (unique per request; only their block hashes matter)."""
    seed = hashlib.blake2b(request_id.encode("utf-8"), digest_size=8).digest()
    return [int.from_bytes(hashlib.blake2b(seed + i.to_bytes(4, "little"), digest_size=8).digest(), "little")
            for i in range(n)]


def from_token_ids(name: str, requests: Iterable[tuple[str, Sequence[int], int]], *, block_tokens: int,
                   blocks_per_chunk: int, gpu_blocks: int, root: int) -> ReplaySequence:
    """A sequence from ``(id, prompt token ids, output tokens)``, hashed as the simulator hashes them."""
    built: list[tuple[str, list[int], int, int]] = []
    tpc = block_tokens * blocks_per_chunk
    for rid, prompt, n_out in requests:
        tokens = [*prompt, *output_ids(rid, max(0, n_out - 1))]
        hashes = chain_hashes(tokens, block_tokens, root)
        built.append((rid, hashes, len(prompt) // tpc, (len(prompt) - 1) // block_tokens))
    hits = _gpu_hits([h for _rid, h, _pc, _cap in built], [cap for *_x, cap in built], gpu_blocks)
    reqs = tuple(ReplayRequest(rid, _chunk_keys(h, blocks_per_chunk), pc, g)
                 for (rid, h, pc, _cap), g in zip(built, hits, strict=True))
    return ReplaySequence(name, block_tokens, blocks_per_chunk, reqs, {"gpu_blocks": gpu_blocks})


def _chain_ids(ids: Iterable[int], salt: bytes) -> list[int]:
    out: list[int] = []
    parent = salt
    for block_id in ids:
        parent = hashlib.blake2b(parent + int(block_id).to_bytes(8, "little", signed=True), digest_size=8).digest()
        out.append(int.from_bytes(parent, "little"))
    return out


def from_block_ids(name: str, requests: Iterable[tuple[str, Sequence[int], int, int]], *, block_tokens: int,
                   blocks_per_chunk: int, gpu_blocks: int) -> ReplaySequence:
    """A sequence from ``(id, block ids, input tokens, output tokens)`` (a Mooncake trace's ``hash_ids``: equal
    leading ids mean an equal prefix); block hashes chain the ids, decode blocks are the request's own."""
    built: list[tuple[str, list[int], int, int]] = []
    tpc = block_tokens * blocks_per_chunk
    for rid, ids, n_in, n_out in requests:
        full = n_in // block_tokens
        hashes = _chain_ids(list(ids)[:full], b"oracle-trace")
        total = (n_in + max(0, n_out - 1)) // block_tokens
        if total > full:  # the request's own decode blocks, chained after its prompt
            tail = hashes[-1].to_bytes(8, "little") if hashes else b""
            hashes += _chain_ids(range(total - full), rid.encode("utf-8") + tail)
        built.append((rid, hashes, n_in // tpc, min(full, (n_in - 1) // block_tokens)))
    hits = _gpu_hits([h for _rid, h, _pc, _cap in built], [cap for *_x, cap in built], gpu_blocks)
    reqs = tuple(ReplayRequest(rid, _chunk_keys(h, blocks_per_chunk), pc, g)
                 for (rid, h, pc, _cap), g in zip(built, hits, strict=True))
    return ReplaySequence(name, block_tokens, blocks_per_chunk, reqs, {"gpu_blocks": gpu_blocks})

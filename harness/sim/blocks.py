"""Chained block hashes for prefix caching.

A sequence of token ids is cut into blocks of ``block_size`` tokens; only full blocks are hashed. The hash of
block ``i`` covers block ``i``'s token ids and the hash of block ``i-1``, so equal hashes mean equal prefixes
(as in vLLM's prefix caching). The chain's root is derived from a namespace string (model name and block
size), so hashes are stable across processes and restarts: the fs tier's files stay valid after a restart and
never match another model's blocks.

``h_0 = root``; ``h_i = int(blake2b(h_{i-1} as 8 bytes little-endian || tokens as uint64 LE, digest_size=8))``.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

from harness.sim.memo import BoundedMemo


def root_hash(namespace: str) -> int:
    """Root of the hash chain for one model/block-size namespace."""
    return int.from_bytes(hashlib.blake2b(namespace.encode("utf-8"), digest_size=8).digest(), "little")


def _block_hash(parent: int, tokens: Sequence[int]) -> int:
    h = hashlib.blake2b(parent.to_bytes(8, "little"), digest_size=8)
    h.update(array("Q", tokens).tobytes())
    return int.from_bytes(h.digest(), "little")


_MEMO_BYTES = 16 << 20
"""Bytes of hash inputs :func:`chain_hashes` remembers before it starts afresh (prompts share prefixes: a shared
system prompt's blocks are hashed once, not once per request)."""
_memo: BoundedMemo[bytes, bytes] = BoundedMemo(_MEMO_BYTES)
_FRESH = hashlib.blake2b(digest_size=8)


def pack_tokens(tokens: Sequence[int]) -> bytes:
    """The token ids as the hashes take them (uint64 each): pack once, hash the chain and the output seed."""
    return array("Q", tokens).tobytes()


def chain_hashes(tokens: Sequence[int], block_size: int, root: int, packed: bytes | None = None) -> list[int]:
    """Hashes of every full block of ``tokens`` (``packed``: :func:`pack_tokens` of them, if the caller has it).

    Each block's BLAKE2b input (parent digest || the block's tokens, the bytes :func:`_block_hash` hashes) is looked
    up in a bounded memo first: a pure function of its input, so a hit returns the digest the hash would."""
    full = len(tokens) // block_size * block_size
    if full == 0:
        return []
    # every block's bytes at once (as _block_hash packs them)
    data = array("Q", tokens[:full]).tobytes() if packed is None else packed
    width = 8 * block_size
    digests: list[bytes] = []
    append = digests.append
    parent = root.to_bytes(8, "little")
    fresh = _FRESH.copy  # a copy of an empty 8-byte hasher: cheaper than constructing one with its parameters
    memo = _memo.data
    get = memo.get
    added = 0
    for start in range(0, full * 8, width):
        key = parent + data[start:start + width]
        digest = get(key)
        if digest is None:
            h = fresh()
            h.update(key)
            digest = memo[key] = h.digest()
            added += 1
        append(digest)
        parent = digest
    _memo.added(added * (width + 8))
    from_bytes = int.from_bytes
    return [from_bytes(d, "little") for d in digests]


class HashChain:
    """Incremental block hashes of a growing sequence (prompt, then generated tokens)."""

    __slots__ = ("_block_size", "_pending", "_root", "hashes")

    def __init__(self, tokens: Sequence[int], block_size: int, root: int, packed: bytes | None = None) -> None:
        self._block_size = block_size
        self._root = root
        self.hashes: list[int] = chain_hashes(tokens, block_size, root, packed)
        full = len(self.hashes) * block_size
        self._pending: list[int] = list(tokens[full:])

    def append(self, token: int) -> None:
        """Append one token; hash the block it completes, if any."""
        self._pending.append(token)
        if len(self._pending) == self._block_size:
            parent = self.hashes[-1] if self.hashes else self._root
            self.hashes.append(_block_hash(parent, self._pending))
            self._pending = []

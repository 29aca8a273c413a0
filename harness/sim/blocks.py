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


def root_hash(namespace: str) -> int:
    """Root of the hash chain for one model/block-size namespace."""
    return int.from_bytes(hashlib.blake2b(namespace.encode("utf-8"), digest_size=8).digest(), "little")


def _block_hash(parent: int, tokens: Sequence[int]) -> int:
    h = hashlib.blake2b(parent.to_bytes(8, "little"), digest_size=8)
    h.update(array("Q", tokens).tobytes())
    return int.from_bytes(h.digest(), "little")


def chain_hashes(tokens: Sequence[int], block_size: int, root: int) -> list[int]:
    """Hashes of every full block of ``tokens``."""
    full = len(tokens) // block_size * block_size
    if full == 0:
        return []
    data = memoryview(array("Q", tokens[:full]).tobytes())  # every block's bytes at once (as _block_hash packs them)
    width = 8 * block_size
    out: list[int] = []
    parent = root.to_bytes(8, "little")
    blake2b = hashlib.blake2b
    for start in range(0, len(data), width):
        h = blake2b(parent, digest_size=8)
        h.update(data[start:start + width])
        parent = h.digest()
        out.append(int.from_bytes(parent, "little"))
    return out


class HashChain:
    """Incremental block hashes of a growing sequence (prompt, then generated tokens)."""

    __slots__ = ("_block_size", "_pending", "_root", "hashes")

    def __init__(self, tokens: Sequence[int], block_size: int, root: int) -> None:
        self._block_size = block_size
        self._root = root
        self.hashes: list[int] = chain_hashes(tokens, block_size, root)
        full = len(self.hashes) * block_size
        self._pending: list[int] = list(tokens[full:])

    def append(self, token: int) -> None:
        """Append one token; hash the block it completes, if any."""
        self._pending.append(token)
        if len(self._pending) == self._block_size:
            parent = self.hashes[-1] if self.hashes else self._root
            self.hashes.append(_block_hash(parent, self._pending))
            self._pending = []

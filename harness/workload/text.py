"""Synthetic prompt text: cheap, deterministic word sequences whose sharing is exactly what the plan says.

Every piece of a prompt (a system prompt, a RAG document, a trace block, a user's question) is a *segment*:
a few *key words* that name it, then filler words. Two segments with different keys differ at their first
token, so prompts share exactly the prefix made of the same segments in the same order and nothing more;
what follows a key does not matter for prefix caching, so the filler is one fixed word sequence (cheap:
list slices, no per-request random draws).

Words are common short English words: one token each for the simulator (which splits on whitespace) and,
with a leading space, usually one token each for BPE tokenizers; :mod:`harness.workload.tokens` measures the
real ratio. Block hashes (:func:`chain_hashes`) are computed over the same word units the simulator counts.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "at", "be", "by",
    "this", "had", "not", "but", "from", "or", "have", "an", "they", "which", "one", "you", "were", "her",
    "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will", "more",
    "no", "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "can", "only",
    "other", "new", "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my",
    "now", "such", "like", "our", "over", "man", "me", "even", "most", "made", "after", "also", "did",
    "many", "before", "must", "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little", "state", "good",
    "very", "make", "world", "still", "own", "see", "men", "work", "long", "get", "here", "between",
    "both", "life", "being", "under", "never", "day", "same", "another", "know", "while", "last", "might",
    "us", "great", "old", "year", "off", "come", "since", "against", "go", "came", "right", "used",
    "take", "three", "place", "hand", "high", "keep", "point", "part", "small", "case", "word", "number",
    "group", "home", "found", "eye", "once", "fact", "end", "child", "few", "large", "tell", "set",
    "play", "run", "move", "live", "feel", "help", "turn", "ask", "show", "light", "open", "seem",
    "begin", "city", "tree", "farm", "road", "rock", "sea", "sun", "air", "fire", "rain", "snow", "wind",
    "star", "moon", "sky", "hill", "lake", "river", "field", "grass", "stone", "wood", "door", "room",
    "wall", "book", "page", "line", "story", "song", "game", "team", "ship", "car", "bus", "train",
    "plane", "map", "card", "box", "cup", "bowl", "plate", "table", "chair", "bed", "lamp", "clock",
    "phone", "key", "coin", "bag", "coat", "shoe", "hat", "ring", "gold", "iron", "salt", "milk", "bread",
    "rice", "fruit", "apple", "corn", "egg", "fish", "bird", "dog", "cat", "horse", "cow", "bear", "lion",
    "wolf", "deer", "duck", "leaf",
)

KEY_WORDS = 6
"""Words that name a segment (base-256 digits of a 48-bit key): 2**48 distinct keys."""

FILLER_WORDS = 1 << 16
_FILLER: list[str] = random.Random(20240601).choices(WORDS, k=FILLER_WORDS)


def stable_key(*parts: object) -> int:
    """A 48-bit key from any printable parts (stable across processes and Python versions)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=6).digest(), "big")


def key_words(key: int) -> list[str]:
    """The words naming a key: its base-256 digits, most significant first."""
    return [WORDS[(key >> (8 * i)) & 0xFF] for i in range(KEY_WORDS - 1, -1, -1)]


def filler(n: int) -> list[str]:
    """The first ``n`` filler words (the fixed sequence repeats for very long segments)."""
    if n <= 0:
        return []
    if n <= FILLER_WORDS:
        return _FILLER[:n]
    reps, rest = divmod(n, FILLER_WORDS)
    return _FILLER * reps + _FILLER[:rest]


def segment(key: int, n: int) -> list[str]:
    """A segment of ``n`` words named by ``key`` (a shorter segment keeps the first key words)."""
    if n <= 0:
        return []
    head = key_words(key)
    if n <= KEY_WORDS:
        return head[:n]
    return head + filler(n - KEY_WORDS)


def chain_hashes(units: Sequence[str], block: int) -> list[int]:
    """Chained 63-bit hashes of ``units`` cut into blocks of ``block`` (the last block may be partial).

    ``h_i = blake2b(h_{i-1} || block_i)``: equal hashes mean equal prefixes, as in the engines' prefix caches
    and in Mooncake ``hash_ids``.
    """
    out: list[int] = []
    parent = b"\0" * 8
    for start in range(0, len(units), block):
        h = hashlib.blake2b(parent, digest_size=8)
        h.update("\x1f".join(units[start:start + block]).encode("utf-8"))
        parent = h.digest()
        out.append(int.from_bytes(parent, "big") & 0x7FFF_FFFF_FFFF_FFFF)
    return out

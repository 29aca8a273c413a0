"""Synthetic text: distinct words, unique segment names, chained block hashes."""

from __future__ import annotations

from harness.workload.text import KEY_WORDS, WORDS, chain_hashes, filler, key_words, segment, stable_key


def test_vocabulary_is_256_distinct_single_words() -> None:
    assert len(WORDS) == 256 and len(set(WORDS)) == 256
    assert all(w.isalpha() and w.islower() for w in WORDS)


def test_segments() -> None:
    a, b = stable_key("sys", 1), stable_key("sys", 2)
    assert a != b and stable_key("sys", 1) == a
    assert key_words(a) != key_words(b) and len(key_words(a)) == KEY_WORDS
    assert len(segment(a, 1000)) == 1000 and segment(a, 1000)[KEY_WORDS:] == filler(1000 - KEY_WORDS)
    assert segment(a, 3) == key_words(a)[:3] and segment(a, 0) == []
    assert len(filler(200_000)) == 200_000


def test_chain_hashes_share_exactly_the_common_full_blocks() -> None:
    base = [f"w{i}" for i in range(1000)]
    other = [*base[:700], "x", *base[701:]]
    h1, h2 = chain_hashes(base, 256), chain_hashes(other, 256)
    assert len(h1) == 4  # 3 full blocks and a partial one
    assert h1[:2] == h2[:2] and h1[2] != h2[2] and h1[3] != h2[3]
    assert all(0 <= h < 2**63 for h in h1)

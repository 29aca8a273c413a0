"""Tokenisation and block hashing are deterministic and documented."""

from __future__ import annotations

import hashlib

import pytest

from harness.sim.blocks import HashChain, chain_hashes, root_hash
from harness.sim.tokenizer import (
    VOCAB,
    VOCAB_IDS,
    PromptError,
    output_seed,
    render_chat,
    tokenize_prompt,
    tokenize_text,
    word_id,
)


def test_word_id_is_first_8_bytes_of_blake2b_big_endian() -> None:
    for word in ("hello", "<|user|>", "ünïcode", "42"):
        assert word_id(word) == int.from_bytes(hashlib.blake2b(word.encode()).digest()[:8], "big")


def test_one_token_per_whitespace_word() -> None:
    assert tokenize_text("  a b\tc\nd  ") == [word_id(w) for w in "abcd"]
    assert tokenize_text("") == []


def test_shared_text_shares_tokens() -> None:
    a = tokenize_text("system prompt words here then question one")
    b = tokenize_text("system prompt words here then question two")
    assert a[:6] == b[:6] and a[6] != b[6]


def test_chat_rendering() -> None:
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}]
    expected = [word_id("<|system|>"), word_id("be"), word_id("brief"), word_id("<|user|>"), word_id("hi"),
                word_id("there"), word_id("<|assistant|>")]
    assert render_chat(msgs) == expected
    with pytest.raises(PromptError):
        render_chat([])
    with pytest.raises(PromptError):
        render_chat([{"content": "no role"}])


def test_prompt_forms() -> None:
    assert tokenize_prompt("a b") == tokenize_prompt(["a b"])
    assert tokenize_prompt([5, 6, 7]) == [5, 6, 7]
    with pytest.raises(PromptError):
        tokenize_prompt(["a", "b"])
    with pytest.raises(PromptError):
        tokenize_prompt([-1])
    with pytest.raises(PromptError):
        tokenize_prompt(3)


def test_output_vocabulary_roundtrips() -> None:
    assert len(VOCAB) == 512 and len(set(VOCAB)) == 512
    text = "".join(" " + VOCAB[i] for i in (3, 1, 4))
    assert tokenize_text(text) == [VOCAB_IDS[3], VOCAB_IDS[1], VOCAB_IDS[4]]
    assert output_seed(0, None, [1, 2]) == output_seed(0, None, [1, 2])
    assert output_seed(0, 5, [1, 2]) != output_seed(0, None, [1, 2])


def test_chain_hashes_identify_prefixes() -> None:
    root = root_hash("ns")
    a = chain_hashes(list(range(20)), 4, root)
    b = chain_hashes([*range(12), 99, *range(13, 20)], 4, root)
    assert len(a) == 5
    assert a[:3] == b[:3] and all(x != y for x, y in zip(a[3:], b[3:], strict=True))
    assert chain_hashes(list(range(20)), 4, root_hash("other"))[0] != a[0]
    assert chain_hashes(list(range(3)), 4, root) == []


def test_incremental_chain_matches_batch() -> None:
    root = root_hash("ns")
    tokens = list(range(1000, 1037))
    chain = HashChain(tokens[:10], 4, root)
    for t in tokens[10:]:
        chain.append(t)
    assert chain.hashes == chain_hashes(tokens, 4, root)

"""Deterministic tokenisation of the simulated engine.

Rules (stable; other parts of the harness may rely on them):

- **Words are tokens.** ``text.split()`` (Python's whitespace split) gives the words; each word is exactly one
  token. Prompts that share text therefore share tokens, and prompts that share a token prefix share KV blocks.
- **Token id** of a word ``w`` = ``int.from_bytes(hashlib.blake2b(w.encode("utf-8")).digest()[:8], "big")``
  (the first 8 bytes of the default 64-byte BLAKE2b digest, big-endian), an unsigned 64-bit integer.
- **Chat rendering.** For each message in order: the role marker word ``<|ROLE|>`` (e.g. ``<|user|>``), then the
  words of the message's content (text parts of a list content are joined with a space). After the last message
  one ``<|assistant|>`` marker. No BOS/EOS tokens are added anywhere.
- **Completions** accept a string (tokenised as above) or a list of integer token ids (used as given).
- **Output tokens** are words from :data:`VOCAB` (a fixed list of 512 two-syllable words), chosen by a PRNG
  seeded from the server seed, the request's ``seed`` field (if any) and the prompt's token ids. Each output
  token is streamed as ``" " + word``, so the text a client gets back re-tokenises to exactly the generated ids
  (a follow-up turn that quotes it shares the decode blocks too). The content of the prompt has no other effect.
- **Length.** There is no EOS: a request always produces exactly ``max_tokens`` tokens (``ignore_eos`` is
  accepted and changes nothing; ``stop`` strings are ignored).
"""

from __future__ import annotations

import hashlib
import random
import struct
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.sim.memo import BoundedMemo

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70 syllables
VOCAB: tuple[str, ...] = tuple(a + b for a in _SYLLABLES for b in _SYLLABLES)[:512]
"""Output vocabulary: 512 pronounceable two-syllable words (``baba``, ``babe``, ...)."""

_CACHE_MAX = 262_144
_cache: dict[str, int] = {}


def word_id(word: str) -> int:
    """Token id of one word (first 8 bytes of BLAKE2b, big-endian)."""
    tid = _cache.get(word)
    if tid is None:
        tid = int.from_bytes(hashlib.blake2b(word.encode("utf-8")).digest()[:8], "big")
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[word] = tid
    return tid


VOCAB_IDS: tuple[int, ...] = tuple(word_id(w) for w in VOCAB)
assert len(VOCAB) == 512  # OutputStream draws 9 random bits per token


_TEXT_CACHE_TOKENS = 1 << 20
"""Token ids of text pieces :func:`tokenize_text` remembers before it starts afresh."""
_PIECE_CHARS = 2048
"""A text is tokenised in pieces of about this many characters, each cut just before a space (so no word is cut
and the pieces' words are the text's words) at the first space from ``start + _PIECE_CHARS``: texts that share a
prefix (a system prompt cut to fit, a shared document) share its pieces, and a piece is split and looked up once."""
_pieces: BoundedMemo[str, list[int]] = BoundedMemo(_TEXT_CACHE_TOKENS)


def _split_ids(text: str) -> list[int]:
    words = text.split()
    ids: list[int | None] = list(map(_cache.get, words))
    if None in ids:
        return [word_id(w) if tid is None else tid for w, tid in zip(words, ids, strict=True)]
    return ids  # type: ignore[return-value]  # no None left


def _piece_ids(piece: str) -> list[int]:
    """Token ids of one piece, from the bounded cache (the list is shared: callers must not change it)."""
    ids = _pieces.data.get(piece)
    if ids is None:
        ids = _pieces.data[piece] = _split_ids(piece)
        _pieces.added(len(ids))
    return ids


def _extend_ids(out: list[int], text: str) -> None:
    """Append the token ids of ``text`` to ``out``."""
    n = len(text)
    start = 0
    while n - start > _PIECE_CHARS:
        cut = text.find(" ", start + _PIECE_CHARS)
        if cut < 0:
            break
        out.extend(_piece_ids(text[start:cut]))
        start = cut
    out.extend(_piece_ids(text[start:] if start else text))


def tokenize_text(text: str) -> list[int]:
    """Token ids of a text: one per whitespace-separated word (a new list)."""
    out: list[int] = []
    _extend_ids(out, text)
    return out


class PromptError(ValueError):
    """A prompt or message list the simulator cannot tokenise (maps to HTTP 400)."""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                raise PromptError("only text content parts are supported by the simulator")
        return " ".join(parts)
    raise PromptError("message content must be a string or a list of text parts")


def render_chat(messages: Iterable[Any]) -> list[int]:
    """Token ids of a chat: per message ``<|role|>`` + content words, then ``<|assistant|>``."""
    ids: list[int] = []
    count = 0
    for msg in messages:
        if not isinstance(msg, Mapping):
            raise PromptError("each message must be an object with 'role' and 'content'")
        role = msg.get("role")
        if not isinstance(role, str) or not role:
            raise PromptError("each message needs a 'role' string")
        ids.append(word_id(f"<|{role}|>"))
        _extend_ids(ids, _content_text(msg.get("content")))
        count += 1
    if count == 0:
        raise PromptError("'messages' must not be empty")
    ids.append(word_id("<|assistant|>"))
    return ids


def tokenize_prompt(prompt: Any) -> list[int]:
    """Token ids of a completions ``prompt``: a string, a list of token ids, or a one-element list of either."""
    if isinstance(prompt, str):
        return tokenize_text(prompt)
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            if any(t < 0 or t >= 2**64 for t in prompt):
                raise PromptError("token ids must be unsigned 64-bit integers")
            return list(prompt)
        if len(prompt) == 1:
            return tokenize_prompt(prompt[0])
        raise PromptError("the simulator serves one prompt per request (got a batch)")
    raise PromptError("'prompt' must be a string or a list of token ids")


def tokenize_body(body: Any) -> list[int]:
    """Token ids of a ``POST /tokenize`` body: chat ``messages`` or a completions ``prompt`` (:class:`PromptError`
    for anything else); the HTTP server and the virtual clock's engine answer it through this one function."""
    if not isinstance(body, dict):
        raise PromptError("request body must be a JSON object")
    if "messages" in body:
        return render_chat(body["messages"])
    if "prompt" in body:
        return tokenize_prompt(body["prompt"])
    raise PromptError("give 'prompt' or 'messages'")


def output_seed(server_seed: int, request_seed: int | None, prompt_ids: Sequence[int],
                packed: bytes | None = None) -> int:
    """Seed of a request's output PRNG: server seed, request seed and the prompt (greedy-like determinism).
    ``packed`` is ``prompt_ids`` as :func:`harness.sim.blocks.pack_tokens` packs them, when the caller has it."""
    h = hashlib.blake2b(digest_size=8)
    h.update(struct.pack("<q", server_seed))
    h.update(struct.pack("<q", -1 if request_seed is None else request_seed & 0x7FFF_FFFF_FFFF_FFFF))
    if sys.byteorder == "little":  # the same bytes as the "<Q" pack, without unpacking the ids into arguments
        h.update(array("Q", prompt_ids).tobytes() if packed is None else packed)
    else:
        h.update(struct.pack(f"<{len(prompt_ids)}Q", *prompt_ids))
    return int.from_bytes(h.digest(), "big")


class OutputStream:
    """Deterministic output words of one request."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def next_index(self) -> int:
        """Index into :data:`VOCAB` / :data:`VOCAB_IDS` of the next output token (9 random bits: 512 words)."""
        return self._rng.getrandbits(9)

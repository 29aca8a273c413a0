"""A word-level Hugging Face tokenizer directory that counts like the simulator: one word = one token.

Peers that draw prompts of N tokens from a tokenizer (``vllm bench serve --dataset-name random``) then send
prompts of exactly N simulator tokens, the same lengths the harness sends. Written as plain JSON (the
``tokenizers`` library's ``tokenizer.json`` format: ``WordLevel`` model, ``WhitespaceSplit`` pre-tokenizer, a
decoder that joins words with spaces), so building it needs nothing from the peer's venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

UNK = "<unk>"
VOCAB_WORDS = 2000


def tokenizer_json(words: int = VOCAB_WORDS) -> dict[str, Any]:
    """The ``tokenizer.json`` document: ``<unk>`` (id 0, special) then ``words`` words ``w1``...."""
    vocab = {UNK: 0} | {f"w{i}": i for i in range(1, words + 1)}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": UNK, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK},
    }


def write_word_tokenizer(directory: Path, words: int = VOCAB_WORDS) -> Path:
    """Write the tokenizer files into ``directory`` (created); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer_json(words)), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNK, "model_max_length": 131072,
              "clean_up_tokenization_spaces": False}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory

"""Build a tiny random-weight Llama model and tokenizer from scratch (no hub, no download) for vLLM on the CPU.

Run with the vLLM venv's Python (it has torch, transformers and tokenizers):

    .e2e/vllm-venv/bin/python scripts/e2e/build-tiny-model.py OUT_DIR

A byte-level BPE tokenizer (~3000 tokens, specials <unk> <s> </s> <pad>) is trained on generated text and wrapped as
``PreTrainedTokenizerFast`` with a chat template; the model is ``LlamaForCausalLM`` with hidden size 128, 2 layers,
4 heads, 2 KV heads, intermediate size 256, 4096 positions, bf16 (about 1M parameters). Idempotent: an existing
complete model directory is left alone.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 3000
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_WORD_TEXT = (
    "cache offload tier token prefix block memory host disk latency request server model batch queue "
    "the a of to and in is it for on with as at by from that this be are was were has have will can may "
    "system user assistant document question answer context window budget rollout baseline arm step "
    "alpha beta gamma delta one two three four five six seven eight nine ten hundred thousand"
)
DONE_MARKER = ".kvoffload-tiny-model"


def corpus(lines: int, seed: int = 0) -> list[str]:
    """Deterministic training text: words, digits and punctuation, enough for a ~3000-token BPE vocabulary."""
    rng = random.Random(seed)
    words = _WORD_TEXT.split()
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    out = []
    for _ in range(lines):
        words = [rng.choice(words) if rng.random() < 0.7 else "".join(rng.choices(alphabet, k=rng.randint(2, 9)))
                 for _ in range(rng.randint(5, 30))]
        out.append(" ".join(words) + rng.choice([".", "?", "!", ",", ";", ":"]))
    return out


def build(out: Path) -> None:
    """Train the tokenizer, create the random model and save both to ``out``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(20_000), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", model_max_length=4096)
    fast.chat_template = CHAT_TEMPLATE
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    (out / DONE_MARKER).write_text(json.dumps({"parameters": params, "vocab": len(fast)}) + "\n", encoding="utf-8")
    print(f"tiny model: {params} parameters, vocabulary {len(fast)} -> {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="directory to write the model into")
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is complete")
    args = parser.parse_args(argv)
    if (args.out / DONE_MARKER).exists() and not args.force:
        print(f"tiny model already built in {args.out}", file=sys.stderr)
        return 0
    build(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

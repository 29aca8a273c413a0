"""How much the harness reads from a server, per kind of answer (bytes, counted after decompression).

Every body and line the harness reads is capped; a server that sends more is refused with
``body too large (> N bytes)`` (see :mod:`harness.core.net.bounded`). The values are generous next to what a real
engine sends, and small next to the memory of the machine running the harness:

- ``/metrics``: a real vLLM exposition is ~100-300 KB (a few MB with many LoRA adapters or label sets);
  TensorRT-LLM's JSON ``/metrics`` is smaller. 32 MiB is 100x that.
- ``/v1/models``, ``/tokenize``, a non-streamed completion the harness asks for (at most a few tokens): a few KB
  in practice; a listing of thousands of models stays under 1 MiB. 4 MiB.
- One SSE line: one token's chunk is ~200-500 bytes, with logprobs a few KB. 1 MiB. (A whole stream the probe
  reads, 8 tokens, is a few KB: it gets the 4 MiB of an API answer.)
- An error body kept for a message: 64 KiB (only its first characters are shown).
"""

from __future__ import annotations

METRICS_MAX_BYTES = 32 << 20
API_MAX_BYTES = 4 << 20
SSE_LINE_MAX_BYTES = 1 << 20
ERROR_BODY_MAX_BYTES = 64 << 10

"""State of one request inside the simulated engine."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from harness.sim.blocks import HashChain
from harness.sim.offload import ExternalHit
from harness.sim.tokenizer import VOCAB_IDS, OutputStream


class ReqState(enum.Enum):
    WAITING = "waiting"
    LOADING = "loading"
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


class SimRequest:
    """A request's tokens, blocks, progress and cache attribution. Times are modelled seconds."""

    __slots__ = (
        "_out",
        "arrival",
        "attributed",
        "blocks",
        "chain",
        "cpu_hit_tokens",
        "disk_hit_tokens",
        "finish_reason",
        "finished_at",
        "first_scheduled",
        "first_token_at",
        "gpu_hit_tokens",
        "listener",
        "load",
        "max_tokens",
        "num_computed",
        "num_registered",
        "num_stored_chunks",
        "num_tokens",
        "output_idx",
        "preemptions",
        "prompt_len",
        "recomputed_tokens",
        "request_id",
        "state",
        "store_ready_at",
    )

    def __init__(
        self,
        request_id: str,
        prompt_ids: Sequence[int],
        max_tokens: int,
        output_seed: int,
        arrival: float,
        chain_root: int,
        block_size: int,
        packed: bytes | None = None,
    ) -> None:
        if not prompt_ids:
            raise ValueError("empty prompt")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.request_id = request_id
        self.prompt_len = len(prompt_ids)
        self.max_tokens = max_tokens
        self.chain = HashChain(prompt_ids, block_size, chain_root, packed)
        self.num_tokens = self.prompt_len
        self.output_idx: list[int] = []
        self._out = OutputStream(output_seed)
        self.num_computed = 0
        self.blocks: list[int] = []
        self.num_registered = 0
        self.num_stored_chunks = 0
        self.state = ReqState.WAITING
        self.arrival = arrival
        self.first_scheduled: float | None = None
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.finish_reason: str | None = None
        self.attributed = False
        self.gpu_hit_tokens = 0
        self.cpu_hit_tokens = 0
        self.disk_hit_tokens = 0
        self.recomputed_tokens = 0
        self.preemptions = 0
        self.load: ExternalHit | None = None
        self.store_ready_at = 0.0
        self.listener: Any = None  # set by the serving layer; the engine core never touches it

    @property
    def num_output(self) -> int:
        return len(self.output_idx)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens served from any cache (what ``usage.prompt_tokens_details.cached_tokens`` reports)."""
        return self.gpu_hit_tokens + self.cpu_hit_tokens + self.disk_hit_tokens

    def sample(self) -> None:
        """Produce the next output token."""
        idx = self._out._rng.getrandbits(9)  # == OutputStream.next_index(), inlined on the hot path
        self.output_idx.append(idx)
        self.chain.append(VOCAB_IDS[idx])
        self.num_tokens += 1

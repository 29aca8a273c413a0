"""Each tier's predicted hit share per step, from the request plan's block hashes: the exact LRU curve at the arm's
capacities.

The model is an approximation of vLLM's scheduler, and every report says so: one LRU cache at block granularity over
the arm's requests in send order (warm-up and steps in turn; caches carry over between steps as the server's do); a
request hits the leading run of its blocks the cache holds when it arrives, then touches all of them
(:mod:`harness.trace.lru_curve`, exact in one pass). The GPU KV cache holds ``G`` blocks, the CPU tier ``C`` and the
disk tier ``D``; with ``inclusive`` tiers (vLLM: the CPU tier stores every block the GPU computes) the GPU serves the
hits at ``G``, the CPU tier adds those up to ``max(G, C)`` and disk those up to ``max(G, C, D)``; with ``exclusive``
tiers (blocks move down on eviction) the reaches are ``G + C`` and ``G + C + D`` (:mod:`harness.trace.tiers`).

Not modelled: blocks pinned by running requests (concurrency shrinks the GPU cache the LRU sees), decode blocks,
the last prompt token that is always computed, offload chunk rounding, eviction orders other than LRU, and requests
that overlap in time (all are served one after another, in send order).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.trace.blocks import from_lists
from harness.trace.lru_curve import stack_distances
from harness.trace.tiers import TierMode
from harness.workload.plan import StepPlan
from harness.workload.requests import PlannedRequest
from harness.workload.text import chain_hashes
from harness.workload.tokens import TokenCalibration

MODEL_TEXT = ("an approximation of vLLM's scheduler: one LRU at the plan's block granularity over the arm's requests "
              "in send order (warm-up included, caches carried over between steps), GPU first, then the CPU tier, "
              "then disk; running requests' pinned blocks, decode blocks and overlapping requests are not modelled")


@dataclass(frozen=True)
class PlannedAccess:
    """One request as the plan made it: its step (``-1`` warm-up), its prompt's block hashes and prompt tokens."""

    step: int
    block_ids: Sequence[int]
    prompt_tokens: int


@dataclass(frozen=True)
class TierCapacity:
    """Capacities in tokens; ``mode`` says how the tiers nest."""

    gpu_tokens: int
    cpu_tokens: int = 0
    disk_tokens: int = 0
    mode: TierMode = "inclusive"

    def reaches(self, block_tokens: int) -> tuple[int, int, int]:
        """Capacities (blocks of ``block_tokens``) whose LRU hits end at the GPU, the CPU tier and disk."""
        g, c, d = (max(0, t) // block_tokens for t in (self.gpu_tokens, self.cpu_tokens, self.disk_tokens))
        if self.mode == "exclusive":
            return g, g + c, g + c + d
        return g, max(g, c), max(g, c, d)


@dataclass(frozen=True)
class StepShare:
    """A step's prompt tokens and the predicted shares of them served by each tier (``miss``: recomputed)."""

    step: int
    requests: int
    prompt_tokens: int
    gpu: float
    cpu: float
    disk: float

    @property
    def miss(self) -> float:
        return max(0.0, 1.0 - self.gpu - self.cpu - self.disk)


def predict_step_shares(requests: Sequence[PlannedAccess], block_tokens: int,
                        capacity: TierCapacity) -> dict[int, StepShare]:
    """Predicted shares per step (steps in the order they first appear) for requests given in send order."""
    if block_tokens < 1:
        raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
    if not requests:
        return {}
    trace = from_lists(list(range(len(requests))), [list(r.block_ids) for r in requests], block_tokens,
                       input_tokens=[max(0, r.prompt_tokens) for r in requests])
    sd = stack_distances(trace)
    depth = np.where(sd.prefix_depth < sd.cold, sd.prefix_depth, np.iinfo(np.int64).max)  # first touches never hit
    weights = trace.block_token_weights()
    steps = sorted({r.step for r in requests})
    slot = {s: i for i, s in enumerate(steps)}
    req_slot = np.array([slot[r.step] for r in requests], dtype=np.int64)
    block_slot = req_slot[trace.request_of_block()]
    prompt = np.bincount(req_slot, weights=trace.input_tokens, minlength=len(steps))
    counts = np.bincount(req_slot, minlength=len(steps))
    hits = [np.bincount(block_slot, weights=np.where(depth <= reach, weights, 0), minlength=len(steps))
            for reach in capacity.reaches(block_tokens)]
    out: dict[int, StepShare] = {}
    for step in steps:
        i = slot[step]
        total = float(prompt[i])
        g, c, d = (float(h[i]) / total if total > 0 else 0.0 for h in hits)
        out[step] = StepShare(step=step, requests=int(counts[i]), prompt_tokens=int(total), gpu=g, cpu=c - g,
                              disk=d - c)
    return out


def prompt_units(req: PlannedRequest) -> list[str]:
    """The units a planned prompt is hashed over, as :func:`harness.workload.requests.finalize` cuts them: the words
    (a completions prompt) or each message's role marker and words, then the assistant marker (chat)."""
    if req.api == "completions":
        return req.messages[0][1].split() if req.messages else []
    units: list[str] = []
    for role, content in req.messages:
        units.append(f"<|{role}|>")
        units.extend(content.split())
    units.append("<|assistant|>")
    return units


def block_hashes(req: PlannedRequest, block_tokens: int, calib: TokenCalibration) -> list[int]:
    """The planned prompt's chained block hashes at ``block_tokens`` server tokens per block."""
    return list(_block_hashes(req, max(1, round(block_tokens / calib.tokens_per_word))))


@functools.lru_cache(maxsize=1 << 16)
def _block_hashes(req: PlannedRequest, block_words: int) -> tuple[int, ...]:
    """Memoised: every arm replays the same planned requests (:mod:`harness.workload.synthesis` shares them)."""
    return tuple(chain_hashes(prompt_units(req), block_words))


def sent_requests(plan: StepPlan, per_user: Mapping[int, int], total: int, slack: int = 8) -> dict[str, PlannedRequest]:
    """The plan's requests a step can have sent, by key: each user's first ``per_user[u]`` (+ ``slack``) requests
    (closed loop: a user sends its stream in order), or the first ``total`` (+ ``slack``) arrivals (open loop)."""
    found: dict[str, PlannedRequest] = {}
    if plan.mode == "closed":
        for user, n in per_user.items():
            if 0 <= user < plan.users:
                found.update((r.key, r) for r in itertools.islice(plan.user_stream(user), n + slack))
    else:
        found.update((r.key, r) for r in itertools.islice(plan.arrivals(), total + slack))
    return found

"""Differential replay of the simulator's offload tiers against vLLM 0.32's own offload managers.

One request sequence (chunk keys in prefix order, the GPU prefix hit of each request, how many chunks are prompt)
is replayed twice, in the same call order and on the same step clock (:mod:`tools.sim_oracle.replay`):

- inside vLLM's interpreter by ``scripts/vllm_replay.py`` (standard library and vLLM only, sent as text), which
  drives ``CPUOffloadingManager`` (lru/arc, ``store_threshold``) or ``TieringOffloadingManager`` with one fs tier
  the way vLLM's ``OffloadingConnectorScheduler`` does: a lookup per chunk, ``prepare_load`` / ``complete_load``,
  ``prepare_store`` when blocks are computed, ``complete_store`` when the worker is done, ``on_request_finished``;
- through the simulator's :class:`~harness.sim.offload.OffloadManager` (its CPU tier, policies and fs tier), with
  transfer times fixed to the step clock.

:mod:`tools.sim_oracle.compare` then holds the two per-request records against each other: which chunks hit and
from which tier, which were stored, evicted, promoted and cascaded, when each request was admitted.
:mod:`tools.sim_oracle.sequence` builds sequences from token ids or block ids (the callers, e.g. the e2e test,
turn request plans and traces into those).
"""

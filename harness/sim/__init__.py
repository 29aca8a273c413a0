"""The simulated engine: an OpenAI-compatible server with a paged KV cache and offload tiers.

It stands in for vLLM / TensorRT-LLM where no GPU exists. Its cache behaves like the real engines' (paged blocks,
prefix caching by chained block hashes, a CPU tier with LRU/ARC, an fs tier of real files) and its timings come
from a profile of the model and hardware (:mod:`harness.sim.profile`). Entry points: ``harness sim serve`` /
``python -m harness.sim serve`` (:mod:`harness.sim.cli`), :func:`harness.sim.testing.running_sim` for tests, and
``python -m harness.sim.bench`` for the throughput benchmark.
"""

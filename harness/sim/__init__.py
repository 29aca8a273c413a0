"""The simulated engine: an OpenAI-compatible server with a paged KV cache and offload tiers.

It stands in for vLLM / TensorRT-LLM where no GPU exists. Its cache behaves like the real engines' (paged blocks,
prefix caching by chained block hashes, a CPU tier with LRU/ARC, an fs tier of real files) and its timings come
from a profile of the model and hardware (:mod:`harness.sim.profile`). Entry points: ``harness sim serve`` /
``python -m harness.sim serve`` (:mod:`harness.sim.cli`), and :func:`harness.sim.embedded.embedded_sim` (on a
thread of the calling process: ``harness plan --calibrate``). Outside the package: ``tests/support/sim.py``
(``running_sim``, the simulator as a process, for tests) and ``python -m tools.bench.sim`` (the throughput benchmark).
"""

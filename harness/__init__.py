"""KV-cache offload rollout harness: plan, run, analyse and report offload-tier rollouts for vLLM and TensorRT-LLM.

The pipeline, one package per stage (data flows one way): ``config`` -> ``plan`` -> ``launch`` -> ``load`` ->
``scrape`` -> ``analysis`` -> ``decision`` -> ``report``, conducted by ``run``; ``cli`` is the face. Shared floors:
``core``, ``secrets``, ``schema``, ``stats``, ``host``, ``rundir``, ``engines``, ``workload``. Wings: ``sim``,
``trace``, ``perf``, ``decision_bench``. ``tests/unit/test_layers.py`` holds the table of who may import whom.
"""

from harness.core.version import __version__

__all__ = ["__version__"]

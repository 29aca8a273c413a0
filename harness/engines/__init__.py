"""Engine adapters: turn (engine spec, arm) into a :class:`~harness.engines.spec.LaunchSpec`, one module per engine.

Adapters register themselves by ``kind`` in :data:`REGISTRY`; nothing else in the harness branches on engine names.
"""

from harness.engines.registry import REGISTRY, EngineAdapter, adapter_for, build_launch_spec

__all__ = ["REGISTRY", "EngineAdapter", "adapter_for", "build_launch_spec"]

"""Engine adapters: turn (engine spec, arm) into a :class:`~harness.engines.spec.LaunchSpec`, one module per engine.

The registry (:mod:`.registry`) is built from the adapter classes by their ``kind``; nothing else in the harness
branches on engine names.
"""

from harness.engines.registry import REGISTRY, EngineAdapter, adapter_for, build_launch_spec

__all__ = ["REGISTRY", "EngineAdapter", "adapter_for", "build_launch_spec"]

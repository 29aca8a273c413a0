"""A small registry of engine adapters chosen by the scenario's ``engine.kind``."""

from __future__ import annotations

from typing import Protocol

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines.spec import LaunchSpec


class EngineAdapter(Protocol):
    """Turns an arm into a launch spec and knows its engine's quirks."""

    kind: str
    supported_offload: tuple[str, ...]
    supports_disk_tier: bool

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        """Build the launch spec for one arm."""
        ...

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """The offload kinds this engine, as configured, accepts (the simulator's depend on its flavor)."""
        ...


REGISTRY: dict[str, EngineAdapter] = {}


def register(adapter: EngineAdapter) -> EngineAdapter:
    """Add an adapter to the registry (called at import by each engine module)."""
    REGISTRY[adapter.kind] = adapter
    return adapter


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter for an engine kind."""
    _load_builtin()
    try:
        return REGISTRY[kind]
    except KeyError:
        raise KeyError(f"no engine adapter for kind {kind!r}; known: {', '.join(sorted(REGISTRY))}") from None


def build_launch_spec(engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
    """Shortcut: the launch spec for ``arm`` of an engine."""
    return adapter_for(engine.kind).launch_spec(engine, arm, host_port=host_port)


def _load_builtin() -> None:
    # Always import all three: one adapter module imported directly (``harness.engines.vllm``) must not hide the
    # others. Repeated imports are cached by Python.
    from harness.engines import sim, trtllm, vllm  # noqa: F401  (import registers the adapters)

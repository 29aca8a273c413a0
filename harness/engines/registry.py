"""The engine adapters, chosen by the scenario's ``engine.kind``: a registry built from the adapter classes.

Each adapter class names its engine in a ``kind`` class variable; :data:`ADAPTER_CLASSES` lists them and
:data:`REGISTRY` maps each kind to one instance. Adding an engine is one module and one entry in that tuple; nothing
registers itself at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, Protocol

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines.sim import SimAdapter
from harness.engines.spec import LaunchSpec
from harness.engines.trtllm import TrtllmAdapter
from harness.engines.vllm import VllmAdapter


class EngineAdapter(Protocol):
    """Turns an arm into a launch spec and knows its engine's quirks."""

    kind: ClassVar[str]
    supported_offload: tuple[str, ...]
    supports_disk_tier: bool

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        """Build the launch spec for one arm."""
        ...

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """The offload kinds this engine, as configured, accepts (the simulator's depend on its flavor)."""
        ...


ADAPTER_CLASSES: tuple[type[EngineAdapter], ...] = (VllmAdapter, TrtllmAdapter, SimAdapter)
REGISTRY: Mapping[str, EngineAdapter] = MappingProxyType({cls.kind: cls() for cls in ADAPTER_CLASSES})


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter for an engine kind."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise KeyError(f"no engine adapter for kind {kind!r}; known: {', '.join(sorted(REGISTRY))}") from None


def build_launch_spec(engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
    """Shortcut: the launch spec for ``arm`` of an engine."""
    return adapter_for(engine.kind).launch_spec(engine, arm, host_port=host_port)

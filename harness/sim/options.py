"""The simulator's serving-layer options: what ``harness sim serve`` resolves and the server runs with.

The engine model's own settings live in :class:`harness.sim.config.EngineConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.sim.faults import Faults


@dataclass
class ServeOptions:
    """Serving-layer options (the engine model's live in :class:`harness.sim.config.EngineConfig`)."""

    host: str = "127.0.0.1"
    port: int = 0
    flavor: str = "vllm"
    served_names: tuple[str, ...] = ("sim-model",)
    time_scale: float = 1.0
    startup_delay_s: float = 0.0
    ground_truth: str | None = None
    seed: int = 0
    kv_offloading_size_gib: float | None = None
    faults: Faults = field(default_factory=Faults)
    dev_mode: bool = False  # VLLM_SERVER_DEV_MODE=1 at start-up: vLLM's development routes (harness.sim.dev_routes)

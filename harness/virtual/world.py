"""One virtual run's shared state: its clock and event queue, its disk tiers, and the engines started in it.

A run's arms share one virtual clock (their journal spans line up as a real run's do) and one
:class:`~harness.virtual.disk.VirtualDisk` (a restarted engine finds its predecessor's disk tier; a fresh arm empties
its own). Engines are found by the base URL the conductor knows them by (``virtual://<arm>/<start>``): a
:class:`~harness.load.step.StepRun` names its server that way, as it names a real one by its URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.engines.spec import LaunchSpec
from harness.virtual.clock import ORIGIN_NS, EventQueue, VirtualClock
from harness.virtual.disk import VirtualDisk
from harness.virtual.engine import VirtualEngine, id_prefix

RESUME_GAP_NS = 1_000_000_000  # a resumed run's clock starts this long after the latest stamp it finds


@dataclass
class VirtualWorld:
    """The virtual clock, its events, the disk tiers and the engines of one run (one harness session)."""

    queue: EventQueue
    disk: VirtualDisk = field(default_factory=VirtualDisk)
    engines: dict[str, VirtualEngine] = field(default_factory=dict)

    @classmethod
    def begin(cls, latest_ns: int | None = None) -> VirtualWorld:
        """A new world; a resumed run passes its latest recorded monotonic stamp, so its clock goes on after it."""
        origin = ORIGIN_NS if latest_ns is None else max(ORIGIN_NS, latest_ns + RESUME_GAP_NS)
        return cls(EventQueue(VirtualClock(origin_ns=origin)))

    @property
    def clock(self) -> VirtualClock:
        """The run's virtual clock."""
        return self.queue.clock

    def start_engine(self, spec: LaunchSpec) -> tuple[str, VirtualEngine]:
        """Start the simulated engine of ``spec`` now; (its base URL, the engine). Raises
        :class:`~harness.virtual.engine.EngineStartError` when the simulator would refuse to start."""
        n = sum(1 for url in self.engines if url.startswith(f"virtual://{spec.arm}/")) + 1
        url = f"virtual://{spec.arm}/{n}"
        engine = VirtualEngine(spec, self.queue, self.disk, id_prefix(f"{spec.arm}/{n}"))
        self.engines[url] = engine
        return url, engine

    def engine(self, base_url: str) -> VirtualEngine:
        """The engine known by ``base_url``."""
        try:
            return self.engines[base_url]
        except KeyError:
            raise LookupError(f"no virtual engine at {base_url}") from None

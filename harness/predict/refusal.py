"""What the simulator cannot model: a refusal that names the scenario field (or option) and says why (exit 2)."""

from __future__ import annotations


class PredictRefused(ValueError):
    """A scenario (or option) the prediction cannot honour; ``field`` is its path, e.g. ``engine.tensor_parallel_size``.

    ``str()`` is ``"FIELD: WHY"``: the line ``harness predict`` prints before it exits 2."""

    def __init__(self, field: str, why: str) -> None:
        self.field = field
        self.why = why
        super().__init__(f"{field}: {why}")

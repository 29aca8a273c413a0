"""Ground truth: what the simulator served from where, one JSON line per finished request.

Fields: ``request_id`` (the response id), ``kind`` (``chat`` | ``completion``), ``prompt_tokens``,
``output_tokens`` (tokens sent to the client), ``gpu_hit_tokens``, ``cpu_hit_tokens``, ``disk_hit_tokens``,
``recomputed_tokens`` (these four always sum to ``prompt_tokens``), ``arrival_ns``, ``first_token_sent_ns``,
``finished_ns`` (``time.perf_counter_ns()``: CLOCK_MONOTONIC on Linux, comparable across processes on one host),
``first_token_sent_wall_ns`` (``time.time_ns()``), ``preemptions``, ``status`` (``ok`` | ``error`` |
``aborted``). ``first_token_sent_ns`` is taken as the first token's chunk (or the whole non-streamed body) is
handed to the socket, so it never follows the client's receipt; ``null`` if nothing was sent. A request
refused before it reached the engine (HTTP error, injected 500) has ``prompt_tokens`` 0 and its tokenised
length in ``requested_prompt_tokens``. Each line is flushed when written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from harness.core.jsonl import read_objects


class GroundTruthWriter:
    """Append-only JSONL writer, flushed per line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = self.path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_ground_truth(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ground-truth file (a partial last line is ignored)."""
    return read_objects(Path(path))

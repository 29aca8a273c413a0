"""A step's steady state as ``summary.json`` records it: the transient cut after the load changed, and the window the
comparisons between arms use (computed by :mod:`harness.analysis.steady`)."""

from __future__ import annotations

from harness.schema.base import SchemaModel as _Model


class SteadyState(_Model):
    """The steady-state part of one step. ``requests_removed`` requests (sent in the first ``seconds_removed``
    seconds) are the transient; the window runs from ``start_s`` to ``end_s`` (seconds after the step's start).
    ``requests``: the requests sent in the window (errors too); ``samples``: the successful ones with a TTFT, the n of
    every latency comparison; ``completed``: the successful requests that ended inside the window, whose output
    tokens over its duration are ``output_tokens_per_s`` (the n of a throughput comparison); ``goodput``: the share of
    ``requests`` within every SLO. ``settled`` false: the rule's minimum lay in the series' second half (no steady
    state shown; ``note`` says so)."""

    rule: str
    requests_removed: int = 0
    seconds_removed: float = 0.0
    start_s: float = 0.0
    end_s: float = 0.0
    requests: int = 0
    samples: int = 0
    completed: int = 0
    output_tokens_per_s: float | None = None
    goodput: float | None = None
    settled: bool = True
    note: str | None = None

"""Bounds on load that more than one model must agree on: a scenario's ``steps.levels`` and ``steps.search``, the
probe levels the capacity search builds from it (:mod:`harness.run.capacity`), and the ``steps.jsonl`` entries a
report reads back. One constant each, so a value the scenario accepts is one the run and the report accept too."""

from __future__ import annotations

MAX_CONCURRENCY = 100_000
"""Closed-loop users in one step (``concurrency``; a concurrency search's ``high``)."""

MAX_RATE_RPS = 1_000_000.0
"""Open-loop arrivals per second in one step (``rate_rps``; a rate search's ``high``)."""

MAX_STEP_S = 86_400.0
"""Seconds one step (or one capacity probe, re-run included) may be planned to last."""

MAX_STEP_REQUESTS = 100_000_000
"""Requests one step (or one capacity probe, re-run included) may be planned to send."""

MAX_THINK_S = 3600.0
"""A closed-loop user's pause after its previous request ended."""

MAX_SEARCH_SESSIONS = 100_000
"""Capacity-search sessions of one arm a journal may hold (one per resume)."""

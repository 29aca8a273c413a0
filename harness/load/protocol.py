"""The messages between a step's locust master and its load workers, and the worker process's exit statuses.

Locust carries the messages; the harness decides who runs what. A step, as the master sees it:

1. Workers connect (``client_ready``). Once the step's worker set is fixed, a worker that connects later is
   refused (:data:`REFUSED`: locust would otherwise move users onto it mid-step).
2. ``SETUP`` (spec and rank) to each; each answers ``READY`` with the fingerprint of the plan it built, or an
   error. A worker without a fingerprint, or with another one, is refused before any request is sent.
3. ``CLOCK`` exchanges measure each worker's monotonic clock against the master's (:mod:`.clocks`).
4. ``START`` to all: each worker runs its own users (rank ``r`` of ``P``: users ``r, r + P, ...``; open loop:
   arrivals ``r, r + P, ...``). Locust's user dispatcher is not used, so nothing rebalances users mid-step.
5. While it runs, each worker sends ``RECORDS`` and a ``BEAT`` (its progress) every half second; the master relays
   ``END_SENDING`` (a sequential look settled the step) and ``HALT`` (stop now) to every worker.
6. Each worker ends with ``DONE`` (its report); the master then quits the workers.
"""

from __future__ import annotations

from harness.core.exit_codes import ExitCode

SETUP = "harness_setup"
READY = "harness_ready"
CLOCK = "harness_clock"
START = "harness_start"
RECORDS = "harness_records"
BEAT = "harness_beat"
END_SENDING = "harness_end_sending"
HALT = "harness_halt"
DONE = "harness_done"
RUN_OVER = "harness_run_over"

# the worker process's exit statuses (``python -m harness.load.locust_runner worker``), read by harness load-worker:
# a protocol between the two processes, not the harness's exit codes; only Ctrl-C's is the user-facing one
STEP_SERVED, RUN_OVER_EXIT, NO_MASTER, NOT_A_MASTER, REFUSED = 0, 3, 5, 6, 7
INTERRUPTED = ExitCode.INTERRUPTED

BEAT_INTERVAL_S = 0.5

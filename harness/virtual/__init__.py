"""The virtual clock: a simulated rollout's launch and load stages in the harness process, on a discrete-event clock.

``engine.sim_clock: virtual`` (``harness run SCENARIO --virtual``) runs the same conductor, plan, request plans,
records, scrapes, decision and report as a real-time simulated run; only the server and the load generator are
replaced: the simulator's engine core is driven in this process by events on one virtual clock, with no HTTP, no
sleeping and no threads, so a rollout takes seconds and the same scenario gives the same summary on any host.

Modules, each with one job: ``clock`` (the virtual clock and its event queue), ``disk`` (the simulator's disk tier in
memory), ``engine`` (the simulator's engine core, request handling and metrics on the event queue), ``exchange``
(one request as its client sees it, and its record), ``driver`` (one load step: users, arrivals, limits, looks),
``scraper`` (scrapes and host readings on the virtual clock), ``world`` (a run's clock, disk and engines),
``checks`` (what the virtual clock refuses). The conductor's side of the seam is :mod:`harness.run.backend` and
:mod:`harness.run.virtual_arm`; docs/virtual-clock.md has the whole picture.
"""

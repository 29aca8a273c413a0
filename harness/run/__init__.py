"""The conductor: arms in order on fresh (or attached) servers, steps with load and scraping, drills, capacity probes.

Data flows one way through the run directory: the orchestrator (:mod:`.orchestrator`) writes raw facts
(``steps.jsonl``, ``arms.jsonl``, records, scrapes, logs) through :mod:`harness.rundir`;
:mod:`harness.decision.summarize` computes ``summary.json`` from those files alone, so ``harness report RUN_DIR``
reproduces it and a crashed run keeps what it had.
"""

"""Rollout orchestration: arms in order on fresh servers, steps with load and scraping, rules, decisions, verdict.

Data flows one way through the run directory: the orchestrator (:mod:`.orchestrator`) writes raw facts
(``steps.jsonl``, ``arms.jsonl``, records, scrapes, logs); :mod:`.summarize` computes ``summary.json`` from those
files alone, so ``harness report RUN_DIR`` reproduces it and a crashed run keeps what it had.
"""

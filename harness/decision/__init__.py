"""The judging stage: request records and scrapes -> rules, decisions and the verdict, as a
:class:`~harness.schema.summary.Summary` (:mod:`.summarize` rebuilds it from the run directory alone).
"""

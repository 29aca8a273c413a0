"""The ``summary.json`` contract: :class:`~harness.schema.summary.Summary` and its parts (tier health, host telemetry).
Pydantic models only; every stage that writes or reads a summary imports them from here.
"""

"""Scenario configuration: strict pydantic models for every section of a scenario file, and the loader.

A scenario is one YAML file under ``scenarios/``. Its sections live in one module each:
``engine`` (:mod:`.engine`), ``arms`` (:mod:`.arms`), ``workload`` (:mod:`.workload`), ``steps`` (:mod:`.steps`),
``slo`` and ``rules`` (:mod:`.rules`), ``drills`` (:mod:`.drills`), ``checks`` (:mod:`.checks_spec`); :mod:`.scenario`
joins them and :mod:`.loader` turns a file into a validated :class:`Scenario` or a :class:`ScenarioError` that names
the file, the field and what would be valid (:mod:`.errors` words pydantic's errors).
"""

from harness.config.loader import ScenarioError, load_scenario, load_scenario_text
from harness.config.scenario import Scenario

__all__ = ["Scenario", "ScenarioError", "load_scenario", "load_scenario_text"]

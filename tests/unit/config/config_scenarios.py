"""A small valid scenario for the config tests, and helpers that load it with some sections replaced."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.config import ScenarioError, load_scenario_text
from harness.config.scenario import Scenario

BASE = """
name: fields
engine: {kind: sim, model: m, launcher: process}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: tiered, tier: tiered, offload: {kind: vllm-connector, spec_name: TieringOffloadingSpec,
     cpu_bytes_to_use: 1073741824, secondary_tiers: [{root_dir: /tmp/kv-fields}]}}
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 100, max: 200}, output_tokens: {min: 4, max: 8}}]
steps: {levels: [{concurrency: 4, duration_s: 20}]}
slo: {ttft_p99_ms: 2000}
"""


def load_with(**sections: Any) -> Scenario:
    """:data:`BASE` with each given section merged in (a mapping updates the section's keys; anything else replaces
    it), loaded as ``s.yaml``."""
    data = yaml.safe_load(BASE)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return load_scenario_text(yaml.safe_dump(data), "s.yaml")


def refused(match: str, **sections: Any) -> str:
    """Load :func:`load_with` ``sections``, expect a ScenarioError containing ``match``; returns its text."""
    with pytest.raises(ScenarioError) as err:
        load_with(**sections)
    text = str(err.value)
    assert match in text, text
    return text

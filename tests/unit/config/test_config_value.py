"""The ``value:`` section: optional, exactly one demand, positive numbers, unknown fields refused by name (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.config.config_scenarios import BASE, load_with, refused

VALUE = {"requests_per_s": 40, "gpu_hour_cost": 3.5, "host_memory_gib_month_cost": 2.0, "nvme_gib_month_cost": 0.1}


def test_absent_by_default_and_read_when_given() -> None:
    assert load_with().value is None
    spec = load_with(value=VALUE).value
    assert spec is not None and (spec.demand, spec.demand_unit, spec.currency) == (40.0, "requests/s", "USD")
    tokens = load_with(value={"output_tokens_per_s": 9000, "gpu_hour_cost": 2, "currency": "EUR"}).value
    assert tokens is not None and (tokens.demand, tokens.demand_unit, tokens.currency) == (9000.0, "output tokens/s",
                                                                                          "EUR")
    assert tokens.host_memory_gib_month_cost is None and tokens.nvme_gib_month_cost is None


@pytest.mark.parametrize(("value", "field", "words"), [
    ({**VALUE, "output_tokens_per_s": 100}, "value", "not both"),
    ({"gpu_hour_cost": 3.5}, "value", "requests_per_s or output_tokens_per_s"),
    ({**VALUE, "requests_per_s": 0}, "value.requests_per_s", ""),
    ({**VALUE, "requests_per_s": -5}, "value.requests_per_s", ""),
    ({**VALUE, "gpu_hour_cost": 0}, "value.gpu_hour_cost", ""),
    ({k: v for k, v in VALUE.items() if k != "gpu_hour_cost"}, "value.gpu_hour_cost", ""),
    ({**VALUE, "host_memory_gib_month_cost": -1}, "value.host_memory_gib_month_cost", ""),
    ({**VALUE, "nvme_gib_month_cost": 0}, "value.nvme_gib_month_cost", ""),
    ({**VALUE, "currency": "US dollars!"}, "value.currency", ""),
    ({**VALUE, "gpu_cost": 3}, "value.gpu_cost", ""),
])
def test_bad_value_section_names_the_field(value: dict[str, Any], field: str, words: str) -> None:
    text = refused(field, value=value)
    assert "s.yaml" in text and words in text, text


def test_plan_refuses_a_bad_value_section_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    data = yaml.safe_load(BASE)
    data["value"] = {**VALUE, "requests_per_s": -1}
    path = tmp_path / "bad-value.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {**os.environ, "HARNESS_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "harness", "plan", str(path)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert "bad-value.yaml" in done.stderr and "value.requests_per_s" in done.stderr, done.stderr[-2000:]

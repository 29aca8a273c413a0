"""The ``steps.search`` section: defaults, bad input named by file and field (exit 2), and what `harness plan` shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import ScenarioError, load_scenario_text
from harness.config.search import SearchSpec
from harness.plan.build import estimate_duration_s

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
SEARCH = {"metric": "ttft", "percentile": 99, "budget_ms": 2000, "low": 4, "high": 128, "resolution": 4,
          "probe_duration_s": 20, "max_probes": 8}


def demo(search: dict[str, Any] | None = None, **steps: Any) -> dict[str, Any]:
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    data["steps"]["search"] = dict(SEARCH, **(search or {}))
    data["steps"].update(steps)
    return dict(data)


def problem(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(yaml.safe_dump(data), "s.yaml")
    return str(info.value)


def test_search_defaults_and_the_kind_of_the_levels() -> None:
    scenario = load_scenario_text(yaml.safe_dump(demo()), "s.yaml")
    spec = scenario.steps.search
    assert spec is not None and spec.kind is None and scenario.steps.search_kind == "concurrency"
    assert (spec.resolution_abs, spec.resolution_ratio, spec.extend_factor) == (4.0, None, 2.0)
    rate = demo({"low": 0.5, "high": 20}, levels=[{"rate_rps": 2, "duration_s": 10}], sequential={"enabled": False})
    assert load_scenario_text(yaml.safe_dump(rate), "s.yaml").steps.search_kind == "rate"


def test_ratio_resolution_is_read_as_a_share() -> None:
    spec = SearchSpec.model_validate(dict(SEARCH, resolution="10 %"))
    assert spec.resolution == "10%" and spec.resolution_ratio == pytest.approx(0.10) and spec.resolution_abs is None


@pytest.mark.parametrize(("search", "field", "words"), [
    ({"resolution": "fine"}, "steps.search.resolution", "percentage"),
    ({"resolution": 0}, "steps.search.resolution", "positive"),
    ({"low": 64, "high": 8}, "steps.search", "below low"),
    ({"low": 4.5}, "steps", "whole numbers"),
    ({"percentile": 97}, "steps.search.percentile", ""),
    ({"metric": "tpot"}, "steps.search.metric", ""),
    ({"budget_ms": 0}, "steps.search.budget_ms", ""),
    ({"max_probes": 0}, "steps.search.max_probes", ""),
    ({"probes": 3}, "steps.search.probes", ""),
])
def test_bad_search_names_the_field(search: dict[str, Any], field: str, words: str) -> None:
    message = problem(demo(search))
    assert "s.yaml" in message and field in message and words in message


def test_worst_case_counts_every_other_probe_rerun_and_the_time_cap() -> None:
    spec = SearchSpec.model_validate(SEARCH)  # 8 probes of 20 s, re-runs 2x
    assert spec.worst_case_s() == 4 * 20 + 4 * 40
    assert SearchSpec.model_validate(dict(SEARCH, extend_factor=1)).worst_case_s() == 8 * 20
    assert SearchSpec.model_validate(dict(SEARCH, max_search_s=60)).worst_case_s() == 60 + 40
    scenario = load_scenario_text(yaml.safe_dump(demo()), "s.yaml")
    without = load_scenario_text(yaml.safe_dump({**demo(), "steps": {
        k: v for k, v in demo()["steps"].items() if k != "search"}}), "s.yaml")
    per_arm_extra = spec.worst_case_s() + 2 * spec.max_probes
    assert estimate_duration_s(scenario)[0] == pytest.approx(estimate_duration_s(without)[0] + 3 * per_arm_extra)


def _cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_plan_shows_the_search_and_refuses_a_bad_one_with_exit_2(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(demo()), encoding="utf-8")
    shown = _cli("plan", str(good), state=tmp_path / "state")
    text = " ".join(shown.stdout.split())
    assert "Capacity search: capacity at SLO per arm, after its fixed steps: the highest load with p99 TTFT ≤ 2 s, " \
           "4 users to 128 users" in text, shown.stdout[-3000:]
    assert "p99 needs 368 requests to be bounded from above" in text
    assert "the capacity informs; it does not change the verdict" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(demo({"resolution": "fine"})), encoding="utf-8")
    refused = _cli("plan", str(bad), state=tmp_path / "state")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "bad.yaml" in refused.stderr and "steps.search.resolution" in refused.stderr

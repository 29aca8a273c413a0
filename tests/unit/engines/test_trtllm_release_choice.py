"""TensorRT-LLM release choice: listed, rc, between, newer, older and unnamed versions; stats source per release."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.engines import build_launch_spec
from harness.engines.trtllm import render_config
from harness.engines.trtllm_versions import (
    Release,
    UnknownRelease,
    choose_release,
    fact_counts,
    release_facts,
    release_for,
    releases,
)
from harness.plan.build import arm_launch_specs
from harness.plan.checks.trtllm_release import check_trtllm_release
from harness.scrape.catalog import catalog_for_engine

REPO = Path(__file__).resolve().parents[3]
GIB = 1 << 30
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:"
HOST = {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 4 * GIB}}


def engine(tag: str | None = None, **more: Any) -> EngineSpec:
    data: dict[str, Any] = {"kind": "trtllm", "model": "m", **more}
    if tag is not None:
        data["image"] = IMAGE + tag
    else:
        data["launcher"] = "process"
    return EngineSpec.model_validate(data)


def scenario(tag: str, arms: list[dict[str, Any]] | None = None) -> Scenario:
    return Scenario.model_validate({
        "name": "t", "engine": {"kind": "trtllm", "image": IMAGE + tag, "model": "m"},
        "arms": arms or [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}}, HOST],
        "workload": {"classes": [{"name": "s", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                                  "output_tokens": {"min": 5, "max": 50}}]},
        "steps": {"levels": [{"concurrency": 2, "duration_s": 10}]}})


def test_a_listed_release_is_chosen_exactly_and_its_unconfirmed_facts_counted() -> None:
    choice = choose_release(engine("1.0.0"))
    assert (choice.release.version, choice.match, choice.level) == ("1.0.0", "exact", "ok")
    assert choice.message.startswith("TensorRT-LLM 1.0.0 (image tag): table entry 1.0.0")
    [item] = check_trtllm_release(scenario("1.0.0"))
    counts = fact_counts(choice.release)
    assert counts.unconfirmed > 0, "no fact of 1.0.0 could be tied to its tag (issue 37)"
    assert item.name == "trtllm-release" and item.level == "warn"
    assert f"{counts.unconfirmed} of {counts.total} facts of entry 1.0.0" in item.message


def test_a_release_before_the_table_is_refused_at_plan_time() -> None:
    with pytest.raises(UnknownRelease, match=r"TensorRT-LLM 0\.21\.0 \(image tag\) predates the TensorRT-LLM "
                       r"version table \(oldest entry 1\.0\.0\).*refuses it; pin 1\.0\.0 or later"):
        choose_release(engine("0.21.0"))
    with pytest.raises(ValueError, match="predates"):
        release_for(engine("0.21.0"))
    scen = scenario("0.21.0")
    [item] = check_trtllm_release(scen)
    assert item.level == "error" and "predates the TensorRT-LLM version table" in item.message
    specs = arm_launch_specs(scen)
    assert all(isinstance(s, str) and "predates" in s for s in specs.values()), "no launch spec is built"


def test_plan_exits_2_for_a_release_before_the_table(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "scenarios" / "trtllm-host.yaml").read_text())
    data["engine"]["image"] = IMAGE + "0.21.0"
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "harness", "plan", str(path), "--json"], capture_output=True,
                          text=True, check=False, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    checks = json.loads(proc.stdout)["checks"]
    assert any(c["level"] == "error" and "predates the TensorRT-LLM version table" in c["message"] for c in checks)


@pytest.mark.parametrize(("tag", "entry", "match", "words"), [
    ("1.2.0", "1.1.0", "between", ["1.2.0 is not in the table: using entry 1.1.0", "UNCONFIRMED for 1.2.0"]),
    ("2.0.0", "1.3.0", "newer", ["2.0.0 is newer than every table entry: using the newest, 1.3.0",
                                 "UNCONFIRMED for 2.0.0"]),
    ("1.3.0rc2", "1.3.0", "prerelease", ["1.3.0rc2 is a pre-release (rc) of 1.3.0: using its base entry, 1.3.0",
                                         "may differ from the final 1.3.0 release"]),
    ("1.2.0rc1", "1.1.0", "between", ["using entry 1.1.0", "1.2.0rc1 is a pre-release (rc), which may differ"]),
])
def test_unlisted_releases_use_a_named_entry_with_a_warning(tag: str, entry: str, match: str,
                                                             words: list[str]) -> None:
    choice = choose_release(engine(tag))
    assert (choice.release.version, choice.match, choice.level) == (entry, match, "warn")
    for word in words:
        assert word in choice.message, choice.message
    assert "harness plan --validate" in choice.message
    [item] = check_trtllm_release(scenario(tag))
    counts = fact_counts(choice.release)
    assert item.level == "warn" and item.message.startswith(choice.message)
    assert f"{counts.unconfirmed} of {counts.total} facts of entry {entry}" in item.message
    spec = build_launch_spec(engine(tag), Arm.model_validate(HOST))
    assert f"(TensorRT-LLM {entry} keys)" in spec.config_files[0].content


def test_no_release_named_is_a_warning_not_silence() -> None:
    choice = choose_release(engine(None))
    assert (choice.release.version, choice.match, choice.level) == ("1.0.0", "unnamed", "warn")
    assert "no TensorRT-LLM release named (no image tag, no engine.version)" in choice.message
    assert "oldest" in choice.message and "set engine.version" in choice.message
    latest = choose_release(engine("latest"))
    assert latest.match == "unnamed" and "image tag 'latest' names no release number" in latest.message


def test_engine_version_names_the_release_before_the_tag() -> None:
    choice = choose_release(engine("1.0.0", version="1.3.0"))
    assert choice.release.version == "1.3.0" and choice.named_by == "engine.version"
    assert "TensorRT-LLM 1.3.0 (engine.version)" in choice.message


def test_arms_naming_different_releases_get_one_item_each() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
            {**HOST, "engine": {"image": IMAGE + "1.2.0"}}]
    items = check_trtllm_release(scenario("1.0.0", arms))
    assert [(i.arm, i.level) for i in items] == [("baseline", "warn"), ("host", "warn")]
    assert "table entry 1.0.0" in items[0].message and "1.2.0 is not in the table" in items[1].message


def test_no_item_for_other_engines() -> None:
    scen = Scenario.model_validate({**scenario("1.0.0").model_dump(mode="json", exclude_none=True),
                                    "engine": {"kind": "sim", "model": "m", "sim_flavor": "trtllm"}})
    assert check_trtllm_release(scen) == []


def test_stats_source_decides_what_is_scraped() -> None:
    paths = {rel.version: [(m.path, m.format) for m in build_launch_spec(engine(rel.version),
                                                                          Arm.model_validate(HOST)).metrics]
             for rel in releases()}
    assert paths["1.0.0"] == [("/metrics", "trtllm-json")]
    assert paths["1.1.0"] == [("/metrics", "trtllm-json"), ("/prometheus/metrics", "prometheus")]
    assert paths["1.3.0"] == [("/prometheus/metrics", "prometheus")], "the collector drains JSON /metrics on 1.3"
    for rel in releases():
        assert not (rel.polls_json and rel.collector_drains_json), rel.version
        assert rel.stats_note


def test_the_catalog_reads_only_what_the_launch_scrapes() -> None:
    for tag in ("1.0.0", "1.1.0rc5", "1.2.0", "1.3.0", "1.3.0rc2", "2.0.0"):
        spec = build_launch_spec(engine(tag), Arm.model_validate(HOST))
        scraped = {m.format for m in spec.metrics}
        catalog = catalog_for_engine("trtllm", IMAGE + tag)
        read = {s.format for sources in catalog.quantities.values() for s in sources}
        assert read <= scraped, (tag, catalog.name)
    assert catalog_for_engine("trtllm", None).name == "trtllm-1.0", "no release named: the oldest, as the launch"
    assert catalog_for_engine("trtllm", None, version="1.3.0").name == "trtllm-1.3"
    assert catalog_for_engine("trtllm", IMAGE + "1.2.0").name == "trtllm-1.1"


def test_a_table_entry_that_would_starve_a_reader_is_refused() -> None:
    raw = releases()[-1].model_dump()
    raw.update(stats_source="json+prometheus", collector_drains_json=True)
    with pytest.raises(ValueError, match="one reader would starve"):
        Release.model_validate(raw)


def test_the_check_request_carries_the_entry_facts_and_the_yaml_stays_clean() -> None:
    text = render_config(engine("1.2.0"), Arm.model_validate(HOST))
    assert "harness-release-facts" not in text and yaml.safe_load(text)["return_perf_metrics"] is True
    assert release_facts(choose_release(engine("1.2.0"))) == {
        "entry": "1.1.0", "covers_below": "1.3.0", "requested": "1.2.0", "return_perf_metrics": True,
        "tokens_per_block": False, "prometheus_route": "/prometheus/metrics", "stats_source": "json+prometheus",
        "collector_drains_json": False}


@pytest.mark.parametrize("fraction", [0.1234567, 0.9, 1 / 3, 0.1 + 0.2, 1e-7, 0.000123456789012345])
def test_floats_in_the_yaml_are_lossless(fraction: float) -> None:
    arm = Arm.model_validate({**HOST, "offload": {**HOST["offload"], "free_gpu_memory_fraction": fraction}})
    text = render_config(engine("1.0.0"), arm)
    assert yaml.safe_load(text)["kv_cache_config"]["free_gpu_memory_fraction"] == fraction
    if fraction == 0.1234567:
        assert "free_gpu_memory_fraction: 0.1234567\n" in text

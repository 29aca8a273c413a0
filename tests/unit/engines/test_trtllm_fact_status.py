"""Per-fact confirmation in the TensorRT-LLM version table (issue 37): every fact an entry states carries confirmed
(file, commit, version seen) or unconfirmed (reason); the loader refuses anything else, and the plan check counts the
unconfirmed facts of the chosen release."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.loader import load_scenario
from harness.config.scenario import Scenario
from harness.engines.trtllm_versions import (
    COMMIT_PATTERN,
    Release,
    choose_release,
    fact_counts,
    load_table,
    releases,
    table,
)
from harness.plan.checks import trtllm_release
from harness.plan.checks.trtllm_release import check_trtllm_release

COMMIT = "0123456789abcdef0123456789abcdef01234567"
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:"


def raw_entry(version: str = "1.0.0") -> dict[str, Any]:
    """A shipped entry as plain data, to mutate."""
    [rel] = [r for r in releases() if r.version == version]
    return copy.deepcopy(rel.model_dump(mode="json"))


def confirm(entry: dict[str, Any], *names: str, **confirmation: str) -> dict[str, Any]:
    """The entry with the named facts (all of them when none is named) marked confirmed."""
    given = {"file": "tensorrt_llm/llmapi/llm_args.py", "commit": COMMIT, "version_seen": entry["version"],
             **confirmation}
    for name in names or tuple(entry["facts"]):
        entry["facts"][name] = {"confirmed": given}
    return entry


def scenario(tag: str) -> Scenario:
    return Scenario.model_validate({
        "name": "t", "engine": {"kind": "trtllm", "image": IMAGE + tag, "model": "m"},
        "arms": [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}}],
        "workload": {"classes": [{"name": "s", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                                  "output_tokens": {"min": 5, "max": 50}}]},
        "steps": {"levels": [{"concurrency": 2, "duration_s": 10}]}})


def test_the_shipped_table_loads_with_a_status_for_every_fact() -> None:
    assert [r.version for r in releases()] == ["1.0.0", "1.1.0", "1.3.0"]
    for rel in releases():
        names = rel.fact_names()
        assert len(names) == len(set(names)) and set(rel.facts) == set(names), rel.version
        assert {"cli_flags", "kv_cache_config.host_cache_size", "kv_cache_config.secondary_offload_min_priority",
                "kv_cache_defaults.secondary_offload_min_priority", "endpoints.health", "endpoints.metrics_json",
                "endpoints.prometheus", "stats_source", "collector_drains_json"} <= set(names)
        counts = fact_counts(rel)
        assert counts.total == len(names) and counts.confirmed + counts.unconfirmed == counts.total
        assert rel.confirmed == (counts.unconfirmed == 0)
        assert len(rel.unconfirmed_facts) == counts.unconfirmed


def test_every_confirmed_fact_in_the_table_carries_file_commit_and_its_version() -> None:
    for rel in releases():
        for name, status in rel.facts.items():
            if status.confirmed is not None:
                assert status.confirmed.file, (rel.version, name)
                assert re.fullmatch(COMMIT_PATTERN, status.confirmed.commit), (rel.version, name)
                assert status.confirmed.version_seen == rel.version, (rel.version, name)
            else:
                assert status.unconfirmed, (rel.version, name)


def test_evidence_the_facts_cite_is_in_the_table() -> None:
    named = {e for rel in releases() for s in rel.facts.values() for e in s.seen}
    assert named and named <= set(table().evidence)
    assert table().evidence["eviction-policy"].file.endswith("evictionPolicy.cpp")


@pytest.mark.parametrize("confirmation", [
    {"file": "tensorrt_llm/llmapi/llm_args.py", "version_seen": "1.0.0"},  # no commit
    {"commit": COMMIT, "version_seen": "1.0.0"},  # no file
    {"file": "", "commit": COMMIT, "version_seen": "1.0.0"},  # an empty file
    {"file": "tensorrt_llm/llmapi/llm_args.py", "commit": "fcd3f31", "version_seen": "1.0.0"},  # a short commit
    {"file": "tensorrt_llm/llmapi/llm_args.py", "commit": COMMIT},  # no version seen
])
def test_a_confirmed_fact_without_file_or_commit_is_refused(confirmation: dict[str, str]) -> None:
    entry = raw_entry()
    entry["facts"]["cli_flags"] = {"confirmed": confirmation}
    with pytest.raises(ValidationError):
        Release.model_validate(entry)


def test_a_confirmation_must_be_of_the_entry_s_own_version() -> None:
    with pytest.raises(ValidationError, match=re.escape("version file says 1.0.0rc4, not 1.0.0")):
        Release.model_validate(confirm(raw_entry(), "cli_flags", version_seen="1.0.0rc4"))


def test_a_fact_is_confirmed_or_unconfirmed_never_both_nor_neither() -> None:
    entry = raw_entry()
    entry["facts"]["cli_flags"] = {"confirmed": {"file": "f", "commit": COMMIT, "version_seen": "1.0.0"},
                                   "unconfirmed": "why"}
    with pytest.raises(ValidationError, match="exactly one"):
        Release.model_validate(entry)
    entry["facts"]["cli_flags"] = {"seen": ["serve-2026"]}
    with pytest.raises(ValidationError, match="exactly one"):
        Release.model_validate(entry)


def test_a_fact_without_status_or_a_status_without_fact_is_refused() -> None:
    entry = raw_entry()
    del entry["facts"]["kv_cache_config.host_cache_size"]
    with pytest.raises(ValidationError, match=re.escape("fact kv_cache_config.host_cache_size has no status")):
        Release.model_validate(entry)
    entry = raw_entry()
    entry["kv_cache_config"].append("disk_cache_size")
    with pytest.raises(ValidationError, match=re.escape("fact kv_cache_config.disk_cache_size has no status")):
        Release.model_validate(entry)
    entry = raw_entry()
    entry["facts"]["kv_cache_config.tokens_per_block"] = {"unconfirmed": "not a key of 1.0.0"}
    with pytest.raises(ValidationError, match=re.escape("facts.kv_cache_config.tokens_per_block names no fact")):
        Release.model_validate(entry)
    entry = raw_entry()
    entry["kv_cache_defaults"]["tokens_per_block"] = 32
    with pytest.raises(ValidationError, match=re.escape("kv_cache_defaults.tokens_per_block is not one of its")):
        Release.model_validate(entry)


def test_top_level_confirmed_is_true_only_when_every_fact_is() -> None:
    entry = confirm(raw_entry(), "cli_flags")
    entry["confirmed"] = True
    with pytest.raises(ValidationError, match="confirmed is true but not every fact is confirmed"):
        Release.model_validate(entry)
    entry = confirm(raw_entry())
    with pytest.raises(ValidationError, match="confirmed is false but every fact is confirmed"):
        Release.model_validate(entry)
    entry["confirmed"] = True
    rel = Release.model_validate(entry)
    assert rel.confirmed and rel.unconfirmed_facts == [] and fact_counts(rel).unconfirmed == 0


def test_evidence_a_fact_cites_must_exist() -> None:
    raw = table().model_dump(mode="json")
    raw["releases"][0]["facts"]["cli_flags"]["seen"] = ["no-such-evidence"]
    with pytest.raises(ValidationError, match="'no-such-evidence', which is not in evidence"):
        load_table(raw)
    raw["releases"][0]["facts"]["cli_flags"]["seen"] = []
    raw["evidence"]["serve-2026"]["commit"] = "00209af"
    with pytest.raises(ValidationError):
        load_table(raw)


@pytest.mark.parametrize("confirmed", [0, 1, "all"])
def test_the_plan_warning_counts_the_chosen_release_s_unconfirmed_facts(
        confirmed: int | str, monkeypatch: pytest.MonkeyPatch) -> None:
    choice = choose_release(scenario("1.0.0").engine)
    entry = raw_entry()
    names = list(entry["facts"])
    if confirmed == "all":
        entry = confirm(entry)
        entry["confirmed"] = True
    elif confirmed:
        entry = confirm(entry, *names[:1])
    rel = Release.model_validate(entry)
    monkeypatch.setattr(trtllm_release, "choose_release", lambda engine: replace(choice, release=rel))
    [item] = check_trtllm_release(scenario("1.0.0"))
    counts = fact_counts(rel)
    if confirmed == "all":
        assert (counts.confirmed, counts.unconfirmed) == (len(names), 0)
        assert item.level == "ok" and "UNCONFIRMED" not in item.message
    else:
        assert (counts.confirmed, counts.unconfirmed) == (confirmed, len(names) - int(confirmed))
        assert item.level == "warn"
        assert f"{counts.unconfirmed} of {counts.total} facts of entry 1.0.0 are UNCONFIRMED" in item.message
        assert f"({counts.confirmed} confirmed;" in item.message


def test_the_shipped_scenario_s_plan_warns_with_the_count() -> None:
    scen = load_scenario(Path(__file__).resolve().parents[3] / "scenarios" / "trtllm-host.yaml")
    [item] = check_trtllm_release(scen)
    counts = fact_counts(choose_release(scen.engine).release)
    assert item.level == "warn" and counts.unconfirmed == counts.total == 31
    assert f"{counts.unconfirmed} of {counts.total} facts" in item.message


def test_the_docs_table_gives_the_table_s_counts() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "engines.md").read_text(encoding="utf-8")
    for rel in releases():
        counts = fact_counts(rel)
        confirmed = "none" if counts.confirmed == 0 else str(counts.confirmed)
        assert f"| {rel.version} | {counts.total} | {confirmed} |" in text, rel.version

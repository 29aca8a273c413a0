"""The scenario loader: shipped scenarios load, and every kind of bad input gives one message naming the file, the
field path and what would be valid."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config import ScenarioError, load_scenario, load_scenario_text
from harness.config.arms import TrtllmKvCache, VllmConnectorOffload, VllmNativeOffload
from harness.config.loader import scenario_hash

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
SHIPPED = ["vllm-cpu-pilot.yaml", "vllm-tiered.yaml", "trtllm-host.yaml"]


def _read(name: str) -> dict:
    return yaml.load((SCENARIOS / name).read_text(), Loader=yaml.CSafeLoader)


def _pilot() -> dict:
    return _read("vllm-cpu-pilot.yaml")


def _problem(data: dict, *overrides: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(yaml.dump(data, Dumper=yaml.CSafeDumper), "s.yaml", overrides)
    return str(info.value)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_load(name: str) -> None:
    scenario = load_scenario(SCENARIOS / name)
    assert scenario.arms[0].tier == "gpu-only"
    assert scenario.source_file == str(SCENARIOS / name)


def test_shipped_scenarios_have_the_documented_shape() -> None:
    pilot = load_scenario(SCENARIOS / "vllm-cpu-pilot.yaml")
    assert isinstance(pilot.arms[1].offload, VllmNativeOffload)
    assert pilot.arms[1].cpu_tier_bytes() == 16 << 30
    tiered = load_scenario(SCENARIOS / "vllm-tiered.yaml")
    assert [a.tier for a in tiered.arms] == ["gpu-only", "cpu", "tiered"]
    off = tiered.arms[2].offload
    assert isinstance(off, VllmConnectorOffload) and off.spec_name == "TieringOffloadingSpec"
    assert [t.root_dir for t in tiered.arms[2].fs_tiers()] == ["/mnt/nvme/kv-tier"]
    trt = load_scenario(SCENARIOS / "trtllm-host.yaml")
    assert isinstance(trt.arms[1].offload, TrtllmKvCache) and trt.arms[1].cpu_tier_bytes() == 32 << 30


def test_source_file_is_not_part_of_the_hash() -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text()
    a = load_scenario_text(text, "a.yaml")
    b = load_scenario_text(text, "b.yaml")
    assert a.source_file == "a.yaml" and b.source_file == "b.yaml"
    assert scenario_hash(a) == scenario_hash(b)
    assert "source" not in a.model_dump()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.yaml: file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_directory_is_not_a_scenario(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not a regular file"):
        load_scenario(tmp_path)


def test_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00name: x")
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(path)


def test_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("#" * (4 * 1024 * 1024 + 1))
    with pytest.raises(ScenarioError, match="at most"):
        load_scenario(path)


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just text\n"])
def test_not_a_mapping(text: str) -> None:
    with pytest.raises(ScenarioError, match="must be a YAML mapping"):
        load_scenario_text(text, "s.yaml")


def test_malformed_yaml_names_line_and_column() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("name: x\nengine: [\n", "s.yaml")
    assert str(info.value).startswith("s.yaml: line 3, column 1: malformed YAML")


def test_duplicate_keys_are_an_error() -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text().replace("  seed: 7", "  seed: 7\n  seed: 8")
    with pytest.raises(ScenarioError, match="key 'seed' appears twice"):
        load_scenario_text(text, "s.yaml")


def test_anchors_and_merge_keys_still_work() -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text().replace(
        "prompt_tokens: {min: 200, max: 800}, output_tokens: {min: 32, max: 128}",
        "prompt_tokens: &p {min: 200, max: 800}, output_tokens: {<<: *p, max: 900}", 1)
    scenario = load_scenario_text(text, "s.yaml")
    short = scenario.workload.classes[0]
    assert (short.output_tokens.min, short.output_tokens.max) == (200, 900)


def test_unknown_key_suggests_and_lists_valid_keys() -> None:
    data = _pilot()
    data["workload"]["sede"] = 3
    msg = _problem(data)
    assert "s.yaml: workload.sede: unknown key 'sede'; did you mean 'seed'?" in msg
    assert "valid keys here: seed, api, classes" in msg


def test_unknown_key_inside_a_union_member() -> None:
    data = _pilot()
    data["arms"][1]["offload"]["kv_offloading_size_gbb"] = 1
    msg = _problem(data)
    assert "arms[1].offload.kv_offloading_size_gbb: unknown key" in msg
    assert "did you mean 'kv_offloading_size_gib'" in msg
    assert "vllm-native" not in msg.split(":")[1]  # the union tag is not part of the path


def test_wrong_type_names_the_field_and_the_value() -> None:
    data = _pilot()
    data["engine"]["tensor_parallel_size"] = "two"
    assert "s.yaml: engine.tensor_parallel_size: Input should be a valid integer" in _problem(data)
    assert "(got 'two')" in _problem(data)


def test_section_of_the_wrong_type() -> None:
    data = _pilot()
    data["engine"] = 5
    assert "engine: should be a mapping with keys such as kind, launcher" in _problem(data)
    data = _pilot()
    data["arms"] = {"baseline": 1}
    assert "arms: " in _problem(data)


@pytest.mark.parametrize(("value", "expect"), [
    (-16, "arms[1].offload.kv_offloading_size_gib: Input should be greater than 0 (got -16)"),
    (0, "arms[1].offload.kv_offloading_size_gib: Input should be greater than 0 (got 0)"),
    (1e9, "arms[1].offload.kv_offloading_size_gib: Input should be less than or equal to 65536"),
])
def test_bad_native_sizes(value: float, expect: str) -> None:
    data = _pilot()
    data["arms"][1]["offload"]["kv_offloading_size_gib"] = value
    msg = _problem(data)
    assert expect in msg
    assert "CPU tier size in GiB" in msg  # what the field means


@pytest.mark.parametrize(("value", "expect"), [
    (-5, "Input should be greater than 0 (got -5)"),
    (1 << 70, "Input should be less than or equal to 70368744177664 (64 TiB)"),
])
def test_bad_connector_bytes(value: int, expect: str) -> None:
    data = _read("vllm-tiered.yaml")
    data["arms"][1]["offload"]["cpu_bytes_to_use"] = value
    assert f"arms[1].offload.cpu_bytes_to_use: {expect}" in _problem(data)


def test_negative_host_cache_size() -> None:
    data = _read("trtllm-host.yaml")
    data["arms"][1]["offload"]["host_cache_size"] = -1
    assert "arms[1].offload.host_cache_size: Input should be greater than or equal to 0 (got -1)" in _problem(data)


def test_missing_offload_kind_lists_the_kinds() -> None:
    data = _pilot()
    del data["arms"][1]["offload"]["kind"]
    assert ("s.yaml: arms[1].offload: kind is missing; give kind: one of none, vllm-native, vllm-connector, trtllm"
            in _problem(data))


def test_unknown_offload_kind_lists_the_kinds() -> None:
    data = _pilot()
    data["arms"][1]["offload"]["kind"] = "vllm-nativ"
    msg = _problem(data)
    assert "arms[1].offload: unknown kind 'vllm-nativ'; valid kinds: 'none', 'vllm-native'" in msg


def test_offload_given_as_a_string() -> None:
    data = _pilot()
    data["arms"][1]["offload"] = "native"
    assert "arms[1].offload: should be a mapping (got 'native')" in _problem(data)


def test_required_field_missing_says_what_it_is() -> None:
    data = _pilot()
    del data["arms"][1]["offload"]["kv_offloading_size_gib"]
    msg = _problem(data)
    assert "arms[1].offload.kv_offloading_size_gib: required field is missing (CPU tier size in GiB" in msg


def test_model_validator_error_keeps_the_arm_path() -> None:
    data = _pilot()
    data["arms"][1]["offload"] = {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                                  "cpu_bytes_to_use": 1 << 30}
    assert "arms[1].offload: TieringOffloadingSpec needs at least one entry in secondary_tiers" in _problem(data)


def test_fs_tier_error_path() -> None:
    data = _pilot()
    data["arms"][1]["offload"] = {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                                  "cpu_bytes_to_use": 1 << 30, "secondary_tiers": [{"root_dir": "/x", "sz": 1}]}
    assert "arms[1].offload.secondary_tiers[0].sz: unknown key 'sz'" in _problem(data)


def test_dict_keys_that_look_like_tags_are_kept_in_the_path() -> None:
    data = _pilot()
    data["engine"]["env"] = {"trtllm": [1]}
    assert "engine.env.trtllm: Input should be a valid string" in _problem(data)


def test_invalid_arm_engine_override_is_bad_input_not_a_traceback() -> None:
    data = _pilot()
    data["arms"][1]["engine"] = {"max_num_seqs": -1}
    assert "arms[1].engine.max_num_seqs: Input should be greater than or equal to 1 (got -1)" in _problem(data)


def test_unknown_arm_engine_override() -> None:
    data = _pilot()
    data["arms"][1]["engine"] = {"max_num_seq": 2}
    assert "arms[1].engine has unknown field(s) max_num_seq; valid:" in _problem(data)


def test_bad_arm_name() -> None:
    data = _pilot()
    data["arms"][1]["name"] = "CPU Tier"
    assert "arms[1].name: use 1-63 lowercase letters" in _problem(data)


def test_bad_tier() -> None:
    data = _pilot()
    data["arms"][1]["tier"] = "disk"
    assert "arms[1].tier: Input should be 'gpu-only', 'cpu' or 'tiered' (got 'disk')" in _problem(data)


def test_bad_gpus_value() -> None:
    data = _pilot()
    data["engine"]["gpus"] = "two please"
    assert "engine.gpus: use 'all', a count such as '2'" in _problem(data)


def test_docker_needs_an_image() -> None:
    data = _pilot()
    del data["engine"]["image"]
    assert "engine: engine.image is required when engine.launcher is docker" in _problem(data)


def test_drill_and_rule_arms_must_exist() -> None:
    data = _pilot()
    data["drills"] = [{"kind": "restart", "arm": "cpu-99g"}]
    assert "drills[0].arm: 'cpu-99g' is not an arm of this scenario; arms: baseline, cpu-16g" in _problem(data)
    data = _pilot()
    data["rules"]["regression"][0]["arms"] = ["cpu-16g", "nope"]
    assert "rules.regression[0].arms[1]: 'nope' is not an arm" in _problem(data)


def test_every_problem_is_reported_once_per_line() -> None:
    data = _pilot()
    data["engine"]["port"] = -1
    data["workload"]["seed"] = -2
    lines = _problem(data).splitlines()
    assert len(lines) == 2
    assert all(line.startswith("s.yaml: ") for line in lines)


def test_overrides_apply_before_validation() -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text()
    scenario = load_scenario_text(text, "s.yaml", ["steps.levels[0].duration_s=5",
                                                   "arms[1].offload.kv_offloading_size_gib=2"])
    assert scenario.steps.levels[0].duration_s == 5
    assert scenario.arms[1].cpu_tier_bytes() == 2 << 30


@pytest.mark.parametrize(("override", "expect"), [
    ("noequals", "--set: noequals: expected KEY=VALUE"),
    ("engine.image=[", "--set: engine.image: value '[' is not valid YAML"),
    ("engine.image.x=1", "--set: engine.image.x: cannot descend into 'x'"),
    ("arms[5].tier=cpu", "--set: arms[5].tier: '5' is not a valid index"),
    ("engine..image=x", "--set: engine..image: empty part in the key"),
])
def test_bad_overrides(override: str, expect: str) -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text()
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml", [override])
    assert str(info.value).startswith(expect)


def test_override_result_is_validated() -> None:
    text = (SCENARIOS / "vllm-cpu-pilot.yaml").read_text()
    with pytest.raises(ScenarioError, match=r"s\.yaml: arms\[1\]\.offload\.kv_offloading_size_gib: Input should"):
        load_scenario_text(text, "s.yaml", ["arms[1].offload.kv_offloading_size_gib=-1"])


def test_long_lists_of_problems_are_cut() -> None:
    data = _pilot()
    data["engine"]["extra_args"] = [[i] for i in range(50)]
    lines = _problem(data).splitlines()
    assert len(lines) == 21 and lines[-1] == "s.yaml: ... and 30 more problems"

"""Engine checks: pinned images, weight offload, offload flags in extra_args, lengths vs max_model_len."""

from __future__ import annotations

import pytest
from checks_helpers import BASES, build, levels

from harness.plan.checks.engine import (
    check_extra_args,
    check_lengths,
    check_pinned_image,
    check_served_name,
    check_weight_offload,
    image_tag,
)


@pytest.mark.parametrize(("image", "tag"), [
    ("vllm/vllm-openai:v0.32.0", "v0.32.0"),
    ("vllm/vllm-openai", None),
    ("localhost:5000/vllm", None),
    ("localhost:5000/vllm:1.2", "1.2"),
    ("vllm/vllm-openai@sha256:" + "a" * 64, "@sha256:" + "a" * 64),
])
def test_image_tag(image: str, tag: str | None) -> None:
    assert image_tag(image) == tag


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai", "vllm/vllm-openai:nightly"])
def test_unpinned_image_is_an_error(image: str) -> None:
    [item] = check_pinned_image(build(engine_set={"image": image}), allow_unpinned=False)
    assert item.level == "error"
    assert f"engine.image {image!r}" in item.message
    assert "pin a version, e.g. vllm/vllm-openai:v0.32.0" in item.message
    assert "--allow-unpinned" in item.message


def test_unpinned_image_allowed_by_flag_or_setting() -> None:
    scenario = build(engine_set={"image": "vllm/vllm-openai:latest"})
    assert levels(check_pinned_image(scenario, allow_unpinned=True)) == [("pinned-image", "warn")]
    scenario = build(engine_set={"image": "vllm/vllm-openai:latest"}, checks={"allow_unpinned": True})
    assert levels(check_pinned_image(scenario, allow_unpinned=False)) == [("pinned-image", "warn")]


def test_pinned_tag_and_digest_are_ok() -> None:
    [item] = check_pinned_image(build(), allow_unpinned=False)
    assert item.level == "ok" and "pinned to tag v0.32.0" in item.message
    digest = "sha256:" + "b" * 64
    [item] = check_pinned_image(build(engine_set={"image": f"vllm/vllm-openai@{digest}"}), allow_unpinned=False)
    assert item.level == "ok" and "pinned by digest" in item.message
    [item] = check_pinned_image(build(engine_set={"image_digest": digest}), allow_unpinned=False)
    assert item.level == "ok" and digest in item.message


def test_trtllm_pin_example_uses_its_repository() -> None:
    [item] = check_pinned_image(build("trtllm", engine_set={"image": "nvcr.io/nvidia/tensorrt-llm/release:latest"}),
                                allow_unpinned=False)
    assert "nvcr.io/nvidia/tensorrt-llm/release:1.0.0" in item.message


def test_local_process_needs_no_image() -> None:
    assert levels(check_pinned_image(build("sim"), allow_unpinned=False)) == [("pinned-image", "ok")]


def test_weight_offload_is_an_error_that_explains_the_difference() -> None:
    [item] = check_weight_offload(build(engine_set={"extra_args": ["--cpu-offload-gb", "10"]}))
    assert item.level == "error"
    assert "engine.extra_args" in item.message
    assert "offloads model WEIGHTS" in item.message and "does not add KV-cache capacity" in item.message
    assert "vllm-native (--kv-offloading-size)" in item.message
    assert "checks.allow_weight_offload" in item.message


def test_weight_offload_in_an_arm_override_and_equals_form() -> None:
    arms = [*BASES["vllm"]["arms"]]
    arms[1] = {**arms[1], "engine": {"extra_args": ["--cpu-offload-gb=4"]}}
    [item] = check_weight_offload(build(arms=arms))
    assert item.level == "error" and "arms[1].engine.extra_args" in item.message


def test_weight_offload_allowed() -> None:
    scenario = build(engine_set={"extra_args": ["--cpu-offload-gb", "10"]}, checks={"allow_weight_offload": True})
    assert levels(check_weight_offload(scenario)) == [("weight-offload", "warn")]
    assert levels(check_weight_offload(build())) == [("weight-offload", "ok")]


def test_offload_flags_in_extra_args_would_reach_the_baseline() -> None:
    [item] = check_extra_args(build(engine_set={"extra_args": ["--kv-offloading-size=8"]}))
    assert item.level == "error" and "--kv-offloading-size" in item.message and "baseline" in item.message
    assert levels(check_extra_args(build(engine_set={"extra_args": ["--seed", "1"]}))) == [("extra-args", "ok")]


def test_lengths_fit_and_exceed() -> None:
    assert levels(check_lengths(build())) == [("lengths", "ok")]
    [item] = check_lengths(build(engine_set={"max_model_len": 120}))
    assert item.level == "error"
    assert "workload.classes[0] (short)" in item.message
    assert "= 150 exceeds engine.max_model_len 120" in item.message


def test_lengths_count_session_history() -> None:
    workload = {"classes": [{"name": "chat", "weight": 1, "reuse": "session", "prompt_tokens": {"min": 1, "max": 100},
                             "output_tokens": {"min": 1, "max": 50}}],
                "reuse": {"system_prompts": {"tokens": 200}, "sessions": {"turns": 4}}}
    # 200 system + 4 x 100 prompt + 3 x 50 earlier answers = 750 prompt, + 50 output = 800
    assert levels(check_lengths(build(workload=workload, engine_set={"max_model_len": 800}))) == [("lengths", "ok")]
    [item] = check_lengths(build(workload=workload, engine_set={"max_model_len": 799}))
    assert item.level == "error" and "4-turn session" in item.message and "= 800 exceeds" in item.message


def test_lengths_without_a_limit_or_with_a_trace() -> None:
    [item] = check_lengths(build(engine_set={"max_model_len": None}))
    assert item.level == "ok" and "not set" in item.message
    [item] = check_lengths(build(workload={"trace": {"path": "t.jsonl"}}))
    assert item.level == "ok" and "trace" in item.message


def test_served_model_name_is_ignored_by_trtllm() -> None:
    assert check_served_name(build("trtllm")) == []
    assert check_served_name(build(engine_set={"served_model_name": "x"})) == []
    [item] = check_served_name(build("trtllm", engine_set={"served_model_name": "x", "model": "/models/llama-8b"}))
    assert item.level == "warn" and "requests use 'llama-8b'" in item.message

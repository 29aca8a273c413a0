"""Number formatting and the 'missing, never 0' rule."""

from __future__ import annotations

import math

from harness.report import fmt
from harness.schema.summary import ArmSummary, HitTokens, ServerStep, StepSummary


def test_none_is_missing_not_zero() -> None:
    for render in (fmt.ms, fmt.num, fmt.pct, fmt.gib, fmt.tokens):
        assert render(None) == "missing"
    assert fmt.ms(float("nan")) == "invalid"  # not a finite number: invalid, neither missing nor "nan"
    assert fmt.num(math.inf) == "invalid"
    assert fmt.ratio(None) == "n/a"


def test_zero_is_printed_as_zero() -> None:
    assert fmt.ms(0.0) == "0.00 ms"
    assert fmt.tokens(0) == "0"
    assert fmt.pct(0.0) == "0.0%"


def test_precision_follows_magnitude() -> None:
    assert fmt.ms(2650.4) == "2,650 ms"
    assert fmt.ms(87.54) == "87.5 ms"
    assert fmt.ms(0.421) == "0.42 ms"
    assert fmt.gib(16 << 30) == "16.0\u00a0GiB"
    assert fmt.gib(512 << 20) == "512.0\u00a0MiB"
    assert fmt.ratio(0.6543) == "0.65x"


def test_hit_missing_prefers_looked_for_names() -> None:
    hits = HitTokens(gpu=1, cpu=None, disk=0, miss=2, missing=["vllm:prompt_tokens_cached_by_source_total"])
    assert fmt.hit_missing(hits) == ["vllm:prompt_tokens_cached_by_source_total"]
    assert fmt.hit_missing(HitTokens(gpu=1, cpu=None, disk=0, miss=2)) == ["cpu hit tokens"]
    assert fmt.hit_missing(HitTokens(gpu=1, cpu=2, disk=0, miss=2)) == []


def test_arm_missing_collects_hit_and_server_names_once() -> None:
    steps = [StepSummary(index=i, label=f"c{i}", hit_tokens=HitTokens(missing=["a"]),
                         server=ServerStep(missing=["b", "a"])) for i in range(2)]
    arm = ArmSummary(name="cpu", tier="cpu", decision="go", steps=steps)
    assert fmt.arm_missing(arm) == ["a", "b"]
    assert fmt.step_label(arm, 1) == "c1"
    assert fmt.step_label(arm, 7) == "7"
    assert fmt.step_label(arm, None) == ""
    assert fmt.top_step(arm) is steps[-1]


def test_join_shortens_long_lists() -> None:
    assert fmt.join(["a", "b"]) == "a, b"
    assert fmt.join([str(i) for i in range(9)], limit=3) == "0, 1, 2 and 6 more"

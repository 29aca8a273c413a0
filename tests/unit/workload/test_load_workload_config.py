"""The workload section's validation: reuse structures a class needs, trace options, strictness."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.config.workload import WorkloadSpec

CLS = {"name": "c", "weight": 1, "prompt_tokens": {"min": 10, "max": 20}, "output_tokens": {"min": 1, "max": 2}}


def test_a_class_needs_its_reuse_structure() -> None:
    with pytest.raises(ValidationError, match=r"draws its prefix from 'rag' but workload.reuse.rag is not configured"):
        WorkloadSpec.model_validate({"classes": [{**CLS, "reuse": "rag"}]})
    ok = WorkloadSpec.model_validate({"classes": [{**CLS, "reuse": "rag"}], "reuse": {"rag": {}}})
    assert ok.class_names() == ["c"]


def test_unknown_keys_and_reuse_kinds_are_rejected() -> None:
    with pytest.raises(ValidationError, match="reuse"):
        WorkloadSpec.model_validate({"classes": [{**CLS, "reuse": "cache"}]})
    with pytest.raises(ValidationError, match="extra"):
        WorkloadSpec.model_validate({"classes": [CLS], "hash_blocks": 3})


def test_trace_options() -> None:
    wl = WorkloadSpec.model_validate({"trace": {"path": "t.jsonl", "block_tokens": 16, "on_bad_line": "skip"}})
    assert wl.trace is not None and wl.trace.block_tokens == 16 and not wl.trace.share_across_steps
    with pytest.raises(ValidationError):
        WorkloadSpec.model_validate({"trace": {"path": "t.jsonl", "speed": 0}})

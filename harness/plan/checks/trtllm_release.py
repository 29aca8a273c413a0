"""Which TensorRT-LLM version-table entry each arm uses, said out loud (``trtllm-release``).

:func:`harness.engines.trtllm_versions.choose_release` decides; this check reports it: ``warn`` for an rc (its base
entry), a release between entries or after the newest (the entry used, its facts unconfirmed for that release), no
release named at all, and for a release the table lists exactly while any of the entry's facts is not confirmed from
that release's source (the count, of how many, always said: :func:`~harness.engines.trtllm_versions.fact_counts`);
``ok`` only for a listed release whose every fact is confirmed; ``error`` for a release older than the table (the
launch spec is refused too, so the plan exits 2).
"""

from __future__ import annotations

from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.engines.trtllm_versions import (
    TABLE_PATH,
    UnknownRelease,
    choose_release,
    engine_release_text,
    fact_counts,
)
from harness.schema.summary import CheckItem

NAME = "trtllm-release"


def check_trtllm_release(scenario: Scenario) -> list[CheckItem]:
    """One item for the scenario's TensorRT-LLM release, or one per arm where arms name different releases."""
    if scenario.engine.kind != "trtllm":
        return []
    per_arm = [(arm.name, scenario.engine_for(arm)) for arm in scenario.arms]
    named = {engine_release_text(engine) for _, engine in per_arm}
    if len(named) <= 1:
        return [_item(scenario.engine if not per_arm else per_arm[0][1], None)]
    return [_item(engine, name) for name, engine in per_arm]


def _item(engine: EngineSpec, arm: str | None) -> CheckItem:
    try:
        choice = choose_release(engine)
    except UnknownRelease as exc:
        return CheckItem(name=NAME, level="error", arm=arm, message=str(exc))
    counts = fact_counts(choice.release)
    if not counts.unconfirmed:
        return CheckItem(name=NAME, level=choice.level, arm=arm, message=choice.message)
    message = (f"{choice.message}; {counts.unconfirmed} of {counts.total} facts of entry {choice.release.version} are "
               f"UNCONFIRMED from TensorRT-LLM's source ({counts.confirmed} confirmed; each fact's status and evidence "
               f"in {TABLE_PATH}, docs/engines.md): `harness plan --validate` in the pinned image compares the ones "
               "it can see with the image's own")
    return CheckItem(name=NAME, level="warn", arm=arm, message=message)

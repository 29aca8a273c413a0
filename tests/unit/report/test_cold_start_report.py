"""The report shows each arm's cold start (loudly when it was warm, as not proven when nothing that could fail was
read, with what the harness did) and its predicted vs measured tier hits."""

from __future__ import annotations

import re

from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.schema.cold_start import (
    CanaryCheck,
    ColdProbe,
    ColdStart,
    DiskTierState,
    EngineReset,
    HitPrediction,
    PredictedStep,
    TierShares,
)
from tests.support.sample import sample_summary


def _text(html: str, marker: str) -> str:
    start = html.index(marker)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start:start + 3000]))


def cold_start_lines(markdown: str) -> dict[str, str]:
    """summary.md's cold-start section: arm -> its line."""
    lines = markdown.split("Cold start (proof of state at each arm's start):", 1)[1].strip().split("\n\n")[0]
    return {ln[2:].split(":", 1)[0]: ln for ln in lines.splitlines()}


def test_warm_start_is_a_callout_and_prediction_a_table() -> None:
    summary = sample_summary()
    base, cpu = summary.arms[0], summary.arms[1]
    base.cold_start = ColdStart(proof="proven", checked=["counters", "probe"], actions=["fresh-process"],
                                counters={"hit_tokens.gpu": 0.0}, probe=ColdProbe(prompt_tokens=97, cached_tokens=0))
    cpu.cold_start = ColdStart(proof="warm", reasons=["disk tier /t held 4 files (40 bytes) at the arm's start"],
                               actions=["fresh-process"])
    cpu.hit_prediction = HitPrediction(model="an approximation of vLLM's scheduler", mode="inclusive",
                                       block_tokens=16, gpu_tokens=1600, cpu_tokens=16000,
                                       sources=["GPU 100 blocks x 16 tokens"],
                                       steps=[PredictedStep(index=0, label="c8", requests=50,
                                                            predicted=TierShares(gpu=0.4, cpu=0.25, disk=0.0,
                                                                                 miss=0.35),
                                                            measured=TierShares(gpu=0.41, cpu=None, disk=0.0,
                                                                                miss=None))])
    html = render_html(summary)
    warm = _text(html, f'id="cold-start-{cpu.name}"')
    assert "NOT A COLD START" in warm and "/t held 4 files" in warm and "cannot be go" in warm
    assert f'id="cold-start-{base.name}" data-proof="proven"' in html
    table = _text(html, f'id="hit-prediction-{cpu.name}"')
    assert "c8 50 40.0% / 41.0% 25.0% / missing 0.0% / 0.0% 35.0% / missing" in table
    assert f'id="hit-prediction-{base.name}"' not in html  # no prediction, no table


NOT_PROVEN = ColdStart(proof="not-proven", reasons=["hit counters not read: metrics /metrics: HTTP 500"],
                       checked=["disk-tier", "probe"], actions=["fresh-process", "emptied-disk-tier"],
                       disk_tiers=[DiskTierState(root_dir="/kv")],
                       probe=ColdProbe(prompt_tokens=96, cached_tokens=0))


def test_a_start_without_hit_counters_reads_not_proven_in_every_output() -> None:
    """The probe saw 0 cached tokens and the tier was emptied, yet without the counters nothing proves the start:
    the summary's data, the HTML block and the Markdown line say not proven (never "proven")."""
    summary = sample_summary()
    tiered = summary.arms[2]
    tiered.cold_start = NOT_PROVEN
    data = summary.model_dump(mode="json")["arms"][2]["cold_start"]
    assert (data["proof"], data["cold"], data["actions"]) == ("not-proven", None,
                                                              ["fresh-process", "emptied-disk-tier"])
    html = render_html(summary)
    block = _text(html, f'id="cold-start-{tiered.name}"')
    assert f'id="cold-start-{tiered.name}" data-proof="not-proven"' in html
    assert "not proven" in block and "proven:" not in block.replace("not proven", "")
    assert "fresh server process" in block and "emptied the disk tier" in block
    line = cold_start_lines(render_markdown(summary))[tiered.name]
    assert "**not proven**" in line and "HTTP 500" in line and "fresh server process" in line


def test_a_reset_start_names_the_reset_and_its_canary() -> None:
    summary = sample_summary()
    cpu = summary.arms[1]
    canary = CanaryCheck(prompt_tokens=96, repeat_hit_tokens=96.0, after_reset_hit_tokens=0.0)
    cpu.cold_start = ColdStart(proof="proven", actions=["engine-reset"], checked=["canary", "engine-reset"],
                               reset=EngineReset(endpoint="/reset_prefix_cache?reset_external=true", attempts=1,
                                                 status=200, success=True, canary=canary))
    html = render_html(summary)
    assert f'id="cold-start-{cpu.name}" data-proof="proven"' in html
    block = _text(html, f'id="cold-start-{cpu.name}"')
    assert "/reset_prefix_cache?reset_external=true" in block
    assert "before it hit 96 tokens by the hit counters, sent after it 0 tokens" in block
    line = cold_start_lines(render_markdown(summary))[cpu.name]
    assert line.startswith(f"- {cpu.name}: proven:") and "reset" in line

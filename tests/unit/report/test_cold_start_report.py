"""The report shows each arm's cold start (loudly when it was not cold) and its predicted vs measured tier hits."""

from __future__ import annotations

import re

from harness.report.html import render_html
from harness.schema.cold_start import ColdProbe, ColdStart, HitPrediction, PredictedStep, TierShares
from tests.support.sample import sample_summary


def _text(html: str, marker: str) -> str:
    start = html.index(marker)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start:start + 3000]))


def test_warm_start_is_a_callout_and_prediction_a_table() -> None:
    summary = sample_summary()
    base, cpu = summary.arms[0], summary.arms[1]
    base.cold_start = ColdStart(cold=True, checked=["counters", "probe"], probe=ColdProbe(prompt_tokens=97,
                                                                                         cached_tokens=0))
    cpu.cold_start = ColdStart(cold=False, reasons=["disk tier /t held 4 files (40 bytes) at the arm's start"])
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
    assert "Cold start proven: counters, probe (probe of 97 prompt tokens: 0 cached tokens reported)" in _text(
        html, f'id="cold-start-{base.name}"')
    table = _text(html, f'id="hit-prediction-{cpu.name}"')
    assert "c8 50 40.0% / 41.0% 25.0% / missing 0.0% / 0.0% 35.0% / missing" in table
    assert f'id="hit-prediction-{base.name}"' not in html  # no prediction, no table

"""The noise floor is said as a figure with what it was measured on (A/A ratios, steps, interval level, requests per
side) and per-step floors where they differ; summary.md no longer appends a bare "Factor 1.16x."."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.markdown import render_markdown
from harness.report.noise_floor_words import noise_floor_line, sentence
from harness.schema.intervals import RatioCI
from harness.schema.summary import NoiseFloor, NoiseFloorItem, StepSummary, Summary

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def item(step: int, lo: float, hi: float, n: int, *, contended: bool = False) -> NoiseFloorItem:
    return NoiseFloorItem(step=step, measure="ttft_p95", host_contended=contended,
                          interval=RatioCI(ratio=(lo + hi) / 2, lo=lo, hi=hi, resolved=True, n=n, n_versus=n + 10))


def test_the_floor_is_a_figure_with_its_basis_and_per_step_floors() -> None:
    nf = NoiseFloor(arm="baseline~aa", factor=1.16, per_step={0: 1.0, 1: 1.16},
                    steps=[StepSummary(index=0, label="c8"), StepSummary(index=1, label="c16")],
                    items=[item(0, 0.9, 1.1, 400), item(1, 1.16, 1.40, 450), item(1, 0.8, 1.3, 30, contended=True)],
                    message="Largest A/A drift beyond sampling noise: 1.160x.")
    line = noise_floor_line(nf)
    assert line.startswith("Noise floor: 1.16x (")
    for figure in ("2 A/A ratios at 2 steps", "95%", "n=400-460", "c8 1.00x", "c16 1.16x"):
        assert figure in line  # the host-contended ratio (n=30) sets no floor and is not counted
    assert "n=30" not in line and line.endswith("1.160x.")


def test_no_floor_says_so_and_why() -> None:
    nf = NoiseFloor(arm="baseline~aa", message="the A/A re-run gave no comparable figures (no resolved interval)")
    assert noise_floor_line(nf) == "No noise floor. The A/A re-run gave no comparable figures (no resolved interval)."
    assert sentence("") == "" and sentence("done.") == "Done."


def test_summary_md_says_the_floor_as_a_sentence() -> None:
    summary = Summary.model_validate(json.loads((RUNS / "demo-quiet-precut" / "summary.json").read_text()))
    md = render_markdown(summary)
    assert "Noise floor: 1.06x (" in md and "Factor 1.0" not in md

"""What it is worth, as the reports print it (summary.md, report.html): the per-server figure named by its basis
(capacity at the SLO only from a capacity search), each column labelled with the level of its own figures, the
baseline's row not applicable (not "missing"), and the value against the arm without the newest tier beside the
value against the baseline, negative where it is."""

from __future__ import annotations

import html
import re

import pytest

from harness.decision.value import value_section
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.schema.summary import Summary
from harness.schema.value import ValueSection
from tests.support.sample import sample_summary
from tests.unit.decision.test_decision_value import (
    WITHOUT_NEWEST,
    arm_summaries,
    disk_worse_run,
    scenario,
)


@pytest.fixture(scope="module")
def section() -> ValueSection:
    s = scenario(tensor_parallel_size=2)
    df, entries = disk_worse_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None, WITHOUT_NEWEST)
    assert v is not None
    return v


def _with(v: ValueSection) -> Summary:
    return sample_summary().model_copy(update={"value": v})


def _md_section(v: ValueSection) -> str:
    md = render_markdown(_with(v))
    start = md.index("### What it is worth")
    end = md.find("\n### ", start + 1)
    return md[start:end if end > 0 else None]


def _row(text: str, first_cell: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {first_cell} |"))


def _header(text: str, first: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| arm | {first}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_step_goodput_is_not_called_capacity_and_each_column_names_its_level(section: ValueSection) -> None:
    text = _md_section(section)
    assert "capacity per server" not in text and "capacity at the SLO per server" not in text
    cols = _header(text, "goodput per server at the best fixed step")
    assert cols[1] == "goodput per server at the best fixed step (requests/s, 97.5%)"
    assert cols[2] == "GPUs needed (97.5%)" and cols[3] == "GPUs saved vs the baseline (95%)"
    assert cols[4] == "tier cost (USD/month, 97.5%)" and cols[5] == "USD/GiB of tier/month (95%)"
    assert "one arm's figures (per-server throughput, GPUs needed, GPU and tier cost) 97.5%" in text
    assert "figures of two arms (GPUs saved, net saving, value per GiB) 95%" in text
    assert _row(text, "cpu").split("|")[2].strip().endswith("\\*")  # best at its highest step: may understate


def test_the_baseline_row_is_not_applicable_not_missing(section: ValueSection) -> None:
    row = _row(_md_section(section), "baseline")
    assert "missing" not in row and "not applicable (the baseline)" in row
    page = render_html(_with(section))
    cells = re.search(r'<tr id="value-baseline">(.*?)</tr>', page, re.S)
    assert cells is not None and "missing" not in cells.group(1) and "not applicable (the baseline)" in cells.group(1)


def test_the_marginal_value_is_printed_negative_beside_the_value_against_the_baseline(section: ValueSection) -> None:
    text = _md_section(section)
    disk = section.arms[2]
    assert disk.marginal is not None and disk.marginal.net_saving_per_month is not None
    net = disk.marginal.net_saving_per_month.value
    assert net is not None and net < 0
    cells = [c.strip() for c in _row(text.split("Against the arm without its newest tier")[1], "disk").split("|")]
    assert cells[2] == "cpu" and cells[3].startswith("-4 [") and cells[6].startswith(f"{net:,.0f} [")
    assert _row(text, "disk").split("|")[4].strip().startswith("6 [")  # against the baseline it saves GPUs
    page = render_html(_with(section))
    row = re.search(r'<tr id="value-marginal-disk">(.*?)</tr>', page, re.S)
    assert row is not None and f"{net:,.0f}" in html.unescape(re.sub(r"<[^>]+>", "", row.group(1)))


def test_a_capacity_search_is_labelled_capacity_at_the_slo_with_brackets(section: ValueSection) -> None:
    arms = [a.model_copy(update={"capacity_basis": "search", "capacity_at_top_step": False,
                                 "capacity": a.capacity.model_copy(update={"confidence": None})
                                 if a.capacity is not None else None}) for a in section.arms]
    searched = section.model_copy(update={"capacity_from": "search", "arms": arms})
    text = _md_section(searched)
    assert _header(text, "capacity at the SLO per server")[1] == "capacity at the SLO per server (requests/s, " \
                                                                 "search bracket)"
    assert "goodput per server" not in text
    page = render_html(_with(searched))
    assert "capacity at the SLO per server (requests/s, search bracket)" in page

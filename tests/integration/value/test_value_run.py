"""What it is worth, on the demo's simulator: `harness run` with a `value:` section and a capacity search reports
GPUs needed and saved per arm with their intervals and sources (in summary.json, summary.md and report.html);
`harness report` of the same records without `value:` reports none of it (nothing invented) and the same verdict;
without the search, the figures come from per-step goodput, say which step and are not called capacity; the
first tier arm's marginal value is against the baseline.

The shortened demo of tests/integration/capacity (baseline and CPU tier on the virtual clock; the baseline meets a
p99 TTFT of 1.8 s at 32 users and breaks it at 64, the CPU tier meets it at 64, the top of the range): whatever the
search found, each end of GPUs needed follows the opposite end of the bracket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.capacity.test_capacity_run import BUDGET_MS, harness, run_dir, scenario, summary, with_scenario

VALUE = {"requests_per_s": 200, "gpu_hour_cost": 3.5, "host_memory_gib_month_cost": 0.5}
SEARCH = {"metric": "ttft", "percentile": 99, "budget_ms": BUDGET_MS, "low": 32, "high": 64, "resolution": "100%",
          "probe_duration_s": 16, "extend_factor": 1.5, "max_probes": 4}


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _figures(arm: dict[str, Any]) -> list[dict[str, Any]]:
    names = ("capacity", "gpus_needed", "gpu_cost_per_month", "gpus_saved", "tier_cost_per_month",
             "net_saving_per_month", "value_per_tier_gib_month")
    return [arm[n] for n in names if arm[n] is not None]


def test_value_section_sizes_the_fleet_and_nothing_without_it(tmp_path: Path) -> None:
    path = scenario(tmp_path / "value.yaml", SEARCH)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**data, "value": VALUE}, sort_keys=False), encoding="utf-8")
    out, state = tmp_path / "results", tmp_path / "state"
    done = harness("run", str(path), "--out", str(out), state=state)
    assert "Traceback" not in done.stderr + done.stdout and out.is_dir(), done.stderr[-2000:]
    run = run_dir(out)
    s = summary(run)
    assert done.returncode == s["exit_code"] and done.returncode in (0, 1, 3, 5), done.stderr[-2000:]

    v = s["value"]
    assert v["capacity_from"] == "search" and v["demand"] == 200 and v["demand_unit"] == "requests/s"
    base, cpu = v["arms"]
    statuses = [a["status"] for a in s["capacity"]["arms"]]
    for arm, status in zip(v["arms"], statuses, strict=True):
        cap, need = arm["capacity"], arm["gpus_needed"]
        assert "capacity search at p99 TTFT" in cap["source"], cap["source"]
        # The search's bracket: met (lower end) to not met (upper end); an open end of capacity leaves the
        # opposite end of GPUs needed open.
        assert (cap["value"] is not None, cap["hi"] is not None) == {
            "found": (True, True), "at-least-high": (True, False), "none-met": (False, True)}[status], (status, cap)
        assert (need["value"] is None, need["lo"] is None, need["hi"] is None) == (
            cap["value"] is None, cap["hi"] is None, not cap["lo"])
        assert need["lo"] is None or need["value"] is None or need["lo"] <= need["value"]
        assert need["hi"] is None or need["value"] is None or need["value"] <= need["hi"]
    assert "at least" in " ".join(s["capacity"]["comparison"]) or statuses != ["found", "at-least-high"]
    saved = cpu["gpus_saved"]
    b, c = base["gpus_needed"], cpu["gpus_needed"]
    assert (saved["value"], saved["lo"], saved["hi"]) == (_minus(b["value"], c["value"]), _minus(b["lo"], c["hi"]),
                                                          _minus(b["hi"], c["lo"]))
    # the 16 GiB CPU tier at 0.5 a GiB-month on every server the arm needs (one GPU per server)
    assert cpu["tier_cost_per_month"]["value"] == pytest.approx(c["value"] * 16 * 0.5)
    assert all(f["source"] for a in v["arms"] for f in _figures(a))
    md = (run / "summary.md").read_text(encoding="utf-8")
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "### What it is worth (200 requests/s at the SLO)" in md and "| cpu-16g |" in md
    assert [a["capacity_basis"] for a in v["arms"] if a["capacity"] is not None] == \
        ["search"] * sum(a["capacity"] is not None for a in v["arms"])
    worth = md[md.index("### What it is worth"):]
    worth = worth[:worth.find("\n### ")] if "\n### " in worth else worth
    assert "| arm | capacity at the SLO per server (requests/s, search bracket) |" in worth
    assert "goodput per server" not in worth
    baseline_row = next(line for line in worth.splitlines() if line.startswith("| baseline |"))
    assert "missing" not in baseline_row and "not applicable (the baseline)" in baseline_row
    # The first tier arm's arm without its newest tier is the baseline: its marginal value is its value against it.
    assert cpu["marginal"]["versus"] == base["arm"] and cpu["marginal"]["gpus_saved"]["value"] == saved["value"]
    assert 'id="value"' in html and 'id="value-cpu-16g"' in html and v["summary"][0].split(" [")[0] in html

    # The same records without `value:`: no value section anywhere, and the same verdict.
    plain = with_scenario(run, tmp_path / "plain", lambda d: d.pop("value"))
    rebuilt = harness("report", str(plain), state=state, timeout_s=120)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    p = summary(plain)
    assert p["value"] is None and p["capacity"] == s["capacity"]
    assert (p["verdict"], [a["decision"] for a in p["arms"]]) == (s["verdict"], [a["decision"] for a in s["arms"]])
    assert "What it is worth" not in (plain / "summary.md").read_text(encoding="utf-8")
    assert 'id="value"' not in (plain / "report.html").read_text(encoding="utf-8")

    # Without the search, per-step goodput sizes the fleet and the source names the step.
    goodput = with_scenario(run, tmp_path / "goodput", lambda d: d["steps"].pop("search"))
    rebuilt = harness("report", str(goodput), state=state, timeout_s=120)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    g = summary(goodput)["value"]
    assert g["capacity_from"] == "step-goodput" and g["pair_confidence"] == pytest.approx(0.95)
    assert [a["capacity_basis"] for a in g["arms"]] == ["step-goodput"] * len(g["arms"])
    gmd = (goodput / "summary.md").read_text(encoding="utf-8")
    assert "| arm | goodput per server at the best fixed step (requests/s, 97.5%) | GPUs needed (97.5%) | GPUs " \
           "saved vs the baseline (95%) |" in gmd and "capacity at the SLO per server" not in gmd
    for arm in g["arms"]:
        assert "goodput at step " in arm["capacity"]["source"] and "no capacity search ran" in \
            arm["capacity"]["source"]
        need = arm["gpus_needed"]
        assert need["lo"] is not None and need["hi"] is not None and need["lo"] <= need["value"] <= need["hi"]
    assert g["arms"][1]["gpus_saved"]["lo"] is not None and g["arms"][1]["gpus_saved"]["hi"] is not None

"""``make perf``'s harness rows in miniature: the same functions (``tools.perf.cli.run`` -> capacity and timing
runs through ``run_step`` and the warm runner) at 2 streams and a few thousand tokens against the simulator.

Every harness row must hold a figure (the speed is not judged here), and a broken runner lookup must make the
perf command exit non-zero naming the rows it could not measure: ``make perf`` once printed a table of ``n/a``
harness rows and exited 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.load import runners
from tools.perf.capacity import HARNESS_TOOL
from tools.perf.cli import main, parse_args, run
from tools.perf.rows import SECTION_CAP, SECTION_TTFT
from tools.perf.table import EXIT_UNMEASURED, exit_status

LEVEL = 2


def _tiny(results: Path) -> list[str]:
    """Tiny sizes, harness sections only, no peer, nothing left on this host (no nice, no py-spy)."""
    return ["--results", str(results), "--no-peer", "--no-boost", "--no-profile", "--levels", str(LEVEL),
            "--tokens-per-run", "10000", "--output-tokens", "64", "--repeats", "1", "--fidelity-streams",
            str(LEVEL), "--fidelity-requests", "2", "--skip", "analysis", "trace", "report", "sim", "decision",
            "virtual"]  # the virtual-clock section runs whole rollouts (~40 s): its parts are tested in tests/unit/perf


def test_every_harness_row_has_a_figure(tmp_path: Path) -> None:
    table = run(parse_args(_tiny(tmp_path)), "smoke", lambda message: None)
    harness_rows = [r for r in table.rows if r.tool == HARNESS_TOOL]
    figures = {(r.section, r.figure) for r in harness_rows}
    assert (SECTION_CAP, f"{LEVEL} streams, fast server: completed tokens/s") in figures
    assert (SECTION_CAP, f"{LEVEL} streams, paced server: client CPU s per 1k tokens") in figures
    assert (SECTION_TTFT, f"{LEVEL} streams: |TTFT error| p99") in figures
    assert [r.name for r in harness_rows if not r.measured] == []
    assert all(r.value is not None and r.value > 0 for r in harness_rows if "CPU" in r.figure)
    # Without a peer only the peer's rows and the ratios it feeds are missing, and the run says so (exit 3).
    code, lines = exit_status(table)
    assert code == EXIT_UNMEASURED
    named = [line for line in lines if line.startswith("  - not measured:")]
    assert named and all("vllm bench serve" in line or "(ratio)" in line for line in named)
    assert all("skipped (--no-peer)" in line for line in named)


def test_no_runner_fails_the_run_naming_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runners.POOL, "prewarm", lambda: None)  # the pool reports no runner
    code = main(_tiny(tmp_path))
    out = capsys.readouterr()
    assert code == EXIT_UNMEASURED
    assert f"not measured: {SECTION_CAP} / {LEVEL} streams, fast server: completed tokens/s ({HARNESS_TOOL}): " \
           "no warm load runner" in out.err
    assert f"not measured: {SECTION_TTFT} / {LEVEL} streams: |TTFT error| p99 ({HARNESS_TOOL}) [goal < 1.00 ms]: " \
           "no warm load runner" in out.err
    assert "no harness run (no warm load runner" in out.err  # the ratio says which side is missing, and why
    assert "not measured:" in out.out and "| n/a " in out.out  # the table's Goals line and rows say so too
    assert list(tmp_path.glob("perf-*.md"))

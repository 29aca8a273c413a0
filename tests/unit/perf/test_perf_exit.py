"""How ``make perf`` ends: a figure that could not be measured (3) versus a goal measured and missed (1), the lines
that name the rows, and how the harness client finds the warm runner it measures (by the pool's PID, never by a
command line)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.load import runners
from tools.perf import cli
from tools.perf import table as perf_table
from tools.perf.harness_client import NoRunnerError, check_measured, warm_runner
from tools.perf.procs import CpuPlan
from tools.perf.rows import ratio_row
from tools.perf.table import Goal, PerfTable, Row, exit_status, markdown

GOAL = Goal("<", 5.0, "ms")


def _table(*rows: Row) -> PerfTable:
    return PerfTable(title="perf", rows=list(rows))


def test_every_figure_measured_and_met_is_0() -> None:
    table = _table(Row("s", "p99", "h", 4.0, "ms", GOAL), Row("s", "tok/s", "h", 9.0))
    assert exit_status(table) == (perf_table.EXIT_OK, [])


def test_a_measured_miss_is_1_and_named() -> None:
    code, lines = exit_status(_table(Row("s", "p99", "h", 6.0, "ms", GOAL), Row("s", "tok/s", "h", 9.0)))
    assert code == perf_table.EXIT_MISSED
    assert lines == ["perf: 1 goal(s) measured and missed (exit 1):",
                     "  - missed: s / p99 (h): 6.00 ms, goal < 5.00 ms"]


@pytest.mark.parametrize("missing", [
    Row("s", "p99", "h", None, goal=GOAL, error="no warm load runner"),
    Row("s", "tok/s", "h", None, error="no warm load runner"),  # an informative row counts too
    Row("s", "tok/s", "h", math.nan),
])
def test_a_figure_not_measured_is_3_and_wins_over_a_miss(missing: Row) -> None:
    code, lines = exit_status(_table(missing, Row("s", "ratio", "r", 0.5, "x", Goal(">=", 1.0, "x"))))
    assert code == perf_table.EXIT_UNMEASURED
    assert lines[0].startswith("perf: 1 figure(s) could not be measured") and "(exit 3)" in lines[0]
    assert lines[1].startswith(f"  - not measured: s / {missing.figure} (h)")
    assert lines[1].endswith(missing.why_missing)
    assert lines[2] == "perf: 1 goal(s) measured and missed:" and lines[3].startswith("  - missed: s / ratio (r)")


def test_markdown_goals_line_separates_missed_from_not_measured() -> None:
    text = markdown(_table(Row("s", "p99", "h", 6.0, "ms", GOAL), Row("s", "ttft", "h", None, goal=GOAL, error="x"),
                           Row("s", "ok", "h", 1.0, "ms", GOAL)))
    assert "Goals: 1 of 3 met; missed: p99 (h); not measured: ttft (h)\n" in text


def test_ratio_row_says_which_side_is_missing_and_why() -> None:
    row = ratio_row("64 streams", None, None, why=("no warm load runner", "skipped (--no-peer)"))
    assert row.error == ("needs both the harness and a peer run: no harness run (no warm load runner); "
                         "no peer run (skipped (--no-peer))")


class _FakeProc:
    def __init__(self, pid: int, alive: bool = True) -> None:
        self.pid, self._alive, self.stdin = pid, alive, None

    def poll(self) -> int | None:
        return None if self._alive else 0


def _fake_runner(pid: int, alive: bool = True) -> runners.Runner:
    proc: Any = _FakeProc(pid, alive)
    return runners.Runner(proc, Path("/nonexistent/runner.log"))


def test_the_pool_reports_the_pid_of_the_runner_the_next_step_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = runners.RunnerPool()
    started = iter([_fake_runner(101, alive=False), _fake_runner(102)])
    monkeypatch.setattr(pool, "_start", lambda: next(started))
    assert pool.idle_pid() is None
    assert pool.prewarm() is None  # started, but already gone
    assert pool.prewarm() == 102 and pool.idle_pid() == 102  # the dead one is skipped, a live one started
    assert pool.prewarm() == 102  # one idle runner at most: nothing new is started
    assert pool.take().pid == 102  # the step runs in the runner whose PID was reported


def test_warm_runner_pins_the_pools_runner_and_refuses_none(monkeypatch: pytest.MonkeyPatch) -> None:
    placed: list[tuple[int, str]] = []

    class Plan(CpuPlan):
        def place(self, pid: int, role: str) -> bool:
            placed.append((pid, role))
            return True

    plan = Plan(None, None, "test")
    monkeypatch.setattr(runners.POOL, "prewarm", lambda: 4242)
    assert warm_runner(plan) == 4242 and placed == [(4242, "client")]
    monkeypatch.setattr(runners.POOL, "prewarm", lambda: None)
    with pytest.raises(NoRunnerError, match="no warm load runner"):
        warm_runner(plan)
    assert placed == [(4242, "client")]


def test_a_sampled_tree_that_did_not_do_the_work_is_refused() -> None:
    check_measured(1, sampled_cpu_s=0.9, reported_cpu_s=1.0)
    check_measured(1, sampled_cpu_s=0.0, reported_cpu_s=0.1)  # too little work to tell
    with pytest.raises(RuntimeError, match="not the process that ran the step"):
        check_measured(1, sampled_cpu_s=0.01, reported_cpu_s=2.0)


def test_an_unexpected_error_is_4_never_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*args: object) -> PerfTable:
        raise KeyError("surprise")

    monkeypatch.setattr(cli, "run", boom)
    assert cli.main(["--results", str(tmp_path), "--no-peer"]) == perf_table.EXIT_FAILED
    assert "error: KeyError: 'surprise'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--output-tokens", "0"], ["--fidelity-streams", "5000"],
                                  ["--fidelity-requests", "0"], ["--strict"]])
def test_cli_rejects_bad_sizes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_make_perf_passes_the_exit_status_on() -> None:
    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text(encoding="utf-8")
    recipe = [line.strip() for line in makefile.split("\nperf:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]]
    assert any("-m tools.perf" in line for line in recipe)
    assert not any(line.startswith(("-", "@-")) or "|| true" in line or "; true" in line for line in recipe)

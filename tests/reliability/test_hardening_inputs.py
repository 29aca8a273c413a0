"""Hostile input files and arguments through the real commands (issue 17, items 11-13, "inputs"): a YAML anchor
bomb, an unhashable key, a FIFO, /dev/zero, a sparse 17 GiB file, a line with no end, JSON nested 100,000 deep,
``nan`` flags, ``${UNSET}`` in engine.env, names with a trailing newline, and an unexpected exception reaching the
top-level error boundary. Each case runs ``python -m harness ...`` as a subprocess and checks the exit code (2 for
bad input, 4 for an unexpected error, never 1), a one-line message naming the file and field, no traceback, the
time it took and, where the fault is about memory, the peak RSS sampled with psutil while it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
CASE_TIMEOUT_S = 30.0  # each case must end well inside this; a hang is killed and fails the test
FAST_S = 15.0  # a refused input is answered within this (imports included, on a loaded 2-core machine)
RSS_CAP = 400 << 20  # a refused bomb or device never takes more than this (a plain `harness plan` is ~200 MiB)
UNSET = "HARNESS_HARDEN_SURELY_UNSET_VAR"


@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float
    peak_rss: int


def harness(*args: str, tmp: Path, env: dict[str, str] | None = None, code: str | None = None) -> Result:
    """Run ``python -m harness ARGS`` (or ``python -c CODE``), sampling its RSS every 20 ms; killed at
    :data:`CASE_TIMEOUT_S`."""
    full_env = {k: v for k, v in os.environ.items() if k not in (UNSET, "HARNESS_DEBUG")}
    full_env.update({"HARNESS_STATE_DIR": str(tmp / "state"), "NO_COLOR": "1", "COLUMNS": "200", **(env or {})})
    argv = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "harness", *args]
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=tmp, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    peak = 0
    watched = psutil.Process(proc.pid)
    while proc.poll() is None and time.monotonic() - start < CASE_TIMEOUT_S:  # bounded by the case timeout
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    try:
        out, err = proc.communicate(timeout=max(0.1, CASE_TIMEOUT_S - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"harness {' '.join(args)} still running after {CASE_TIMEOUT_S} s: {err.decode()[-500:]}")
    return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                  time.monotonic() - start, peak)


def refused(res: Result, *needles: str, code: int = 2) -> str:
    """The exit code is ``code``, stderr has no traceback and one error line holding every needle; that line."""
    assert res.code == code, (res.code, res.out[-2000:], res.err[-2000:])
    assert "Traceback" not in res.err + res.out, res.err
    assert res.seconds < FAST_S, f"took {res.seconds:.1f} s"
    text = res.err + res.out
    lines = [line for line in text.splitlines() if all(n in line for n in needles)]
    assert lines, f"no line holds {needles}: {text[-2000:]}"
    return lines[0]


def bomb(levels: int = 9) -> str:
    """Anchors ``a``..: each a list of nine aliases to the previous one; 9**levels strings when expanded."""
    text = 'x-bomb:\n  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for i in range(1, levels):
        prev, name = chr(96 + i), chr(97 + i)
        text += f"  {name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    return text


def with_bomb(path: Path, levels: int = 9) -> Path:
    """The scenario at ``path`` with ``description`` set to the bomb's last anchor."""
    text = path.read_text(encoding="utf-8")
    assert "description: BOMB" in text
    last = chr(96 + levels)
    path.write_text(bomb(levels) + text.replace("description: BOMB", f"description: *{last}"), encoding="utf-8")
    return path


def trace_scenario(scenario: Callable[..., Path], trace: str, name: str = "tr") -> Path:
    # closed loop: the fixture's rising concurrency levels each take the trace's requests in order
    trace_spec = {"path": trace, "mode": "closed_loop"}
    return scenario(name, arms=("baseline",), workload={"classes": [], "reuse": {}, "trace": trace_spec})


GOOD_LINE = json.dumps({"timestamp": 1, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]})
DEEP_LINE = "[" * 100_000 + "]" * 100_000


# --- YAML: anchor bomb, unhashable key ---------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [pytest.param(9, marks=pytest.mark.slow), 10])
def test_anchor_bomb_in_a_mapping_field_is_refused_fast_and_small(scenario: Callable[..., Path], tmp_path: Path,
                                                                  levels: int) -> None:
    path = with_bomb(scenario("bomb", description="BOMB"), levels)
    res = harness("plan", str(path), tmp=tmp_path)
    line = refused(res, str(path), "line ", "expands to more than")
    assert "lol" not in line and len(line) < 400  # the input is never echoed
    assert res.peak_rss < RSS_CAP, f"peak RSS {res.peak_rss >> 20} MiB"


@pytest.mark.parametrize("command", [pytest.param("report", marks=pytest.mark.slow), "resume"])
def test_anchor_bomb_in_a_runs_scenario_yaml_is_refused_by_report_and_resume(scenario: Callable[..., Path],
                                                                             tmp_path: Path, command: str) -> None:
    run_dir = tmp_path / "results" / "planted"
    run_dir.mkdir(parents=True)
    with_bomb(scenario("bomb", description="BOMB")).rename(run_dir / "scenario.yaml")
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": "planted"}), encoding="utf-8")
    args = ("report", str(run_dir)) if command == "report" else ("run", "--resume", str(run_dir))
    res = harness(*args, tmp=tmp_path)
    refused(res, "scenario.yaml", "expands to more than")
    assert res.peak_rss < RSS_CAP, res.peak_rss >> 20


def test_unhashable_yaml_key_names_the_file_and_line(scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = scenario("unhash")
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, "? [a, b]", ": 1", ""]), encoding="utf-8")
    line = refused(harness("plan", str(path), tmp=tmp_path), str(path), f"line {len(lines) + 1}", "mapping key")
    assert "TypeError" not in line


# --- special and oversized files ---------------------------------------------------------------------------------


def test_scenario_that_is_a_fifo_or_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    refused(harness("plan", str(fifo), tmp=tmp_path), str(fifo), "FIFO", "not a regular file")
    res = harness("plan", "/dev/zero", tmp=tmp_path)
    refused(res, "/dev/zero", "device")
    assert res.peak_rss < RSS_CAP


def test_analyze_trace_refuses_fifo_device_huge_file_and_endless_line(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    refused(harness("analyze-trace", str(fifo), tmp=tmp_path), str(fifo), "FIFO")
    res = harness("analyze-trace", "/dev/zero", tmp=tmp_path)
    refused(res, "/dev/zero", "device")
    assert res.peak_rss < RSS_CAP
    sparse = tmp_path / "sparse.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(17 << 30)  # sparse: no disk used
    refused(harness("analyze-trace", str(sparse), tmp=tmp_path), str(sparse), "bytes", "at most")


@pytest.mark.slow
def test_a_line_longer_than_the_cap_is_refused_with_its_number(tmp_path: Path) -> None:
    long = tmp_path / "long.jsonl"
    with long.open("wb") as handle:
        handle.write(GOOD_LINE.encode() + b"\n")
        handle.write(b"x" * ((64 << 20) + 16))  # no newline, past the 64 MiB line cap
    res = harness("analyze-trace", str(long), tmp=tmp_path)
    refused(res, f"{long}:2", "longer than")
    assert res.peak_rss < RSS_CAP, res.peak_rss >> 20  # the exact reader's one capped line; pyarrow never sees it


# --- JSON nested 100,000 deep: analyze-trace, plan and run agree -------------------------------------------------


def test_deeply_nested_trace_line_is_refused_alike_by_analyze_trace_plan_and_run(scenario: Callable[..., Path],
                                                                                 tmp_path: Path) -> None:
    trace = tmp_path / "deep.jsonl"
    trace.write_text(f"{GOOD_LINE}\n{DEEP_LINE}\n", encoding="utf-8")
    refused(harness("analyze-trace", str(trace), tmp=tmp_path), f"{trace}:2", "nested deeper than")
    path = trace_scenario(scenario, str(trace))
    refused(harness("plan", str(path), tmp=tmp_path), "workload.trace", "line 2: nested deeper than")
    res = harness("run", str(path), "--out", str(tmp_path / "results"), tmp=tmp_path)
    refused(res, "workload", "line 2: nested deeper than")


def test_deep_json_in_a_field_the_fast_reader_ignores_is_still_a_bad_line(tmp_path: Path) -> None:
    trace = tmp_path / "deep-extra.jsonl"
    extra = json.loads(GOOD_LINE) | {"x": "PLACEHOLDER"}
    trace.write_text(GOOD_LINE + "\n" + json.dumps(extra).replace('"PLACEHOLDER"', "[" * 200 + "]" * 200) + "\n",
                     encoding="utf-8")
    refused(harness("analyze-trace", str(trace), tmp=tmp_path), f"{trace}:2", "nested deeper than")


def test_run_refuses_a_trace_that_is_a_fifo(scenario: Callable[..., Path], tmp_path: Path) -> None:
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    path = trace_scenario(scenario, str(fifo))
    refused(harness("run", str(path), "--out", str(tmp_path / "results"), tmp=tmp_path), "workload", "FIFO")


@pytest.mark.slow
def test_plan_and_run_refuse_a_trace_that_is_a_fifo_or_device(scenario: Callable[..., Path],
                                                              tmp_path: Path) -> None:
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    path = trace_scenario(scenario, str(fifo))
    refused(harness("plan", str(path), tmp=tmp_path), "workload.trace", "FIFO")
    path = trace_scenario(scenario, "/dev/zero", name="zero")
    res = harness("run", str(path), "--out", str(tmp_path / "results"), tmp=tmp_path)
    refused(res, "/dev/zero", "device")
    assert res.peak_rss < RSS_CAP


# --- sim serve flags and profile files ---------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "flag"), [
    (("--kv-offloading-size", "nan"), "--kv-offloading-size"),
    pytest.param(("--kv-offloading-size", "inf"), "--kv-offloading-size", marks=pytest.mark.slow),
    pytest.param(("--kv-offloading-size", "-4"), "--kv-offloading-size", marks=pytest.mark.slow),
    pytest.param(("--time-scale", "nan"), "--time-scale", marks=pytest.mark.slow),
    (("--profile-file", "/dev/zero"), "--profile-file"),
])
def test_sim_serve_refuses_bad_numbers_and_profile_files(tmp_path: Path, args: tuple[str, ...], flag: str) -> None:
    res = harness("sim", "serve", "--port", "0", *args, tmp=tmp_path)
    refused(res, flag)
    assert res.peak_rss < RSS_CAP


@pytest.mark.slow
def test_sim_profile_file_fifo_and_bomb_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.yaml"
    os.mkfifo(fifo)
    refused(harness("sim", "serve", "--port", "0", "--profile-file", str(fifo), tmp=tmp_path), "FIFO")
    boom = tmp_path / "bomb.yaml"
    boom.write_text(bomb(9) + "name: *i\n", encoding="utf-8")
    res = harness("sim", "serve", "--port", "0", "--profile-file", str(boom), tmp=tmp_path)
    refused(res, "expands to more than")
    assert res.peak_rss < RSS_CAP


# --- ${UNSET} in engine.env, names with control characters -------------------------------------------------------


def _env_scenario(scenario: Callable[..., Path]) -> Path:
    return scenario("envref", arms=("baseline",), engine={"env": {"HF_TOKEN": f"${{{UNSET}}}",
                                                                  "WITH_DEFAULT": "${HARNESS_HARDEN_NOPE:-x}"}})


def test_unset_env_reference_is_refused_at_run_before_any_server(scenario: Callable[..., Path],
                                                                  tmp_path: Path) -> None:
    res = harness("run", str(_env_scenario(scenario)), "--out", str(tmp_path / "results"), tmp=tmp_path)
    refused(res, f"engine.env.HF_TOKEN: ${{{UNSET}}} is not set")
    assert "WITH_DEFAULT" not in res.out + res.err  # ${VAR:-default} needs no variable
    assert "ready after" not in res.out  # refused before any server started
    broken = scenario("envbroken", arms=("baseline",), engine={"env": {"HF_TOKEN": "${HF_TOKEN"}})
    refused(harness("plan", str(broken), tmp=tmp_path), str(broken), "engine.env.HF_TOKEN", "whole reference")


@pytest.mark.slow
def test_unset_env_reference_is_named_by_plan(scenario: Callable[..., Path], tmp_path: Path) -> None:
    res = harness("plan", str(_env_scenario(scenario)), tmp=tmp_path)
    assert res.code == 0 and "Traceback" not in res.err  # plan may run on another host: a warning, as gpu-runtime
    warned = [line for line in res.out.splitlines() if "warn" in line and "env-refs" in line]
    assert len(warned) == 1 and f"engine.env.HF_TOKEN: ${{{UNSET}}} is not set" in warned[0], res.out


@pytest.mark.parametrize(("field", "value", "where"), [
    ("arm", "baseline\n", "arms[0].name"),
    pytest.param("name", "rel \n", "name:", marks=pytest.mark.slow),
    ("name", "rel\x1b[2J", "name:"),
    pytest.param("class", "short\r", "workload.classes[0].name", marks=pytest.mark.slow),
])
def test_names_with_control_characters_or_trailing_blanks_are_refused(scenario: Callable[..., Path],
                                                                      tmp_path: Path, field: str, value: str,
                                                                      where: str) -> None:
    path = scenario("names", arms=("baseline",))
    text = path.read_text(encoding="utf-8")
    quoted = json.dumps(value)  # a YAML double-quoted scalar
    if field == "arm":
        text = text.replace("- name: baseline", f"- name: {quoted}", 1)
    elif field == "name":
        text = text.replace("name: names", f"name: {quoted}", 1)
    else:
        text = text.replace("- name: short", f"- name: {quoted}", 1)
    path.write_text(text, encoding="utf-8")
    line = refused(harness("plan", str(path), tmp=tmp_path), str(path), where)
    assert "\x1b" not in line and "\r" not in line  # shown escaped, never raw


# --- the top-level error boundary --------------------------------------------------------------------------------

_RAISING_APP = """
import sys
from harness import cli

@cli.app.command("boom")
def boom() -> None:
    raise {exc}

sys.argv = ["harness", "boom"]
cli.main()
"""


def test_an_unexpected_exception_is_one_line_and_exit_4(tmp_path: Path) -> None:
    res = harness(tmp=tmp_path, code=_RAISING_APP.format(exc="RuntimeError('boom ' + 'x' * 5000)"))
    line = refused(res, "error: RuntimeError: boom", "--debug", "HARNESS_DEBUG=1", code=4)
    assert len(line) < 500 and len(res.err.strip().splitlines()) == 1, res.err
    res = harness(tmp=tmp_path, env={"HARNESS_DEBUG": "1"}, code=_RAISING_APP.format(exc="RuntimeError('boom')"))
    assert res.code == 4 and "Traceback" in res.err and "error: RuntimeError: boom" in res.err


def test_ctrl_c_that_reaches_the_boundary_is_130_with_a_message(tmp_path: Path) -> None:
    res = harness(tmp=tmp_path, code=_RAISING_APP.format(exc="KeyboardInterrupt()"))
    refused(res, "interrupted", code=130)


def test_usage_errors_stay_exit_2(tmp_path: Path) -> None:
    refused(harness("plan", "--no-such-option", "x.yaml", tmp=tmp_path), "No such option")

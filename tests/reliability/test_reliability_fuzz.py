"""Bad input fuzzing (hypothesis): mutated scenario files through ``harness plan`` and mutated Mooncake traces
through ``harness analyze-trace`` and the load generator's replay reader. Never a traceback: exit 2 with a message
(or 0 for a mutation that is still valid). Each test prints how many cases it tried; ``HARNESS_FUZZ_SCALE=20``
multiplies the number of cases for a longer hunt."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli import app
from harness.config.workload import TraceSource, WorkloadSpec
from harness.trace.cli import trace_app
from harness.workload.replay import TraceGenerator, TraceLoadError, load_trace
from harness.workload.requests import Shape
from harness.workload.tokens import EXACT_WORDS

DEMO = Path(__file__).resolve().parents[2] / "scenarios" / "demo-sim.yaml"
SCALE = float(os.environ.get("HARNESS_FUZZ_SCALE", "1"))  # e.g. 20 for a longer hunt
SCENARIO_CASES = max(1, int(60 * SCALE))
TRACE_CASES = max(1, int(50 * SCALE))


def _fuzz(cases: int) -> settings:
    return settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                    print_blob=True)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["", "0", "-1", "1e400", "yes", "~", "${NOT_SET}", "/", "../..", "\x00", "16g", "sha256:xyz"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=8)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a YAML document (mapping keys and list indexes)."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


@st.composite
def scenario_texts(draw: st.DrawFn) -> bytes:
    """The demo scenario with one or a few mutations, or text-level damage."""
    data = yaml.safe_load(DEMO.read_text())
    data["arms"][2]["offload"]["secondary_tiers"][0]["root_dir"] = "/tmp/harness-fuzz-never-created/kv"
    how = draw(st.sampled_from(["set", "set", "set", "delete", "unknown", "text", "bytes", "numbers"]))
    if how in ("set", "delete", "unknown", "numbers"):
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            paths = [p for p in _paths(data) if p]
            path = draw(st.sampled_from(paths))
            parent, last = _get(data, path[:-1]), path[-1]
            if how == "set":
                parent[last] = draw(values)
            elif how == "numbers":
                if isinstance(parent[last], (int, float)) and not isinstance(parent[last], bool):
                    parent[last] = draw(st.sampled_from([-1, 0, -0.5, 10**12, 2**63, 1e300, math.inf, math.nan]))
            elif how == "delete":
                if isinstance(parent, dict):
                    del parent[last]
                else:
                    parent.pop(last)
            else:
                target = parent[last] if isinstance(parent[last], dict) else parent
                if isinstance(target, dict):
                    target[draw(st.text(min_size=1, max_size=12))] = draw(scalars)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
    text = DEMO.read_bytes()
    if how == "bytes":
        return draw(st.binary(max_size=300))
    cut = draw(st.integers(min_value=0, max_value=len(text)))
    junk = draw(st.sampled_from([b"", b"\t", b":", b"- ", b"{", b"]", b"&a *a", b"!!python/object:os.system x",
                                 b"\xff\xfe", b"engine:\n", b"'"]))
    return text[:cut] + junk + text[cut:][: draw(st.integers(min_value=0, max_value=len(text)))]


def _no_traceback(result: Any) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def test_fuzzed_scenarios_never_traceback(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner = CliRunner()
    tally = {"cases": 0, "exit 0": 0, "exit 2": 0}

    @_fuzz(SCENARIO_CASES)
    @given(scenario_texts())
    def case(text: bytes) -> None:
        path = workdir / "fuzzed.yaml"
        path.write_bytes(text)
        result = runner.invoke(app, ["plan", str(path)])
        tally["cases"] += 1
        _no_traceback(result)
        assert result.exit_code in (0, 2), (result.exit_code, result.output)
        tally[f"exit {result.exit_code}"] += 1
        if result.exit_code == 2:
            assert "error" in result.output.lower(), result.output
            assert result.output.strip(), "a message names the problem"

    case()
    with capsys.disabled():
        print(f"\nscenario fuzzing through `harness plan`: {tally['cases']} cases "
              f"({tally['exit 2']} rejected with exit 2, {tally['exit 0']} still valid)")
    assert tally["cases"] >= SCENARIO_CASES // 2 and tally["exit 2"] > 0


good_record = st.fixed_dictionaries({
    "timestamp": st.integers(min_value=0, max_value=10**6),
    "input_length": st.integers(min_value=1, max_value=4000),
    "output_length": st.integers(min_value=1, max_value=200),
}).map(lambda r: {**r, "hash_ids": list(range(math.ceil(r["input_length"] / 512)))})


@st.composite
def trace_lines(draw: st.DrawFn) -> bytes:
    lines: list[bytes] = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        record = draw(good_record)
        how = draw(st.sampled_from(["good", "good", "field", "drop", "extra", "garbage", "blank", "bytes"]))
        if how == "field":
            record[draw(st.sampled_from(list(record)))] = draw(values)
        elif how == "drop":
            del record[draw(st.sampled_from(list(record)))]
        elif how == "extra":
            record[draw(st.text(max_size=8))] = draw(scalars)
        if how == "garbage":
            lines.append(draw(st.text(max_size=60)).encode("utf-8", "replace"))
        elif how == "blank":
            lines.append(b"   ")
        elif how == "bytes":
            lines.append(draw(st.binary(max_size=40)).replace(b"\n", b" "))
        else:
            lines.append(json.dumps(record, allow_nan=True).encode())
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\n\n"]))


def test_fuzzed_traces_never_traceback(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner = CliRunner()
    tally = {"cases": 0, "analyze exit 0": 0, "analyze exit 2": 0, "replayed": 0, "replay refused": 0}
    wl = WorkloadSpec(trace=TraceSource(path="fuzzed.jsonl", on_bad_line="skip"))

    @_fuzz(TRACE_CASES)
    @given(trace_lines(), st.sampled_from(["stop", "skip"]))
    def case(data: bytes, on_bad: str) -> None:
        path = workdir / "fuzzed.jsonl"
        path.write_bytes(data)
        tally["cases"] += 1
        result = runner.invoke(trace_app, [str(path), "--on-bad-line", on_bad, "--json"])
        _no_traceback(result)
        assert result.exit_code in (0, 2), (result.exit_code, result.output)
        tally[f"analyze exit {result.exit_code}"] += 1
        source = TraceSource.model_validate({"path": str(path), "on_bad_line": on_bad})
        try:
            loaded = load_trace(source, max_model_len=8192)
        except TraceLoadError as exc:
            assert str(path) in str(exc), "the message names the file"
            tally["replay refused"] += 1
            return
        gen = TraceGenerator(loaded, wl, EXACT_WORDS, "s0")
        for i in range(min(3, len(loaded.requests))):
            req = gen.request(i, Shape(key=f"t{i}", user=0, seq=i, request_class="trace"))
            assert req.hash_ids
        tally["replayed"] += 1

    case()
    with capsys.disabled():
        print(f"\ntrace fuzzing through `harness analyze-trace` and the replay reader: {tally['cases']} cases "
              f"(analyze-trace: {tally['analyze exit 2']} exit 2, {tally['analyze exit 0']} exit 0; replay: "
              f"{tally['replay refused']} refused, {tally['replayed']} replayed)")
    assert tally["cases"] >= TRACE_CASES // 2 and tally["analyze exit 2"] > 0 and tally["replay refused"] > 0

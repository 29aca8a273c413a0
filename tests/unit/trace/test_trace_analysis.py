"""Analysis document, units, tier splits, HTML and the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.trace.analysis import AnalysisOptions, analyze
from harness.trace.blocks import from_lists
from harness.trace.cli import trace_app
from harness.trace.html import render_html
from harness.trace.lru_curve import LruCurve
from harness.trace.mooncake import synthesize_mooncake, write_mooncake
from harness.trace.tiers import TierSpec, tier_split_row
from harness.trace.units import MODEL_PROFILES, CapacityError, kv_bytes_per_token, parse_capacities, parse_capacity

DOCS = Path(__file__).resolve().parents[3] / "docs" / "trace-analysis.md"


def small_trace() -> tuple[list[float], list[list[int]]]:
    # t=0: [1,2]; t=1000: [1,2,3]; t=3000: [1,9]; t=3000: [4]
    return [0.0, 1000.0, 3000.0, 3000.0], [[1, 2], [1, 2, 3], [1, 9], [4]]


def test_document_on_a_hand_checked_trace() -> None:
    ts, ids = small_trace()
    trace = from_lists(ts, ids, 2, input_tokens=[4, 5, 4, 1], source="hand")
    result = analyze(trace, AnalysisOptions(kv_bytes_per_token=10, capacities=tuple(parse_capacities("2,3,60B"))))
    doc = result.document
    assert (doc["requests"], doc["blocks"], doc["unique_blocks"]) == (4, 8, 5)
    assert doc["block_bytes"] == 20
    # infinite cache: request 2 hits [1,2], request 3 hits [1]
    assert doc["infinite_cache_hit_ratio"] == pytest.approx(3 / 8)
    assert doc["reused_prefix_token_share"] == pytest.approx((2 + 2 + 2) / 14)
    assert doc["requests_with_reuse"] == pytest.approx(2 / 4)
    # stack distances of the reuses: 1 at t=1 -> 2, 2 -> 2, 1 at t=2 -> 3
    rd = doc["reuse_distance"]
    assert rd["count"] == 3
    assert rd["blocks"]["max"] == 3.0
    assert rd["bytes"]["max"] == 60.0
    assert rd["time_s"]["max"] == pytest.approx(2.0)
    caps = {row["given"]: row for row in doc["capacities"]}
    assert caps["2"]["hit_ratio"] == pytest.approx(2 / 8)  # at 2 blocks: [1,2] hit, then 1 is evicted by 3
    assert caps["3"]["hit_ratio"] == pytest.approx(3 / 8)
    assert caps["60B"]["capacity_blocks"] == 3
    assert caps["3"]["share_of_achievable"] == pytest.approx(1.0)
    assert doc["curve"]["max_capacity_blocks"] == 3
    assert [p["hit_blocks"] for p in doc["curve"]["points"]] == [0, 0, 2, 3]
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


def test_every_document_field_is_documented() -> None:
    ts, ids = small_trace()
    spec = TierSpec(gpu=parse_capacity("1"), cpu=(parse_capacity("2"),), disk=parse_capacity("3"))
    doc = analyze(from_lists(ts, ids, 2), AnalysisOptions(tiers=spec)).document
    text = DOCS.read_text(encoding="utf-8")
    for key in doc:
        assert f"`{key}`" in text, key
    for key in (*doc["reuse_distance"], *doc["curve"], *doc["curve"]["points"][0], *doc["tiers"]["rows"][0]):
        assert f"`{key}`" in text, key


def fake_curve(hits: list[int], total: int) -> LruCurve:
    arr = np.array(hits, dtype=np.int64)
    return LruCurve(hit_blocks=arr, hit_tokens=arr * 10, total_blocks=total, total_tokens=total * 10)


def test_tier_split_inclusive_and_exclusive() -> None:
    curve = fake_curve([0, 10, 20, 30, 40, 50, 60], 100)  # 10 hits per block of capacity, 60 at most
    gpu, cpu, disk = parse_capacity("2"), parse_capacity("3"), parse_capacity("5")
    inclusive = tier_split_row(curve, TierSpec(gpu=gpu, disk=disk), cpu, None)
    assert inclusive["hit_ratio"] == pytest.approx({"gpu": 0.2, "cpu": 0.1, "disk": 0.2, "miss": 0.5})
    assert inclusive["cpu_adds_hit_ratio"] == pytest.approx(0.1)
    exclusive = tier_split_row(curve, TierSpec(gpu=gpu, disk=disk, mode="exclusive"), cpu, None)
    assert exclusive["hit_ratio"] == pytest.approx({"gpu": 0.2, "cpu": 0.3, "disk": 0.1, "miss": 0.4})
    small_cpu = tier_split_row(curve, TierSpec(gpu=gpu), parse_capacity("1"), None)
    assert small_cpu["cpu_adds_hit_ratio"] == 0.0  # inclusive: a CPU tier no bigger than the GPU adds nothing
    with_bytes = tier_split_row(curve, TierSpec(gpu=parse_capacity("40B")), parse_capacity("60B"), 10)
    assert (with_bytes["gpu"]["blocks"], with_bytes["cpu"]["blocks"]) == (4, 6)


def test_capacity_parsing_and_profiles() -> None:
    assert parse_capacity("10000").blocks == 10000
    assert parse_capacity("10000 blocks").blocks == 10000
    assert parse_capacity("8GiB").bytes == 8 * 2**30
    assert parse_capacity("1.5 TB").bytes == 1_500_000_000_000
    assert parse_capacity("64GiB").to_blocks(512 * 131072) == 1024
    for bad in ("", "GiB", "1.5", "5 parsecs", "-3"):
        with pytest.raises(CapacityError):
            parse_capacity(bad)
    with pytest.raises(CapacityError, match="--kv-bytes-per-token"):
        parse_capacity("1GiB").to_blocks(None)
    assert MODEL_PROFILES["llama-3.1-8b"] == 131072
    assert MODEL_PROFILES["llama-3.1-70b"] == 327680
    assert MODEL_PROFILES["qwen2.5-7b"] == 57344
    assert kv_bytes_per_token(None, "Llama-3.1-8B") == 131072
    assert kv_bytes_per_token(5, None) == 5
    assert kv_bytes_per_token(None, None) is None
    with pytest.raises(CapacityError, match="not both"):
        kv_bytes_per_token(5, "llama-3.1-8b")
    with pytest.raises(CapacityError, match="unknown --model-profile"):
        kv_bytes_per_token(None, "gpt-9")


def test_html_is_self_contained_and_escaped() -> None:
    ts, ids = small_trace()
    trace = from_lists(ts, ids, 2, source="<script>alert(1)</script>&.jsonl")
    spec = TierSpec(gpu=parse_capacity("1"), cpu=(parse_capacity("2"),))
    html = render_html(analyze(trace, AnalysisOptions(kv_bytes_per_token=8, tiers=spec)))
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert "<svg" in html and "</svg>" in html
    assert "http" not in re.sub(r'\sxmlns(:xlink)?="http://www\.w3\.org/[^"]*"', "", html)  # namespaces only
    assert not re.search(r"""(src|href)=["'](?!#)""", html)  # only in-document references


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "t.jsonl"
    write_mooncake(path, synthesize_mooncake(300, seed=3))
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(trace_app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_json_and_html(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, stdout, _ = invoke(
        str(trace_file),
        "--model-profile",
        "llama-3.1-8b",
        "--capacities",
        "100,1GiB",
        "--gpu-cache",
        "8GiB",
        "--cpu-tier",
        "16GiB,64GiB",
        "--json",
        "--html",
        str(out),
    )
    assert code == 0
    doc = json.loads(stdout)
    assert doc["kv_bytes_per_token"] == 131072
    assert [r["capacity_blocks"] for r in doc["capacities"]] == [100, 16]
    assert len(doc["tiers"]["rows"]) == 2
    assert doc["tiers"]["rows"][1]["cpu_adds_hit_ratio"] >= doc["tiers"]["rows"][0]["cpu_adds_hit_ratio"]
    assert "<svg" in out.read_text(encoding="utf-8")


def test_cli_human_output(trace_file: Path) -> None:
    code, stdout, _ = invoke(str(trace_file), "--capacities", "1000")
    assert code == 0
    assert "infinite-cache hit ratio" in stdout
    assert "KV bytes per token unknown" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "no such file"),
        (["{trace}", "--capacities", "8GiB"], "--kv-bytes-per-token"),
        (["{trace}", "--format", "csv"], "--format 'csv'"),
        (["{trace}", "--cpu-tier", "8GiB"], "need --gpu-cache"),
        (["{trace}", "--shares", "2"], "--shares"),
        (["{trace}", "--kv-bytes-per-token", "5", "--model-profile", "qwen2.5-7b"], "not both"),
        (["{trace}", "--format", "records"], "not a readable parquet"),
        (["{dir}"], "is a directory"),
    ],
)
def test_cli_bad_input_exits_2_with_one_message(trace_file: Path, args: list[str], message: str) -> None:
    argv = [a.format(trace=trace_file, dir=trace_file.parent) for a in args]
    code, stdout, stderr = invoke(*argv)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr + stdout
    assert stderr.count("error:") == 1


def test_cli_broken_line_and_empty_trace(tmp_path: Path) -> None:
    good = '{"timestamp": 1, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}'
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f"{good}\n{good}\n{{oops\n", encoding="utf-8")
    code, _, stderr = invoke(str(broken))
    assert code == 2
    assert f"{broken}:3: not valid JSON" in stderr
    code, stdout, _ = invoke(str(broken), "--on-bad-line", "skip", "--json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["trace"]["bad_line_numbers"] == [3]
    assert doc["requests"] == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    code, _, stderr = invoke(str(empty))
    assert code == 2
    assert "the trace is empty" in stderr
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text("{oops\n", encoding="utf-8")
    code, _, stderr = invoke(str(only_bad), "--on-bad-line", "skip")
    assert code == 2
    assert "the trace is empty" in stderr and "1 bad line(s) skipped" in stderr
    broken_first = tmp_path / "first.jsonl"
    broken_first.write_text(f"{{oops\n{good}\n", encoding="utf-8")
    code, _, stderr = invoke(str(broken_first))
    assert code == 2
    assert f"{broken_first}:1: not valid JSON" in stderr

"""Trace readers: Mooncake (exact and fast paths), records parquet, prompts; bad lines and format detection."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.trace import mooncake_columns
from harness.trace.blocks import from_requests
from harness.trace.mooncake import TraceFormatError, TraceRequest, read_mooncake, synthesize_mooncake, write_mooncake
from harness.trace.mooncake_columns import read_mooncake_blocks
from harness.trace.readers import chained_block_hashes, detect_format, load_trace

GOOD = '{"timestamp": 10, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}'


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_round_trip(tmp_path: Path) -> None:
    reqs = synthesize_mooncake(50, seed=1)
    path = tmp_path / "t.jsonl"
    assert write_mooncake(path, reqs) == 50
    back = read_mooncake(path)
    assert back.requests == reqs
    assert back.bad_lines == []


def test_synthesize_is_deterministic_and_shares_prefixes() -> None:
    a, b = synthesize_mooncake(300, seed=5), synthesize_mooncake(300, seed=5)
    assert a == b
    assert a != synthesize_mooncake(300, seed=6)
    firsts = [r.hash_ids[0] for r in a]
    assert len(set(firsts)) < len(firsts) / 2  # popular shared prefixes
    assert all(r.input_length > (len(r.hash_ids) - 1) * 512 for r in a)
    assert all(r.input_length <= len(r.hash_ids) * 512 for r in a)
    assert [r.timestamp_ms for r in a] == sorted(r.timestamp_ms for r in a)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1}', "missing field(s) 'hash_ids'"),
        ('{"timestamp": -1, "input_length": 5, "output_length": 1, "hash_ids": []}', "'timestamp'"),
        ('{"timestamp": NaN, "input_length": 5, "output_length": 1, "hash_ids": []}', "'timestamp'"),
        ('{"timestamp": 1' + "0" * 400 + ', "input_length": 5, "output_length": 1, "hash_ids": []}', "'timestamp'"),
        ('{"timestamp": true, "input_length": 5, "output_length": 1, "hash_ids": []}', "'timestamp'"),
        ('{"timestamp": 1, "input_length": 5.0, "output_length": 1, "hash_ids": []}', "'input_length'"),
        ('{"timestamp": 1, "input_length": 5, "output_length": -2, "hash_ids": []}', "'output_length'"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": 3}', "'hash_ids' must be a list"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1, true]}', "'hash_ids'[1]"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1, 2.5]}', "'hash_ids'[1]"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [' + str(2**63) + "]}", "64-bit"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": null}', "'hash_ids' must be a list"),
    ],
)
def test_bad_line_is_named_with_its_number(tmp_path: Path, line: str, reason: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, "", line, GOOD])
    with pytest.raises(TraceFormatError) as err:
        read_mooncake(path)
    assert f"{path}:3:" in str(err.value)
    assert reason in str(err.value)
    with pytest.raises(TraceFormatError, match=f"{path}:3:"):
        read_mooncake_blocks(path, 512)  # the fast path falls back and reports the same
    skipped = read_mooncake(path, on_bad_line="skip")
    assert [b.line_no for b in skipped.bad_lines] == [3]
    assert [r.line_no for r in skipped.requests] == [1, 4]
    trace, bad = read_mooncake_blocks(path, 512, on_bad_line="skip")
    assert trace.n_requests == 2
    assert [b.line_no for b in bad] == [3]


def test_invalid_utf8_is_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(GOOD.encode() + b"\n\xff\xfe\n")
    with pytest.raises(TraceFormatError, match=":2: not UTF-8"):
        read_mooncake(path)


def test_fast_and_exact_paths_agree(tmp_path: Path) -> None:
    reqs = synthesize_mooncake(400, seed=9)
    path = tmp_path / "t.jsonl"
    write_mooncake(path, reqs)
    fast, bad = read_mooncake_blocks(path, 512)
    exact = from_requests(read_mooncake(path).requests, 512)
    assert bad == []
    for name in ("timestamps_ms", "input_tokens", "output_tokens", "offsets", "block_ids"):
        assert np.array_equal(getattr(fast, name), getattr(exact, name)), name


def test_line_scan_finds_depth_and_longest_line_across_chunk_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mooncake_columns, "_SCAN_CHUNK", 7)  # lines and bracket runs straddle chunk edges
    lines = [b"[[1]]", b"x" * 23, b"{[{[{", b"", b"ab"]
    data = b"\n".join(lines)  # the last line has no newline
    depth, longest = mooncake_columns._line_extremes(io.BytesIO(data))
    assert depth == 5
    assert longest == 24  # 23 bytes and its newline


def test_a_line_as_long_as_a_parse_block_goes_to_the_exact_reader(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mooncake_columns, "_BLOCK_SIZE", 256)
    path = tmp_path / "t.jsonl"
    good = json.dumps({"timestamp": 1, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]})
    path.write_text(f"{good}\n{good}\n", encoding="utf-8")
    assert mooncake_columns._fast(path, 16) is not None
    path.write_text(f"{good}\n" + json.dumps({"timestamp": 2, "input_length": 1, "output_length": 1,
                                               "hash_ids": list(range(100))}) + "\n", encoding="utf-8")
    assert mooncake_columns._fast(path, 16) is None
    trace, bad = read_mooncake_blocks(path, 16)
    assert len(trace.input_tokens) == 2 and not bad


def test_duplicate_keys_follow_the_exact_reader(tmp_path: Path) -> None:
    # pyarrow rejects duplicate keys; the exact reader (json.loads: last wins) decides
    line = '{"timestamp": 1, "timestamp": 7, "input_length": 5, "output_length": 1, "hash_ids": [4]}'
    path = write_lines(tmp_path / "dup.jsonl", [line])
    trace, _ = read_mooncake_blocks(path, 512)
    assert trace.timestamps_ms.tolist() == [7.0]


def test_empty_file_gives_no_requests(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    assert read_mooncake(path).requests == []
    assert load_trace(path).trace.n_requests == 0


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(write_lines(tmp_path / "a.jsonl", ["", GOOD])) == "mooncake"
    assert detect_format(write_lines(tmp_path / "b.jsonl", ['{"timestamp": 0, "prompt": "hi"}'])) == "prompts"
    assert detect_format(tmp_path / "c.parquet") == "records"
    with pytest.raises(TraceFormatError, match="pass --format"):
        detect_format(write_lines(tmp_path / "d.jsonl", ['{"x": 1}']))
    # unparsable lines are passed over (the reader names them); nothing parsable means mooncake
    assert detect_format(write_lines(tmp_path / "e.jsonl", ["nope", '{"timestamp": 0, "prompt": "x"}'])) == "prompts"
    assert detect_format(write_lines(tmp_path / "f.jsonl", ["nope"])) == "mooncake"


def test_prompts_whitespace_tokens_and_chained_blocks(tmp_path: Path) -> None:
    shared = " ".join(f"w{i}" for i in range(8))
    lines = [
        json.dumps({"timestamp": 0, "prompt": shared + " a b c"}),
        json.dumps({"timestamp": 5, "prompt": shared + "\n x  y", "output_length": 3}),
        json.dumps({"timestamp": 9, "prompt": "w0 w1 w2 w3 zz w5 w6 w7"}),
    ]
    loaded = load_trace(write_lines(tmp_path / "p.jsonl", lines), "auto", block_tokens=4)
    trace = loaded.trace
    assert loaded.format == "prompts"
    assert trace.input_tokens.tolist() == [11, 10, 8]
    assert trace.output_tokens.tolist() == [0, 3, 0]
    blocks = [trace.block_ids[trace.offsets[i] : trace.offsets[i + 1]].tolist() for i in range(3)]
    assert [len(b) for b in blocks] == [3, 3, 2]  # the last block may be partial
    assert blocks[0][:2] == blocks[1][:2] and blocks[0][2] != blocks[1][2]
    assert blocks[2][0] == blocks[0][0] and blocks[2][1] != blocks[0][1]  # chained: differs from the first change
    assert chained_block_hashes(["a", "b"], 1) != chained_block_hashes(["b", "a"], 1)
    assert chained_block_hashes([], 4) == []


def test_prompts_bad_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [json.dumps({"timestamp": 0, "prompt": "a"}), '{"timestamp": 1}'])
    with pytest.raises(TraceFormatError, match=r"p\.jsonl:2: 'prompt' must be a string"):
        load_trace(path, "prompts")
    assert [b.line_no for b in load_trace(path, "prompts", on_bad_line="skip").bad_lines] == [2]


def write_records(path: Path, rows: dict[str, list[object]]) -> Path:
    schema = pa.schema(
        [
            ("send_wall_ns", pa.int64()),
            ("prompt_tokens", pa.int64()),
            ("hash_ids", pa.list_(pa.int64())),
            ("hash_block_tokens", pa.int64()),
            ("status", pa.string()),
        ]
    )
    pq.write_table(pa.table(rows, schema=schema), path)
    return path


def records_rows(**override: list[object]) -> dict[str, list[object]]:
    rows: dict[str, list[object]] = {
        "send_wall_ns": [2_000_000_000, 1_000_000_000, 1_500_000_000],
        "prompt_tokens": [40, 30, 33],
        "hash_ids": [[1, 2, 3], [1, 2], [1, 2, 5]],
        "hash_block_tokens": [16, 16, 16],
        "status": ["ok", "ok", "error"],
    }
    rows.update(override)
    return rows


def test_records_parquet(tmp_path: Path) -> None:
    loaded = load_trace(write_records(tmp_path / "requests.parquet", records_rows()))
    trace = loaded.trace
    assert loaded.format == "records"
    assert trace.block_tokens == 16
    assert trace.timestamps_ms.tolist() == [1000.0, 0.0, 500.0]
    assert trace.offsets.tolist() == [0, 3, 5, 8]
    assert trace.input_tokens.tolist() == [40, 30, 33]


def test_records_nulls_are_reported_by_row(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.parquet", records_rows(hash_ids=[[1], None, [2]]))
    with pytest.raises(TraceFormatError, match="row 2: 'hash_ids' is null"):
        load_trace(path)
    loaded = load_trace(path, on_bad_line="skip")
    assert [b.line_no for b in loaded.bad_lines] == [2]
    assert loaded.trace.n_requests == 2


def test_records_problems(tmp_path: Path) -> None:
    mixed = write_records(tmp_path / "m.parquet", records_rows(hash_block_tokens=[16, 32, 16]))
    with pytest.raises(TraceFormatError, match="differs between rows"):
        load_trace(mixed)
    good = write_records(tmp_path / "g.parquet", records_rows())
    with pytest.raises(TraceFormatError, match="cannot re-cut"):
        load_trace(good, block_tokens=64)
    negative = write_records(tmp_path / "n.parquet", records_rows(prompt_tokens=[1, -1, 2]))
    with pytest.raises(TraceFormatError, match="row 2: 'prompt_tokens'"):
        load_trace(negative)
    pq.write_table(pa.table({"x": [1]}), tmp_path / "x.parquet")
    with pytest.raises(TraceFormatError, match="lacks column"):
        load_trace(tmp_path / "x.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(TraceFormatError, match="not a readable parquet"):
        load_trace(tmp_path / "junk.parquet")


def test_trace_request_fields() -> None:
    req = TraceRequest(1.5, 10, 2, (1, 2), 7)
    assert (req.timestamp_ms, req.input_length, req.output_length, req.hash_ids, req.line_no) == (1.5, 10, 2, (1, 2), 7)

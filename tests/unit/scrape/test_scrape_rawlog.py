"""Raw scrape files: durable per-record gzip members, readable after a crash mid-write."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from harness.scrape.rawlog import RawScrapeWriter, read_raw_scrapes
from harness.scrape.series import load_scrapes


def _record(i: int) -> dict[str, object]:
    return {"wall_ns": 1000 + i, "mono_ns": 10 + i, "endpoint": "/metrics", "format": "prometheus", "tag": "poll",
            "status": 200, "error": None, "body": f"m_total {i}\n"}


def test_round_trip_and_plain_gzip_compatible(tmp_path: Path) -> None:
    path = tmp_path / "scrapes.jsonl.gz"
    writer = RawScrapeWriter(path)
    for i in range(5):
        assert writer.write(_record(i))
    # readable while the writer is still open (flushed per record)
    records, notes = read_raw_scrapes(path)
    assert [r["mono_ns"] for r in records] == [10, 11, 12, 13, 14] and notes == []
    writer.close()
    assert not writer.write(_record(99))  # dropped after close
    with gzip.open(path, "rt") as fh:
        assert [json.loads(line)["mono_ns"] for line in fh] == [10, 11, 12, 13, 14]


def test_truncated_tail_keeps_everything_before(tmp_path: Path) -> None:
    path = tmp_path / "scrapes.jsonl.gz"
    writer = RawScrapeWriter(path)
    for i in range(4):
        writer.write(_record(i))
    writer.close()
    data = path.read_bytes()
    # only the gzip trailer lost: the record itself is complete and kept
    path.write_bytes(data[:-3])
    records, notes = read_raw_scrapes(path)
    assert [r["mono_ns"] for r in records] == [10, 11, 12, 13]
    assert notes and "truncated" in notes[0]
    # cut inside the last record: the records before it survive, the partial one is dropped
    path.write_bytes(data[:-20])
    records, notes = read_raw_scrapes(path)
    assert [r["mono_ns"] for r in records] == [10, 11, 12]
    assert notes and "truncated" in notes[0]


def test_garbage_tail_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "scrapes.jsonl.gz"
    with RawScrapeWriterContext(path) as writer:
        writer.write(_record(0))
    with path.open("ab") as fh:
        fh.write(gzip.compress(b'{"no_mono": 1}\nnot json\n'))
        fh.write(b"\x00garbage")
    records, notes = read_raw_scrapes(path)
    assert len(records) == 1
    assert any("unreadable bytes" in n for n in notes)
    assert any("skipped 2 unreadable record(s)" in n for n in notes)


def test_a_failed_write_in_the_middle_loses_only_that_record(tmp_path: Path) -> None:
    path = tmp_path / "scrapes.jsonl.gz"
    with RawScrapeWriterContext(path) as writer:
        writer.write(_record(0))
    partial = gzip.compress(json.dumps(_record(1)).encode() + b"\n")[:-15]  # disk full mid-write
    with path.open("ab") as fh:
        fh.write(partial)
    with RawScrapeWriterContext(path) as writer:
        writer.write(_record(2))
    records, notes = read_raw_scrapes(path)
    assert [r["mono_ns"] for r in records] == [10, 12]
    assert notes


def test_load_scrapes_sorts_and_tolerates_absence(tmp_path: Path) -> None:
    empty = load_scrapes(tmp_path / "nothing-here")
    assert empty.scrapes == [] and "no scrapes file" in empty.notes[0]
    path = tmp_path / "scrapes.jsonl.gz"
    with RawScrapeWriterContext(path) as writer:
        for i in (3, 1, 2):
            writer.write(_record(i))
    series = load_scrapes(tmp_path)
    assert [s.mono_ns for s in series.scrapes] == [11, 12, 13]
    assert series.scrapes[0].ok and series.scrapes[0].body == "m_total 1\n"
    assert [s.mono_ns for s in load_scrapes(path).scrapes] == [11, 12, 13]


class RawScrapeWriterContext:
    """A writer closed at the end of a with-block."""

    def __init__(self, path: Path) -> None:
        self.writer = RawScrapeWriter(path)

    def __enter__(self) -> RawScrapeWriter:
        return self.writer

    def __exit__(self, *exc: object) -> None:
        self.writer.close()

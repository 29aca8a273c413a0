"""The summary, the sequential looks and ``harness compare`` judge the same request rows of a resumed run.

The run is the pre-layout demo run (``tests/fixtures/runs/demo-prelayout/``) made into a resumed one: its CPU arm's
step 0 ran twice. Attempt 1 was cut short (the load generator failed: a ``partial`` journal entry, as the harness
writes one) and its rows stay in the records; attempt 2 is the fixture's own step, and a few of its rows were sent
outside its journaled span (before its start and after its end). The records are written as record parts and
``requests.parquet`` is built from them by the harness's own builder, as at the end of a run.

The rows that count are attempt 2's inside its span, which are exactly the fixture's rows: all three paths must
select those (the same request ids, of attempt 2), none of attempt 1 and none outside the span, and the summary's
figures for the step must be the fixture summary's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import harness.analysis
from harness.decision.sequential import reference_rows
from harness.decision.summarize import rebuild_summary
from harness.report.compare_ratios import load_frame
from harness.rundir.entries import StepEntry
from harness.rundir.journal import append_step, read_step_entries
from harness.rundir.layout import RunDir
from harness.rundir.parts import build_requests_parquet, part_prefix
from harness.rundir.records import SCHEMA

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "demo-prelayout"
ARM, STEP, LABEL = "cpu-16g", 0, "c8"
CUT_SHORT = 40  # rows attempt 1 recorded before it was cut short
EARLY, LATE = 3, 5  # attempt 2's rows sent before its start / after its end
TIME_COLUMNS = ("planned_send_ns", "send_ns", "first_byte_ns", "first_token_ns", "end_ns", "send_wall_ns")
Keys = set[tuple[str, int]]


def _shifted(rows: pd.DataFrame, by_ns: int, **columns: Any) -> pd.DataFrame:
    """Copies of ``rows`` moved ``by_ns`` in time (every clock reading, chunk arrivals included)."""
    out = rows.copy()
    for column in TIME_COLUMNS:
        out[column] = out[column] + by_ns
    out["chunk_ns"] = [[t + by_ns for t in chunks] for chunks in out["chunk_ns"]]
    for name, value in columns.items():
        out[name] = value
    return out


def _write_parts(run: RunDir, rows: pd.DataFrame) -> None:
    """The records as the load generator leaves them: one part per (arm, step, phase), under records/<arm>/."""
    shutil.rmtree(run.records_root, ignore_errors=True)
    groups = rows.groupby(["arm", "step", "step_label", "drill", "drill_phase", "attempt"], dropna=False, sort=False)
    for n, ((arm, step, label, drill, phase, _attempt), part) in enumerate(groups):
        prefix = part_prefix(int(step), str(label), None if pd.isna(drill) else str(drill),
                             None if pd.isna(phase) else str(phase))
        folder = run.records_dir(str(arm))
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(part.drop(columns=["superseded"]).reindex(columns=SCHEMA.names), schema=SCHEMA,
                                     preserve_index=False)
        pq.write_table(table, folder / f"{prefix}-test-{n:05d}.parquet")


def _journal_with_the_redo(run: RunDir, attempt_1: StepEntry) -> StepEntry:
    """Rewrite steps.jsonl: attempt 1 of the step (cut short) just before the fixture's entry, now attempt 2."""
    entries = read_step_entries(run)
    run.steps.unlink()
    counted = None
    for entry in entries:
        if entry.key == (ARM, STEP):
            counted = entry.model_copy(update={"attempt": 2})
            append_step(run, attempt_1)
            append_step(run, counted)
        else:
            append_step(run, entry)
    assert counted is not None
    return counted


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StepEntry, pd.DataFrame]:
    """(the resumed run directory, its counted entry for the step, the rows that must count)."""
    root = Path(shutil.copytree(FIXTURE, tmp_path_factory.mktemp("counted") / FIXTURE.name))
    run = RunDir(root)
    rows = pq.read_table(run.requests).to_pandas()
    mine = (rows["arm"] == ARM) & (rows["step"] == STEP)
    counted_rows = rows[mine].sort_values("send_ns").assign(attempt=2)
    original = next(e for e in read_step_entries(run) if e.key == (ARM, STEP))
    start, end = original.start_ns, original.end_ns
    first = int(counted_rows["send_ns"].iloc[0])
    cut = counted_rows.head(CUT_SHORT)
    attempt_1_start = start - 30 * 10**9  # an earlier try on another server, long before the redo
    attempt_1 = StepEntry(arm=ARM, step=STEP, label=LABEL, concurrency=8, start_ns=attempt_1_start,
                          end_ns=attempt_1_start + 5 * 10**9, requests=CUT_SHORT, errors=0, partial=True,
                          error="load runner failed: OSError: [Errno 28] No space left on device", attempt=1)
    superseded = _shifted(cut, attempt_1_start + 10**6 - first, attempt=1)  # the same plan: the same request ids
    early = _shifted(counted_rows.head(EARLY), start - 10**6 - first, attempt=2)
    early["request_id"] = early["request_id"] + "-early"
    late = _shifted(counted_rows.tail(LATE), end + 10**6 - int(counted_rows["send_ns"].iloc[-LATE]), attempt=2)
    late["request_id"] = late["request_id"] + "-late"
    _write_parts(run, pd.concat([rows[~mine], counted_rows, superseded, early, late], ignore_index=True))
    counted = _journal_with_the_redo(run, attempt_1)
    run.requests.unlink()
    build_requests_parquet(root)
    return root, counted, counted_rows


def _keys(df: pd.DataFrame) -> Keys:
    """(request id, attempt) of the step's rows among ``df``."""
    step = df[(df["arm"] == ARM) & (df["step"] == STEP) & df["drill"].isna()]
    return set(zip(step["request_id"].astype(str), step["attempt"].astype(int), strict=True))


def test_the_resumed_run_keeps_every_attempts_rows(resumed_run: tuple[Path, StepEntry, pd.DataFrame]) -> None:
    root, counted, expected = resumed_run
    rows = harness.analysis.load_requests(root)
    step = rows[(rows["arm"] == ARM) & (rows["step"] == STEP)]
    assert len(step) == len(expected) + CUT_SHORT + EARLY + LATE, "the test's run holds rows that must not count"
    assert step["superseded"].astype(bool).sum() == CUT_SHORT  # attempt 1's rows, marked by the builder
    send = step["send_ns"].astype("int64")
    outside = step[(step["attempt"] == 2) & ((send < counted.start_ns) | (send > counted.end_ns))]
    assert len(outside) == EARLY + LATE


def test_summary_looks_and_compare_count_the_same_rows(resumed_run: tuple[Path, StepEntry, pd.DataFrame],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root, counted, expected = resumed_run
    judged: list[pd.DataFrame] = []
    real = harness.analysis.analyze_arms

    def spy(df: pd.DataFrame, *args: Any, **kwargs: Any) -> Any:
        judged.append(df)
        return real(df, *args, **kwargs)

    monkeypatch.setattr(harness.analysis, "analyze_arms", spy)
    summary = rebuild_summary(root)
    assert judged, "the summary judged no rows"
    by_summary = _keys(judged[0])

    looked = reference_rows(RunDir(root), ARM, STEP, part_prefix(STEP, LABEL))
    assert looked is not None and looked[1].line() == counted.line(), "the looks' reference is the counted entry"
    by_looks = _keys(looked[0])
    by_compare = _keys(load_frame(root))

    want = {(rid, 2) for rid in expected["request_id"].astype(str)}
    assert by_summary == want, (len(by_summary), len(want))
    assert by_looks == want, (len(by_looks), len(want))
    assert by_compare == want, (len(by_compare), len(want))
    assert not any(rid.endswith(("-early", "-late")) for rid, _attempt in by_compare), "rows outside the span"

    before = json.loads((FIXTURE / "summary.json").read_text())
    step_before = next(a for a in before["arms"] if a["name"] == ARM)["steps"][STEP]
    step_after = next(a for a in summary.arms if a.name == ARM).steps[STEP].model_dump(mode="json")
    for key in ("requests", "errors", "duration_s", "ttft_ms", "e2e_ms", "output_tokens_per_s"):
        assert step_after[key] == step_before[key], key

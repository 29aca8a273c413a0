"""A rollout on the simulator with two ``harness load-worker`` processes, one of them in its own time namespace
whose monotonic clock is 2000 s behind (``unshare -T --monotonic -2000``, root): the summary counts every planned
request of every step (the counted-rows mask keeps rows whose ``send_ns`` is inside the master's span)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_distributed_rollout import HARNESS, LEVELS, _check_run, _run, _scenario, _stop

from harness.run.ports import free_port


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-T", "--monotonic", "-2000", "true"], check=False, capture_output=True,
                           timeout=10)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="needs unshare -T (root) for a worker with its own monotonic clock")
def test_a_rollout_with_a_worker_2000_s_behind_counts_every_planned_request(tmp_path: Path) -> None:
    port = free_port()
    path = _scenario(tmp_path, "offset", {"remote_workers": 2, "master_port": port, "worker_wait_s": 30}, LEVELS)
    workers = []
    for i, prefix in enumerate(([], ["unshare", "-T", "--monotonic", "-2000"])):
        log = tmp_path / f"load-worker-{i}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen([*prefix, HARNESS, "load-worker", "--master", f"127.0.0.1:{port}",
                                     "--idle-timeout", "60"], stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        workers.append((proc, log))
    try:
        run_dir, _ = _run(path, tmp_path / "results", reports=True)
        codes = [proc.wait(timeout=30) for proc, _ in workers]
    finally:
        _stop(workers)
    assert codes == [0, 0], [log.read_text() for _, log in workers]
    _check_run(run_dir, path, LEVELS, 2, 2)
    summary = json.loads((run_dir / "summary.json").read_text())
    steps = summary["arms"][0]["steps"]
    assert [s["requests"] for s in steps] == [level["requests"] for level in LEVELS], "every planned request counts"
    assert all("2000.0" in (s["client"]["layout_note"] or "") for s in steps), [s["client"] for s in steps]

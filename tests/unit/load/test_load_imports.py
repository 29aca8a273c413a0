"""The parent side of the load generator must never import gevent or locust (they patch the standard library)."""

from __future__ import annotations

import subprocess
import sys

from tools import child_env

PARENT_MODULES = ["harness.load", "harness.load.step", "harness.workload.plan", "harness.load.probe",
                  "harness.rundir.parts", "harness.load.runners", "harness.workload.tokens", "tools.bench.load"]


def test_parent_modules_do_not_import_gevent_or_locust() -> None:
    code = ("import sys\n"
            + "".join(f"import {m}\n" for m in PARENT_MODULES)
            + "from harness.load import run_step, StepRun, probe_command\n"
            + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('gevent', 'locust', 'geventhttpclient'))\n"
            + "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env=child_env())  # tools.bench.load: the repository root on the child's path
    assert out.stdout.strip() == ""

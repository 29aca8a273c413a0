"""Run the replay inside vLLM's interpreter: ``scripts/vllm_replay.py`` as text through ``python -c``.

The interpreter is a vLLM 0.32 venv's python (the e2e tier's ``HARNESS_VLLM_PYTHON``); the request goes in on stdin
as JSON, one ``KVH-ORACLE {json}`` line per run comes back (:class:`~tools.sim_oracle.replay.ReplayResult`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tools.sim_oracle.replay import ReplayConfig, ReplayResult
from tools.sim_oracle.sequence import ReplaySequence

SCRIPT = Path(__file__).resolve().parent / "scripts" / "vllm_replay.py"
MARK = "KVH-ORACLE "
ERROR = "KVH-ORACLE-ERROR "


class OracleError(RuntimeError):
    """The replay inside vLLM failed; the message carries vLLM's own error."""


def run_vllm(python: str | os.PathLike[str], sequences: Sequence[ReplaySequence],
             runs: Sequence[tuple[str, ReplayConfig]], scratch: str | os.PathLike[str],
             timeout_s: float = 600.0) -> list[ReplayResult]:
    """Replay ``runs`` (sequence name, configuration) inside vLLM; results in the order of ``runs``."""
    Path(scratch).mkdir(parents=True, exist_ok=True)
    payload = {"sequences": [s.to_json() for s in sequences],
               "runs": [{"sequence": name, "config": cfg.to_json()} for name, cfg in runs],
               "scratch": str(scratch)}
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([str(python), "-c", SCRIPT.read_text(encoding="utf-8")], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    results: list[ReplayResult] = []
    errors: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            results.append(ReplayResult.from_json(json.loads(line[len(MARK):])))
        elif line.startswith(ERROR):
            item = json.loads(line[len(ERROR):])
            errors.append(f"{item['sequence']}/{item['config']}: {item['error']}\n{item['trace']}")
    if errors or proc.returncode != 0 or len(results) != len(runs):
        detail = "\n".join(errors) or proc.stderr[-4000:]
        raise OracleError(f"the replay inside vLLM ({python}) failed (exit {proc.returncode}, "
                          f"{len(results)} of {len(runs)} runs):\n{detail}")
    return results

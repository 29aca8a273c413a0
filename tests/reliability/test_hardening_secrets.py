"""Issue 17, items 4 and 6 (plan, run's live output): no secret on any command line leaks; terminal escapes in
scenario text are printed visibly.

A secret is passed in ``engine.sim_args`` (``--api-key S``), in ``engine.extra_args`` (``--api-key=S`` where S
equals a secret environment variable), as a literal ``engine.env`` value in the file (a secret-looking name and a
plain one) and via ``--set engine.env.X=S``. The simulator is wrapped so that it prints every secret, raw, base64
and URL-encoded, on stdout and stderr (text the harness did not author). Then every file of the results directory
(gzip and parquet contents included), the compose files, stdout and stderr of ``harness run``, ``harness
report``, ``harness run --resume``, ``harness plan`` and ``plan --json`` are searched for all three forms.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.config import load_scenario
from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.launch.compose import render_compose
from harness.secrets.flags import is_secret_flag, mask_argv
from harness.secrets.redact import MASK

RUN_LIMIT_S = 90.0  # the fast two-arm simulator run takes ~15 s here; the bound catches a hang, not a slow host
PLAN_LIMIT_S = 20.0
VERDICTS = (0, 1, 3, 5)  # any verdict: the simulated tier's figures on a busy host are not what is tested here
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\rHIDDEN"
# Prints every secret it can see (its environment and its --api-key arguments) raw, base64 and URL-encoded, on
# stdout and stderr, then becomes the simulator.
WRAPPER = """
import base64, os, sys
from urllib.parse import quote
argv = sys.argv[1:]
seen = [v for k, v in os.environ.items() if k.startswith("HARDEN_")]
seen += [a.split("=", 1)[1] if "=" in a else argv[i + 1] for i, a in enumerate(argv) if a.startswith("--api-key")]
for value in seen:
    forms = (value, base64.b64encode(value.encode()).decode(), quote(value, safe=""))
    print("server sees " + " | ".join(forms), flush=True)
    print("server error " + " | ".join(forms), file=sys.stderr, flush=True)
os.execv(argv[0], argv)
"""


def _forms(value: str) -> list[str]:
    raw = value.encode()
    return [value, base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode(), quote(value, safe=""), quote_plus(value)]


def _texts(path: Path) -> Iterator[str]:
    """The file as text, and its decompressed (gzip) or decoded (parquet) contents."""
    raw = path.read_bytes()
    yield raw.decode("utf-8", "replace")
    if path.name.endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh, contextlib.suppress(OSError, EOFError):
            yield fh.read(64 << 20).decode("utf-8", "replace")  # a member cut short: the raw text was searched
    if path.suffix == ".parquet":
        yield json.dumps(pq.read_table(path).to_pylist(), default=str)


def _leaks(secret_list: list[str], texts: dict[str, str]) -> list[str]:
    return [f"{where}: {form!r}" for where, text in texts.items() for value in secret_list for form in _forms(value)
            if form in text]


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Five random secrets; one also lives in a secret-looking variable of the harness's environment."""
    values = {k: f"{k}-{secrets.token_urlsafe(12)}+/=" for k in ("sim", "extra", "envfile", "plain", "set")}
    monkeypatch.setenv("HARDEN_TEST_API_TOKEN", values["extra"])
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    wrapper = tmp_path / "talkative.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    real = build_launch_spec

    def talkative(engine: Any, arm: Any, **kwargs: Any) -> LaunchSpec:
        spec = real(engine, arm, **kwargs)
        return spec.model_copy(update={"entrypoint": [sys.executable, str(wrapper), *spec.entrypoint]})

    monkeypatch.setattr("harness.run.arm_server.build_launch_spec", talkative)
    return values


def _secret_scenario(scenario: Callable[..., Path], values: dict[str, str]) -> Path:
    return scenario("secrets", arms=("baseline", "cpu-16g"), engine={
        "sim_args": ["--api-key", values["sim"]], "extra_args": [f"--api-key={values['extra']}"],
        "env": {"HARDEN_PASSWORD": values["envfile"], "HARDEN_SETTING": values["plain"]}})


def _invoke(args: list[str], limit_s: float) -> tuple[int, str, str, float]:
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    took = time.monotonic() - started
    assert took < limit_s, f"harness {' '.join(args[:1])} took {took:.1f} s"
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr, took


def test_no_secret_reaches_results_output_or_compose(scenario: Callable[..., Path], planted: dict[str, str],
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _secret_scenario(scenario, planted)
    out = tmp_path / "results"
    setting = f"engine.env.HARDEN_SET={planted['set']}"
    code, stdout, stderr, _ = _invoke(["run", str(path), "--out", str(out), "--set", setting], RUN_LIMIT_S)
    assert code in VERDICTS, stdout + stderr
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    assert (run_dir / "compose" / "baseline.sh").is_file()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 15, files
    texts = {f"{p.relative_to(out)}#{i}": t for p in files for i, t in enumerate(_texts(p))}
    texts |= {"run stdout": stdout, "run stderr": stderr}

    # The flags are recorded with the value masked, so a reviewer sees which were set.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    command = manifest["launches"][0]["command"]
    assert f"--api-key '{MASK}'" in command and f"'--api-key={MASK}'" in command, command
    assert f"--api-key '{MASK}'" in stdout and f"'--api-key={MASK}'" in stdout
    log = (run_dir / "logs" / "baseline.log").read_text()
    assert f"server sees {MASK} | {MASK} | {MASK}" in log and f"server error {MASK} | {MASK} | {MASK}" in log
    # The compose script references the variables that reproduce the launch, never their values.
    script = (run_dir / "compose" / "baseline.sh").read_text()
    assert '--api-key "${API_KEY}"' in script and '--api-key="${HARDEN_TEST_API_TOKEN}"' in script, script
    assert 'HARDEN_PASSWORD="${HARDEN_PASSWORD}"' in script and 'HARDEN_SET="${HARDEN_SET}"' in script
    # scenario.yaml names the variables only.
    recorded = yaml.safe_load((run_dir / "scenario.yaml").read_text())["engine"]
    assert recorded["env"] == {"HARDEN_PASSWORD": "${HARDEN_PASSWORD}", "HARDEN_SETTING": "${HARDEN_SETTING}",
                               "HARDEN_SET": "${HARDEN_SET}"}
    assert recorded["sim_args"] == ["--api-key", "${API_KEY}"]
    assert recorded["extra_args"] == ["--api-key=${HARDEN_TEST_API_TOKEN}"]

    # harness report rebuilds from the files without any of the values.
    code, rep_out, rep_err, _ = _invoke(["report", str(run_dir)], PLAN_LIMIT_S)
    assert code in VERDICTS, rep_out + rep_err
    texts |= {"report stdout": rep_out, "report stderr": rep_err}
    # --resume needs the recorded variables: a missing one is exit 2 naming it and the field ...
    code, res_out, res_err, _ = _invoke(["run", "--resume", str(run_dir)], PLAN_LIMIT_S)
    assert code == 2 and "API_KEY" in res_err and "engine.sim_args[1]" in res_err, res_out + res_err
    # ... and with them exported it completes (nothing is left to run: it rebuilds the summary).
    for name, key in (("HARDEN_PASSWORD", "envfile"), ("HARDEN_SETTING", "plain"), ("HARDEN_SET", "set"),
                      ("API_KEY", "sim")):
        monkeypatch.setenv(name, planted[key])
    code, res_out, res_err, _ = _invoke(["run", "--resume", str(run_dir)], RUN_LIMIT_S)
    assert code in VERDICTS, res_out + res_err
    texts |= {"resume stdout": res_out, "resume stderr": res_err}
    texts |= {f"after resume {p}#{i}": t for where in (out, tmp_path / "state") for p in where.rglob("*")
              if p.is_file() for i, t in enumerate(_texts(p))}

    # A docker launch of the same scenario: the compose file references the variables too.
    scen = load_scenario(path, [setting])
    docker = scen.engine.model_copy(update={"launcher": "docker", "image": "kvoffload-harness-sim:test"})
    compose = render_compose(build_launch_spec(docker, scen.arms[0], host_port=18000), "p")
    service = yaml.safe_load(compose)["services"]["engine"]
    assert {"--api-key", "${API_KEY}", "--api-key=${HARDEN_TEST_API_TOKEN}"} <= set(service["command"])
    assert service["environment"]["HARDEN_SET"] == "${HARDEN_SET}"
    texts["compose.yaml"] = compose

    leaks = _leaks(list(planted.values()), texts)
    assert not leaks, f"secrets written or printed: {leaks[:10]}"


def test_plan_and_plan_json_mask_secrets(scenario: Callable[..., Path], planted: dict[str, str]) -> None:
    path = _secret_scenario(scenario, planted)
    setting = f"engine.env.HARDEN_SET={planted['set']}"
    texts: dict[str, str] = {}
    for args in (["plan", str(path)], ["plan", str(path), "--json"]):
        code, stdout, stderr, _ = _invoke([*args, "--set", setting], PLAN_LIMIT_S)
        assert code in (0, 2), stdout + stderr  # 2: a pre-flight check of this host; the output is what counts
        texts |= {f"{args} stdout": stdout, f"{args} stderr": stderr}
    plan = json.loads(texts[f"{['plan', str(path), '--json']} stdout"])
    argv = plan["arms"][0]["argv"]
    assert argv[argv.index("--api-key"):argv.index("--api-key") + 2] == ["--api-key", MASK]
    assert f"--api-key={MASK}" in argv
    assert "HARDEN_SET" in plan["arms"][0]["env_keys"]
    assert f"--api-key {MASK}" in texts[f"{['plan', str(path)]} stdout"].replace("'", "")
    assert not _leaks(list(planted.values()), texts)


def test_escapes_in_scenario_text_are_printed_visibly(scenario: Callable[..., Path], tmp_path: Path) -> None:
    """plan shows the command (sim_args carry escapes); a scenario name with escapes is shown or refused, never
    printed raw; run's live output shows the command (and whatever else it prints) with the escapes visible."""
    path = scenario("escapes", arms=("baseline", "cpu-16g"), engine={"sim_args": ["--fail-start", ESCAPES]})
    named = scenario("named", arms=("baseline",))
    data = yaml.safe_load(named.read_text())
    data["name"] = f"demo{ESCAPES}"
    data["engine"]["model"] = f"model{ESCAPES}"
    named.write_text(yaml.safe_dump(data), encoding="utf-8")
    outputs = []
    for args in (["plan", str(path)], ["plan", str(named)]):
        code, stdout, stderr, _ = _invoke(args, PLAN_LIMIT_S)
        assert code in (0, 2), stdout + stderr
        outputs.append(stdout + stderr)
    code, stdout, stderr, _ = _invoke(["run", str(path), "--out", str(tmp_path / "results"), "--no-validate"],
                                      RUN_LIMIT_S)
    assert code == 4, stdout + stderr  # the baseline refused to start: the run failed
    outputs.append(stdout + stderr)
    for text in outputs:
        assert "\x1b" not in text and "\r" not in text and "\x07" not in text, repr(text[-400:])
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x0dHIDDEN" in outputs[0], outputs[0]
    assert "\\x1b" in outputs[1], outputs[1]  # shown visibly, or named in the refusal
    assert "--fail-start '\\x1b]0;pwned\\x07\\x1b[2J\\x0dHIDDEN'" in outputs[2], outputs[2]  # the command


@pytest.mark.parametrize(("flag", "secret"), [
    ("--api-key", True), ("--hf-token", True), ("--auth-token", True), ("--db_password", True),
    ("--aws-secret-access-key", True), ("--credentials-file", True), ("--kv-cache-dtype", False),
    ("--kv-offloading-size", False), ("--max-num-batched-tokens", False), ("--enable-prompt-tokens-details", False),
    ("--tokenizer", False), ("--tokenizer-mode", False), ("--return-tokens-as-token-ids", False),
    ("--long-prefill-token-threshold", False), ("--ssl-keyfile", False), ("--max_num_tokens", False),
])
def test_secret_flag_rule(flag: str, secret: bool) -> None:
    assert is_secret_flag(flag) is secret
    masked = mask_argv(["serve", flag, "value-1234", f"{flag}=value-5678", "--port", "8000"])
    assert ("value-1234" not in masked and f"{flag}=value-5678" not in masked) is secret
    assert masked[-2:] == ["--port", "8000"]


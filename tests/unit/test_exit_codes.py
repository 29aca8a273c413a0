"""One exit-code enum: the verdicts' codes come from it, ``--help`` lists every code from it, and the README's table
names the same codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.exit_codes import COMPLETED_ROLLOUT, MEANINGS, VERDICT_EXIT_CODES, ExitCode, verdict_exit_code
from harness.schema.summary import Verdict

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_verdict_has_one_code_and_an_error_never_exits_1() -> None:
    assert set(VERDICT_EXIT_CODES) == set(Verdict.__args__)  # type: ignore[attr-defined]
    assert {verdict_exit_code(v) for v in ("go", "no-go", "hold", "slo-unmet")} == COMPLETED_ROLLOUT
    assert verdict_exit_code("failed") == ExitCode.FAILED != ExitCode.NO_GO
    assert ExitCode.BAD_INPUT not in COMPLETED_ROLLOUT and ExitCode.FAILED not in COMPLETED_ROLLOUT
    assert set(MEANINGS) == set(ExitCode)
    with pytest.raises(KeyError):
        verdict_exit_code("maybe")


def _readme_codes() -> set[int]:
    section = README.read_text().split("### Verdicts and exit codes", 1)[1].split("\n## ", 1)[0]
    return {int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)}


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help_lists_every_code_the_readme_lists(argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv, terminal_width=200)
    assert result.exit_code == 0, result.output
    listed = {int(m) for m in re.findall(r"^\W*(\d+)  [a-z-]+(?: [a-z]+)?:", result.output, flags=re.M)}
    assert _readme_codes() == {code.value for code in ExitCode} == listed

"""The simulator's fidelity table as data: what is checked against vLLM's code, what against published figures,
and what is only modelled (``harness/sim/fidelity.yaml``).

One table, three readers: ``harness/sim/README.md``'s "Fidelity" section is rendered from it
(``python -m harness.sim.fidelity --write`` rewrites the section between its markers; ``--check`` exits 1 when the
README and the data disagree, as ``tests/unit/predict/test_fidelity_sources.py`` does), and every PREDICTED report
(``harness predict``) carries its rows in the header.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core.safe_yaml import YamlInputError, load_yaml

Status = Literal["vllm-code", "published", "modelled"]
STATUS_TEXT: dict[str, str] = {
    "vllm-code": "checked against vLLM's code",
    "published": "checked against published figures",
    "modelled": "modelled only",
}
README_BEGIN = ("<!-- fidelity table: rendered from fidelity.yaml by `python -m harness.sim.fidelity --write`; "
                "edit the YAML, not this table -->")
README_END = "<!-- end of the fidelity table -->"
COLUMNS = ("part", "reference", "how", "tolerance", "result", "status")


class FidelityError(ValueError):
    """The shipped fidelity table cannot be read (a packaging or editing mistake, not user input)."""


class FidelityRow(BaseModel):
    """One part of the simulator and how far it is held against a reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    part: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    how: str = Field(min_length=1)
    tolerance: str = Field(min_length=1)
    result: str = Field(min_length=1)
    status: Status

    @property
    def status_text(self) -> str:
        """The status as the README and the reports say it."""
        return STATUS_TEXT[self.status]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rows: list[FidelityRow] = Field(min_length=1)


def load_fidelity() -> list[FidelityRow]:
    """The rows of ``harness/sim/fidelity.yaml``, validated."""
    text = resources.files("harness.sim").joinpath("fidelity.yaml").read_text(encoding="utf-8")
    try:
        return _Table.model_validate(load_yaml(text)).rows
    except (YamlInputError, ValidationError) as exc:
        raise FidelityError(f"harness/sim/fidelity.yaml: {exc}") from None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(rows: list[FidelityRow] | None = None) -> str:
    """The table as the README shows it (Markdown, one row per part)."""
    rows = load_fidelity() if rows is None else rows
    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    for row in rows:
        cells = [row.part, row.reference, row.how, row.tolerance, row.result, row.status_text]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def readme_section(readme: str) -> str:
    """The text between the README's fidelity markers (ValueError when the markers are missing)."""
    _head, sep, rest = readme.partition(README_BEGIN)
    body, sep2, _tail = rest.partition(README_END)
    if not sep or not sep2:
        raise ValueError(f"the README lacks the fidelity markers {README_BEGIN!r} ... {README_END!r}")
    return body.strip("\n")


def with_table(readme: str, rows: list[FidelityRow] | None = None) -> str:
    """The README text with the section between the markers replaced by the table."""
    readme_section(readme)  # the markers are there
    head, _, rest = readme.partition(README_BEGIN)
    _body, _, tail = rest.partition(README_END)
    return f"{head}{README_BEGIN}\n{markdown_table(rows)}\n{README_END}{tail}"


def _readme_path() -> Path:
    return Path(__file__).resolve().parent / "README.md"  # a source checkout's file (not package data)


def main(argv: list[str] | None = None) -> int:
    """``--write``: render the table into the README; ``--check``: exit 1 when they differ; neither: print it."""
    parser = argparse.ArgumentParser(prog="python -m harness.sim.fidelity", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite harness/sim/README.md's fidelity section")
    mode.add_argument("--check", action="store_true", help="exit 1 when the README's table differs from the data")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        print(markdown_table())
        return 0
    path = _readme_path()
    text = path.read_text(encoding="utf-8")
    if args.write:
        path.write_text(with_table(text), encoding="utf-8")
        return 0
    if readme_section(text) != markdown_table():
        print(f"{path}: the fidelity table differs from fidelity.yaml; run python -m harness.sim.fidelity --write",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

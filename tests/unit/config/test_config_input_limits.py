"""Units of the input limits: ``${NAME}`` references, the bounded YAML loader, JSON depth and special files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config.env_refs import UnsetEnvError, parse_reference, resolve_env, unset_references
from harness.core.input_files import InputFileError, iter_lines, open_regular, read_text
from harness.core.json_depth import json_too_deep
from harness.core.safe_yaml import YamlInputError, load_yaml


def test_env_references_resolve_like_the_shell() -> None:
    environ = {"SET": "v", "EMPTY": ""}
    env = {"A": "${SET}", "B": "${EMPTY}", "C": "${NOPE:-d}", "D": "${EMPTY:-d}", "E": "literal"}
    assert resolve_env(env, environ) == {"A": "v", "B": "", "C": "d", "D": "d", "E": "literal"}
    assert unset_references({"X": "${NOPE}", "Y": "${NOPE:-}"}, environ) == [("X", "NOPE")]
    with pytest.raises(UnsetEnvError, match=r"engine.env.X: \$\{NOPE\} is not set"):
        resolve_env({"X": "${NOPE}"}, environ)


@pytest.mark.parametrize("value", ["${A", "x${A}", "${A}x", "${1A}", "${A:-b}c"])
def test_partial_references_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="whole reference"):
        parse_reference(value)


def test_yaml_bounds() -> None:
    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(YamlInputError, match="cyclic"):
        load_yaml("&a [*a]")
    with pytest.raises(YamlInputError, match="deeper than 64"):
        load_yaml("a:\n" + "".join("  " * i + "- \n" for i in range(1, 70)))
    with pytest.raises(YamlInputError, match="line 2, column 1: key 'a' appears twice"):
        load_yaml("a: 1\na: 2\n")
    with pytest.raises(YamlInputError, match="line 1, column 3: a mapping key must be a plain value"):
        load_yaml("? [a, b]\n: 1\n")


def test_json_depth() -> None:
    assert not json_too_deep('{"a": [[1]], "s": "' + "[" * 500 + '"}')
    assert json_too_deep("[" * 65 + "]" * 65)
    assert not json_too_deep("[" * 64 + "]" * 64)


def test_special_files_and_caps(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match="FIFO"):
        open_regular(fifo, max_bytes=10)
    with pytest.raises(InputFileError, match="device"):
        read_text("/dev/zero", max_bytes=10)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(InputFileError, match="is 11 bytes"):
        read_text(big, max_bytes=10)
    lines = tmp_path / "lines"
    lines.write_bytes(b"ok\n" + b"y" * 20 + b"\n")
    with open_regular(lines, max_bytes=100) as handle, pytest.raises(InputFileError, match=r"lines:2: .*longer"):
        list(iter_lines(handle, "lines", max_line_bytes=10, max_bytes=100))

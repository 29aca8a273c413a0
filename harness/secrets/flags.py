"""Which command-line flags carry secrets, and command lines with their values masked or made references.

The rule (applied to every command line the harness builds or records: ``engine.extra_args``, ``engine.sim_args``,
the engines' own launch commands, docker commands): a long flag ``--name`` (also ``--name=value``) is secret when
one of its words (``name`` split at ``-``, ``_`` and ``.``) contains ``token``, ``key``, ``secret``, ``password``,
``passwd``, ``credential``, ``auth`` or ``signature`` (:func:`harness.secrets.names.is_secret_key`) --
``--api-key``, ``--hf-token``, ``--auth-token``, ``--db_password`` -- except where the word names something that
is not a credential:

* counts and tokenizers: the words ``tokens``, ``tokenizer*``, ``tokeniz*`` (vLLM's ``--max-num-batched-tokens``,
  ``--enable-prompt-tokens-details``, ``--tokenizer``, ``--tokenizer-mode``, ``--skip-tokenizer-init``,
  TensorRT-LLM's ``--max_num_tokens``);
* a secret word followed by a word that makes it a quantity or an id: ``id``, ``ids``, ``threshold``, ``budget``,
  ``limit``, ``size``, ``len``, ``count`` (``--return-tokens-as-token-ids``, ``--long-prefill-token-threshold``);
* words that merely contain the letters: ``keyfile`` and ``certfile`` (``--ssl-keyfile`` names a file),
  ``keyword``, ``keywords``, ``author``, ``monkey``.

KV-cache flags (``--kv-cache-dtype``, ``--kv-offloading-size``) say ``kv``, not ``key``: never masked.
The value is the text after ``=``, or else the next argument unless that starts with ``--`` (a secret-looking
switch followed by another flag has no value). A value written as a ``${NAME}`` reference is not a secret and is
kept as it is.

Every other argument is scanned for the secrets a value can hold (:mod:`harness.secrets.forms`): a JSON value's
entries under secret-looking keys (``--model-loader-extra-config '{"s3_secret_access_key": ...}'``), URL
credentials (``--otlp-traces-endpoint http://user:pass@host:4317``), ``key=value`` pairs and credential headers.
:func:`mask_argv` masks all of them for what is shown or recorded; the launched command keeps the real values.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence

from harness.secrets.forms import scan
from harness.secrets.names import MASK, is_secret_key, is_secret_name

REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
# In free text (server logs, messages): ``--flag=value`` or ``--flag value``; quoted values as one piece.
_IN_TEXT = re.compile(r"(?<![\w-])(--[A-Za-z][\w.-]*)(=|[ \t]+)('[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+)")


def is_secret_flag(flag: str) -> bool:
    """True when a flag (``--api-key``; dashes and any ``=value`` allowed) carries a secret by the rule above."""
    return is_secret_key(flag.split("=", 1)[0].lstrip("-"))


def _value_positions(argv: Sequence[str]) -> list[tuple[int, str, bool]]:
    """(index, flag, inline) of every secret value in ``argv``: inline for ``--flag=value``."""
    out: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and is_secret_flag(arg):
            flag, eq, value = arg.partition("=")
            if eq:
                if value and not REFERENCE.match(value):
                    out.append((i, flag, True))
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                if argv[i + 1] and not REFERENCE.match(argv[i + 1]):
                    out.append((i + 1, flag, False))
                i += 1
        i += 1
    return out


def value_slots(argv: Sequence[str]) -> dict[int, tuple[str, str, str]]:
    """index -> (text before the value, flag, value) for each secret flag value in ``argv``."""
    out: dict[int, tuple[str, str, str]] = {}
    for i, flag, inline in _value_positions(argv):
        out[i] = (f"{flag}=", flag, argv[i].partition("=")[2]) if inline else ("", flag, argv[i])
    return out


def secret_flag_values(argv: Sequence[str]) -> list[str]:
    """The values of secret flags in ``argv`` (``${NAME}`` references are not values)."""
    return [value for _, _, value in value_slots(argv).values()]


def replace_secret_values(argv: Sequence[str], replacement: Callable[[str, str], str]) -> list[str]:
    """``argv`` with each secret flag value replaced by ``replacement(flag, value)``."""
    out = list(argv)
    for i, (prefix, flag, value) in value_slots(argv).items():
        out[i] = prefix + replacement(flag, value)
    return out


def _embedded(arg: str) -> tuple[str, list[str]]:
    """One argument that is not a secret flag's value, with the secrets inside it masked (a JSON value, a URL,
    ``key=value`` pairs, a header; after the ``=`` of ``--flag=value``): :func:`harness.secrets.forms.scan`."""
    flag, eq, value = arg.partition("=")
    if eq and arg.startswith("--"):
        masked, found = scan(value)
        return f"{flag}={masked}", found
    return scan(arg)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret masked: secret flag values become ``***`` (the flag itself stays, so a reviewer
    sees it), and secrets inside other arguments (JSON under secret keys, URL credentials, ``key=value`` pairs,
    credential headers) are masked in place."""
    slots = value_slots(argv)
    return [f"{slots[i][0]}{MASK}" if i in slots else _embedded(arg)[0] for i, arg in enumerate(argv)]


def argv_secret_values(argv: Sequence[str]) -> list[str]:
    """Every secret value on a command line: secret flag values and the secrets inside other arguments."""
    slots = value_slots(argv)
    out = [value for _, _, value in slots.values()]
    for i, arg in enumerate(argv):
        if i not in slots:
            out += _embedded(arg)[1]
    return out


def mask_embedded(arg: str) -> str:
    """One argument with the secrets inside it masked (what :func:`mask_argv` does to an argument that is not a
    secret flag's value)."""
    return _embedded(arg)[0]


def masked_command_line(argv: Sequence[str]) -> str:
    """The command as one shell-quoted line, every secret masked (:func:`mask_argv`)."""
    return shlex.join(mask_argv(argv))


def mask_flags_in_text(text: str) -> str:
    """Free text (a log line, a message) with the values of secret-looking ``--flag value`` pairs masked."""
    if "--" not in text:
        return text

    def sub(match: re.Match[str]) -> str:
        flag, sep, value = match.group(1), match.group(2), match.group(3)
        if not is_secret_flag(flag) or value.startswith("-") or REFERENCE.match(value.strip("'\"")) \
                or value.strip("'\"") == MASK:
            return match.group(0)
        return f"{flag}{sep}{MASK}"

    return _IN_TEXT.sub(sub, text)


def reference_name(flag: str, value: str, environ: Iterable[tuple[str, str]] | None = None) -> str:
    """The environment variable a reproduction reads a secret flag's value from.

    The variable that holds this value in the harness's environment when there is one (secret-looking names
    first), else the flag's name in upper snake case (``--hf-token`` -> ``HF_TOKEN``)."""
    pairs = sorted(environ if environ is not None else os.environ.items())
    holders = [name for name, held in pairs if held == value and re.fullmatch(r"[A-Za-z_]\w*", name)]
    if holders:
        return sorted(holders, key=lambda n: (not is_secret_name(n), n))[0]
    name = re.sub(r"\W+", "_", flag.lstrip("-")).strip("_").upper()
    return name if re.fullmatch(r"[A-Z_]\w*", name) else f"SECRET_{name}"

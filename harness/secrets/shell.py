"""Secrets on a shell command line (an external arm's ``restart_command`` / ``clear_cache_command``): found and
masked token by token.

The line is split as ``/bin/sh`` would (quotes, ``;``, ``&&``, ``||``, ``|``, ``&``, parentheses), each simple
command on its own. In every one:

* ``NAME=value`` assignments before the command and after ``env`` (and ``sudo``, ``nohup``, ``timeout``...):
  the value when NAME is secret-looking (``DB_PASSWORD=x cmd``, ``env HF_TOKEN=x cmd``, ``PGPASSWORD=x psql``);
* long secret flags of any tool (``--password x``, ``--token=x``; :func:`harness.secrets.flags.is_secret_flag`),
  a value that starts with ``-`` being the next option, not a value;
* the options of known tools that take a password (the tool is the command word's base name):
  ``sshpass -p`` (what follows its options is another command), ``mysql``/``mariadb``/``mysqldump``/``mysqladmin
  -pPASS`` (attached only: ``-p`` alone prompts),
  ``redis-cli -a`` / ``--pass``, ``mongosh``/``mongo -p``, ``ipmitool -P``, ``docker``/``podman``/``nerdctl login
  -p``; ``user:password`` options: ``curl -u``/``--user``/``-U``/``--proxy-user``, ``http``/``https`` (HTTPie)
  ``-a``/``--auth`` (the user is kept, the password masked). ``-p`` of any other tool is left alone:
  ``docker run -p 8000:8000`` maps a port, ``psql -p 5432`` and ``ssh -p 22`` name one;
* a quoted command line given to a shell (``sh -c '...'``, ``ssh host '...'``, ``docker exec c sh -c '...'``),
  read the same way (up to 4 levels deep);
* inside every token, what a value can hold (:mod:`harness.secrets.forms`): URL credentials, ``-H 'Authorization:
  Bearer x'`` and other credential headers, JSON under secret keys (``-d '{"password": ...}'``), ``key=value``
  pairs (``-d 'user=u&password=x'``, ``docker -e DB_PASSWORD=x``).

:func:`mask_shell_command` returns the line re-quoted with the masks (unchanged when nothing was masked);
:func:`shell_secret_values` the values, for the run's redactor. A line that does not parse is masked as free text.
"""

from __future__ import annotations

import os
import shlex

from harness.secrets.flags import REFERENCE, is_secret_flag
from harness.secrets.forms import mask_text, scan
from harness.secrets.names import MASK, is_secret_key

_OPERATOR_CHARS = frozenset("();<>|&")
_WRAPPERS = frozenset({"env", "sudo", "nohup", "exec", "command", "time", "nice", "ionice", "timeout", "stdbuf",
                       "doas", "setsid"})
_WRAPPER_ARGS = {"timeout": 1}  # wrappers that take positional arguments before the command (timeout 30 cmd)
_PASSWORD_OPTIONS: dict[str, frozenset[str]] = {
    "sshpass": frozenset({"-p"}), "redis-cli": frozenset({"-a", "--pass"}), "mongosh": frozenset({"-p"}),
    "mongo": frozenset({"-p"}), "ipmitool": frozenset({"-P"}),
}
_ATTACHED_ONLY: dict[str, str] = {"mysql": "-p", "mariadb": "-p", "mysqldump": "-p", "mysqladmin": "-p"}
_USERINFO_OPTIONS: dict[str, frozenset[str]] = {
    "curl": frozenset({"-u", "--user", "-U", "--proxy-user"}), "http": frozenset({"-a", "--auth"}),
    "https": frozenset({"-a", "--auth"}),
}
_LOGIN_TOOLS = frozenset({"docker", "podman", "nerdctl"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ssh", "su", "kubectl", "docker", "podman"})
_MAX_NESTING = 4  # sh -c "ssh host 'sudo ...'": how deep a quoted command line is read as one
_RUNS_COMMAND = frozenset({"sshpass"})  # its first argument that is not an option starts another command


class _Masker:
    """The tokens of one command line, masked in place; the values masked are collected."""

    def __init__(self, tokens: list[str], depth: int) -> None:
        self.tokens = list(tokens)
        self.found: list[str] = []
        self.depth = depth

    def secret(self, i: int, prefix: str = "") -> None:
        """Token ``i`` (after ``prefix``) is a secret value."""
        value = self.tokens[i][len(prefix):]
        if value and value != MASK and not REFERENCE.match(value):
            self.found.append(value)
            self.tokens[i] = prefix + MASK

    def userinfo(self, i: int, prefix: str = "") -> None:
        """Token ``i`` (after ``prefix``) is ``user:password``: the password is the secret."""
        user, colon, password = self.tokens[i][len(prefix):].partition(":")
        if colon and password and not REFERENCE.match(password):
            self.found.append(password)
            self.tokens[i] = f"{prefix}{user}:{MASK}"

    def embedded(self, i: int, tool: str = "") -> None:
        """Secrets inside token ``i``; a token with blanks given to a shell (``sh -c``, ``ssh host``, ``docker
        exec``) is read as a command line of its own."""
        token = self.tokens[i]
        if tool in _SHELLS and " " in token.strip() and self.depth < _MAX_NESTING:
            masked, found = _scan_command(token, self.depth + 1)
        else:
            masked, found = scan(token)
        if found:
            self.found += found
            self.tokens[i] = masked


def _is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _OPERATOR_CHARS


def _tokens(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    return list(lex)


def _simple_commands(tokens: list[str]) -> list[range]:
    """The index ranges of the simple commands between operators."""
    out, start = [], 0
    for i, token in enumerate([*tokens, ";"]):
        if _is_operator(token):
            if i > start:
                out.append(range(start, i))
            start = i + 1
    return out


def _assignment(token: str) -> tuple[str, str] | None:
    name, eq, value = token.partition("=")
    return (name, value) if eq and name.isidentifier() else None


def _mask_simple(m: _Masker, span: range) -> None:
    tokens = m.tokens
    tool, tool_at, positional = "", -1, 0
    for i in span:  # assignments and wrappers before the command word
        token = tokens[i]
        pair = _assignment(token)
        if pair is not None:
            if is_secret_key(pair[0]):
                m.secret(i, pair[0] + "=")
            else:
                m.embedded(i)
            continue
        base = os.path.basename(token)
        if tool and token.startswith("-"):
            continue
        if base in _WRAPPERS:
            tool, positional = base, _WRAPPER_ARGS.get(base, 0)
            continue
        if positional:
            positional -= 1
            continue
        tool, tool_at = base, i
        break
    if tool_at < 0:
        return
    rest = [i for i in span if i > tool_at]
    options = _PASSWORD_OPTIONS.get(tool, frozenset())
    if tool in _LOGIN_TOOLS and any(tokens[i] == "login" for i in rest[:3]):
        options = frozenset({"-p"})
    userinfo = _USERINFO_OPTIONS.get(tool, frozenset())
    skip: set[int] = set()
    for n, i in enumerate(rest):
        if i in skip:
            continue
        token = tokens[i]
        nxt = rest[n + 1] if n + 1 < len(rest) else None
        takes_next = nxt is not None and not tokens[nxt].startswith("-")
        flag, eq, _ = token.partition("=")
        if token in options or token in userinfo:
            if takes_next and nxt is not None:
                (m.secret if token in options else m.userinfo)(nxt)
                skip.add(nxt)
            continue
        if token.startswith("--") and is_secret_flag(flag):
            if eq:
                m.secret(i, flag + "=")
            elif takes_next and nxt is not None:
                m.secret(nxt)
                skip.add(nxt)
            continue
        if eq and token.startswith("--") and flag in userinfo:
            m.userinfo(i, flag + "=")
            continue
        short = next((o for o in (*options, *userinfo) if len(o) == 2 and token.startswith(o) and len(token) > 2),
                     None)
        attached = _ATTACHED_ONLY.get(tool)
        if short is None and attached and token.startswith(attached) and len(token) > 2:
            short = attached
        if short is not None:
            (m.userinfo if short in userinfo else m.secret)(i, short)
            continue
        if tool in _RUNS_COMMAND and not token.startswith("-"):
            _mask_simple(m, range(i, span.stop))
            return
        m.embedded(i, tool)


def _scan_command(command: str, depth: int = 0) -> tuple[str, list[str]]:
    try:
        tokens = _tokens(command)
    except ValueError:  # unbalanced quotes: refused at load; mask what free text shows
        return mask_text(command), []
    m = _Masker(tokens, depth)
    for span in _simple_commands(tokens):
        _mask_simple(m, span)
    if m.tokens == tokens:
        return command, []
    return " ".join(t if _is_operator(t) else shlex.quote(t) for t in m.tokens), m.found


def mask_shell_command(command: str) -> str:
    """The command line with every secret it carries masked (re-quoted when anything was)."""
    return _scan_command(command)[0]


def shell_secret_values(command: str) -> list[str]:
    """The secret values on a shell command line."""
    return _scan_command(command)[1]

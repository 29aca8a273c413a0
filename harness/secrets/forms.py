"""Secrets inside one value: the forms a credential takes in a URL, a JSON document, a ``key=value`` list or an
HTTP header, found and masked by one function, :func:`scan`.

* URL userinfo (anywhere in the text): ``http://user:pass@host`` -> ``http://user:***@host``; a user without a
  password is a token (``https://<token>@github.com``) -> ``https://***@host``;
* URL query and fragment parameters whose name is secret-looking (:func:`harness.secrets.names.is_secret_key`:
  ``token``, ``api_key``, ``X-Amz-Signature``, ``sig``...) and every ``X-Amz-*`` / ``X-Goog-*`` parameter;
* JSON (a value that is a JSON object or array): every value under a secret-looking key, at any depth (the document
  is re-serialised, compact); strings elsewhere are scanned for URLs;
* ``'key': 'value'`` pairs with quoted keys where the text is not JSON (a Python dict, a log line);
* ``name=value`` pairs with a secret-looking name at the start or after ``,``, ``;``, ``&`` or a blank
  (``a=1,secret_key=x``, ``DB_PASSWORD=x``);
* HTTP credential headers: ``Authorization: Bearer x`` -> ``Authorization: Bearer ***`` (``X-Api-Key: x``,
  ``Cookie: x``...); in a value (:func:`scan`) any secret-looking header name counts, in free text
  (:func:`mask_text`) only real header names (``Authorization``, ``Proxy-Authorization``, ``Cookie``,
  ``X-...``, ``...Api-Key``) so that ``key: value`` prose is left alone.

:func:`scan` returns the masked text and the values it masked (for a redactor that must find them again in text
the harness did not author, e.g. a server echoing its arguments). ``${NAME}`` references are never values.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, unquote_plus

from harness.secrets.names import MASK, is_secret_key

# Every repeat before a fixed part is bounded: these run on every line of a server's log (no quadratic backtracking
# on a hostile line such as "a.a.a.a...").
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>`]+")
_KV = re.compile(r"(?:^|(?<=[,;&\s]))([A-Za-z_][\w.-]*)=([^,;&\s]*)")
_QUOTED_KEY = re.compile(r"([\"'])([\w.-]{1,128})\1(\s{0,8}:\s{0,8})([\"'])(.{0,4096}?)(?<!\\)\4")
_HEADER = re.compile(r"^\s*([A-Za-z][\w-]*)(\s*:\s*)(.*)$", re.DOTALL)
_TEXT_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|x-[\w-]{1,64}|(?:\w{1,64}-)?api-key)"
                          r"(\s{0,8}:\s{0,8})"
                          r"((?:bearer|basic|token|digest|negotiate)\s+)?([^\s'\",;]+)")
_AUTH_SCHEME = re.compile(r"(?i)^((?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)(.+)$", re.DOTALL)
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_SECRET_PARAMS = frozenset({"sig", "pass", "pwd", "code", "session"})
_SECRET_HEADERS = frozenset({"cookie", "set-cookie"})
_MAX_JSON_CHARS = 1 << 20
_MAX_DEPTH = 64

Found = list[str]


def is_secret_param(name: str) -> bool:
    """True for a URL query parameter that carries a credential."""
    low = unquote_plus(name).lower()
    return is_secret_key(low) or low in _SECRET_PARAMS or low.startswith(("x-amz-", "x-goog-"))


def is_secret_header(name: str) -> bool:
    """True for an HTTP header whose value is a credential (``Authorization``, ``X-Api-Key``, ``Cookie``...)."""
    return is_secret_key(name) or name.lower() in _SECRET_HEADERS


def _keep(value: str, found: Found) -> str:
    """Record ``value`` as a secret (not a reference, not the mask itself) and return the mask."""
    if value and value != MASK and not _REFERENCE.match(value):
        found.append(value)
        decoded = unquote(value)
        if decoded != value:
            found.append(decoded)
        return MASK
    return value


def _mask_params(part: str, found: Found) -> str:
    pieces = []
    for piece in part.split("&"):
        name, eq, value = piece.partition("=")
        pieces.append(f"{name}={_keep(value, found)}" if eq and value and is_secret_param(name) else piece)
    return "&".join(pieces)


def mask_url(url: str, found: Found) -> str:
    """``url`` with its userinfo secret and its secret query/fragment parameters masked (values to ``found``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, host = netloc.rpartition("@")
    if at and userinfo:
        user, colon, password = userinfo.partition(":")
        netloc = f"{user}:{_keep(password, found)}@{host}" if colon else f"{_keep(user, found)}@{host}"
    path, hash_, fragment = tail.partition("#")
    path, qmark, query = path.partition("?")
    if qmark:
        path += "?" + _mask_params(query, found)
    if hash_:
        path += "#" + _mask_params(fragment, found)
    return f"{scheme}://{netloc}{path}"


def _mask_urls(text: str, found: Found) -> str:
    return _URL.sub(lambda m: mask_url(m.group(0), found), text) if "://" in text else text


def _mask_header_value(value: str, found: Found) -> str:
    scheme = _AUTH_SCHEME.match(value.strip())
    if scheme:
        return scheme.group(1) + _keep(scheme.group(2).strip(), found)
    return _keep(value.strip(), found)


def _mask_json(obj: Any, secret: bool, found: Found, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return MASK
    if isinstance(obj, dict):
        return {k: _mask_json(v, secret or is_secret_key(str(k)), found, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mask_json(v, secret, found, depth + 1) for v in obj]
    if isinstance(obj, bool) or obj is None:
        return obj
    if secret and isinstance(obj, str | int | float):
        return _keep(obj if isinstance(obj, str) else json.dumps(obj), found)
    return _mask_urls(obj, found) if isinstance(obj, str) else obj


def _as_json(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or len(stripped) > _MAX_JSON_CHARS:
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def _quoted_pair(m: re.Match[str], found: Found) -> str:
    if not is_secret_key(m.group(2)):
        return m.group(0)
    q, v = m.group(1), m.group(4)
    return f"{q}{m.group(2)}{q}{m.group(3)}{v}{_keep(m.group(5), found)}{v}"


def _mask_pairs(text: str, found: Found) -> str:
    """``'key': 'value'`` and ``name=value`` pairs under secret-looking names."""
    def plain(m: re.Match[str]) -> str:
        return f"{m.group(1)}={_keep(m.group(2), found)}" if m.group(2) and is_secret_key(m.group(1)) else m.group(0)

    if ":" in text and ("'" in text or '"' in text):
        text = _QUOTED_KEY.sub(lambda m: _quoted_pair(m, found), text)
    return _KV.sub(plain, text) if "=" in text else text


def scan(value: str) -> tuple[str, list[str]]:
    """One value (an argument, a header, a URL, a JSON document): the value with every secret form masked, and the
    secrets it held."""
    found: Found = []
    doc = _as_json(value)
    if doc is not None:
        masked_doc = _mask_json(doc, False, found)
        return (json.dumps(masked_doc, separators=(",", ":")) if found else value), found
    header = _HEADER.match(value)
    if header and not value.lstrip().startswith(("http:", "https:")) and is_secret_header(header.group(1)):
        return header.group(1) + header.group(2) + _mask_header_value(header.group(3), found), found
    masked = _mask_pairs(_mask_urls(value, found), found)
    return masked, found


def mask_value(value: str) -> str:
    """``value`` with every secret form masked (:func:`scan`)."""
    return scan(value)[0]


def value_secrets(value: str) -> list[str]:
    """The secrets one value holds (:func:`scan`)."""
    return scan(value)[1]


def mask_text(text: str) -> str:
    """Free text (a log line, an error message): URL credentials, credential headers and quoted secret keys
    masked; unlike :func:`scan` no ``name=value`` pairs and only real header names."""
    found: Found = []

    def header(m: re.Match[str]) -> str:
        if not is_secret_header(m.group(1)):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{_keep(m.group(4), found)}"

    text = _mask_urls(text, found)
    if ":" in text:
        text = _TEXT_HEADER.sub(header, text)
        if "'" in text or '"' in text:
            text = _QUOTED_KEY.sub(lambda m: _quoted_pair(m, found), text)
    return text

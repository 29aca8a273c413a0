"""What every secret rule shares: which names hold secrets, and the mask that replaces a value.

Two rules for names:

* :func:`is_secret_name` (environment variables): the name contains TOKEN, KEY, SECRET, PASSWORD, PASSWD,
  CREDENTIAL or AUTH anywhere (any case) -- broad on purpose, a variable's value is never needed in a record;
* :func:`is_secret_key` (flags, JSON keys, query parameters, header names, ``NAME=value`` pairs on a command line):
  one of the name's words (split at ``-``, ``_``, ``.``, blanks and camelCase humps) contains ``token``, ``key``,
  ``secret``, ``password``, ``passwd``, ``credential``, ``auth`` or ``signature``, except words that merely name
  something else: counts and tokenizers (``tokens``, ``tokeniz*``), files (``keyfile``, ``certfile``),
  ``keyword(s)``, ``author``, ``monkey``, and a secret word followed by ``id``, ``ids``, ``threshold``, ``budget``,
  ``limit``, ``size``, ``len`` or ``count`` (``max_num_tokens``, ``return_tokens_as_token_ids``), and ``key``
  followed by ``value(s)`` (``num_key_value_heads``). ``kv`` is not ``key``: ``kv_cache_dtype`` is never secret.
"""

from __future__ import annotations

import re

MASK = "***"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_STEM = re.compile(r"token|key|secret|passw(?:or)?d|credential|auth|signature", re.IGNORECASE)
_NOT_SECRET_WORD = re.compile(r"tokens|tokeniz\w*|keyfile|certfile|keywords?|author|monkey", re.IGNORECASE)
_QUALIFIERS = frozenset({"id", "ids", "threshold", "budget", "limit", "size", "len", "count"})
_KEY_VALUE = frozenset({"value", "values"})  # key_value: the K and V of attention (num_key_value_heads)
_WORD_SPLIT = re.compile(r"[-_.\s]+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_secret_name(name: str) -> bool:
    """True when an environment variable name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))


def is_secret_key(name: str) -> bool:
    """True when a flag, key, parameter or header name says its value is a credential (rule above)."""
    words = [w.lower() for w in _WORD_SPLIT.split(_CAMEL_HUMP.sub("_", name)) if w]
    for i, word in enumerate(words):
        if not _STEM.search(word) or _NOT_SECRET_WORD.fullmatch(word):
            continue
        if i + 1 < len(words) and (words[i + 1] in _QUALIFIERS or (word == "key" and words[i + 1] in _KEY_VALUE)):
            continue
        return True
    return False

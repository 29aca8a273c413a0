"""A fast path for Prometheus text exposition: the plain form servers write, parsed exactly as prometheus_client does.

Why hand-written: a run's summary parses every scrape of every step (hundreds of bodies of ~100-500 lines), and
``prometheus_client.parser.text_string_to_metric_families`` costs ~3-4 ms per filtered body (it walks each line
character by character in Python to honour quotes and escapes); this path parses the same body in a fraction of that
with one regular expression per line. It is **not** a second parser of the format: it accepts only the plain subset
and returns ``None`` for anything else, and the caller (:func:`harness.scrape.parse.parse_prometheus`) then parses
the body with prometheus_client as before. So the library stays the parser of record and the authority on errors.

The plain subset (every line of the body must be one of these, else ``None``):

* printable ASCII, tabs and newlines only (no escapes: no backslash anywhere);
* blank lines; comment lines (``# TYPE name type``, ``# HELP name text``, other comments) whose first three
  words hold no quote;
* samples ``name value`` or ``name{label="value",...} value``: a legacy metric name, label names that are legacy and
  not reserved (``__``), label values without quotes, no duplicate label, one value token (no timestamp, no
  exemplar) that ``int`` or ``float`` reads as the library does, holds no ``_`` and is not an integer too
  large for a float.

Within that subset it reproduces the library's results, family rules included: a sample whose name is not one of the
current family's (``_bucket``/``_sum``/``_count`` for a histogram, the name itself for a counter or gauge) starts an
untyped family of its own; a ``counter`` family whose name lacks ``_total`` has ``_total`` added to its samples' names
(the library's OpenMetrics munging); a ``# TYPE`` with an unknown type, a TYPE line without a type or an invalid name
would make the library raise, so such bodies go to it. ``tests/unit/scrape/test_scrape_textparse.py`` holds it to the
library on the simulator's vLLM and TensorRT-LLM expositions, the fixtures' real bodies and edge cases.
"""

from __future__ import annotations

import math
import re

Labels = dict[str, str]
Samples = dict[str, list[tuple[Labels, float]]]

_PLAIN = re.compile(r"[\t\n\x20-\x5b\x5d-\x7e]*")  # printable ASCII, tab and newline; no backslash
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"'
_SAMPLE = re.compile(rf'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_LABEL}(?:,{_LABEL})*,?)?)\}}[ \t]*|[ \t]+)([^\s{{"]+)')
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')
_TYPES = frozenset({"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset",
                    "untyped"})
_SUFFIXES = {"counter": ("",), "gauge": ("",), "summary": ("_count", "_sum", ""),
             "histogram": ("_count", "_sum", "_bucket")}
_LABEL_CACHE: dict[str, tuple[tuple[str, str], ...]] = {}
_LABEL_CACHE_MAX = 8192


class _Unhandled(Exception):
    """The body leaves the plain subset: the library parses it."""


def _labels(inner: str) -> tuple[tuple[str, str], ...]:
    pairs = _LABEL_CACHE.get(inner)
    if pairs is None:
        pairs = tuple(_PAIR.findall(inner))
        if len({k for k, _ in pairs}) != len(pairs) or any(k.startswith("__") for k, _ in pairs):
            raise _Unhandled  # duplicate or reserved label names: the library's errors
        if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
            _LABEL_CACHE.clear()
        _LABEL_CACHE[inner] = pairs
    return pairs


def _value(token: str) -> float:
    """The library's reading: ``int(token)`` where that works (so ``-0`` is 0.0, not -0.0), else ``float(token)``."""
    if "_" in token:
        raise _Unhandled  # the library refuses digit separators that int() and float() would accept
    if token.isdigit() or (token[0] in "+-" and token[1:].isdigit()):
        try:
            return float(int(token))
        except OverflowError:
            raise _Unhandled from None  # an integer beyond a float: the library's float() of it fails the same way
    try:
        return float(token)
    except ValueError:
        raise _Unhandled from None


class _Families:
    """The library's family state, kept only as far as it decides the samples' names."""

    def __init__(self) -> None:
        self.name = ""
        self.typ = "untyped"
        self.allowed: tuple[str, ...] = ()
        self.pending: list[tuple[str, Labels, float]] = []
        self.out: Samples = {}

    def emit(self, name: str, labels: Labels, value: float) -> None:
        if not math.isnan(value):
            self.out.setdefault(name, []).append((labels, value))

    def close(self) -> None:
        """The current family is built (the library's ``build_metric``) and its samples emitted."""
        if self.name == "":
            return
        if self.typ not in _TYPES or self.name == "_total":
            raise _Unhandled  # the library's Metric() refuses it
        rename = self.typ == "counter" and not self.name.endswith("_total")
        for name, labels, value in self.pending:
            self.emit(name + "_total" if rename else name, labels, value)
        self.pending = []

    def start(self, name: str, typ: str, allowed: tuple[str, ...]) -> None:
        self.close()
        self.name, self.typ, self.allowed = name, typ, allowed

    def comment(self, line: str) -> None:
        parts = line.split(None, 3)
        if len(parts) < 2 or any('"' in p for p in parts[:3]):
            if len(parts) >= 2:
                raise _Unhandled  # a quoted word changes how the library splits the line
            return
        if len(parts) == 2:
            if parts[1] in ("TYPE", "HELP"):
                raise _Unhandled
            return
        kind, candidate = parts[1], parts[2]
        if kind not in ("TYPE", "HELP"):
            return
        if _NAME.fullmatch(candidate) is None:
            raise _Unhandled  # the library raises on an invalid unquoted name
        if kind == "HELP":
            if candidate != self.name:
                self.start(candidate, "untyped", (candidate,))
            return
        if len(parts) < 4:
            raise _Unhandled
        if candidate != self.name:
            self.start(candidate, self.typ, ())
        self.typ = parts[3]
        self.allowed = tuple(candidate + s for s in _SUFFIXES.get(self.typ, ("",)))

    def sample(self, line: str) -> None:
        match = _SAMPLE.fullmatch(line)
        if match is None:
            raise _Unhandled
        name, inner, token = match.groups()
        labels = dict(_labels(inner)) if inner else {}
        value = _value(token)
        if name in self.allowed:
            self.pending.append((name, labels, value))
            return
        self.start("", "untyped", ())
        self.emit(name, labels, value)  # an untyped family of its own, as the library yields it


def parse_plain(text: str) -> Samples | None:
    """The samples of a plain exposition (name -> [(labels, value)], NaN left out) exactly as
    :func:`harness.scrape.parse.parse_prometheus` gets them from prometheus_client; None outside the plain subset."""
    if _PLAIN.fullmatch(text) is None:
        return None
    families = _Families()
    try:
        for raw in text.split("\n"):
            line = raw.strip()
            if not line:
                continue
            if line[0] == "#":
                families.comment(line)
            else:
                families.sample(line)
        families.close()
    except _Unhandled:
        return None
    return families.out

"""A memoising Prometheus text writer: byte for byte what ``prometheus_client.generate_latest`` writes.

``generate_latest`` re-validates and re-escapes every label name and value of every sample on every scrape; the
simulator's registries expose the same few hundred label sets each time (a 36-label ``cache_config_info``, ~300
histogram buckets), so most of a scrape's CPU went there. :class:`TextWriter` walks ``registry.collect()`` the way
``generate_latest`` does (legacy ``underscores`` escaping, the default; counters get ``_total``, ``info`` becomes a
gauge ``_info``, OpenMetrics-only ``_created``/``_gsum``/``_gcount`` samples are moved into a gauge after their
family, sorted by suffix) and keeps what depends only on names, documentation and label sets: the ``# HELP`` /
``# TYPE`` lines, escaped sample names and the rendered ``{...}`` label strings, each computed once by
prometheus_client's own escape functions. Values are formatted by prometheus_client's ``floatToGoString`` on
every render. Hand-written because prometheus_client has no cached writer; ``tests/unit/sim/test_exposition.py``
checks it against ``generate_latest`` on the simulator's registries (both flavours) at many states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from prometheus_client import utils as _prom_utils
from prometheus_client.openmetrics import exposition as _om

_go_string = cast(Callable[[float], str], _prom_utils.floatToGoString)  # untyped in prometheus_client
_escape_metric_name = cast(Callable[[str, str], str], _om.escape_metric_name)
_escape_label_name = cast(Callable[[str, str], str], _om.escape_label_name)
_escape_value = cast(Callable[[str, str, bool], str], _om._escape)  # the call generate_latest makes for values
_UNDERSCORES: str = _om.UNDERSCORES
_ALLOW_UTF8: str = _om.ALLOWUTF8
_OM_SUFFIXES = ("_created", "_gsum", "_gcount")
_CACHE_MAX = 65_536
"""Label strings kept before the cache starts afresh (a registry's label sets are a few hundred)."""


class _Collectable(Protocol):
    def collect(self) -> Iterable[Any]: ...


def _doc(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


class _Family:
    """What a metric family's text needs besides its samples (fixed by name, type and documentation)."""

    __slots__ = ("header", "om_headers", "om_names")

    def __init__(self, name: str, mtype: str, documentation: str) -> None:
        mname = name
        if mtype == "counter":
            mname = name + "_total"
        elif mtype == "info":
            mname = name + "_info"
            mtype = "gauge"
        elif mtype == "stateset":
            mtype = "gauge"
        elif mtype == "gaugehistogram":
            mtype = "histogram"
        elif mtype == "unknown":
            mtype = "untyped"
        esc = _escape_metric_name(mname, _UNDERSCORES)
        doc = _doc(documentation)
        self.header = f"# HELP {esc} {doc}\n# TYPE {esc} {mtype}\n"
        self.om_names = {name + suffix: suffix for suffix in _OM_SUFFIXES}
        self.om_headers: dict[str, str] = {}
        for suffix in _OM_SUFFIXES:
            om = _escape_metric_name(name + suffix, _UNDERSCORES)
            self.om_headers[suffix] = f"# HELP {om} {doc}\n# TYPE {om} gauge\n"


class TextWriter:
    """``generate_latest(registry)`` with the per-name and per-label-set work done once (one per registry)."""

    def __init__(self) -> None:
        self._families: dict[tuple[str, str, str], _Family] = {}
        self._names: dict[str, str] = {}
        self._labels: dict[tuple[tuple[str, str], ...], str] = {}

    def _name(self, name: str) -> str:
        esc = self._names.get(name)
        if esc is None:
            esc = self._names[name] = _escape_metric_name(name, _UNDERSCORES)
        return esc

    def _label_str(self, key: tuple[tuple[str, str], ...]) -> str:
        if len(self._labels) >= _CACHE_MAX:
            self._labels.clear()
        text = ",".join(f'{_escape_label_name(k, _UNDERSCORES)}="{_escape_value(v, _ALLOW_UTF8, False)}"'
                        for k, v in sorted(key))
        self._labels[key] = text = "{" + text + "}" if text else ""
        return text

    def _line(self, sample: Any) -> str:
        labels = sample.labels
        if labels:
            key = tuple(labels.items())
            labelstr = self._labels.get(key)
            if labelstr is None:
                labelstr = self._label_str(key)
        else:
            labelstr = ""
        ts = sample.timestamp
        timestamp = "" if ts is None else f" {int(float(ts) * 1000):d}"
        return f"{self._name(sample.name)}{labelstr} {_go_string(sample.value)}{timestamp}\n"

    def render(self, registry: _Collectable) -> bytes:
        """The exposition text of ``registry`` (UTF-8), as ``generate_latest(registry)`` returns it."""
        output: list[str] = []
        families = self._families
        line = self._line
        for metric in registry.collect():
            try:
                fkey = (metric.name, metric.type, metric.documentation)
                fam = families.get(fkey)
                if fam is None:
                    fam = families[fkey] = _Family(*fkey)
                output.append(fam.header)
                om_names = fam.om_names
                om_samples: dict[str, list[str]] = {}
                for s in metric.samples:
                    suffix = om_names.get(s.name)
                    if suffix is None:
                        output.append(line(s))
                    else:
                        om_samples.setdefault(suffix, []).append(line(s))
            except Exception as exception:
                exception.args = (exception.args or ("",)) + (metric,)
                raise
            for suffix, lines in sorted(om_samples.items()):
                output.append(fam.om_headers[suffix])
                output.extend(lines)
        return "".join(output).encode("utf-8")

"""Scrape bodies -> samples: Prometheus text (prometheus_client's parser) and TensorRT-LLM JSON iteration stats.

Prometheus text goes first through :func:`harness.scrape.textparse.parse_plain`, a fast path for the plain form
servers write that returns exactly the library's samples; any body outside that form is parsed by the library.

A parsed scrape is a :data:`Samples` mapping: sample name -> list of (labels, value). Prometheus sample names are kept
as exposed (``vllm:prompt_tokens_total``, ``..._bucket`` with ``le``). A TensorRT-LLM iteration entry is flattened to
dotted names (``kvCacheStats.reusedBlocks``) without labels, so one catalog format covers both.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from harness.scrape.textparse import parse_plain

Labels = dict[str, str]
Samples = dict[str, list[tuple[Labels, float]]]


class ParseError(ValueError):
    """A scrape body that is not valid Prometheus text / TensorRT-LLM JSON."""


@lru_cache(maxsize=32)
def _filter_regex(wanted: frozenset[str]) -> re.Pattern[str]:
    families = set(wanted)
    for name in wanted:
        for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
            if name.endswith(suffix):
                families.add(name[: -len(suffix)])
    samples = "|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True))
    types = "|".join(re.escape(n) for n in sorted(families, key=len, reverse=True))
    return re.compile(rf"^(?:(?:{samples})(?:[{{ \t])|# TYPE (?:{types})[ \t]).*$", re.MULTILINE)


def filter_exposition(text: str, keep: Iterable[str]) -> str:
    """Only the lines of an exposition that belong to the named samples (cheap pre-filter before parsing).

    ``keep`` holds sample names; TYPE lines are kept for those names and for their family names
    (``x_total`` -> ``x``, ``x_bucket`` -> ``x``), so the parser still knows each family's type.
    """
    wanted = frozenset(keep)
    if not wanted:
        return ""
    return "\n".join(m.group(0) for m in _filter_regex(wanted).finditer(text)) + "\n"


def parse_prometheus(text: str, keep: Iterable[str] | None = None) -> Samples:
    """Parse Prometheus text exposition; ``keep`` limits parsing to those sample names (faster on big pages)."""
    body = filter_exposition(text, keep) if keep is not None else text
    if keep is not None and not any(line and not line.startswith("#") for line in body.splitlines()):
        body = text  # nothing we look for: parse it all, so a body that is not an exposition is still an error
    plain = parse_plain(body)
    return plain if plain is not None else library_samples(body)


def library_samples(body: str) -> Samples:
    """The samples prometheus_client's parser reads from ``body`` (NaN left out); the parser of record."""
    samples: Samples = {}
    try:
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                value = float(sample.value)
                if math.isnan(value):
                    continue
                samples.setdefault(sample.name, []).append((dict(sample.labels), value))
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        raise ParseError(f"not valid Prometheus text: {exc}") from None
    return samples


def _flatten(prefix: str, obj: Any, out: Samples) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), value, out)
    elif isinstance(obj, bool):
        return
    elif isinstance(obj, int | float) and not (isinstance(obj, float) and math.isnan(obj)):
        out[prefix] = [({}, float(obj))]


def _entries(text: str) -> Iterator[Any]:
    stripped = text.strip()
    if not stripped:
        return
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        # JSON lines: one object per line.
        for number, line in enumerate(stripped.splitlines(), 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ParseError(f"not valid TensorRT-LLM JSON (line {number}: {exc.msg})") from None
        return
    if isinstance(doc, list):
        yield from doc
    else:
        yield doc


def parse_trtllm_json(text: str) -> list[Samples]:
    """TensorRT-LLM iteration stats (a JSON list, one object, or JSON lines) -> one Samples per iteration entry.

    ``[]`` (the queue was already drained) gives an empty list. Entries are ordered by ``iter`` when present.
    """
    entries: list[Samples] = []
    for entry in _entries(text):
        if not isinstance(entry, dict):
            raise ParseError(f"not valid TensorRT-LLM JSON: expected objects, got {type(entry).__name__}")
        flat: Samples = {}
        _flatten("", entry, flat)
        entries.append(flat)
    return sorted(entries, key=lambda e: e.get("iter", [({}, 0.0)])[0][1])

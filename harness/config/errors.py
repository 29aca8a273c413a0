"""Turn pydantic validation errors into the user's words: a field path and what would be valid.

Pydantic reports locations such as ``('arms', 1, 'offload', 'vllm-connector', 'cpu_bytes_to_use')``: the
``vllm-connector`` part is the tag of a discriminated union, not something the user wrote. :func:`format_loc` walks
the scenario models alongside the location, drops union tags only where a tagged union sits (so a dict key that
happens to read ``trtllm`` is kept), and :func:`explain` says what would be valid there (the keys of that section,
the kinds a union accepts, the field's own description).
"""

from __future__ import annotations

import difflib
import reprlib
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from harness.secrets.forms import mask_text
from harness.secrets.names import is_secret_name

_MAX_SHOWN = 80
_BOUND_TYPES = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_MAPPING_TYPES = {"model_type", "model_attributes_type", "dict_type"}


def _unwrap(node: Any) -> Any:
    """Strip ``Annotated`` and ``X | None``."""
    while True:
        if get_origin(node) is typing.Annotated:
            node = get_args(node)[0]
            continue
        if _is_union(node):
            members = [a for a in get_args(node) if a is not type(None)]
            if len(members) == 1:
                node = members[0]
                continue
        return node


def _is_union(node: Any) -> bool:
    return get_origin(node) in (Union, types.UnionType)


def _is_model(node: Any) -> bool:
    return isinstance(node, type) and issubclass(node, BaseModel)


def union_tags(node: Any, discriminator: str = "kind") -> dict[str, type[BaseModel]]:
    """The tags of a tagged union of models (``{'vllm-native': VllmNativeOffload, ...}``); empty if none."""
    node = _unwrap(node)
    if not _is_union(node):
        return {}
    out: dict[str, type[BaseModel]] = {}
    for member in get_args(node):
        if not _is_model(member):
            continue
        field = member.model_fields.get(discriminator)
        if field is None:
            continue
        for value in get_args(_unwrap(field.annotation)) if get_origin(_unwrap(field.annotation)) is Literal else ():
            out[str(value)] = member
    return out


class _Where:
    """Where a location ends: the user's path, the annotation there, and the model/field that holds it."""

    def __init__(self) -> None:
        self.path = ""
        self.node: Any = None
        self.parent: type[BaseModel] | None = None
        self.field: FieldInfo | None = None


def locate(loc: Iterable[int | str], root: Any) -> _Where:
    """Walk ``root`` (a model class) along a pydantic location."""
    where = _Where()
    node: Any = root
    for part in loc:
        node = _unwrap(node)
        if isinstance(part, int):
            where.path += f"[{part}]"
            args = get_args(node)
            node = args[0] if get_origin(node) in (list, tuple, set, frozenset) and args else None
            continue
        if isinstance(part, str) and part.startswith("function-"):
            continue  # validator wrappers are not part of the user's path
        tags = union_tags(node)
        if part in tags:
            node = tags[part]
            continue
        if _is_union(node) and ("[" in part or part in {getattr(a, "__name__", "") for a in get_args(node)}):
            continue  # the member type name pydantic adds for plain unions
        where.path += f".{part}" if where.path else str(part)
        if _is_model(node):
            where.parent = node
            where.field = node.model_fields.get(part)
            node = where.field.annotation if where.field is not None else None
        elif get_origin(node) in (dict, Mapping):
            args = get_args(node)
            where.parent, where.field = None, None
            node = args[1] if len(args) == 2 else None
        else:
            where.parent, where.field, node = None, None, None
    where.node = _unwrap(node)
    return where


def format_loc(loc: Iterable[int | str], root: Any) -> str:
    """Turn a pydantic error location under the model class ``root`` into a path like
    ``arms[1].offload.cpu_bytes_to_use``."""
    return locate(loc, root).path


_REPR = reprlib.Repr()  # keyword arguments only from Python 3.12
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 4, 4, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = _MAX_SHOWN, _MAX_SHOWN, 40


def _shown(value: Any) -> str:
    """The input echoed in a message: bounded before it is built (a shared structure is never expanded), URL
    credentials and credential headers masked (a refusal never shows what it refuses)."""
    text = _REPR.repr(mask_text(value) if isinstance(value, str) else value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def may_hold_secret(loc: Iterable[Any]) -> bool:
    """A field (path parts) whose value is never echoed in an error: environment values, command-line arguments
    and shell commands, secret-looking keys (their values can be tokens, and errors reach the terminal and CI logs)."""
    names = [str(part) for part in loc]
    return any(n.lower() == "env" or n.lower().endswith(("args", "command")) or is_secret_name(n) for n in names)


def _size_hint(limit: Any) -> str:
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit >= 1 << 30:
        return f" ({limit / (1 << 30):g} GiB)" if limit < 1 << 40 else f" ({limit / (1 << 40):g} TiB)"
    return ""


def _keys(model: type[BaseModel], limit: int | None = None) -> str:
    names = list(model.model_fields)
    if limit is not None and len(names) > limit:
        return ", ".join(names[:limit]) + ", ..."
    return ", ".join(names)


def explain(err: Mapping[str, Any], root: Any) -> tuple[str, str]:
    """``(path, message)`` for one pydantic error under the model class ``root`` (the scenario's, or a section's);
    the message says what would be valid."""
    loc = tuple(err.get("loc", ()))
    kind = str(err.get("type", ""))
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    ctx = err.get("ctx") or {}
    where = locate(loc, root)
    shown = _shown if not may_hold_secret(loc) else (lambda _value: "a value not shown: it may hold a secret")
    if kind == "extra_forbidden":
        parent = locate(loc[:-1], root).node
        key = str(loc[-1]) if loc else "?"
        if _is_model(parent):
            close = difflib.get_close_matches(key, list(parent.model_fields), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return where.path, f"unknown key {key!r}; {hint}valid keys here: {_keys(parent)}"
        return where.path, f"unknown key {key!r}"
    if kind == "managed_key" and {"keys", "fields", "whys"} <= set(ctx):
        # a passthrough mapping (e.g. FsTier.extra) naming keys the harness writes from sibling fields
        parent = where.path.rsplit(".", 1)[0] if "." in where.path else where.path
        parts = [f"{key!r} {why}; " + (f"set {parent}.{field} instead" if field else "remove it")
                 for key, field, why in zip(ctx["keys"], ctx["fields"], ctx["whys"], strict=True)]
        return where.path, "; ".join(parts)
    if kind == "missing":
        desc = where.field.description if where.field is not None else None
        return where.path, "required field is missing" + (f" ({desc})" if desc else "")
    if kind == "union_tag_invalid":
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        return where.path, f"unknown {disc} {ctx.get('tag')!r}; valid {disc}s: {ctx.get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        tags = ", ".join(union_tags(where.node, disc)) or "see the documentation"
        return where.path, f"{disc} is missing; give {disc}: one of {tags}"
    if kind in _MAPPING_TYPES:
        keys = f" with keys such as {_keys(where.node, 6)}" if _is_model(where.node) else ""
        return where.path, f"should be a mapping{keys} (got {shown(err.get('input'))})"
    if kind == "list_type":
        return where.path, f"should be a list (got {shown(err.get('input'))})"
    if kind in _BOUND_TYPES:
        limit = next(iter(ctx.values()), None)
        msg += _size_hint(limit)
    if "input" in err and not isinstance(err["input"], dict | list):
        desc = where.field.description if where.field is not None and kind != "value_error" else None
        return where.path, f"{msg} (got {shown(err['input'])})" + (f"; expected: {desc}" if desc else "")
    return where.path, msg

"""Bounded YAML for files a user gives the harness (scenarios, a run's scenario.yaml, simulator profiles).

PyYAML's safe loader builds only plain data, but it still accepts three things that hurt later:

* an **alias bomb** ("billion laughs"): ten anchors of ten aliases each compose into a few dozen nodes, yet every
  consumer that walks the data (validation, an error message's ``repr``, a JSON dump for the scenario hash) expands
  them to 10**10 values. After composing, :class:`BoundedSafeLoader` counts the nodes the document *expands* to
  (shared nodes counted as often as they are used, computed without expanding anything) and its depth, and refuses
  a document over :data:`MAX_NODES` / :data:`MAX_DEPTH` before any Python object is built; an anchor that contains
  an alias to itself (a cyclic document) is refused too;
* a key given twice in one mapping (PyYAML keeps the last silently);
* an unhashable key (``? [a, b]: 1``), which PyYAML reports with a ``TypeError``.

Every refusal is a :class:`YamlInputError` naming the line and column, and never echoes the input.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

try:  # libyaml's parser is ~10x faster than the pure-Python one; both construct only plain data
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

MAX_NODES = 100_000
"""Nodes a document may expand to (a shipped scenario has a few hundred)."""
MAX_DEPTH = 64
"""Nesting depth a document may reach (a shipped scenario reaches 6)."""


class YamlInputError(ValueError):
    """YAML that cannot be used: ``where`` is ``line L, column C`` (or empty), ``problem`` says why."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_bounds(root: yaml.Node, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a composed document that expands to more than ``max_nodes`` nodes, nests deeper than ``max_depth``
    or refers to itself; linear in the composed (not the expanded) size."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # bounded: each composed node is pushed at most twice (enter, leave) before it is memoised
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] > max_nodes:
                raise YamlInputError(_where(node.start_mark), f"the document expands to more than {max_nodes} "
                                     "values (anchors and aliases used as a YAML bomb?); write the values out")
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlInputError(_where(node.start_mark), "an alias refers to the anchor that contains it "
                                 "(a cyclic document)")
        if len(on_path) >= max_depth:
            raise YamlInputError(_where(node.start_mark), f"nested deeper than {max_depth} levels")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


class BoundedSafeLoader(_SafeLoader):
    """The safe loader with :func:`check_bounds` between composing and constructing, unique and hashable keys."""

    max_nodes = MAX_NODES
    max_depth = MAX_DEPTH

    def get_single_data(self) -> Any:
        """Compose the one document, check its bounds, then build it."""
        node = self.get_single_node()
        if node is None:
            return None
        check_bounds(node, self.max_nodes, self.max_depth)
        return self.construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        """A mapping whose keys are hashable and given once each."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise YamlInputError(_where(key_node.start_mark), "a mapping key must be a plain value (a string "
                                     "or a number), not a list or a mapping") from None
            if duplicate:
                raise YamlInputError(_where(key_node.start_mark), f"key {_short(key)} appears twice in the same "
                                     "mapping (keep one)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_yaml(text: str) -> Any:
    """Parse one YAML document into plain data; :class:`YamlInputError` (with the line) for anything refused."""
    try:
        return yaml.load(text, Loader=BoundedSafeLoader)  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise YamlInputError("", "malformed YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlInputError(_where(mark), f"malformed YAML: {_cut(str(problem))}") from None


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

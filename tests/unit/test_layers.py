"""The house's shape, enforced: one package per pipeline stage, data flowing one way, no import circles.

Every import in ``harness/`` (module level, inside functions and under ``TYPE_CHECKING`` alike) is read from the
source and checked against :data:`LAYERS`, the table of which package may import which (``docs/layout.md`` gives its
reasons). More rules:

* no module at ``harness/`` top level but ``cli.py``, ``__main__.py`` and the package's face ``__init__.py``;
* the package holds only the product: no benchmark, oracle, sample summary or test helper (they live in ``tools/``
  and ``tests/support/``, outside the wheel), and no harness module imports ``tools`` or ``tests``; ``tests/support``
  imports only ``harness``, ``tools`` only ``harness``, itself and ``tests.support``;
* no circle of imports between modules, of any length, whether the imports sit at module level or in functions;
* an import of a harness module inside a function is allowed only where it defers a heavy or optional dependency
  (:data:`HEAVY`, which that module pulls in at module level, directly or through others), never to dodge a circle.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"
TOOLS = ROOT / "tools"
SUPPORT = ROOT / "tests" / "support"

# Who may import whom: a package (the first name below ``harness.``) -> the packages it may import. Shared floors
# first, then the pipeline's stages in order (each may import the stages before it), the conductor, the face and
# the wings. A package may always import itself.
FLOORS = {
    "core": set(),
    "schema": {"core"},  # the exit codes (core.exit_codes): a summary's verdict -> its exit status
    "secrets": {"core"},
    "stats": {"schema"},
    "config": {"core", "secrets"},
    "host": {"core"},
    "rundir": {"core", "schema"},
    "trace": {"core"},
    "sim": {"core", "host"},
    "engines": {"core", "config", "sim"},
    "workload": {"core", "config", "trace"},
}
_BELOW_STAGES = {"core", "schema", "secrets", "stats", "config", "host", "rundir", "engines", "workload"}
STAGES = {
    "plan": _BELOW_STAGES,
    "launch": _BELOW_STAGES,
    "load": _BELOW_STAGES,
    "scrape": _BELOW_STAGES,
    "analysis": _BELOW_STAGES,
    "decision": _BELOW_STAGES | {"plan", "scrape", "analysis"},
    "report": _BELOW_STAGES | {"analysis"},  # never decision or run: a report renders a Summary
    # the virtual clock: launch and load in-process (the simulator's engine core, the load's step contract, scrapes)
    "virtual": _BELOW_STAGES | {"sim", "load", "scrape"},
    "run": _BELOW_STAGES | {"sim", "plan", "launch", "load", "scrape", "virtual", "analysis", "decision", "report"},
}
WINGS = {
    "predict": _BELOW_STAGES | {"sim", "report", "run"},  # harness predict: a scenario mapped onto the simulator
}
FACE = {
    "cli": set(FLOORS) | set(STAGES) | {"predict"},
    "__main__": {"cli"},
    "__init__": {"core"},
}
LAYERS: dict[str, set[str]] = {**FLOORS, **STAGES, **WINGS, **FACE}
TOP_LEVEL_MODULES = {"cli", "__main__", "__init__"}
# Names no module or package inside harness/ may have: benchmarks, the simulator's oracle replay, sample summaries and
# test helpers live in tools/ and tests/support/ (docs/layout.md, "Outside the package").
NOT_PRODUCT = re.compile(r"perf|decision_bench|bench|\w+_bench|oracle|sim_oracle|sample|sample_\w+|testing")
# What tools/ and tests/support/ may import of this repository (top-level names; outside packages are free).
OUTSIDE = {"tools": {"harness", "tools", "tests.support"}, "tests.support": {"harness", "tests.support"}}

# What an import inside a function may defer: heavy or optional dependencies (each costs a command that does not use
# it 0.1 s or more at start-up, or patches the standard library), and the engines' own packages (imported only by
# the validation scripts, inside the engine's interpreter). aiohttp is the simulator's web server: ~0.14 s.
HEAVY = {"pandas", "pyarrow", "docker", "locust", "gevent", "geventhttpclient", "matplotlib", "pynvml", "scipy",
         "aiohttp", "vllm", "tensorrt_llm", "torch"}
MAX_FLOORS = 10


@dataclass(frozen=True)
class Import:
    source: str       # importing module, dotted
    target: str       # the harness module it names (or the top-level name of an outside package)
    line: int
    in_function: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The harness module a dotted name lives in (``harness.a.b.func`` -> ``harness.a.b``)."""
    modules = _modules()
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
        inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, inside)


@cache
def _imports() -> tuple[Import, ...]:
    out: list[Import] = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node, in_function in _walk(tree, False):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" for a in node.names] if base.startswith("harness") else [base]
            for name in names:
                if name == "harness" or name.startswith("harness."):
                    target = _resolve(name)
                    if target is not None and target != module:
                        out.append(Import(module, target, node.lineno, in_function))
                else:
                    out.append(Import(module, name.split(".")[0], node.lineno, in_function))
    return tuple(out)


def _room(module: str) -> str:
    """The package a module belongs to (``harness.run.arm`` -> ``run``; ``harness.cli`` -> ``cli``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _harness_imports() -> list[Import]:
    return [i for i in _imports() if i.target.startswith("harness")]


def _where(imp: Import) -> str:
    return f"{_modules()[imp.source].relative_to(ROOT)}:{imp.line}: {imp.source} -> {imp.target}"


def test_every_package_is_in_the_table() -> None:
    rooms = {_room(m) for m in _modules()}
    assert rooms <= set(LAYERS), f"packages missing from LAYERS (add them with their floor): {rooms - set(LAYERS)}"


def test_no_loose_module_at_top_level() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in TOP_LEVEL_MODULES)
    assert not loose, f"harness/ holds only cli.py, __main__.py and __init__.py; move these into their stage: {loose}"


def test_imports_follow_the_layer_table() -> None:
    bad = []
    for imp in _harness_imports():
        src, dst = _room(imp.source), _room(imp.target)
        if src == dst:
            continue
        if dst not in LAYERS.get(src, set()):
            bad.append(_where(imp) + f"  ({src} may import: {', '.join(sorted(LAYERS.get(src, set()))) or 'nothing'})")
    assert not bad, "imports that break the layer table:\n" + "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for imp in _harness_imports():
        graph[imp.source].add(imp.target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_circle() -> None:
    graph = _graph()
    circles = _circles(graph)
    lines = []
    for circle in circles:
        members = set(circle)
        ties = [_where(i) for i in _harness_imports() if i.source in members and i.target in members]
        lines.append(" <-> ".join(circle) + "\n    " + "\n    ".join(ties))
    assert not circles, "import circles (function-level imports count too):\n" + "\n".join(lines)


def _heavy_closure() -> dict[str, set[str]]:
    """Per module: the heavy packages its module-level imports pull in, transitively."""
    direct: dict[str, set[str]] = {m: set() for m in _modules()}
    edges: dict[str, set[str]] = {m: set() for m in _modules()}
    for imp in _imports():
        if imp.in_function:
            continue
        if imp.target.startswith("harness"):
            edges[imp.source].add(imp.target)
        elif imp.target in HEAVY:
            direct[imp.source].add(imp.target)
    closure: dict[str, set[str]] = {}
    for module in _modules():
        seen, todo, heavy = {module}, [module], set()
        while todo:
            current = todo.pop()
            heavy |= direct[current]
            for nxt in edges[current] - seen:
                seen.add(nxt)
                todo.append(nxt)
        closure[module] = heavy
    return closure


def test_function_level_imports_only_defer_heavy_dependencies() -> None:
    closure = _heavy_closure()
    bad = []
    for imp in _imports():
        if not imp.in_function:
            continue
        if imp.target.startswith("harness") and not closure[imp.target]:
            bad.append(_where(imp))
    bad = sorted(set(bad))
    assert not bad, ("imports inside functions that defer nothing heavy (move them to the top of the module; "
                     "if that makes a circle, the code is in the wrong place):\n" + "\n".join(bad))


def _floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each package's floor: 1 + the highest floor of what it imports (packages as rooms)."""
    rooms: dict[str, set[str]] = {}
    for src, targets in graph.items():
        rooms.setdefault(_room(src), set()).update(_room(t) for t in targets if _room(t) != _room(src))
    floors: dict[str, int] = {}

    def floor(room: str, path: tuple[str, ...] = ()) -> int:
        if room in floors:
            return floors[room]
        if room in path:
            pytest.fail(f"packages import each other: {' -> '.join((*path, room))}")
        floors[room] = 1 + max((floor(r, (*path, room)) for r in rooms.get(room, ())), default=0)
        return floors[room]

    for room in rooms:
        floor(room)
    return floors


def test_at_most_ten_floors() -> None:
    floors = _floors(_graph())
    top = max(floors.values())
    assert top <= MAX_FLOORS, f"{top} import floors: {sorted(floors.items(), key=lambda kv: kv[1])}"


def test_the_checker_sees_what_it_must() -> None:
    """The rules above can fail: a known import, a known circle and a known lazy import are found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    found = {(i.source, i.target) for i in _harness_imports()}
    assert ("harness.cli", "harness.core.term") in found
    assert any(i.in_function and i.target == "pyarrow" for i in _imports())
    assert all(NOT_PRODUCT.fullmatch(n) for n in ("perf", "bench", "drift_bench", "oracle", "sample_stats", "testing"))
    assert not any(NOT_PRODUCT.fullmatch(n) for n in ("samples", "sampler", "embedded", "benchmark_notes"))
    assert any(t.startswith("harness.") for _, _, t in _outside_imports(TOOLS))
    assert any(t == "tests.support.sample" for _, _, t in _outside_imports(TOOLS))


def test_the_package_holds_only_the_product() -> None:
    found = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*")
                   if (p.is_dir() or p.suffix == ".py") and p.name != "__pycache__"
                   and NOT_PRODUCT.fullmatch(p.stem if p.is_file() else p.name))
    assert not found, f"benchmarks and test tooling belong in tools/ or tests/support/, not the package: {found}"


def test_no_harness_module_imports_tools_or_tests() -> None:
    bad = [_where(i) for i in _imports() if i.target in ("tools", "tests")]
    assert not bad, "the product never imports tools/ or tests/:\n" + "\n".join(bad)


def _outside_imports(folder: Path) -> Iterator[tuple[Path, int, str]]:
    """Every import of a module of this repository (harness, tools, tests) in ``folder``: (file, line, name)."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, _ in _walk(tree, False):
            if isinstance(node, ast.ImportFrom) and node.level:
                yield path, node.lineno, "." * node.level + (node.module or "")
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name.split(".")[0] in ("harness", "tools", "tests"):
                    yield path, node.lineno, name


@pytest.mark.parametrize(("name", "folder"), [("tools", TOOLS), ("tests.support", SUPPORT)])
def test_tools_and_test_support_import_only_what_they_may(name: str, folder: Path) -> None:
    allowed = OUTSIDE[name]
    bad = [f"{path.relative_to(ROOT)}:{line}: {target}" for path, line, target in _outside_imports(folder)
           if not any(target == a or target.startswith(a + ".") for a in allowed)]
    assert not bad, (f"{name} may import only {sorted(allowed)} of this repository (no relative imports):\n"
                     + "\n".join(bad))


def test_the_wheel_packages_only_harness() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["harness*"]

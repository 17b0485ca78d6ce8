"""The shape the design promises: no import cycle among refsim's modules, a domain that
knows nothing of JSON Schema, HTTP or request dicts, and a wire that never imports the host."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import refsim

ROOT = Path(refsim.__file__).parent


def _modules() -> dict[str, Path]:
    out = {"refsim": ROOT / "__init__.py"}
    for info in pkgutil.walk_packages([str(ROOT)], prefix="refsim."):
        spec = importlib.util.find_spec(info.name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            out[info.name] = Path(spec.origin)
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every refsim module `name` imports at module level, TYPE_CHECKING blocks included
    (a type-only import is a back-arrow too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    add(full if full in known else base)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
    visit(tree.body)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: {m for m in _imports(name, path, known) if m.startswith("refsim")}
            for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def test_no_import_cycle_among_refsims_modules() -> None:
    graph = _graph()
    assert len(graph) > 30
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_wire_imports_nothing_from_the_host() -> None:
    graph = _graph()
    wire = {name: deps for name, deps in graph.items() if name.startswith("refsim.wire")}
    assert wire
    for name, deps in wire.items():
        assert "refsim.host" not in deps, name
        assert "refsim" not in deps, f"{name} imports the package root (which imports the host)"


def test_the_domain_imports_no_json_schema() -> None:
    for name, path in _modules().items():
        if not name.startswith("refsim.domain"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        names |= {f"{n.module}.{a.name}" for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not {m for m in names if m.startswith(("jsonschema", "referencing"))}, name
        assert "refsim.schemas" not in names, name


def test_no_domain_entry_point_takes_a_request_dict() -> None:
    from refsim.domain.core import HostCore
    for name, fn in inspect.getmembers(HostCore, inspect.isfunction):
        if name.startswith("_"):
            continue
        for param in inspect.signature(fn).parameters.values():
            assert param.name not in ("body", "request"), f"HostCore.{name}({param.name})"
            assert "dict[str, Any]" not in str(param.annotation), f"HostCore.{name}({param})"

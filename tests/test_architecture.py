"""The shape the design promises: tiers whose imports run one way (domain < wire < host <
check < testing < zoo < demo, cli), no import cycle among refsim's modules, a domain that
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


def _imports(name: str, path: Path, known: set[str], *, everywhere: bool = False) -> set[str]:
    """Every refsim module `name` imports at module level, TYPE_CHECKING blocks included
    (a type-only import is a back-arrow too); with `everywhere`, inside functions too."""
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
    visit(list(ast.walk(tree)) if everywhere else tree.body)  # type: ignore[arg-type]
    return found


def _graph(*, everywhere: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: {m for m in _imports(name, path, known, everywhere=everywhere)
                   if m.startswith("refsim")}
            for name, path in modules.items()}


# The tiers, lowest first: a module may import its own tier and those below, never above.
# Each names the top-level packages and modules of `refsim` it holds.
TIERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("ground", frozenset({"data", "_version", "progress"})),
    ("domain", frozenset({"domain"})),
    ("wire", frozenset({"wire"})),
    ("host", frozenset({"host", ""})),  # "": the package root, which hands on the host
    ("check", frozenset({"check"})),
    ("testing", frozenset({"testing"})),
    ("zoo", frozenset({"zoo"})),
    ("demo", frozenset({"demo"})),
    ("cli", frozenset({"cli", "__main__"})),
)
# What `refsim/` may hold beside its packages: its face, and at most two modules more.
FACE = {"__init__.py", "__main__.py", "_version.py"}
LOOSE_MAX = 2
LINES_MAX = 1000
# A file past LINES_MAX says why in its first lines, after this phrase.
LONG_BECAUSE = "Longer than 1,000 lines because"


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _tier(module: str) -> int:
    for rank, (_, parts) in enumerate(TIERS):
        if _part(module) in parts:
            return rank
    raise AssertionError(f"{module} is in no tier: add it to TIERS")


def _back_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a tier to a higher one."""
    return sorted(f"{a} ({TIERS[_tier(a)][0]}) -> {b} ({TIERS[_tier(b)][0]})"
                  for a, deps in graph.items() for b in deps if _tier(b) > _tier(a))


def _package_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    parts: dict[str, set[str]] = {}
    for a, deps in graph.items():
        parts.setdefault(_part(a), set()).update(_part(b) for b in deps if _part(b) != _part(a))
    return _cycle(parts)


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
    assert set(_modules().values()) == set(ROOT.rglob("*.py"))  # every module is read
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_no_circle_between_files_lazy_imports_included() -> None:
    """A function that imports the module importing it closes a circle all the same."""
    cycle = _cycle(_graph(everywhere=True))
    assert cycle is None, " -> ".join(cycle or [])


def test_imports_run_one_way_through_the_tiers() -> None:
    """Lazy imports inside functions count: a function that imports upward is an arrow
    back up all the same."""
    graph = _graph(everywhere=True)
    assert {_part(m) for m in graph} <= {p for _, parts in TIERS for p in parts}
    assert _back_arrows(graph) == []
    assert _package_cycle(graph) is None


def test_the_tier_rule_finds_a_planted_back_arrow_and_package_cycle() -> None:
    planted = {"refsim.check.runner": {"refsim.zoo.faulty"},
               "refsim.zoo.faulty": {"refsim.check.assume"}}
    assert _back_arrows(planted) == [
        "refsim.check.runner (check) -> refsim.zoo.faulty (zoo)"]
    assert _package_cycle(planted) == ["check", "zoo", "check"]
    assert _back_arrows({"refsim.zoo.faulty": {"refsim.check.assume"}}) == []


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
        assert "refsim.wire.schemas" not in names, name


def test_no_domain_entry_point_takes_a_request_dict() -> None:
    from refsim.domain.core import HostCore
    for name, fn in inspect.getmembers(HostCore, inspect.isfunction):
        if name.startswith("_"):
            continue
        for param in inspect.signature(fn).parameters.values():
            assert param.name not in ("body", "request"), f"HostCore.{name}({param.name})"
            assert "dict[str, Any]" not in str(param.annotation), f"HostCore.{name}({param})"


# Where a verdict may be written: a judge (the package check/judges/) or an
# expectation class (check/expectations.py); findings.py defines the constructors.
VERDICT_HOMES = frozenset({"refsim.check.judges", "refsim.check.judges.answers",
                           "refsim.check.judges.content", "refsim.check.judges.controls",
                           "refsim.check.judges.echoes", "refsim.check.judges.replays",
                           "refsim.check.judges.timing", "refsim.check.judges.uniformity",
                           "refsim.check.expectations", "refsim.check.findings"})


def _verdicts_written(name: str, path: Path) -> list[str]:
    """Where a module builds a finding itself: a call of `check`, `fail`, `ok` or
    `Finding` imported from refsim.check.findings (or named through the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    makers = {alias.asname or alias.name for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module == "refsim.check.findings"
              for alias in node.names if alias.name in ("check", "fail", "ok", "Finding")}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in makers:
            found.append(f"{name}:{node.lineno} {func.id}(...)")
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
              and func.value.id == "findings" and func.attr in ("check", "fail", "ok")):
            found.append(f"{name}:{node.lineno} findings.{func.attr}(...)")
    return found


def test_every_verdict_is_written_in_a_judge_or_an_expectation_class() -> None:
    written = [w for name, path in _modules().items() if name not in VERDICT_HOMES
               for w in _verdicts_written(name, path)]
    assert written == []


def test_the_verdict_rule_finds_a_finding_built_elsewhere(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from refsim.check.findings import check as c\n"
                       "def judge(x):\n    return c('req', x == 1, 'x is one')\n",
                       encoding="utf-8")
    assert _verdicts_written("planted", planted) == ["planted:3 c(...)"]


def test_the_machine_fails_a_step_only_on_a_judges_finding() -> None:
    """The machine (refsim.testing.stateful and the sibling modules it is assembled from)
    raises a violation only in `judged`, on a judge's finding."""
    callers: set[str] = set()
    for path in (ROOT / "testing").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        callers |= {fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                    for node in ast.walk(fn) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name) and node.func.id == "expect"}
    assert sorted(callers) == ["judged"]


def test_the_package_root_holds_its_face_and_at_most_two_modules() -> None:
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name not in FACE)
    assert len(loose) <= LOOSE_MAX, f"loose modules in refsim/: {loose}: put them in a package"



def _too_long(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LINES_MAX and LONG_BECAUSE not in text[:2000]:
            out.append(f"{path.relative_to(root.parent)} ({text.count(chr(10))} lines)")
    return out


def test_no_source_file_runs_past_a_thousand_lines_without_a_reason() -> None:
    assert _too_long(ROOT) == []


def test_the_length_rule_finds_a_long_file(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (LINES_MAX + 1), encoding="utf-8")
    (package / "said.py").write_text(f'"""{LONG_BECAUSE} it must be."""\n' +
                                     "x = 1\n" * (LINES_MAX + 1), encoding="utf-8")
    assert _too_long(package) == [f"pkg/long.py ({LINES_MAX + 1} lines)"]

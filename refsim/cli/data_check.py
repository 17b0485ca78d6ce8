"""Does refsim's data load? Asked before `refsim serve` binds its port (a server that
answers every request with a 500 because a file is missing is worse than one that does not
start) and before any command reads `specs/` or `invariants/`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from refsim.data import paths

# Each file, and the function that loads it: imported only when asked, inside the check
# (a module that reads a file as it is imported would otherwise fail before the line).
_LOADERS = (
    ("specs/error-registry.json", "refsim.data.registry_codes", "registry"),
    ("specs/schemas/", "refsim.wire.schemas", "registry"),
    ("specs/fixtures/", "refsim.wire.catalog", "fixtures"),
    ("specs/fixtures/ (as eval suites)", "refsim.wire.suite_docs", "load_builtin"),
    ("specs/requirements.yaml", "refsim.check.registry", "load_registry"),
    ("specs/assumptions.yaml", "refsim.check.assume", "assumables"),
    ("invariants/invariants.yaml", "refsim.check.invariants", "load_invariants"),
    ("specs/classes.yaml", "refsim.check.classes", "load"),
)


def _loaders() -> list[tuple[str, Callable[[], Any]]]:
    def loader(module: str, name: str) -> Callable[[], Any]:
        return lambda: getattr(importlib.import_module(module), name)()
    return [(file, loader(module, name)) for file, module, name in _LOADERS]


def problem(smoke: bool = False) -> str | None:
    """Why the data does not load, in one line, or None. With `smoke`, a throwaway host also
    answers one eval run in process, which must not be a 5xx."""
    gone = paths.missing()
    if gone is not None:
        return gone
    for name, load in _loaders():
        try:
            load()
        except Exception as exc:  # any failure to load is the one line we print
            return (f"refsim's data does not load: {name} under {paths.ROOT}: " +
                _said(exc))
    if smoke:
        return _smoke()
    return None


def _said(exc: BaseException) -> str:
    """An error in one line; a YAML error with the line and column it found (1-based) and
    what it found there."""
    import yaml
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return (f"line {mark.line + 1}, column {mark.column + 1}: YAML {type(exc).__name__}: "
                f"{exc.problem or ''}" + (f" ({exc.context}" + (
                    f" begun at line {exc.context_mark.line + 1}, column "
                    f"{exc.context_mark.column + 1}" if exc.context_mark is not None else "")
                    + ")" if exc.context else ""))
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _smoke() -> str | None:
    from refsim.check.observe import KEY_A, SOURCE, eval_body
    from refsim.host import SimHost

    try:
        answer = SimHost(seed=0).request("POST", "/runs", api_key=KEY_A,
                                         json=eval_body(SOURCE))
    except Exception as exc:  # the host could not answer at all
        return f"refsim's reference host cannot answer an eval run: {type(exc).__name__}: {exc}"
    if answer.status >= 500:
        return (f"refsim's reference host answers an eval run with {answer.status}: "
               f"{answer.body[:200]!r}")
    return None

"""Does refsim's data load? Asked before `refsim serve` binds its port (a server that
answers every request with a 500 because a file is missing is worse than one that does not
start) and before any command reads `specs/` or `invariants/`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refsim import paths


def _loaders() -> list[tuple[str, Callable[[], Any]]]:
    from refsim import catalog, registry_codes, schemas, suite_docs
    from refsim.check import registry
    from refsim.check.invariants import load_invariants

    return [
        ("specs/error-registry.json", registry_codes.registry),
        ("specs/schemas/", schemas.registry),
        ("specs/fixtures/", catalog.fixtures),
        ("specs/fixtures/ (as eval suites)", suite_docs.load_builtin),
        ("specs/requirements.yaml", registry.load_registry),
        ("invariants/invariants.yaml", load_invariants),
    ]


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
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    if smoke:
        return _smoke()
    return None


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

"""Requirement ids come from specs/requirements.yaml: `req_id("0252.shape")` is the full id
there, and a short id the registry lacks fails at import, never mid-run."""

from __future__ import annotations

import functools

from refsim.check.registry import load_registry, short_id


@functools.cache
def _by_short() -> dict[str, str]:
    return {short_id(i): i for i in load_registry().ids}


def req_id(short: str) -> str:
    """The registry's full id for `short` (`0252.shape` -> `openwop.requirement.0252.shape`)."""
    try:
        return _by_short()[short]
    except KeyError:
        raise KeyError(f"{short!r} names no requirement in specs/requirements.yaml") from None

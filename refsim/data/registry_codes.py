"""The v2 error-code registry (specs/error-registry.json): each registered code's status."""

from __future__ import annotations

import functools
import json

from refsim.data import paths


@functools.cache
def registry() -> dict[str, int]:
    doc = json.loads((paths.SPECS / "error-registry.json").read_text(encoding="utf-8"))
    return {str(k): int(v) for k, v in doc["codes"].items()}


def registered_status(code: str, default: int) -> int:
    """The status a code is registered at, or `default` for a code the registry lacks."""
    return registry().get(code, default)

"""Canonical JSON (sorted keys, no spaces) and hashes over it.

Fixture matching compares canonical forms, and `argsHash` hashes one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    """A deterministic JSON text: sorted keys, compact separators, UTF-8 kept, and an
    integral number written the same whether it arrived as 1 or 1.0 (as RFC 8785 does)."""
    return json.dumps(_numbers(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)


def _numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers(v) for v in value]
    return value


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def is_json_value(value: Any) -> bool:
    """True when `value` is made only of JSON types (no NaN, no non-string keys)."""
    try:
        canonical(value)
    except (TypeError, ValueError):
        return False
    return True

"""Canonical JSON (sorted keys, no spaces) and hashes over it.

Fixture matching compares canonical forms, and `argsHash` hashes one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    """A deterministic JSON text: sorted keys, compact separators, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def is_json_value(value: Any) -> bool:
    """True when `value` is made only of JSON types (no NaN, no non-string keys)."""
    try:
        canonical(value)
    except (TypeError, ValueError):
        return False
    return True

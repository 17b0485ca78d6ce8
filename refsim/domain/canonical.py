"""Canonical JSON (sorted keys, no spaces) and hashes over it.

Fixture matching compares canonical forms, and `argsHash` hashes one.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def encoder(*, sort_keys: bool = False, compact: bool = False, ensure_ascii: bool = True,
            allow_nan: bool = True) -> Callable[[Any], str]:
    """`json.dumps` with these options, as a function built once.

    `json.dumps` with any option builds a `JSONEncoder` and then its C encoder on every call:
    half the cost of encoding a small document. This builds the C encoder once. It keeps no
    circular-reference markers (a cycle ends in RecursionError, where `json.dumps` raises
    ValueError); anything else is as `json.dumps` gives it, which a probe checks here. Falls
    back to the documented encoder when this Python's C encoder takes other arguments."""
    separators = (",", ":") if compact else (", ", ": ")
    documented = json.JSONEncoder(sort_keys=sort_keys, separators=separators,
                                  ensure_ascii=ensure_ascii, allow_nan=allow_nan).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return documented
    try:
        strings = (json.encoder.encode_basestring_ascii if ensure_ascii
                   else json.encoder.encode_basestring)
        encode = make(None, _refuse, strings, None, separators[1], separators[0],
                      sort_keys, False, allow_nan)

        def run(value: Any) -> str:
            return "".join(encode(value, 0))

        probe = {"b": [1, 2.5, "é\n", None, True, (3,)], "a": {"y": -0.0, "x": 10**20}}
        if run(probe) != documented(probe) or run("s") != '"s"':
            return documented
        try:
            nan = run(float("nan"))
        except ValueError:
            return documented if allow_nan else run
        return run if allow_nan and nan == "NaN" else documented
    except Exception:  # a different signature: fall back to the documented encoder
        return documented


_ENCODE: Callable[[Any], str] = encoder(sort_keys=True, compact=True, ensure_ascii=False,
                                        allow_nan=False)
_INTEGRAL_HINT = re.compile(r"[0-9]\.0(?=[,\]}]|$)")


def canonical(value: Any) -> str:
    """A deterministic JSON text: sorted keys, compact separators, UTF-8 kept, and an
    integral number written the same whether it arrived as 1 or 1.0 (as RFC 8785 does)."""
    try:
        text = _ENCODE(value)
        # Only an integral float below 2**53 is rewritten, and it always prints as "N.0"
        # (floats print with an exponent from 1e16 up, past 2**53): without that shape
        # ending a number there is nothing to rewrite and the value need not be walked
        # (the common case, "1.0.0" in a version string included). A string that holds
        # the shape only costs the walk, which then rewrites nothing.
        if ".0" not in text or _INTEGRAL_HINT.search(text) is None:
            return text
        return _ENCODE(_numbers(value))
    except RecursionError as exc:
        raise ValueError("the value is too deep or circular to be JSON") from exc


def _numbers(value: Any) -> Any:
    if isinstance(value, float):
        whole = integral(value)
        return value if whole is None else whole
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers(v) for v in value]
    return value


def integral(value: Any) -> int | None:
    """`value` as an integer where it is a JSON number with no fractional part (1, 1.0 and
    1e0 are one JSON value, and an integer to JSON Schema), else None (a bool is no number;
    nor is a float past 2**53, which no longer names one integer)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return None


def canonical_or_none(value: Any) -> str | None:
    """`canonical(value)`, or None when the value is no JSON."""
    try:
        return canonical(value)
    except (TypeError, ValueError):
        return None


def sha256_hex(value: Any) -> str:
    return sha256_text(canonical(value))


def sha256_text(text: str) -> str:
    """The hash `sha256_hex` gives a value whose canonical form is `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_json_value(value: Any) -> bool:
    """True when `value` is made only of JSON types (no NaN, no non-string keys)."""
    try:
        canonical(value)
    except (TypeError, ValueError):
        return False
    return True

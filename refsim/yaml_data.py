"""YAML data files read with libyaml's C loader where it is installed (several times faster
than the pure-Python one, which dominated `refsim check`), the safe Python loader otherwise."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """Parse YAML text safely (yaml.safe_load semantics)."""
    return yaml.load(text, Loader=_LOADER)

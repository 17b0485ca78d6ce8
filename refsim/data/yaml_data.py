"""YAML data files read with libyaml's C loader where it is installed (several times faster
than the pure-Python one, which dominated `refsim check`), the safe Python loader otherwise.

A parsed file is kept as JSON in a cache folder, by the SHA-256 of its text: reading that
JSON takes a twentieth of parsing the YAML (a tenth of `refsim check`'s start went to
parsing), and an edited file has another digest, so an entry is never stale. Only a
document that JSON carries exactly is kept (a YAML date or a number key would come back
changed, so such a file is parsed each time). The folder is `$REFSIM_CACHE_DIR`, else
`$XDG_CACHE_HOME/refsim`, else `~/.cache/refsim`; `REFSIM_CACHE_DIR=off` keeps nothing. A
folder that cannot be read or written is passed over silently (the file is parsed), and
the folder holds at most CACHE_MAX_FILES entries (the oldest go)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

CACHE_MAX_FILES = 256
_FORMAT = "1"  # bumped when what a cached entry holds changes


def _parse(text: str) -> Any:
    import yaml  # here: a start whose files are all cached does not import it
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def is_error(exc: BaseException) -> bool:
    """Whether `exc` is the YAML parser's (only a parse, never a cached read, raises one;
    asked without importing the parser where nothing was parsed)."""
    yaml = sys.modules.get("yaml")
    return yaml is not None and isinstance(exc, yaml.YAMLError)


def cache_dir() -> Path | None:
    """Where parsed files are kept, or None when caching is off."""
    named = os.environ.get("REFSIM_CACHE_DIR")
    if named:
        return None if named.lower() == "off" else Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "refsim"


def load(text: str) -> Any:
    """Parse YAML text safely (yaml.safe_load semantics)."""
    folder = cache_dir()
    if folder is None:
        return _parse(text)
    digest = hashlib.sha256(f"{_FORMAT}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    entry = folder / f"yaml-{digest}.json"
    try:
        return json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    data = _parse(text)
    _keep(folder, entry, data)
    return data


def _keep(folder: Path, entry: Path, data: Any) -> None:
    try:
        encoded = json.dumps(data, ensure_ascii=False, allow_nan=False)
        if json.loads(encoded) != data:  # JSON would not give it back as it is
            return
    except (TypeError, ValueError, RecursionError):
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        kept = sorted(folder.glob("yaml-*.json"), key=lambda p: p.stat().st_mtime)
        for old in kept[:max(0, len(kept) - CACHE_MAX_FILES + 1)]:
            old.unlink(missing_ok=True)
        partial = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        partial.write_text(encoded, encoding="utf-8")
        os.replace(partial, entry)  # whole or not at all, for a reader in another process
    except OSError:
        return

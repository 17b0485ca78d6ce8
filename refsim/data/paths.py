"""Where the editable data lives: `specs/` and `invariants/`.

A checkout (and an editable install) reads them at the top of the checkout, beside the
package, where a spec author edits them. A built wheel carries a copy as the package's
`_data/` (setup.py puts it there), found through importlib.resources whichever way refsim
was installed. REFSIM_ROOT, when set, names a folder holding both and wins."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def _root() -> Path:
    named = os.environ.get("REFSIM_ROOT")
    if named:
        return Path(named)
    packaged = Path(str(resources.files("refsim").joinpath("_data")))
    if (packaged / "specs").is_dir():
        return packaged
    return Path(__file__).resolve().parents[2]  # refsim/data/paths.py: the checkout


ROOT = _root()
SPECS = ROOT / "specs"
SCHEMAS = SPECS / "schemas"
FIXTURES = SPECS / "fixtures"
INVARIANTS = ROOT / "invariants"


def missing() -> str | None:
    """Why refsim's data cannot be found, in one line, or None."""
    for needed in (SPECS / "requirements.yaml", INVARIANTS / "invariants.yaml", SCHEMAS,
                   FIXTURES):
        if not needed.exists():
            how = ("REFSIM_ROOT names" if os.environ.get("REFSIM_ROOT") else "refsim looks in")
            return (f"refsim's data is missing: {how} {ROOT}, which has no "
                    f"{needed.relative_to(ROOT)} (reinstall refsim, or set REFSIM_ROOT to a "
                    "folder holding specs/ and invariants/)")
    return None


def install_hint(extra: str) -> str:
    """The pip command that adds the optional extra `extra` to refsim as it was installed:
    from a checkout (editable or not) that checkout's folder, else the package's name
    (refsim is on no package index: a name alone works only where a wheel was given)."""
    import json
    from importlib import metadata
    try:
        text = metadata.distribution("refsim").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    source = json.loads(text) if text else {}
    url = str(source.get("url", ""))
    if url.startswith("file://"):
        from urllib.parse import unquote, urlsplit
        folder = unquote(urlsplit(url).path)
        editable = bool(source.get("dir_info", {}).get("editable"))
        return f"pip install {'-e ' if editable else ''}'{folder}[{extra}]'"
    if (ROOT / "pyproject.toml").is_file():  # run from a checkout, not installed
        return f"pip install -e '{ROOT}[{extra}]'"
    return f"pip install 'refsim[{extra}]'"


def unread_checkout(cwd: Path | None = None) -> Path | None:
    """A refsim checkout at or above `cwd` whose specs/ or invariants/ differ from the data
    in use (a packaged copy, after `pip install .`): the spec author's edits there would
    be silently ignored. None when there is none, or when it is the data in use."""
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        project = folder / "pyproject.toml"
        if project.is_file() and (folder / "specs").is_dir() and (
                folder / "invariants").is_dir():
            try:
                named = 'name = "refsim"' in project.read_text(encoding="utf-8")
            except OSError:
                return None
            if not named or folder == ROOT.resolve():
                return None
            return folder if _digest(folder) != _digest(ROOT) else None
    return None


def _digest(root: Path) -> str:
    import hashlib
    h = hashlib.sha256()
    for part in ("specs", "invariants"):
        for file in sorted((root / part).rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                h.update(str(file.relative_to(root)).encode())
                h.update(file.read_bytes())
    return h.hexdigest()

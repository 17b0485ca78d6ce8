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
    packaged = Path(str(resources.files(__package__ or "refsim").joinpath("_data")))
    if (packaged / "specs").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent


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

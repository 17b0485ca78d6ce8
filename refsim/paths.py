"""Where the editable data lives: `specs/` and `invariants/` beside the package."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("REFSIM_ROOT", Path(__file__).resolve().parent.parent))
SPECS = ROOT / "specs"
SCHEMAS = SPECS / "schemas"
FIXTURES = SPECS / "fixtures"
INVARIANTS = ROOT / "invariants"

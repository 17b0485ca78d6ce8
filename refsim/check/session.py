"""Compatibility names: the observation layer lives in `refsim.check.observe`."""

from __future__ import annotations

from refsim.check.observe import (
    COUNTER_KEY,
    DRIFT,
    MAX_POLLS,
    RECORDER,
    REPLAY,
    SOURCE,
    Session,
    eval_body,
    run_path,
)

__all__ = ["COUNTER_KEY", "DRIFT", "MAX_POLLS", "RECORDER", "REPLAY", "SOURCE", "Session",
           "eval_body", "run_path"]

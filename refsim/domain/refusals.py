"""Refusals as values: a registered code, a message, optional details.

Python exceptions are for bugs and misuse; a request the host declines is a Refusal. The
domain names the code only: the wire answers it at the status the error registry gives it.
"""

from __future__ import annotations

from typing import Any

import attrs

# One fixed sentence for every unusable fixtureRuns source (RFC 0252 §C): no id, no
# task key, no reason, so another tenant's run reads exactly like no run at all.
UNUSABLE_SOURCE_MESSAGE = "fixtureRuns names a source run that cannot be used for this eval"
# RFC 0251 §C's own uniform refusal for a baseline, distinct from the one above.
UNUSABLE_BASELINE_MESSAGE = "baselineRunId names a run that cannot be used as a baseline"
TENANT_MISMATCH = "id_tenant_mismatch"


@attrs.frozen
class Refusal:
    code: str
    message: str
    details: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def validation(message: str, **details: Any) -> Refusal:
    return Refusal("validation_error", message, details or None)


UNUSABLE_SOURCE = Refusal("validation_error", UNUSABLE_SOURCE_MESSAGE)
UNUSABLE_BASELINE = Refusal("validation_error", UNUSABLE_BASELINE_MESSAGE)


def not_found(message: str = "no run of that id is visible to the caller") -> Refusal:
    return Refusal("not_found", message)


def tenant_mismatch() -> Refusal:
    return Refusal(TENANT_MISMATCH, "the id's tenant segment is not the caller's tenant")


def state_conflict(message: str, run_status: str) -> Refusal:
    return Refusal("run_state_conflict", message, {"runStatus": run_status})

"""The domain's values as wire documents: the run snapshot and a page of them, the agents
family of the discovery document, the erase seam's answer. The domain returns values; this
renders them."""

from __future__ import annotations

from typing import Any

from refsim.domain.profile import HostProfile
from refsim.domain.runs import SCHEMA_VERSION, RunRecord
from refsim.domain.values import Erasure


def snapshot(run: RunRecord) -> dict[str, Any]:
    """GET /runs/{runId}: the RunSnapshot."""
    out: dict[str, Any] = {"runId": run.run_id.bound, "workflowId": run.workflow_id,
                           "status": run.status, "owner": run.owner.to_json(),
                           "eventLogSchemaVersion": SCHEMA_VERSION, "startedAt": run.started_at}
    if run.completed_at is not None:
        out["completedAt"] = run.completed_at
    if run.parent is not None:
        out["parentRunId"] = run.parent.bound
    options = run.request.options
    if options.has_tags:
        out["tags"] = options.tags
    if options.has_metadata:
        out["metadata"] = options.metadata
    return out


def run_list(snapshots: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    """GET /runs: a page of RunSnapshots; nextCursor only when more runs follow."""
    out: dict[str, Any] = {"runs": snapshots}
    if next_cursor is not None:
        out["nextCursor"] = next_cursor
    return out


def agents_family(profile: HostProfile) -> dict[str, Any] | None:
    """The discovery document's `agents` family record, or None when evals are not run."""
    if not profile.eval_suite:
        return None
    facet: dict[str, Any] = {"modes": list(profile.modes)}
    for key, on in (("fixtureMatching", profile.fixture_matching),
                    ("fixtureErrors", profile.fixture_errors),
                    ("baselineSelection", profile.baseline_selection),
                    ("recordedFixtures", profile.accepts_recorded_fixtures)):
        if on:
            facet[key] = True
    return {"status": "stable", "since": "2.0", "witness": "witnessable-gated",
            "evalSuite": facet}


def erasure(result: Erasure) -> dict[str, Any]:
    """The runs:erase seam's answer."""
    return {"runId": result.run_id.bound, "erased": True,
            "derivedCopiesErased": result.copies_erased, "runsReached": result.runs_reached}

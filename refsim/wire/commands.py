"""Request bodies, already schema-valid, as the domain's typed commands."""

from __future__ import annotations

from typing import Any

from refsim.domain.commands import CreateEval, CreateRun, CreateWorkflow, Fork, RunOptions
from refsim.wire.schemas import valid_script


def create_command(body: dict[str, Any]) -> CreateRun:
    """A createRun body (valid against create-run.schema.json) as a command."""
    options = RunOptions(tenant_id=body.get("tenantId"), tags=body.get("tags"),
                         metadata=body.get("metadata"), has_tags="tags" in body,
                         has_metadata="metadata" in body)
    fixture_runs = dict(body["fixtureRuns"]) if "fixtureRuns" in body else None
    if body.get("mode") == "eval":
        modes = body.get("evalModes")
        return CreateEval(suite_ref=body["evalSuiteRef"], agent_id=body["agentId"],
                          eval_modes=tuple(modes) if modes is not None else None,
                          has_baseline="baselineRunId" in body,
                          baseline_run_id=body.get("baselineRunId"),
                          fixture_runs=fixture_runs, options=options)
    inputs = body.get("inputs") or {}
    script = inputs.get("script", [])
    return CreateWorkflow(workflow_id=body["workflowId"], agent_id=inputs.get("agentId"),
                          script=tuple(script) if isinstance(script, list) else (),
                          script_valid=valid_script(script, parsed=True),
                          fixture_runs=fixture_runs,
                          has_eval_options="evalModes" in body or "baselineRunId" in body,
                          options=options)


def fork_command(body: dict[str, Any]) -> Fork:
    """A fork body (valid against fork-run.schema.json) as a command."""
    return Fork(mode=body["mode"], from_seq=body.get("fromSeq", 0),
                has_overlay=bool(body.get("runOptionsOverlay")))

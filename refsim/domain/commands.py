"""Typed commands: what the wire parses a request body into before the domain sees it.

The domain takes these and returns values; it never reads a JSON body or a camelCase key.
Values that the domain must judge as they came (a fixtureRuns value that may not decode,
an agentId of any type) stay raw, as `Any`.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class RunOptions:
    """What every createRun carries besides its mode: kept for the run's snapshot."""

    tenant_id: str | None = None
    tags: Any = None
    metadata: Any = None
    has_tags: bool = False
    has_metadata: bool = False


@attrs.frozen
class CreateWorkflow:
    """createRun without mode eval: a workflow run."""

    workflow_id: str
    agent_id: Any = None  # inputs.agentId as sent (None: absent)
    script: tuple[Any, ...] = ()  # inputs.script as sent
    script_valid: bool = True  # whether it matched script.schema.json (the wire checks)
    # fixtureRuns / evalModes / baselineRunId as sent: refused here (§B, RFC 0251).
    fixture_runs: dict[str, Any] | None = None
    has_eval_options: bool = False
    options: RunOptions = RunOptions()


@attrs.frozen
class CreateEval:
    """createRun with mode eval (RFC 0081), optionally naming sources (RFC 0252 §B)."""

    suite_ref: str
    agent_id: str
    eval_modes: tuple[str, ...] | None = None
    has_baseline: bool = False
    baseline_run_id: Any = None
    # The accepted map verbatim, in request order (§E echoes it); values as sent.
    fixture_runs: dict[str, Any] | None = None
    options: RunOptions = RunOptions()


@attrs.frozen
class Fork:
    """POST /runs/{id}:fork."""

    mode: str
    from_seq: int = 0
    has_overlay: bool = False  # a non-empty runOptionsOverlay


CreateRun = CreateWorkflow | CreateEval

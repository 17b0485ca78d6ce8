"""Scripted agents: the built-in `conformance.eval:recorder` and a way to register more.

An agent sees only its context: it calls tools and delegates, and returns a decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs

from refsim.domain.tools import ToolResult

RECORDER = "conformance.eval:recorder"
HELPER = "refsim.agents:helper"
# Recorders on the reference host's other lanes: one whose wire events are content-free
# (argsHash, no outcome) while its calls are still held, one whose calls are not kept.
CONTENT_FREE = "refsim.agents:content-free"
UNHELD = "refsim.agents:unheld"


class AgentContext(Protocol):
    def call(self, tool: str, args: Any) -> ToolResult: ...

    def delegate(self, agent_id: str, task_input: Any) -> Any: ...


class Agent(Protocol):
    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        """Run one invocation and return the decision."""
        ...


DEFAULT_DECISION = "done"


def run_script(ctx: AgentContext, script: Sequence[Any]) -> Any:
    """Execute a declarative script (see specs/schemas/script.schema.json)."""
    for step in script:
        if not isinstance(step, dict):
            continue
        if isinstance(step.get("call"), str):
            ctx.call(step["call"], step.get("args"))
        elif isinstance(step.get("delegate"), str):
            nested = step.get("script")
            ctx.delegate(step["delegate"], {"script": nested if isinstance(nested, list) else []})
        elif "decide" in step:
            return step["decide"]
    return DEFAULT_DECISION


@attrs.frozen
class RecorderAgent:
    """Runs the script carried in its input as `{"script": [...]}`."""

    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        script = task_input.get("script") if isinstance(task_input, dict) else None
        return run_script(ctx, script if isinstance(script, list) else [])


@attrs.frozen
class ScriptedAgent:
    """Runs a fixed script, whatever its input: register one with `SimHost.register_agent`."""

    script: tuple[Any, ...]

    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        return run_script(ctx, self.script)


def default_agents() -> dict[str, Agent]:
    return {agent_id: RecorderAgent() for agent_id in (RECORDER, HELPER, CONTENT_FREE, UNHELD)}

"""The tool gateway: every live tool call of every agent passes through here.

Holds live state per tenant (the counter) and the egress log, where a
credential injected after the agent's call is visible and nowhere else.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

COUNTER = "conformance.eval:counter"
VAULT = "refsim.tools:vault"
FLAKY = "refsim.tools:flaky"


class ToolResult(NamedTuple):
    """What a call returned at the agent-side boundary (a named tuple, as `Event` says)."""

    status: str  # ok | error | forbidden | rate_limited
    outcome: Any = None
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    @staticmethod
    def ok(outcome: Any) -> ToolResult:
        return ToolResult("ok", outcome=outcome)

    @staticmethod
    def err(code: str, message: str, status: str = "error") -> ToolResult:
        return ToolResult(status, error={"code": code, "message": message})


@attrs.frozen
class EgressRecord:
    """A request as it left the host, after credential injection."""

    tenant: str
    tool: str
    headers: tuple[tuple[str, str], ...]
    body: Any


def vault_credential(tenant: str) -> str:
    """The secret the host injects at egress for `tenant`; agents never see it."""
    return f"sk-refsim-{tenant}-egress-7f3a9c"


@attrs.define
class ToolGateway:
    counters: dict[tuple[str, str], int] = attrs.Factory(dict)
    egress: list[EgressRecord] = attrs.Factory(list)
    live_calls: int = 0

    def call(self, tenant: str, tool: str, inputs: Any) -> ToolResult:
        if tool == COUNTER:
            return self._counter(tenant, inputs)
        if tool == VAULT:
            return self._vault(tenant, inputs)
        if tool == FLAKY:
            return self._flaky(inputs)
        return ToolResult.err("tool_not_found", "no tool of that name is behind this gateway")

    def counter_value(self, tenant: str, key: str) -> int:
        return self.counters.get((tenant, key), 0)

    def _counter(self, tenant: str, inputs: Any) -> ToolResult:
        if (not isinstance(inputs, dict) or inputs.get("op") not in ("inc", "read")
                or not isinstance(inputs.get("key"), str)):
            return ToolResult.err("invalid_arguments", "the counter takes {op: inc|read, key}")
        self.live_calls += 1
        slot = (tenant, inputs["key"])
        if inputs["op"] == "inc":
            self.counters[slot] = self.counters.get(slot, 0) + 1
        return ToolResult.ok({"key": inputs["key"], "count": self.counters.get(slot, 0)})

    def _vault(self, tenant: str, inputs: Any) -> ToolResult:
        if not isinstance(inputs, dict) or not isinstance(inputs.get("query"), str):
            return ToolResult.err("invalid_arguments", "the vault takes {query}")
        self.live_calls += 1
        # The credential is resolved here, after the agent's call: only egress sees it.
        headers = (("Authorization", f"Bearer {vault_credential(tenant)}"),)
        self.egress.append(EgressRecord(tenant, VAULT, headers, dict(inputs)))
        return ToolResult.ok({"query": inputs["query"], "answer": f"vault:{inputs['query']}"})

    def _flaky(self, inputs: Any) -> ToolResult:
        mode = inputs.get("mode", "ok") if isinstance(inputs, dict) else None
        if mode == "forbidden":
            return ToolResult.err("forbidden", "the gateway refused the call by policy",
                                  status="forbidden")
        if mode == "rate_limited":
            return ToolResult.err("rate_limited", "the gateway throttled the call",
                                  status="rate_limited")
        if mode not in ("ok", "error"):
            return ToolResult.err("invalid_arguments",
                                  "flaky takes {mode: ok|error|forbidden|rate_limited}")
        self.live_calls += 1
        if mode == "error":
            return ToolResult.err("tool_failed", "the tool ran and reported a failure")
        value = inputs.get("value") if isinstance(inputs, dict) else None
        return ToolResult.ok({"value": value})

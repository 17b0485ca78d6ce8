"""A thin driver over any `HostClient`: the requests every check repeats, and nothing else.

It observes; it never judges. Judging is for `refsim.check.judges`.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.domain.ids import project
from refsim.wire.client import HostClient
from refsim.wire.response import Response

RECORDER = "conformance.eval:recorder"
COUNTER_KEY = "recorded-fixtures"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
DRIFT = "conformance-eval-recorded-drift"
MAX_POLLS = 50


def run_path(run_id: str, suffix: str = "") -> str:
    return "/runs/" + project(run_id) + suffix


def eval_body(suite: str, fixture_runs: dict[str, Any] | None = None, *,
              agent_id: str = RECORDER, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": agent_id}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    body.update(extra)
    return body


@attrs.define
class Session:
    client: HostClient
    api_key: str

    def create(self, body: Any) -> Response:
        return self.client.request("POST", "/runs", api_key=self.api_key, json=body)

    def discovery(self) -> Response:
        return self.client.request("GET", "/.well-known/openwop")

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of a run, polling until it is terminal (bounded)."""
        events: list[dict[str, Any]] = []
        after = -1
        for _ in range(MAX_POLLS):
            r = self.client.request("GET", run_path(run_id, f"/events/poll?afterSequence={after}"
                                                    "&timeout=2"), api_key=self.api_key)
            if r.status != 200 or not isinstance(r.json, dict):
                return events
            page = [e for e in r.json.get("events", []) if isinstance(e, dict)]
            events.extend(page)
            if page:
                after = int(page[-1].get("sequence", after))
            if r.json.get("isTerminal"):
                return events
        return events

    def summary(self, run_id: str) -> Any:
        r = self.client.request("GET", run_path(run_id, "/eval-summary"), api_key=self.api_key)
        return r.json if r.status == 200 else None

    def counter(self, key: str = COUNTER_KEY) -> int | None:
        """The live counter through the seam, or None when it cannot be observed."""
        r = self.client.request("GET", f"/conformance/seams/eval-counter?key={key}",
                                api_key=self.api_key)
        if r.status != 200 or not isinstance(r.json, dict):
            return None
        count = r.json.get("count")
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def workflow(self, workflow_id: str, inputs: dict[str, Any] | None = None) -> Response:
        body: dict[str, Any] = {"workflowId": workflow_id}
        if inputs is not None:
            body["inputs"] = inputs
        return self.create(body)

    def fork(self, run_id: str, mode: str = "replay") -> Response:
        return self.client.request("POST", run_path(run_id, ":fork"), api_key=self.api_key,
                                   json={"mode": mode})

    def erase(self, run_id: str) -> Response:
        return self.client.request("POST", "/conformance/seams" + run_path(run_id, ":erase"),
                                   api_key=self.api_key)

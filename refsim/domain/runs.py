"""Run records, their sequence-ordered event logs, and the held tool-call store.

A run's events are recorded facts; its held calls are the as-executed boundary,
kept apart from the wire so a content-free lane can still be a fixture source.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from refsim.domain.clock import stamp
from refsim.domain.commands import CreateRun
from refsim.domain.ids import RunId
from refsim.domain.owners import Owner
from refsim.domain.suites import Suite

TERMINAL = frozenset({"completed", "failed", "cancelled"})
SCHEMA_VERSION = 2


class Event(NamedTuple):
    """One recorded event. The per-call records (this, `HeldCall`, `ToolResult`,
    `FixtureEntry`) are immutable named tuples rather than frozen attrs classes: a replayed
    call builds several, and a frozen slotted attrs class costs about four times as much
    to construct (each field through `object.__setattr__`)."""

    event_id: str
    # The run's bound id, as a string: a tuple of nothing but strings, numbers and a payload
    # of plain values is one the garbage collector stops tracking after one look, where an
    # id object kept every event of every run on its lists.
    run: str
    type: str
    payload: dict[str, Any]
    tick: int  # the logical clock's tick: the time is formatted when it is read
    sequence: int

    @property
    def timestamp(self) -> str:
        return stamp(self.tick)

    def to_json(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "runId": self.run, "type": self.type,
                "payload": self.payload, "timestamp": stamp(self.tick),
                "sequence": self.sequence, "schemaVersion": SCHEMA_VERSION}


class HeldCall(NamedTuple):
    """One tool call as executed: the inputs the agent passed and what it got back."""

    sequence: int
    agent_id: str
    invocation_id: str
    tool: str
    call_id: str
    inputs: Any
    status: str
    outcome: Any
    error: dict[str, Any] | None
    # The agent at the top of the delegation chain: a delegate's call keeps its own
    # agent_id and names here the agent that handed the work on.
    root_agent: str
    # canonical(inputs), computed once at the boundary (None when the inputs are no JSON):
    # matching, derivation and argsHash all read it instead of computing it again.
    inputs_key: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "ok"


@attrs.define
class EvalRecord:
    # The suite as it was when the run was created: a fork re-runs this very document,
    # never whatever the ref names now (a recorded fact, like the derived copy).
    suite: Suite
    suite_ref: str
    agent_id: str
    modes: tuple[str, ...]
    fixture_runs: dict[str, Any] | None
    baseline: RunId | None
    # task id -> the eval run whose derived copy serves it (itself, or the run it forks)
    copy_origin: RunId | None = None
    summary: dict[str, Any] | None = None

    @property
    def suite_id(self) -> str:
        return self.suite.suite_id


@attrs.define
class RunRecord:
    run_id: RunId
    owner: Owner
    workflow_id: str
    status: str
    request: CreateRun  # the command that created it (a fork: its source's)
    started_at: str
    events: list[Event] = attrs.Factory(list)
    invoked_agents: set[str] = attrs.Factory(set)
    held_calls: list[HeldCall] = attrs.Factory(list)
    # Agents that made calls this host did not keep (profile), and whether the run's
    # held content was erased: either way the run cannot be a fixture source.
    unheld_agents: set[str] = attrs.Factory(set)
    calls_erased: bool = False
    holds_calls: bool = True
    # Source runs whose as-executed tool content this run carries (it was served their
    # derived entries, directly or through another eval run): erasing one reaches this run.
    content_from: set[RunId] = attrs.Factory(set)
    eval: EvalRecord | None = None
    parent: RunId | None = None
    completed_at: str | None = None
    bound: str = attrs.field(init=False)  # run_id.bound, made once: every event carries it

    def __attrs_post_init__(self) -> None:
        self.bound = self.run_id.bound

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def last_sequence(self) -> int:
        return self.events[-1].sequence if self.events else -1

"""RFC 0252 in the host: source usability (§C), derivation (§D) and the derived-copy store.

Each piece is a small component a faulty host can swap for a broken twin.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import attrs

from refsim.domain.fixtures import FixtureEntry
from refsim.domain.ids import RunId, parse_bound
from refsim.domain.owners import Owner
from refsim.domain.runs import HeldCall, RunRecord
from refsim.domain.view import HostView

# Why a source is unusable. Never on the wire: the refusal is one body whatever the kind.
UNKNOWN = "unknown"  # no such run, or an id that does not decode
FOREIGN = "foreign"  # the caller's owner triple cannot read it
NOT_TERMINAL = "not-terminal"
NO_AGENT = "never-invoked-the-agent"
NOT_HELD = "calls-not-held"  # erased, or never kept
FAILED_CALL = "failed-call-without-fixture-errors"


class SourcePolicy:
    """§C: decides whether a supplied value names a usable source run."""

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        """The usable run, or the kind of reason it is unusable."""
        rid = parse_bound(value)
        if rid is None:
            return UNKNOWN  # an id that does not decode is an unknown source
        core.resolutions[rid] = core.resolutions.get(rid, 0) + 1
        run = core.runs.get(rid)
        if run is None:
            return UNKNOWN
        if not caller.can_read(run.owner):
            return FOREIGN
        if not run.terminal:
            return NOT_TERMINAL
        if agent_id not in run.invoked_agents:
            return NO_AGENT
        if not run.holds_calls or run.calls_erased or agent_id in run.unheld_agents:
            return NOT_HELD
        calls = [c for c in run.held_calls if c.agent_id == agent_id]
        if any(c.failed for c in calls) and not core.profile.fixture_errors:
            return FAILED_CALL
        return run


_BY_SEQUENCE = operator.attrgetter("sequence")


class Deriver:
    """§D: one exact-args entry per call of the eval's agent, delegates excluded, in order."""

    def derive(self, core: HostView, source: RunRecord, agent_id: str) -> tuple[FixtureEntry, ...]:
        # Counted, as resolutions are: a fork must never derive from its source again (§E).
        core.derivations[source.run_id] = core.derivations.get(source.run_id, 0) + 1
        calls = sorted((c for c in source.held_calls if c.agent_id == agent_id),
                       key=_BY_SEQUENCE)
        entry = self.entry
        return tuple([entry(c) for c in calls])

    @staticmethod
    def entry(call: HeldCall) -> FixtureEntry:
        if call.failed:
            return FixtureEntry(call.tool, call.inputs, True, call.error, True, call.inputs_key)
        return FixtureEntry(call.tool, call.inputs, True, call.outcome, False, call.inputs_key)


@attrs.define
class CopyStore:
    """Derived entries, stored under their source run so erasing the source reaches them."""

    _by_source: dict[RunId, dict[tuple[RunId, str], tuple[FixtureEntry, ...]]] = attrs.Factory(
        dict)

    def put(self, source: RunId, eval_run: RunId, task_id: str,
            entries: tuple[FixtureEntry, ...]) -> None:
        self._by_source.setdefault(source, {})[(eval_run, task_id)] = entries

    def get(self, source: RunId, eval_run: RunId, task_id: str) -> tuple[FixtureEntry, ...] | None:
        return self._by_source.get(source, {}).get((eval_run, task_id))

    def erase_source(self, source: RunId) -> int:
        return len(self._by_source.pop(source, {}))

    def erase_eval_run(self, eval_run: RunId) -> int:
        """Drop the copies an eval run was served (kept with it for its forks)."""
        dropped = 0
        for copies in self._by_source.values():
            for key in [k for k in copies if k[0] == eval_run]:
                del copies[key]
                dropped += 1
        return dropped

    def all_entries(self) -> Iterable[tuple[RunId, RunId, str, tuple[FixtureEntry, ...]]]:
        for source, copies in self._by_source.items():
            for (eval_run, task_id), entries in copies.items():
                yield source, eval_run, task_id, entries

    def count_for(self, source: RunId) -> int:
        return len(self._by_source.get(source, {}))

"""Faulty hosts that get the stored copy of a source's fixtures wrong (RFC 0252 §E and
Security): a fork of an eval run that resolves or derives from the source again instead of
reading its copy, or runs live once the copy is gone, and a copy store that keeps copies
after erasure, erases others' too, or holds the egress credential. Several can only be
killed in process (`REDERIVES` says why). A new host whose fault is in forks or in keeping
and erasing the copies goes here.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.domain.core import Components, ForkPolicy, HostCore
from refsim.domain.fixtures import FixtureEntry
from refsim.domain.ids import RunId, parse_bound
from refsim.domain.recorded import CopyStore
from refsim.domain.runs import RunRecord
from refsim.zoo.faulty.base import Mutant, _swap


class ReresolvesOnFork(ForkPolicy):
    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out: dict[str, tuple[FixtureEntry, ...]] = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            source = core.components.sources.assess(core, run.owner, value, run.eval.agent_id)
            if isinstance(source, str):
                return None
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


class KeepsCopies(CopyStore):
    def erase_source(self, source: Any) -> int:
        return self.count_for(source)

    def erase_eval_run(self, eval_run: Any) -> int:
        return 0


class _DerivesFromSourceOnFork(ForkPolicy):
    """Derives from the source again, looking it up directly (no resolution is counted)."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            rid = parse_bound(value)
            source = core.runs.get(rid) if rid is not None else None
            if source is None or source.calls_erased:
                return None
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


class _RunsLiveWhenCopyGone(ForkPolicy):
    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        return super().copies(core, run) or {}


class _WipesAllCopies(CopyStore):
    def erase_source(self, source: Any) -> int:
        count = self.count_for(source)
        self._by_source.clear()
        return count


class _RederivesWhileUsable(ForkPolicy):
    """Derives the fork's fixtures from the source again while it is there, and falls back
    to the stored copy only once it is gone."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out: dict[str, tuple[FixtureEntry, ...]] = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            rid = parse_bound(value)
            source = core.runs.get(rid) if rid is not None else None
            if source is None or source.calls_erased:
                return super().copies(core, run)
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


@attrs.define
class _StoresCredential(CopyStore):
    """Keeps the egress credential beside each stored entry and strips it when serving."""

    secret: dict[RunId, str] = attrs.Factory(dict)

    def put(self, source: RunId, eval_run: RunId, task_id: str,
            entries: tuple[FixtureEntry, ...]) -> None:
        from refsim.domain.tools import vault_credential
        kept = tuple(e._replace(response={"answer": e.response,
                                          "egress": vault_credential(source.tenant)})
                     for e in entries)
        super().put(source, eval_run, task_id, kept)

    def get(self, source: RunId, eval_run: RunId, task_id: str
            ) -> tuple[FixtureEntry, ...] | None:
        found = super().get(source, eval_run, task_id)
        return None if found is None else tuple(
            e._replace(response=e.response["answer"]) for e in found)


@attrs.define
class _KeepsErasedCopies(CopyStore):
    """Erasing the source stops serving its copies, and keeps them."""

    erased: set[RunId] = attrs.Factory(set)

    def erase_source(self, source: RunId) -> int:
        self.erased.add(source)
        return self.count_for(source)

    def erase_eval_run(self, eval_run: RunId) -> int:
        return 0

    def get(self, source: RunId, eval_run: RunId, task_id: str
            ) -> tuple[FixtureEntry, ...] | None:
        return None if source in self.erased else super().get(source, eval_run, task_id)


# Why a host that reads the source again on a fork cannot be caught from outside.
REDERIVES = ("while the source is usable, deriving again gives the fork the very entries the "
             "copy holds; once it is erased, the copy is erased with it (Security), so either "
             "way the fork is refused; and v2 has no portable run deletion that would take the "
             "source away alone (RFC 0252's falsifiability table: unwitnessable). Only the "
             "host's resolution and derivation counts show it")


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("reresolves-on-fork", "§E: a fork of the eval run MUST NOT resolve the source "
           "again", _swap(forks=ReresolvesOnFork), inside_only=REDERIVES),
    Mutant("keeps-copy-after-erasure", "Security: the derived copy is erased with its "
           "source", lambda: Components(copies=KeepsCopies)),
    Mutant("derives-from-source-on-fork", "§E: a fork reads the stored copy, never the "
           "source again", _swap(forks=_DerivesFromSourceOnFork), inside_only=REDERIVES),
    Mutant("runs-live-when-copy-gone", "Security: a fork whose copy is gone is refused, never "
           "run against live tools", _swap(forks=_RunsLiveWhenCopyGone)),
    Mutant("wipes-all-copies", "Security: erasure reaches the source's copies, and only "
           "those", lambda: Components(copies=_WipesAllCopies)),
    Mutant("rederives-while-usable", "§E: a fork reads the stored copy, never the source "
           "again (here only while the source is there)", _swap(forks=_RederivesWhileUsable),
           inside_only=REDERIVES),
    Mutant("stores-egress-credential", "§D/SR-1: credential material MUST NOT enter a "
           "derived entry (here stored with it, stripped when served)",
           lambda: Components(copies=_StoresCredential),
           inside_only="the stored entries never leave the host and what it serves is "
           "right: only the copy store shows the credential (RFC 0252's falsifiability "
           "table: unwitnessable)"),
    Mutant("keeps-erased-copies", "Security: the copy is erased with its source (here "
           "kept, only no longer served)", lambda: Components(copies=_KeepsErasedCopies),
           inside_only="a fork is refused as it should be: only the copy store shows the "
           "erased content still held (RFC 0252: unwitnessable without portable erasure)"),
)

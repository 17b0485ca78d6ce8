"""Faulty hosts that break what a create with fixtureRuns must refuse before any run starts
(RFC 0252 §B): fixtureRuns without mode eval, live-shadow among the modes, an empty map,
suite fixtures merged in, keys that are not taskIds of the suite (only the first checked, or
matched loosely, NFKC-folded or as slugs), and a refused create that leaves a failed run
behind. A new host whose fault is in the request rules of §B goes here.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from refsim.domain.commands import CreateEval, CreateRun
from refsim.domain.core import HostCore, RequestRules
from refsim.domain.readings import MergingPlanner, MergingRules
from refsim.domain.refusals import UNUSABLE_SOURCE, Refusal
from refsim.domain.suites import Suite
from refsim.host import SimHost
from refsim.wire.commands import create_command
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _caller_and_body, _swap


class _AcceptsLiveShadow(RequestRules):
    def live_shadow(self, modes: tuple[str, ...]) -> Refusal | None:
        return None


class _AcceptsWithoutMode(RequestRules):
    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        if command.fixture_runs is not None and not isinstance(command, CreateEval):
            return None
        return super().fixture_runs_gate(core, command)


class _AcceptsEmptyMap:
    """An edge in front of the host: an eval create whose fixtureRuns is an empty map has
    the member dropped before the host reads it, so the eval runs as if none were given
    (the schema's minProperties would refuse it further in)."""

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        if method != "POST" or target.split("?", 1)[0] != "/runs" or not body:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if isinstance(doc, dict) and doc.get("fixtureRuns") == {} and doc.get("mode") == "eval":
            return json.dumps({k: v for k, v in doc.items() if k != "fixtureRuns"}).encode()
        return body

    def __call__(self, host: SimHost, method: str, path: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response


class _FirstKeyOnlyKeys(RequestRules):
    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        first = next(iter(fixture_runs))
        return super().keys(suite, {first: fixture_runs[first]})


class _FirstKeyOnlyConflicts(RequestRules):
    def conflicts(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        first = next(iter(fixture_runs))
        return super().conflicts(suite, {first: fixture_runs[first]})


class _KeysLoosely(RequestRules):
    """Takes a key for a taskId when they match case-folded and trimmed."""

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        names = {t.task_id.casefold() for t in suite.tasks}
        if all(k.strip().casefold() in names for k in fixture_runs):
            return None
        return super().keys(suite, fixture_runs)


def _leaves_a_run(host: SimHost, method: str, target: str, headers: dict[str, str],
                  body: bytes | None, response: Response) -> Response:
    """Starts the eval run, finds a source unusable, fails the run and answers with the one
    refusal: the run exists afterwards (§B: refused before the run starts)."""
    doc = response.json
    if (method != "POST" or target != "/runs" or response.status != 400
            or not isinstance(doc, dict) or doc.get("message") != UNUSABLE_SOURCE.message):
        return response
    owner, request = _caller_and_body(host, headers, body)
    if owner is None or not isinstance(request, dict):
        return response
    core = host.core
    run = core._new_run(owner, "eval:refused", create_command(request))
    core._emit(run, "run.started", core._run_started(run))
    core._finish(run, "failed")
    return response


def _fold_key(key: str) -> str:
    """NFKC, then without format characters (zero-width, soft hyphen) or whitespace; case
    is kept (unlike `_KeysLoosely`)."""
    return "".join(c for c in unicodedata.normalize("NFKC", key)
                   if unicodedata.category(c) != "Cf" and not c.isspace())


class _FoldsKeys(RequestRules):
    """Judges each fixtureRuns key after folding it (`_fold_key`)."""

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        return super().keys(suite, {_fold_key(k): v for k, v in fixture_runs.items()})


class _SlugKeys(RequestRules):
    """Task keys matched as slugs: `both_tasks`, `both.tasks` and `both tasks` name
    `both-tasks` (and the named task then runs on the source's fixtures)."""

    @staticmethod
    def _slug(key: str) -> str:
        return key.replace("_", "-").replace(".", "-").replace(" ", "-")

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        ids = {self._slug(t.task_id): t.task_id for t in suite.tasks}
        return super().keys(suite, {ids.get(self._slug(k), k): v
                                    for k, v in fixture_runs.items()})


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("merges-suite-fixtures", "§B: a task with suite toolResponses/onMiss is refused "
           "(the two sources are never merged)",
           _swap(rules=MergingRules, planner=MergingPlanner)),
    Mutant("accepts-live-shadow", "§B: live-shadow among the modes is refused",
           _swap(rules=_AcceptsLiveShadow)),
    Mutant("accepts-without-mode", "§B: fixtureRuns without mode eval is refused",
           _swap(rules=_AcceptsWithoutMode)),
    Mutant("accepts-empty-map", "§B: an empty fixtureRuns map is refused (here the eval runs "
           "as if none were given)", edge=_AcceptsEmptyMap()),
    Mutant("first-key-only", "§B: every key of fixtureRuns is a taskId of the suite",
           _swap(rules=_FirstKeyOnlyKeys)),
    Mutant("first-conflict-only", "§B: every named task is checked for suite fixtures",
           _swap(rules=_FirstKeyOnlyConflicts)),
    Mutant("accepts-near-miss-key", "§B: a key that is not a taskId is refused (here "
           "matched case-folded and trimmed)", _swap(rules=_KeysLoosely)),
    Mutant("leaves-a-failed-run", "§B: an unusable source is refused before the run starts "
           "(here a failed run is left behind)", edge=_leaves_a_run),
    Mutant("folds-task-keys", "§B: a key that is not a taskId of the suite is refused (here "
           "NFKC-folded and stripped of format characters and whitespace first)",
           _swap(rules=_FoldsKeys)),
    Mutant("slug-folds-task-keys", "§B: a key that is not a taskId is refused (here `_`, `.` "
           "and a space are folded to `-` first)", _swap(rules=_SlugKeys)),
)

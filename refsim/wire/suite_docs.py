"""Suite documents, outside the domain: JSON documents validated against
eval-suite.schema.json and parsed into `refsim.domain.suites.Suite` values.

Built-in suites come from specs/fixtures/ (their file stem is the fixture id).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from refsim.data import paths
from refsim.domain.fixtures import FixtureEntry
from refsim.domain.suites import Suite, Task, TaskFixtures
from refsim.wire import schemas


class SuiteError(ValueError):
    """A built-in suite file that does not validate: a broken checkout, not bad input."""


def parse_suite(doc: dict[str, Any]) -> Suite:
    """Parse a document that already validated against eval-suite.schema.json."""
    tasks = []
    for t in doc["tasks"]:
        fx = t.get("fixtures")
        fixtures = None
        if fx is not None:
            fixtures = TaskFixtures(
                entries=tuple(FixtureEntry.from_json(e) for e in fx.get("toolResponses", [])),
                on_miss=fx.get("onMiss"), has_tool_responses="toolResponses" in fx)
        tasks.append(Task(t["taskId"], t["input"], t["expected"], fixtures))
    thresholds = doc.get("thresholds") or {}
    return Suite(suite_id=doc["suiteId"], version=doc["version"], modes=tuple(doc["modes"]),
                 tasks=tuple(tasks), trials=int(doc.get("trials", 1)),
                 pass_score=thresholds.get("passScore"),
                 target_agent_id=doc.get("targetAgentId"), doc=doc)


def load_builtin(directory: Path = paths.FIXTURES) -> dict[str, Suite]:
    """Fixture id -> Suite for every file in specs/fixtures/ (a fresh dict each call)."""
    return dict(_load_builtin(directory))


@functools.cache
def _load_builtin(directory: Path) -> dict[str, Suite]:
    # Parsed once per process, and hosts are built by the thousand: what a host hands an
    # agent from a suite is a copy, so one host's agent never edits what another serves.
    out: dict[str, Suite] = {}
    for file in sorted(directory.glob("*.json")):
        doc = json.loads(file.read_text(encoding="utf-8"))
        problems = schemas.issues("eval-suite.schema.json", doc)
        if problems:
            raise SuiteError(f"{file}: not a valid eval suite: {problems[0]}")
        out[file.stem] = parse_suite(doc)
    return out

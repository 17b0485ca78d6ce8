"""Findings (one judged assertion) and rows (one requirement's disposition in a report)."""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs


class Disposition(enum.Enum):
    EXECUTED_PASS = "executed-pass"
    EXECUTED_FAIL = "executed-fail"
    SKIPPED = "skipped"
    INAPPLICABLE = "inapplicable"
    BLOCKED = "blocked"


@attrs.frozen
class Finding:
    """One assertion a judge made about an observation, tied to a requirement id."""

    requirement_id: str
    ok: bool
    message: str
    observation: Any = attrs.field(default=None, eq=False)

    def __str__(self) -> str:
        return f"[{'ok' if self.ok else 'FAIL'}] {self.requirement_id}: {self.message}"


def ok(requirement_id: str, message: str, observation: Any = None) -> Finding:
    return Finding(requirement_id, True, message, observation)


def fail(requirement_id: str, message: str, observation: Any = None) -> Finding:
    return Finding(requirement_id, False, message, observation)


def check(requirement_id: str, condition: bool, message: str, observation: Any = None) -> Finding:
    return Finding(requirement_id, bool(condition), message, observation)


_PACKAGE = Path(__file__).resolve().parents[1]  # refsim/


def raised_at(exc: BaseException) -> str:
    """Where refsim raised `exc`: `refsim/<file>:<line>` of the innermost traceback frame in
    the refsim package (the frame that raised, or the refsim code that called out of it),
    or "an unknown place" when no frame of refsim's is on the traceback."""
    where = "an unknown place"
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(_PACKAGE):
            where = f"{path.relative_to(_PACKAGE.parent).as_posix()}:{frame.lineno}"
    return where


# How a blocked row's reason ends when a check raised (`check_raised`).
RAISED = "(refsim's fault, not the host's: the row is not judged)"


def check_raised(what: str, exc: BaseException) -> str:
    """A blocked row's reason when a check raised: a suite-side fault (refsim's, never the
    host's), naming the exception and where refsim raised it."""
    return f"{what} raised {type(exc).__name__}: {exc} at {raised_at(exc)} {RAISED}"


@attrs.frozen
class Row:
    """A report row: a requirement's disposition, with the findings behind it."""

    requirement_id: str
    scenario_id: str
    disposition: Disposition
    detail: str
    findings: tuple[Finding, ...] = ()
    # Which check produced the row (a leg, an example row, an invariant): several checks
    # may witness one requirement id.
    check_id: str = ""
    # Not run on this host because it needs the simulator's inside: listed apart in every
    # report, never a pass or a fail, and no part of the verdict.
    apart: bool = False
    # A failed row's exchanges behind its failing assertions, as HAR entries (keys
    # redacted, bodies bounded), and the curl lines that send them again, in order (over
    # HTTP); `reproduce` says what running the last line shows (`refsim.check.evidence`).
    evidence: tuple[Any, ...] = attrs.field(default=(), eq=False)
    curl: tuple[str, ...] = attrs.field(default=(), eq=False)
    reproduce: str = attrs.field(default="", eq=False)

    @property
    def assertion_count(self) -> int:
        return len(self.findings)

    @staticmethod
    def judged(requirement_id: str, scenario_id: str, findings: Iterable[Finding],
               check_id: str = "") -> Row:
        """executed-pass only when something was asserted and every assertion held."""
        found = tuple(findings)
        failed = [f for f in found if not f.ok]
        check_id = check_id or requirement_id
        if not found:
            return Row(requirement_id, scenario_id, Disposition.EXECUTED_FAIL,
                       "the check made no assertion, so it cannot pass", (), check_id)
        if failed:
            return Row(requirement_id, scenario_id, Disposition.EXECUTED_FAIL,
                       "; ".join(f.message for f in failed), found, check_id)
        return Row(requirement_id, scenario_id, Disposition.EXECUTED_PASS,
                   f"{len(found)} assertion(s) held", found, check_id)

    @staticmethod
    def unjudged(requirement_id: str, scenario_id: str, disposition: Disposition,
                 reason: str, check_id: str = "") -> Row:
        if disposition in (Disposition.EXECUTED_PASS, Disposition.EXECUTED_FAIL):
            raise ValueError("a row without findings cannot be executed")
        if not reason:
            raise ValueError("every non-pass row carries a reason")
        return Row(requirement_id, scenario_id, disposition, reason, (),
                   check_id or requirement_id)

    @staticmethod
    def apart_row(requirement_id: str, scenario_id: str, reason: str, check_id: str = "") -> Row:
        return Row(requirement_id, scenario_id, Disposition.SKIPPED,
                   "in process only: " + reason, (), check_id or requirement_id, True)

    @property
    def passed(self) -> bool:
        return self.disposition is Disposition.EXECUTED_PASS


def matches(prefix: str | None, row: Row) -> bool:
    """Whether a row is among those `refsim check PREFIX` names: by the start of its
    requirement or check id, or anywhere in either without its namespace."""
    if not prefix:
        return True
    for value in (row.requirement_id, row.check_id):
        short = value.removeprefix("openwop.requirement.").removeprefix("refsim.requirement.")
        if value.startswith(prefix) or short.startswith(prefix) or prefix in short:
            return True
    return False

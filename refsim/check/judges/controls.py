"""Judges of the facts a check stands on: positive controls (the run completed, a
white-box action took effect, there is something to judge), counts, equality, a counter's
change, a server-free schema vector, and a check that could not go on.

Part of `refsim.check.judges` (import the judges from there). A new positive control or
plain comparison goes here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from refsim.check.findings import Finding, check, fail
from refsim.domain.canonical import canonical
from refsim.wire import schemas


def schema_vector(req: str, vector: Mapping[str, Any]) -> Finding:
    """A server-free vector: `instance` against `schema` must be `valid` as stated."""
    got = schemas.is_valid(str(vector["schema"]), vector["instance"])
    want = bool(vector["valid"])
    return check(req, got == want,
                 f"vector {vector['id']}: {'validates' if got else 'is refused'}"
                 f" (expected {'valid' if want else 'refused'})", dict(vector))


def unchanged(req: str, before: Any, after: Any, what: str) -> Finding:
    same = canonical(before) == canonical(after)
    return check(req, same, f"{what}: unchanged" if same else f"{what}: changed",
                 {"before": before, "after": after})


def counter_delta(req: str, before: int | None, after: int | None, expected: int,
                  what: str) -> Finding:
    """An effect judged as a change across the step that should cause it, never as an
    absolute value: a host that has served other traffic before still passes."""
    if before is None or after is None:
        return fail(req, f"{what}: the live counter cannot be observed")
    return check(req, after - before == expected,
                 f"{what}: the live counter moved by {after - before}"
                 + ("" if after - before == expected else f", expected {expected}"),
                 {"before": before, "after": after})


def completed(req: str, reached: bool, what: str) -> Finding:
    """A positive control: the run reached run.completed."""
    return check(req, reached, f"{what}: reached run.completed" if reached
                 else f"{what}: never reached run.completed")


def run_status_is(req: str, status: Any, want: str, what: str) -> Finding:
    """A run's status, as its snapshot shows it."""
    return check(req, status == want, f"{what}: {status}" if status == want
                 else f"{what}: {status}, expected {want}")


def readable(req: str, value: Any, what: str) -> Finding:
    """Something the host must still serve: it answered with a document."""
    return check(req, value is not None, f"{what}: it does" if value is not None
                 else f"{what}: it does not")


def count_is(req: str, got: int, want: int, what: str) -> Finding:
    return check(req, got == want, f"{what}: {got}" if got == want
                 else f"{what}: {got}, expected {want}", {"got": got, "want": want})


def at_least(req: str, got: int, least: int, what: str) -> Finding:
    """A positive control: there is something to judge (at least `least` of it)."""
    return check(req, got >= least, f"{what}: {got}" if got >= least
                 else f"{what}: {got}, fewer than {least}", {"got": got, "least": least})


def same_as(req: str, got: Any, want: Any, what: str) -> Finding:
    """Equal as JSON values (member order aside)."""
    same = canonical(got) == canonical(want)
    return check(req, same, what if same else f"{what}: no, {canonical(got)[:200]} is not "
                 f"{canonical(want)[:200]}", {"got": got, "want": want})


def done(req: str, took: bool, what: str) -> Finding:
    """A white-box action the check stands on (a deletion, a registration) took effect."""
    return check(req, took, what if took else f"{what}: it did not take effect")


def byte_identical(req: str, body: bytes, earlier: bytes, what: str) -> Finding:
    return check(req, body == earlier, f"{what}: byte-identical" if body == earlier
                 else f"{what}: it differs")


def could_not_go_on(req: str, what: str, why: str) -> Finding:
    """A check that stopped before it could judge (what it needed was not there, or it
    raised): a failure, never a pass by omission."""
    return fail(req, f"{what}: {why}")


def leg_passed(req: str, leg: str, disposition: str, passed: bool) -> Finding:
    """The scenario row stands on its legs: each must pass."""
    return check(req, passed, f"{leg}: {disposition}")



def not_asked(req: str, label: str, ids: Sequence[str]) -> Finding:
    """A case built from a tenant part of the host's ids, said not to apply (never asked,
    never failed) where its ids carry none; a failure of refsim's where they do carry one
    (the case should have been asked)."""
    parted = [i for i in ids if "/" in i]
    return check(req, not parted,
                 f"{label}: not asked, as it does not apply to this host's id shape (its ids "
                 f"{', '.join(map(repr, ids))} carry no tenant part to take apart)" if not parted
                 else f"{label}: said not to apply, yet {parted[0]!r} carries a tenant part")

"""How the machine fails a step, and how it tells the story of one.

A step fails only on a judge's finding (`refsim.check.judges`): a rule hands each finding
to `judged`, which counts it (`JUDGED`) and raises `RequirementViolated` when it did not
hold; `focused_on` narrows failing to one requirement while a kill is shrunk. `note` and
`narrating` tell the story of a step. A new way for the machine to fail or to narrate goes
here; a new verdict goes in a judge, never here.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from hypothesis import note as _hypothesis_note
from hypothesis import reject
from hypothesis.control import should_note
from hypothesis.errors import InvalidArgument

from refsim.check.findings import Finding


def note(text: str) -> None:
    """Narrate a step: into Hypothesis's report in a test, onto stdout in a pasted program."""
    try:
        _hypothesis_note(text)
    except InvalidArgument:
        print(text)


def narrating() -> bool:
    """Whether this example's narrative is shown: in the run Hypothesis reports (its final
    replay of a failure), at verbose, or in a pasted program. Asked once per example, so
    the other runs neither format nor file a narrative no one reads."""
    try:
        return should_note()
    except InvalidArgument:  # outside a test: a pasted program prints its story
        return True


class RequirementViolated(AssertionError):
    """A check failed; the message starts with the requirement id in brackets."""

    def __init__(self, requirement_id: str, message: str, observation: Any = None) -> None:
        super().__init__(f"[{requirement_id}] {message}")
        self.requirement_id = requirement_id
        # What the failed finding quoted (the answers it judged), for the evidence.
        self.observation = observation


# While set, a violation of any other requirement makes the example invalid rather than
# failing (Hypothesis rejects it). `refsim.testing.fuzz.shrink_for_display` sets it: without
# it the shrinker may slip from the kill it shrinks to another requirement's smaller one.
_FOCUS: contextvars.ContextVar[str | None] = contextvars.ContextVar("refsim_machine_focus",
                                                                     default=None)


@contextlib.contextmanager
def focused_on(requirement_id: str | None) -> Iterator[None]:
    """Only `requirement_id` fails an example inside; other violations reject it."""
    token = _FOCUS.set(requirement_id)
    try:
        yield
    finally:
        _FOCUS.reset(token)


def expect(condition: bool, requirement_id: str, message: str,
           observation: Any = None) -> None:
    if not condition:
        focus = _FOCUS.get()
        if focus is not None and requirement_id != focus:
            reject()
        raise RequirementViolated(requirement_id, message, observation)


# Every finding the machine's judges gave in this process, by requirement id: how often a
# requirement (an invariant row's, say) was checked, and how often it held.
JUDGED: collections.Counter[tuple[str, bool]] = collections.Counter()


def judged(finding: Finding) -> None:
    """The machine's verdicts are the checker's judges' (`refsim.check.judges`): a failed
    finding fails the step."""
    JUDGED[(finding.requirement_id, finding.ok)] += 1
    if not finding.ok:
        expect(False, finding.requirement_id, finding.message, finding.observation)

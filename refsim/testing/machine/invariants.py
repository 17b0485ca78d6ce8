"""The machine's checks after every step (`AfterEveryStep`): one Hypothesis invariant,
`after_every_step`, runs each check `AFTER_EVERY_STEP` names (erasure reaches the copies,
the live counters agree with the model, refusals stay uniform); and the example's final
check, at `teardown`.

A new check after every step goes here, as a method named in `AFTER_EVERY_STEP` (where
Hypothesis would run it as an invariant of its own: in order of name), not as another
`@invariant`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import ClassVar

from hypothesis.stateful import invariant

from refsim.check import judges
from refsim.check.ids import req_id
from refsim.testing.machine.state import WATCHED_KEYS, MachineState
from refsim.testing.machine.verdicts import judged
from refsim.wire.trace import mark


class AfterEveryStep(MachineState):
    """The checks after every step, mixed into `RecordedFixturesMachine`."""

    # The checks after every step, run by one invariant: Hypothesis pays its own overhead
    # per invariant and step (a verbosity comparison, a timing), so three would cost thrice.
    # In the order Hypothesis ran them as three (by name): where two fail after one step,
    # the same one is reported.
    AFTER_EVERY_STEP: ClassVar[tuple[str, ...]] = ("erasure_reaches_copies",
                                                   "live_state_agrees",
                                                   "refusals_uniform")

    @invariant()
    def after_every_step(self) -> None:
        type(self).steps_taken += 1
        for name in self.AFTER_EVERY_STEP:
            getattr(self, name)()
        self._step += 1  # the exchanges from here on are the next step's (the evidence)
        mark(f"step {self._step}")

    def live_state_agrees(self, every: bool = False
                          ) -> dict[str, list[tuple[str, int | None]]]:
        """Fail-closed: only live runs moved the counter, exactly as the model did. After a
        step, the counters it may have moved (`_may_move`); with `every`, every tenant's
        counters any step of the example may have moved; wherever the reading costs no
        request (in process), every watched counter of every tenant. Returns what it read,
        by tenant."""
        world = self.model.world
        moved, self._moved = self._moved, set()
        read: dict[str, list[tuple[str, int | None]]] = {}
        if (self._same_names and self.inside is not None and self.inside.counter_seam()
                and self.inside.live_counters() == world.counters):
            return read  # every counter of every tenant agrees, the watched ones among them
        for tenant in self.keys:
            if self._gateway_owner(tenant) is not None:  # free to read: all of them
                names: Iterable[str] = WATCHED_KEYS
            elif every:
                names = sorted(self._movable)
            else:
                names = sorted(name for owner, name in moved if owner == tenant)
            read[tenant] = self._readings(tenant, names) if names else []
            for name, got in read[tenant]:
                if got is None:
                    continue
                judged(judges.count_is(req_id("0252.fail-closed-miss"), got,
                                       world.counter_value(tenant, name),
                                       f"{tenant}'s live counter {name}, as the model counts"))
        return read

    def erasure_reaches_copies(self) -> None:
        if self.inside is None:
            return
        for run in self.model.runs.values():
            if run.erased:
                judged(judges.count_is(req_id("0252.copy-erased-with-source"),
                                       self.inside.copy_count(run.id), 0,
                                       f"derived copies of erased {run.id} still stored"))

    def teardown(self) -> None:
        """The example's final check, where no step failed: every tenant's counters that any
        step may have moved, where a step moved one of a tenant it did not run for. Then let
        the host and the model go with the example. Hypothesis's rule strategy and the
        machine refer to each other, so a machine is freed only when a collection finds
        that cycle; until then it kept its host alive, every run and event of the example,
        which the collections on the way (the full ones included, once they had aged that
        far) walked again and again."""
        try:
            if sys.exc_info()[0] is None and "model" in self.__dict__:
                read = self.live_state_agrees(every=True)
                if set(read) == set(self._known) == set(self.keys):
                    # the next example on this host starts from what this one knew
                    for tenant, readings in read.items():
                        self._known[tenant].update(readings)
                    self._memory.counters = self._known
        finally:
            for name in ("client", "inside", "model", "refusals", "registered", "_needles",
                         "oracles", "_memory"):
                self.__dict__.pop(name, None)
            super().teardown()

    def refusals_uniform(self) -> None:
        if self.oracles:  # a difference found at a step, found again after every step
            judged(self.oracles[0])

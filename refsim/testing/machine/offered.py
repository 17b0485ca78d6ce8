"""What the machine may send a host, read off its discovery (`Offered`): the fixtures,
seams and families its rules need, and the critical branches a run must reach
(`CRITICAL`), with why a host cannot reach one (`Offered.unoffered`).

A new fixture, seam or family a rule needs goes here (its name, and in `unoffered` the
branches that need it); a branch every run must reach goes in `CRITICAL`.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.check.observe import SEAM_ERASE, Surface
from refsim.wire import catalog

CRITICAL = (
    "source:eval", "source:workflow", "source:delegates", "source:failed-call",
    "source:credentialed", "source:non-terminal", "source:no-agent", "source:not-held",
    "refusal:unknown", "refusal:undecodable", "refusal:foreign", "refusal:non-terminal",
    "refusal:no-agent", "refusal:not-held", "refusal:erased", "refusal:key-not-task",
    "refusal:suite-fixtures", "refusal:without-mode", "refusal:live-shadow", "refusal:empty-map",
    "replay:no-miss", "replay:miss", "fork:ok", "fork:gone",
)


AGENT_CALL, WAIT_INPUT, NOOP = ("conformance-agent-call", "conformance-wait-input",
    "conformance-noop")
SUITE_FIXTURES_SUITE, TWO_TASKS_SUITE = "refsim-eval-with-suite-fixtures", "refsim-eval-two-tasks"


@attrs.frozen
class Offered:
    """What the machine may send this host, read from its discovery document: it never
    sends what the host does not advertise (fixtureRuns without recordedFixtures, a seam
    or a fixture it does not list, a fork without the replay family)."""

    surface: Surface

    @property
    def recorded(self) -> bool:
        return (self.surface.advertises("recordedFixtures") and
            self.surface.advertises("fixtureMatching"))

    def seam(self, name: str) -> bool:
        return self.surface.offers(name)

    def fixture(self, name: str) -> bool:
        return self.surface.lists(name)

    @property
    def forks(self) -> bool:
        return self.surface.family("replay")

    def lane(self, agent: str) -> bool:
        """An agent the machine may run: the recorder, or a catalog agent the host lists."""
        needed = catalog.for_agent_or_tool(agent)
        return needed is None or self.fixture(needed)

    def script(self, script: list[Any]) -> list[Any]:
        """The script with every step the host cannot run (a tool or a delegate whose
        catalog fixture it does not list) left out, a delegate's own steps kept in line."""
        out: list[Any] = []
        for step in script:
            if "delegate" in step and not self.lane(step["delegate"]):
                out.extend(self.script(step.get("script") or []))
            elif "call" in step and not self.lane(step["call"]):
                continue
            elif "delegate" in step:
                out.append({**step, "script": self.script(step.get("script") or [])})
            else:
                out.append(step)
        return out

    def unoffered(self, tenants: int) -> dict[str, str]:
        """The critical branches this host cannot reach, and what it would take."""
        out: dict[str, str] = {}

        def need(branches: tuple[str, ...], ok: bool, why: str) -> None:
            for branch in branches:
                if not ok:
                    out.setdefault(branch, why)
        if not self.recorded:
            need(tuple(b for b in CRITICAL if b.startswith(("refusal:", "replay:", "fork:"))),
                 False, "the host does not advertise recordedFixtures with fixtureMatching")
        need(("source:workflow", "source:delegates", "source:failed-call",
              "source:credentialed"), self.fixture(AGENT_CALL),
             f"the host does not list the fixture {AGENT_CALL}")
        need(("source:delegates",), self.lane("refsim.agents:helper"),
             "the host does not list the fixture refsim-agent-helper")
        need(("source:failed-call",), self.lane("refsim.tools:flaky"),
             "the host does not list the fixture refsim-tool-flaky")
        need(("source:credentialed",), self.lane("refsim.tools:vault"),
             "the host does not list the fixture refsim-tool-vault")
        need(("source:non-terminal", "refusal:non-terminal"), self.fixture(WAIT_INPUT),
             f"the host does not list the fixture {WAIT_INPUT}")
        need(("source:no-agent", "refusal:no-agent"), self.fixture(NOOP),
             f"the host does not list the fixture {NOOP}")
        need(("source:not-held", "refusal:not-held"), self.lane("refsim.agents:unheld"),
             "the host does not list the fixture refsim-agent-unheld")
        need(("refusal:erased", "fork:gone"), self.seam(SEAM_ERASE),
             f"the host does not advertise the seam {SEAM_ERASE}")
        need(("fork:ok", "fork:gone"), self.forks,
             "the host does not advertise the replay family (forkRun)")
        need(("refusal:suite-fixtures",), self.fixture(SUITE_FIXTURES_SUITE),
             f"the host does not list the fixture {SUITE_FIXTURES_SUITE}")
        need(("refusal:live-shadow", "refusal:empty-map"), self.fixture(TWO_TASKS_SUITE),
             f"the host does not list the fixture {TWO_TASKS_SUITE}")
        need(("refusal:foreign",), tenants > 1,
             "one tenant only: no second tenant's API key")
        return out

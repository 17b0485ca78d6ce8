"""What a host advertises and retains: the knobs that make one host differ from another."""

from __future__ import annotations

import attrs

from refsim.domain.agents import CONTENT_FREE, RECORDER, UNHELD

# The modes this simulator really implements: golden scoring, regression against a
# baseline, and live-shadow (which ignores fixtures). No rubric judge, no adversarial.
IMPLEMENTED_MODES = ("golden", "regression", "live-shadow")


@attrs.frozen
class HostProfile:
    name: str = "reference"
    eval_suite: bool = True
    recorded_fixtures: bool = True
    fixture_matching: bool = True
    fixture_errors: bool = True
    baseline_selection: bool = True
    modes: tuple[str, ...] = IMPLEMENTED_MODES
    # Agents whose calls the host does not keep: their runs are never usable sources.
    unheld_agents: frozenset[str] = frozenset({UNHELD})
    # Agents whose wire lane is content-free (argsHash, no outcome); calls still held.
    content_free_agents: frozenset[str] = frozenset({CONTENT_FREE})
    counter_seam: bool = True
    # Registered code for a replay/fork whose derived copy is gone (assumption gone-copy-code).
    gone_copy_code: str = "replay_source_missing"
    # onMiss for a task whose suite fixtures omit it (assumption default-on-miss).
    default_on_miss: str = "fail"

    @property
    def accepts_recorded_fixtures(self) -> bool:
        """RFC 0252 §A: the member is advertised, and honoured, only with fixtureMatching."""
        return self.recorded_fixtures and self.fixture_matching


PROFILES: dict[str, HostProfile] = {
    "reference": HostProfile(),
    "no-recorded-fixtures": HostProfile(name="no-recorded-fixtures", recorded_fixtures=False),
    "no-fixture-errors": HostProfile(name="no-fixture-errors", fixture_errors=False),
    "no-baseline-selection": HostProfile(name="no-baseline-selection",
                                         baseline_selection=False),
    "content-free-lane": HostProfile(name="content-free-lane",
                                     content_free_agents=frozenset({RECORDER, CONTENT_FREE})),
    "unheld-calls": HostProfile(name="unheld-calls", unheld_agents=frozenset({RECORDER, UNHELD})),
    "no-eval": HostProfile(name="no-eval", eval_suite=False, recorded_fixtures=False),
    "no-counter-seam": HostProfile(name="no-counter-seam", counter_seam=False),
}


def profile_named(name: str) -> HostProfile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown host profile {name!r}; known: {known}") from None

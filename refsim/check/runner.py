"""Runs the checker's parts against a host built from a profile and readings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from refsim.check.assume import Reading, build
from refsim.check.findings import Row
from refsim.check.observe import KEY_A, KEY_B, TENANT_A, TENANT_B
from refsim.check.scenario import ScenarioConfig, run_scenario
from refsim.domain.core import Components
from refsim.domain.profile import HostProfile, profile_named
from refsim.host import SimHost
from refsim.wire.client import HostClient

if TYPE_CHECKING:  # the zoos are imported by what runs them, not by every check
    from refsim.check.variants import Variant
    from refsim.check.zoo import Mutant

PARTS = ("conformance", "examples", "invariants")


@attrs.frozen
class Target:
    """The built-in host under a profile and readings; every check gets a fresh one."""

    profile: str = "reference"
    readings: tuple[Reading, ...] = ()
    seed: int = 0
    base_components: Components | None = None
    mutant: Mutant | None = None
    variant: Variant | None = None

    def host(self, profile: str | None = None) -> SimHost:
        """A fresh host: under `profile` when a check pins one (an example row's `profile:`),
        else under the target's own profile, the one the report is labelled with."""
        chosen: HostProfile = profile_named(self.profile if profile is None else profile)
        if self.variant is not None:
            return self.variant.host(self.seed, chosen)
        if self.mutant is None:
            chosen, components = build(self.readings, chosen, self.base_components)
            return SimHost(seed=self.seed, profile=chosen, components=components)
        chosen, components = build(self.readings, self.mutant.claims(chosen),
                                   self.mutant.components())
        return self.mutant.assemble(self.seed, chosen, components)

    @property
    def label(self) -> str:
        extra = "".join(f" --assume {r}" for r in self.readings)
        faulty = f" --mutant {self.mutant.name}" if self.mutant is not None else ""
        correct = f" --variant {self.variant.name}" if self.variant is not None else ""
        return f"refsim:{self.profile}{faulty}{correct}{extra}"


def matches(prefix: str | None, row: Row) -> bool:
    if not prefix:
        return True
    for value in (row.requirement_id, row.check_id):
        short = value.removeprefix("openwop.requirement.").removeprefix("refsim.requirement.")
        if value.startswith(prefix) or short.startswith(prefix) or prefix in short:
            return True
    return False


def run_parts(target: Target, parts: Sequence[str], prefix: str | None = None,
              client: HostClient | None = None, tenant_b_key: str | None = KEY_B,
              api_key: str = KEY_A) -> list[Row]:
    """The parts' rows on the built-in host (a fresh one per check), or, with `client`, on
    that one host (over HTTP): every row the wire can witness, the rest listed apart."""
    rows: list[Row] = []
    if client is not None:
        keys = {TENANT_A: api_key, **({TENANT_B: tenant_b_key} if tenant_b_key else {})}
        remote = client
        runners: dict[str, Callable[[], list[Row]]] = {
            "conformance": lambda: run_scenario(remote, ScenarioConfig(api_key, tenant_b_key)),
            "examples": lambda: _remote_examples(remote, keys, prefix),
            "invariants": lambda: _remote_invariants(remote, keys, prefix),
        }
    else:
        runners = {
            "conformance": lambda: run_scenario(target.host(),
                                                ScenarioConfig(api_key, tenant_b_key)),
            "examples": lambda: _examples(target, prefix),
            "invariants": lambda: _invariants(target, prefix),
        }
    for part in parts:
        rows += [r for r in runners[part]() if matches(prefix, r)]
    return rows


def _examples(target: Target, prefix: str | None) -> list[Row]:
    from refsim.check.examples import run_examples
    return run_examples(target.host, prefix)


def _remote_examples(client: HostClient, keys: dict[str, str], prefix: str | None
                     ) -> list[Row]:
    from refsim.check.examples import run_examples
    return run_examples(lambda profile: client, prefix, keys=keys, remote=True)


def _remote_invariants(client: HostClient, keys: dict[str, str], prefix: str | None
                       ) -> list[Row]:
    from refsim.check.invariants import run_invariants
    return run_invariants(lambda: client, prefix, keys=keys, remote=True)


def _invariants(target: Target, prefix: str | None) -> list[Row]:
    from refsim.check.invariants import run_invariants
    return run_invariants(lambda: target.host(), prefix)


@attrs.frozen
class Change:
    row: Row
    before: Row | None


def changes(before: Sequence[Row], after: Sequence[Row]) -> list[Change]:
    """Rows whose disposition differs between two runs, keyed by requirement and check."""
    old = {(r.requirement_id, r.check_id): r for r in before}
    return [Change(r, old.get((r.requirement_id, r.check_id))) for r in after
            if (r.requirement_id, r.check_id) not in old
            or old[(r.requirement_id, r.check_id)].disposition is not r.disposition]


def explain(readings: Sequence[Reading], found: Sequence[Change]) -> str:
    lines = []
    for reading in readings:
        lines.append(f"Assuming {reading}: {reading.meaning}")
    if not found:
        lines.append("No check changes under this reading.")
    for change in found:
        was = change.before.disposition.value if change.before else "absent"
        row = change.row
        name = row.check_id if row.check_id != row.requirement_id else row.requirement_id
        lines.append(f"  {name} ({row.requirement_id}): {was} -> {row.disposition.value}")
        for finding in row.findings:
            if not finding.ok:
                lines.append(f"      because {finding.message}")
                if finding.observation is not None:
                    lines.append(f"      observed {_short(finding.observation)}")
    return "\n".join(lines)


def _short(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

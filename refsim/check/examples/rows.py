"""The example table's rows as values: an `Example` (one row, validated), its `Action`s,
its `RowRequest`s and their `Expected` values, and what a row may require of the host
(`FACET_MEMBERS`, `FAMILIES`).

Part of `refsim.check.examples` (import the table from there). A new property of a row (what
it needs, where it can run) goes on `Example` here; how a row is read from YAML is
`refsim.check.examples.load`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from refsim.check.expectations import EXPECTATIONS
from refsim.check.observe import COUNTER_TOOL, Surface
from refsim.check.registry import load_registry
from refsim.wire import catalog


@attrs.frozen
class Action:
    """One step: `kind` (a key of ACTIONS) and its arguments, normalised at load."""

    kind: str
    args: Mapping[str, Any] = attrs.field(hash=False)

    @property
    def tenant(self) -> str:
        return str(self.args.get("key", "acme"))

    @property
    def capture(self) -> str | None:
        name = self.args.get("as")
        return str(name) if name is not None else None


@attrs.frozen
class Expected:
    name: str
    value: Any = attrs.field(hash=False)


@attrs.frozen
class RowRequest:
    label: str
    action: Action
    expect: tuple[Expected, ...]


@attrs.frozen
class Example:
    """One row of the table, validated: every name it uses is defined before it is used."""

    id: str
    source: str
    requirement_id: str
    title: str
    profile: str | None  # None: the target's profile, gated on recordedFixtures
    setup: tuple[Action, ...]
    requests: tuple[RowRequest, ...]
    file: str = attrs.field(default="", eq=False)
    # What the host must advertise for the row to say anything of it (`requires:`, and
    # what the row's own requests imply: evalModes and baselineRunId need
    # baselineSelection, a fork the replay family).
    requires: tuple[str, ...] = attrs.field(default=(), eq=False)
    # What the row's claim needs the host NOT to advertise (`withholds:`): it judges a host
    # without these members, so a host that advertises one gets an inapplicable row. In
    # process it runs on its `profile`, which withholds them; over HTTP on the host itself.
    withholds: tuple[str, ...] = attrs.field(default=(), eq=False)
    # Every live-counter key the row's scripts and suites name.
    counter_keys: tuple[str, ...] = attrs.field(default=(), eq=False)
    # `every_host:` the row is judged on every host, whatever it advertises.
    every_host: bool = attrs.field(default=False, eq=False)

    @property
    def actions(self) -> tuple[Action, ...]:
        return (*self.setup, *(r.action for r in self.requests))

    @property
    def expectation_names(self) -> set[str]:
        return {e.name for r in self.requests for e in r.expect}

    def unmet(self, surface: Surface) -> list[str]:
        """What the row requires that the host does not advertise."""
        out = []
        for name in self.requires:
            if name in FAMILIES and not surface.family(name):
                out.append(f"the {name} family")
            elif name in FACET_MEMBERS and not surface.advertises(name):
                out.append(f"agents.evalSuite.{name}")
        return out

    def advertised_against(self, surface: Surface) -> list[str]:
        """What the host advertises that the row's claim needs withheld."""
        return [f"agents.evalSuite.{name}" for name in self.withholds
                if surface.advertises(name)]

    def fixtures(self) -> set[str]:
        """The catalog fixtures the row runs beside its suites: the workflows it starts and
        the agents and tools its requests and its suites name (the recorder and the counter
        come with the three conformance fixtures)."""
        needed = catalog.needs([a.args for a in self.actions])
        for action in self.actions:
            if action.kind == "create_workflow":
                needed.add(str(action.args["workflow"]))
            elif (action.kind in ("register_suite", "create_eval")
                    and isinstance(action.args.get("suite"), str)):
                needed |= catalog.suite_needs(str(action.args["suite"]))
        return needed

    def needs_inside(self) -> str | None:
        """Why the row can only run in process (None when the wire can witness it): it pins
        a profile of the built-in host, the requirement it witnesses is one no outside
        party can observe (its witness class is unwitnessable), or every claim it makes
        needs the inside."""
        if self.profile is not None and not self.withholds:
            return (f"it states a fact about the {self.profile!r} profile of the built-in "
                    "host, which a host behind HTTP cannot be switched to")
        registry = load_registry()
        requirement = (registry.requirement(self.requirement_id)
            if self.requirement_id in registry else None)
        if requirement is not None and requirement.witness == "unwitnessable":
            return (f"its requirement ({requirement.short}) is unwitnessable from outside: "
                    "what it claims never reaches the wire, so only the simulator's inside "
                    "can observe it")
        claims = self.expectation_names - {"status", "error"}
        blind = sorted(n for n in claims if not EXPECTATIONS[n].observable_outside)
        if claims and len(blind) == len(claims):
            return ("every claim it makes reads the simulator's inside (" + ", ".join(blind)
                    + ")")
        return None

    def wire_claims_beside_the_inside(self) -> bool:
        """Whether the row, listed apart over HTTP only because its requirement is
        unwitnessable, also makes claims the wire can witness (besides status and error)."""
        if self.profile is not None and not self.withholds:
            return False
        claims = self.expectation_names - {"status", "error"}
        return any(EXPECTATIONS[n].observable_outside for n in claims)

    def live_keys(self) -> set[str]:
        """Every live-counter key a step of the row can move: those its scripts name and
        those of the catalog suites it runs."""
        keys = set(self.counter_keys)
        for action in self.actions:
            suite = action.args.get("suite")
            if isinstance(suite, str) and catalog.is_suite(suite):
                keys.update(_counter_keys(catalog.suite(suite)))
        return keys

    def tenants_missing(self, keys: Iterable[str]) -> list[str]:
        """The tenants the row acts as that have no key among `keys` (those it adds through
        the tenant seam aside)."""
        return sorted({a.tenant for a in self.actions} - set(keys)
                      - {a.capture for a in self.actions if a.kind == "add_tenant"})

    def matches(self, prefix: str | None) -> bool:
        """`prefix` is a substring of the short requirement id or of the example id."""
        if not prefix:
            return True
        short = _short(prefix)
        return short in _short(self.requirement_id) or short in self.id


def _short(text: str) -> str:
    for head in ("openwop.requirement.", "refsim.requirement."):
        if text.startswith(head):
            return text[len(head):]
    return text


# What a row may require of the host, beside recordedFixtures (the gate): a member of the
# agents.evalSuite facet, or a capability family at the discovery root.
FACET_MEMBERS = frozenset({"fixtureErrors", "baselineSelection", "fixtureMatching"})
FAMILIES = frozenset({"replay", "runList"})


def _counter_keys(value: Any) -> Iterable[str]:
    """The live-counter keys named anywhere in `value` (script steps calling the counter)."""
    if isinstance(value, dict):
        args = value.get("args")
        if (value.get("call") == COUNTER_TOOL and isinstance(args, dict)
                and isinstance(args.get("key"), str)):
            yield args["key"]
        for v in value.values():
            yield from _counter_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _counter_keys(v)

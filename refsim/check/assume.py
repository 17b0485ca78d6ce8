"""`--assume NAME=VALUE`: build the host under another reading of an open point.

The names and values come from the `assumable` rows of specs/assumptions.yaml; each
maps to a profile change or a component swap in `refsim.domain.readings`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from refsim.data import paths, yaml_data
from refsim.domain.agents import RECORDER
from refsim.domain.core import Components
from refsim.domain.profile import HostProfile
from refsim.domain.readings import DelegateDeriver, MergingPlanner, MergingRules, ReasonedRefusals

Change = Callable[[HostProfile, Components], tuple[HostProfile, Components]]


def _profile(**changes: Any) -> Change:
    return lambda p, c: (attrs.evolve(p, **changes), c)


def _components(**changes: Any) -> Change:
    return lambda p, c: (p, attrs.evolve(c, **changes))


# How each non-default value is built. The YAML says what the reading means; this says
# where the code takes it. A value listed in the YAML but missing here is an error.
BUILDERS: dict[tuple[str, str], Change] = {
    ("merge-suite-fixtures", "merge"): _components(rules=MergingRules(),
                                                   planner=MergingPlanner()),
    ("gone-copy-code", "run_expired"): _profile(gone_copy_code="run_expired"),
    ("gone-copy-code", "eval_recorded_fixtures_gone"):
        _profile(gone_copy_code="eval_recorded_fixtures_gone"),
    ("default-on-miss", "live"): _profile(default_on_miss="live"),
    ("uniform-refusal-body", "status-and-code-only"): _components(rules=ReasonedRefusals()),
    ("delegate-calls-derived", "included"): _components(deriver=DelegateDeriver()),
    ("fixture-errors", "not-advertised"): _profile(fixture_errors=False),
    ("held-calls", "content-free-lane"): lambda p, c: (attrs.evolve(
        p, content_free_agents=p.content_free_agents | {RECORDER}), c),
    ("held-calls", "not-held"): lambda p, c: (attrs.evolve(
        p, unheld_agents=p.unheld_agents | {RECORDER}), c),
}


@attrs.frozen
class Assumable:
    id: str
    question: str
    default: str
    alternatives: dict[str, str]  # value -> reading


@functools.cache
def _register() -> dict[str, Any]:
    doc: dict[str, Any] = yaml_data.load(
        (paths.SPECS / "assumptions.yaml").read_text(encoding="utf-8"))
    return doc


@functools.cache
def assumables() -> dict[str, Assumable]:
    doc = _register()
    out: dict[str, Assumable] = {}
    for row in doc["assumptions"]:
        if not row.get("assumable"):
            continue
        alternatives = {str(a["value"]): str(a["reading"]) for a in row.get("alternatives", [])}
        out[row["id"]] = Assumable(row["id"], str(row["question"]).strip(), str(row["default"]),
                                   alternatives)
    return out


class AssumptionError(ValueError):
    """A `--assume` the register does not know: the message lists what it does know."""


@attrs.frozen
class Reading:
    name: str
    value: str
    meaning: str

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


def parse(specs: Sequence[str]) -> list[Reading]:
    readings: list[Reading] = []
    known = assumables()
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise AssumptionError(f"--assume takes NAME=VALUE, got {spec!r}")
        row = known.get(name)
        if row is None:
            listed = {str(r["id"]) for r in _register()["assumptions"]}
            why = (f"{name!r} is an open point refsim settles one way only (not assumable)"
                   if name in listed else f"unknown assumption {name!r}")
            raise AssumptionError(f"{why}; assumable: " + ", ".join(sorted(known)))
        if value == row.default:
            readings.append(Reading(name, value, "the default reading"))
            continue
        built = [v for v in row.alternatives if (name, v) in BUILDERS]
        if value in row.alternatives and value not in built:
            # written in specs/assumptions.yaml, but no code builds a host that reads it so
            raise AssumptionError(
                f"{name}={value} is a reading specs/assumptions.yaml lists, but no code "
                f"builds it yet (refsim.check.assume.BUILDERS has none for it); readings "
                f"built: {', '.join([row.default, *built])}")
        if value not in built:
            choices = ", ".join([row.default, *built])
            raise AssumptionError(f"{name} has no reading {value!r}; choose one of {choices}")
        readings.append(Reading(name, value, row.alternatives[value]))
    return readings


def build(readings: Sequence[Reading], profile: HostProfile,
          components: Components | None = None) -> tuple[HostProfile, Components]:
    components = components or Components()
    for reading in readings:
        change = BUILDERS.get((reading.name, reading.value))
        if change is not None:
            profile, components = change(profile, components)
    return profile, components

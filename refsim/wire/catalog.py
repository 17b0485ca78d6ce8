"""The conformance fixture catalog: every suite, workflow, agent and tool behaviour the
checker runs, published as fixtures a host loads at boot (specs/fixtures/, README there).

A host lists the ids it seeded in its discovery document's `fixtures`; the checker runs a
row only where every fixture the row needs is listed (a suite may also come through
refsim's suite seam, where the host advertises it), and says `blocked`, naming the
fixture, where one is not. The three `conformance-eval-recorded-*` suites of RFC 0252's
scenario bring the recorder agent and the counter tool with them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from refsim.data import paths

# Named by the three conformance fixtures themselves (RFC 0252 Conformance): never listed
# apart.
RECORDER = "conformance.eval:recorder"
COUNTER = "conformance.eval:counter"
KINDS = ("suite", "workflow", "agent", "tool")


@attrs.frozen
class Fixture:
    """One catalog entry: its fixture id, its kind, and its document."""

    id: str
    kind: str
    doc: Mapping[str, Any] = attrs.field(eq=False, repr=False)

    @property
    def names(self) -> str | None:
        """The agent or tool id an agent or tool fixture stands for."""
        value = self.doc.get("agentId" if self.kind == "agent" else "toolId")
        return value if isinstance(value, str) else None


@functools.cache
def _load(directory: str) -> tuple[Fixture, ...]:
    root = Path(directory)
    out = [Fixture(f.stem, "suite", json.loads(f.read_text(encoding="utf-8")))
           for f in sorted(root.glob("*.json"))]
    for kind in KINDS[1:]:
        for f in sorted((root / f"{kind}s").glob("*.json")):
            doc = json.loads(f.read_text(encoding="utf-8"))
            if doc.get("id") != f.stem or doc.get("kind") != kind:
                raise ValueError(f"{f}: a catalog {kind} names itself {doc.get('id')!r} "
                                 f"({doc.get('kind')!r}); expected {f.stem!r} ({kind!r})")
            out.append(Fixture(f.stem, kind, doc))
    return tuple(out)


def fixtures(directory: Path = paths.FIXTURES) -> tuple[Fixture, ...]:
    return _load(str(directory))


def ids(directory: Path = paths.FIXTURES) -> list[str]:
    """Every fixture id, as a host that loaded the whole catalog lists them."""
    return sorted(f.id for f in fixtures(directory))


def agent_and_tool_ids(directory: Path = paths.FIXTURES) -> list[str]:
    return sorted(f.id for f in fixtures(directory) if f.kind in ("agent", "tool"))


def suite(fixture_id: str) -> Mapping[str, Any]:
    """The suite document a catalog suite fixture id names (KeyError if none)."""
    for f in fixtures():
        if f.id == fixture_id and f.kind == "suite":
            return f.doc
    raise KeyError(f"{fixture_id!r} is no suite of the catalog (specs/fixtures/)")


def is_suite(name: str) -> bool:
    return any(f.id == name and f.kind == "suite" for f in fixtures())


@functools.cache
def _by_name() -> dict[str, str]:
    return {f.names: f.id for f in fixtures() if f.kind in ("agent", "tool") and f.names}


def for_agent_or_tool(name: str) -> str | None:
    """The fixture id that stands for an agent or tool id (None: the recorder, the counter,
    which the conformance fixtures bring, or a name the catalog does not know)."""
    return _by_name().get(name)


def needs(value: Any) -> set[str]:
    """The agent and tool fixtures a script, a suite document or a request body names,
    at any depth (`call`, `delegate`, `agentId`, `agent`)."""
    out: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in ("call", "delegate", "agentId", "agent"):
                name = item.get(key)
                if isinstance(name, str) and for_agent_or_tool(name) is not None:
                    out.add(str(for_agent_or_tool(name)))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def suite_needs(fixture_id: str) -> set[str]:
    """The fixtures a catalog suite needs beside itself (its tasks' agents and tools)."""
    return needs(suite(fixture_id)) if is_suite(fixture_id) else set()

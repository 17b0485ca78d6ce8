"""Fixture entries and the RFC 0244 matcher (selection, consumption, per-trial reset).

Entries are indexed by tool and canonical arguments, so serving a call costs
one canonicalisation of its arguments and never a scan of the entry list.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.domain.canonical import canonical


@attrs.frozen
class FixtureEntry:
    """One `toolResponses` entry. `args` is only compared when `has_args`."""

    tool: str
    args: Any = None
    has_args: bool = False
    response: Any = None
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool}
        if self.has_args:
            out["args"] = self.args
            out["argsMatch"] = "exact"
        out["response"] = self.response
        if self.is_error:
            out["isError"] = True
        return out

    @staticmethod
    def from_json(doc: dict[str, Any]) -> FixtureEntry:
        return FixtureEntry(tool=doc["tool"], args=doc.get("args"), has_args="args" in doc,
                            response=doc.get("response"), is_error=bool(doc.get("isError")))


@attrs.define
class FixtureMatcher:
    """Serves entries: the first unconsumed match in list order; each entry serves once."""

    entries: tuple[FixtureEntry, ...]
    _exact: dict[tuple[str, str], list[int]] = attrs.field(init=False, factory=dict)
    _any_args: dict[str, list[int]] = attrs.field(init=False, factory=dict)
    _next: dict[object, int] = attrs.field(init=False, factory=dict)
    lookups: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        for index, entry in enumerate(self.entries):
            if entry.has_args:
                self._exact.setdefault((entry.tool, canonical(entry.args)), []).append(index)
            else:
                self._any_args.setdefault(entry.tool, []).append(index)

    def reset(self) -> None:
        """Start a new trial: every entry is unconsumed again."""
        self._next.clear()

    def _head(self, key: object, bucket: list[int] | None) -> int | None:
        if not bucket:
            return None
        pos = self._next.get(key, 0)
        return bucket[pos] if pos < len(bucket) else None

    def select(self, tool: str, args: Any) -> FixtureEntry | None:
        """Consume and return the entry that serves this call, or None on a miss."""
        self.lookups += 1
        exact_key = (tool, canonical(args))
        exact = self._head(exact_key, self._exact.get(exact_key))
        loose = self._head(tool, self._any_args.get(tool))
        if exact is None and loose is None:
            return None
        if loose is None or (exact is not None and exact < loose):
            self._next[exact_key] = self._next.get(exact_key, 0) + 1
            return self.entries[exact]  # type: ignore[index]
        self._next[tool] = self._next.get(tool, 0) + 1
        return self.entries[loose]

    @property
    def consumed(self) -> int:
        return sum(self._next.values())

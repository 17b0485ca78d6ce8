"""Fixture entries and the RFC 0244 matcher (selection, consumption, per-trial reset).

Entries are indexed by tool and canonical arguments, so serving a call costs
one canonicalisation of its arguments and never a scan of the entry list.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from refsim.domain.canonical import canonical


class FixtureEntry(NamedTuple):
    """One `toolResponses` entry. `args` is only compared when `has_args`. A named tuple,
    for the reason `refsim.domain.runs.Event` gives. `key` is the canonical form of `args`
    when the recorded call it was derived from already holds it (None: the matcher computes
    it), so a source replayed again and again is not canonicalised again and again."""

    tool: str
    args: Any = None
    has_args: bool = False
    response: Any = None
    is_error: bool = False
    key: str | None = None

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
    # Tools some exact-args entry names: a call to any other tool needs no canonical form.
    _exact_tools: set[str] = attrs.field(init=False, factory=set)
    lookups: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        for index, entry in enumerate(self.entries):
            if entry.has_args:
                key = entry.key if entry.key is not None else canonical(entry.args)
                self._exact.setdefault((entry.tool, key), []).append(index)
                self._exact_tools.add(entry.tool)
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

    def select(self, tool: str, args: Any, key: str | None = None) -> FixtureEntry | None:
        """Consume and return the entry that serves this call, or None on a miss. `key` is
        `canonical(args)` when the caller already has it."""
        self.lookups += 1
        nxt = self._next
        loose: int | None = None
        bucket = self._any_args.get(tool)
        if bucket:
            pos = nxt.get(tool, 0)
            if pos < len(bucket):
                loose = bucket[pos]
        exact: int | None = None
        if tool in self._exact_tools:
            exact_key = (tool, key if key is not None else canonical(args))
            bucket = self._exact.get(exact_key)
            if bucket:
                pos = nxt.get(exact_key, 0)
                if pos < len(bucket):
                    exact = bucket[pos]
        if exact is not None and (loose is None or exact < loose):
            nxt[exact_key] = nxt.get(exact_key, 0) + 1
            return self.entries[exact]
        if loose is None:
            return None
        nxt[tool] = nxt.get(tool, 0) + 1
        return self.entries[loose]

    @property
    def consumed(self) -> int:
        return sum(self._next.values())

"""Routes as data: the row (`Route`) and the table of rows (`RouteTable`), and the one way a
handler's refusal leaves it. The host's own table, one row per route, is `ROUTES` at the end
of `refsim.wire.router`.

A row names the method, the path pattern, whether the route needs a caller, what it does
with a body, when the host has it at all, and the handler; the router matches, warms,
checks and dispatches from the rows alone. A helper that cannot go on raises `Refused`,
which the router turns into the answer once, where it dispatches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

from refsim.domain.profile import HostProfile
from refsim.domain.refusals import Refusal

H = TypeVar("H")
T = TypeVar("T")

# `{name}` is a non-empty segment; `{name?}` may be empty; either may end in a fixed
# suffix (`{run?}:fork`), which the segment must end in and the value leaves out.
_HOLE_RE = re.compile(r"\{[a-z]+(\??)\}(.*)")


class Refused(Exception):
    """A request the host declines, raised by a helper: the handler need not pass it on."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


def unwrap(value: T | Refusal) -> T:
    """The value, or `Refused` with the refusal the domain answered instead."""
    if isinstance(value, Refusal):
        raise Refused(value)
    return value


@attrs.frozen
class Body:
    """What a route does with a request body: it is parsed as a JSON object and, where a
    schema is named, held to `caps` (work limits, checked first so the schema check stays
    linear) and then to the schema; an issue at a pointer `skip` picks is not the schema's
    to refuse (the handler or the domain judges that value)."""

    schema: str | None = None
    caps: Callable[[dict[str, Any]], Refusal | None] | None = None
    skip: Callable[[str], bool] | None = None


JSON = Body()  # parsed as a JSON object, with no schema


@attrs.frozen
class _Hole:
    index: int  # which segment
    suffix: str
    may_be_empty: bool


@attrs.frozen
class Route(Generic[H]):
    """One route. `seam` is the name discovery advertises the route under, for a seam of
    the conformance profile; `when` says which hosts have it (all, when None)."""

    method: str
    pattern: str
    handler: H
    auth: bool = True
    body: Body | None = None
    when: Callable[[HostProfile], bool] | None = None
    seam: str | None = None
    # The pattern, compiled: its segment count, its fixed segments, its holes.
    size: int = attrs.field(init=False, eq=False)
    _fixed: tuple[tuple[int, str], ...] = attrs.field(init=False, repr=False, eq=False)
    _holes: tuple[_Hole, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not self.pattern.startswith("/"):
            raise ValueError(f"a route pattern starts with '/': {self.pattern!r}")
        segments = self.pattern.split("/")[1:]
        fixed: list[tuple[int, str]] = []
        holes: list[_Hole] = []
        for index, segment in enumerate(segments):
            hole = _HOLE_RE.fullmatch(segment)
            if hole is None:
                fixed.append((index, segment))
            else:
                holes.append(_Hole(index, hole.group(2), bool(hole.group(1))))
        object.__setattr__(self, "size", len(segments))
        object.__setattr__(self, "_fixed", tuple(fixed))
        object.__setattr__(self, "_holes", tuple(holes))

    def exists(self, profile: HostProfile) -> bool:
        return self.when is None or self.when(profile)

    def match(self, method: str, segments: Sequence[str]) -> list[str] | None:
        """The values of the pattern's holes, in order, or None when the request is not
        this route's (whatever the host: see `exists`)."""
        if method != self.method or len(segments) != self.size:
            return None
        for index, text in self._fixed:
            if segments[index] != text:
                return None
        values: list[str] = []
        for hole in self._holes:
            segment = segments[hole.index]
            if not segment.endswith(hole.suffix):
                return None
            value = segment[:len(segment) - len(hole.suffix)]
            if not value and not hole.may_be_empty:
                return None
            values.append(value)
        return values


@attrs.frozen
class RouteTable(Generic[H]):
    """The rows, and an index of them by method and segment count (derived, so a lookup
    reads a row or two, not every row)."""

    rows: tuple[Route[H], ...]
    _by_shape: dict[tuple[str, int], list[Route[H]]] = attrs.field(init=False, repr=False,
                                                                   eq=False)

    def __attrs_post_init__(self) -> None:
        by_shape: dict[tuple[str, int], list[Route[H]]] = {}
        for route in self.rows:
            by_shape.setdefault((route.method, route.size), []).append(route)
        object.__setattr__(self, "_by_shape", by_shape)

    def find(self, profile: HostProfile, method: str, segments: Sequence[str]
             ) -> tuple[Route[H], list[str]] | None:
        """The first row the host has that the request matches, and its hole values."""
        for route in self._by_shape.get((method, len(segments)), ()):
            values = route.match(method, segments)
            if values is not None and route.exists(profile):
                return route, values
        return None

    def seams(self, profile: HostProfile) -> list[str]:
        """The seams this host has, in the rows' order: what discovery advertises."""
        return [route.seam for route in self.rows
                if route.seam is not None and route.exists(profile)]

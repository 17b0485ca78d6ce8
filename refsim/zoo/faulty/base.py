"""What every faulty host is made of, and what the family modules share: the `Mutant` class
(the reference host with one part swapped), the zoo's registry that `mutant` looks hosts up
in, `_swap` (components with some parts replaced), and the helpers several families' edges
use to read a request or rewrite an answer (`_caller_and_body`, `_with_header`,
`_is_unusable`, `_run_id_of`, `_stream_only`). It imports none of the family modules (the
package `refsim.zoo.faulty` gathers them); a new helper goes here only once two families use
it, and a new faulty host never does: it goes in the module of its family.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

import attrs

from refsim.check.assume import Reading, build
from refsim.domain.core import Components
from refsim.domain.ids import ProjectionError, unproject
from refsim.domain.owners import Owner
from refsim.domain.profile import HostProfile
from refsim.domain.refusals import UNUSABLE_SOURCE
from refsim.host import Edge, SimHost
from refsim.wire.response import Response


@attrs.frozen
class Mutant:
    """One faulty host: the reference host with one part swapped (a component, the profile's
    discovery claim, or an edge that rewrites answers on the wire)."""

    name: str
    breaks: str  # the RFC line, in a few words
    components: Callable[[], Components] = Components
    profile: Callable[[HostProfile], HostProfile] | None = None
    edge: Edge | None = None
    # Wires a component to the host it lives in, for parts that read the whole core.
    wire: Callable[[SimHost], None] | None = None
    # Why its fault cannot show on the wire, when it cannot: then only the in-process
    # checker (with the simulator's inside) can kill it.
    inside_only: str | None = None
    # Its fault is only in how long answers take: the latency rows judge it; the machine
    # times nothing (its steps run in any order, on a host that may be busy).
    timing_only: bool = False

    @property
    def doc(self) -> str:
        return self.breaks

    def host(self, seed: int = 0, profile: HostProfile | None = None) -> SimHost:
        return self.assemble(seed, self.claims(profile or HostProfile()), self.components())

    def claims(self, profile: HostProfile) -> HostProfile:
        """`profile` as this host advertises it (its own lie, if it has one)."""
        return self.profile(profile) if self.profile is not None else profile

    def assemble(self, seed: int, profile: HostProfile, components: Components) -> SimHost:
        """The faulty host from these parts: its edge and its wiring added."""
        host = SimHost(seed=seed, profile=profile, components=components, edge=self.edge)
        if self.wire is not None:
            self.wire(host)
        return host

    # As a `refsim.check.runner.HostRecipe`:

    @property
    def flag(self) -> str:
        return "--mutant"

    def read_as(self, readings: Sequence[Reading], seed: int, profile: HostProfile) -> SimHost:
        chosen, components = build(readings, self.claims(profile), self.components())
        return self.assemble(seed, chosen, components)

    def rebuilt(self) -> tuple[str, str]:
        return "from refsim.zoo.faulty import mutant", f"mutant({self.name!r})"

    def __reduce__(self) -> tuple[Callable[[str], Mutant], tuple[str]]:
        """To another process by name: its parts are functions."""
        return mutant, (self.name,)


# The zoo in its order, as the package (`refsim.zoo.faulty`) assembled it from the family
# modules: `mutant` looks names up here, since this module imports none of them.
_ZOO: list[Mutant] = []


def assemble(order: Sequence[str], *families: Sequence[Mutant]) -> tuple[Mutant, ...]:
    """The zoo: the hosts of every family, in `order` (each host named there once, and built
    by one family only); from then on `mutant` finds them."""
    hosts = [m for family in families for m in family]
    built = {m.name: m for m in hosts}
    twice = sorted({name for seen in (Counter(m.name for m in hosts), Counter(order))
                    for name, times in seen.items() if times > 1})
    unordered = sorted(set(built) - set(order))
    unbuilt = sorted(set(order) - set(built))
    if twice or unordered or unbuilt:
        raise ValueError(f"the zoo does not add up: named twice {twice}; built but not in the "
                         f"order {unordered}; in the order but built by no family {unbuilt}")
    _ZOO[:] = [built[name] for name in order]
    return tuple(_ZOO)


def mutant(name: str) -> Mutant:
    for m in _ZOO:
        if m.name == name:
            return m
    raise KeyError(f"no mutant {name!r}; known: {', '.join(m.name for m in _ZOO)}")


# ----------------------------------------------------------------------------- shared parts


def _caller_and_body(host: SimHost, headers: dict[str, str], body: bytes | None
                     ) -> tuple[Owner | None, Any]:
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    owner = host.core.caller(auth.partition(" ")[2].strip())
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    return owner, doc


def _with_header(response: Response, name: str, value: str) -> Response:
    return attrs.evolve(response, headers={**response.headers, name: value})


def _is_unusable(response: Response) -> bool:
    return (response.status == 400 and isinstance(response.json, dict)
        and response.json.get("message") == UNUSABLE_SOURCE.message)


def _run_id_of(target: str) -> str | None:
    parts = target.split("?", 1)[0].split("/")
    if len(parts) < 3 or parts[1] != "runs":
        return None
    segment = unquote(parts[2]).split(":", 1)[0]
    if "/" in segment:  # the slash percent-encoded
        return segment
    try:
        return unproject(segment)
    except (ProjectionError, UnicodeError):
        return None


def _stream_only(rewrite: Callable[[SimHost, dict[str, Any]], dict[str, Any]]) -> Edge:
    """Rewrites the events of the SSE stream only (the poll shows them as they are)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or not target.split("?", 1)[0].endswith("/events")
                or response.status != 200 or response.text is None):
            return response
        frames = []
        for chunk in response.text.split("\n\n"):
            lines = chunk.split("\n")
            out = []
            for line in lines:
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    line = "data: " + json.dumps(rewrite(host, event), separators=(",", ":"))
                out.append(line)
            frames.append("\n".join(out))
        return attrs.evolve(response, text="\n\n".join(frames))
    return edge


def _swap(**parts: Callable[[], Any]) -> Callable[[], Components]:
    return lambda: Components(**{name: make() for name, make in parts.items()})

"""Asking again: whether refusals a client cannot tell apart stay alike when each is asked
several times, interleaved (a header that changes with the clock is noise, an oracle is
constant within each request's answers), and whether a refused request made a run. It
observes through `refsim.check.observe` and judges with `refsim.check.judges`, so neither
of those needs the other."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Mapping, Sequence

import attrs

from refsim.check import judges
from refsim.check.findings import Finding
from refsim.check.observe import (
    _NOISE,
    NO_SUCH_TENANT,
    NOISE_SAMPLES,
    REPLAY,
    UNKNOWN_OPAQUE,
    Session,
    _keyable,
    eval_body,
)
from refsim.wire.response import Response


def no_new_runs(session: Session, req: str, before: Mapping[str, str | None] | None,
                what: str, kinds: Sequence[str] = ("eval",)) -> list[Finding]:
    """§B "before the run starts", judged by listing: the caller's list gains no run the
    refused requests could have made (`Session.listing_news` says which are other
    traffic). Nothing is judged where either listing cannot be read."""
    news = session.listing_news(before, kinds)
    if news is None:
        return []
    return [judges.no_new_runs(req, *news[:2], what, news[2])]


def noise_of_host(session: Session) -> frozenset[str]:
    """What varies on this host between answers to one and the same refused request (a
    request id, a trace header, a correlation id in `details`): noise, which no uniformity
    judge may count as a difference. Learnt once per client from NOISE_SAMPLES refusals
    of an id no host minted (they change nothing)."""
    keyed = _keyable(session.client)
    if keyed and session.client in _NOISE:
        return _NOISE[session.client]
    if getattr(session.client, "edge", True) is None and hasattr(session.client, "core"):
        # The built-in host with nothing rewriting its answers: it adds nothing that varies
        # (no request id, no clock in a refusal). Nothing is set aside, which judges no
        # more leniently than learning would.
        return frozenset()
    body = eval_body(REPLAY, {"record": f"{NO_SUCH_TENANT}/{UNKNOWN_OPAQUE}"})
    found = judges.noise_of([session.create(body) for _ in range(NOISE_SAMPLES)])
    if keyed:
        _NOISE[session.client] = found
    return found


# Where two refusals read differently on first sight, each is asked for again this many
# times, interleaved in a random order, before the difference counts (a header that takes
# one of a few values at random, or changes with the clock, is noise the first sight
# cannot tell from an oracle).
ALIKE_SAMPLES = 4
# Where ALIKE_SAMPLES answers each still tell the requests apart, each is asked this many
# times more before the difference counts: a feature that takes one of two values at
# random (members in a random order, a header on half the answers) is constant within
# each of two groups of 4 and different between them once in 128 tries; within groups of
# 4 + 16 answers, once in 2^38.
ALIKE_CONFIRM = 16
Ask = Callable[[], Response]


def alike(req: str, asks: Sequence[tuple[str, Ask]], first: Sequence[Response],
          noise: frozenset[str] = frozenset()) -> Finding:
    """Refusals a client cannot tell apart, judged differentially: the answers `first`
    (one per labelled request) alike, all but `noise`, is enough; where they differ,
    every request is asked again ALIKE_SAMPLES times, interleaved in a random order, and
    only what is constant within each one's answers and differs between them counts
    (`judges.indistinguishable`). `asks` make the requests again; only refusals are asked
    again (asking again changes nothing)."""
    labelled = [(label, r) for (label, _), r in zip(asks, first, strict=True)]
    plain = judges.uniform(req, labelled, exact=True, noise=noise)
    if plain.ok or any(r.status < 400 for r in first):
        return plain
    found, _, times = asked_apart(req, asks, ALIKE_SAMPLES)
    return attrs.evolve(found, message=f"{plain.message.split(': they are not')[0]} on "
                        f"first sight; asked again {times} times each, interleaved: "
                        + found.message)


def asked_apart(req: str, asks: Sequence[tuple[str, Ask]], samples: int,
                rng: random.Random | None = None
                ) -> tuple[Finding, list[tuple[str, list[Response]]], int]:
    """Each request asked `samples` times, interleaved in a random order, and judged by
    `judges.indistinguishable`; where that tells them apart, ALIKE_CONFIRM times more
    each, and judged again on all the answers. Returns the finding, the answers by label
    and how many times each request was asked."""
    groups: list[tuple[str, list[Response]]] = [(label, []) for label, _ in asks]
    rng = rng or random.Random(secrets.randbits(64))

    def ask_round(times: int) -> None:
        for _ in range(times):
            order = list(range(len(asks)))
            rng.shuffle(order)
            for index in order:
                groups[index][1].append(asks[index][1]())
    ask_round(samples)
    found = judges.indistinguishable(req, groups)
    if not found.ok:
        ask_round(ALIKE_CONFIRM)
        found = judges.indistinguishable(req, groups)
        samples += ALIKE_CONFIRM
    return found, groups, samples

"""Judges of refusal uniformity: a response as the features a client can tell apart, the
noise among them, and whether refusals of several kinds are alike (`uniform`,
`indistinguishable`), or told apart by how often a value shows (`frequencies_alike`,
Fisher's exact test).

Part of `refsim.check.judges` (import the judges from there). A new judge of whether
refusals can be told apart by what they say goes here (by how long they take:
`refsim.check.judges.timing`), and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Sequence
from typing import Any

from refsim.check.findings import Finding, check, fail, ok
from refsim.check.judges.answers import _obs
from refsim.wire.response import Response

# Headers that are no part of the answer: the clock (Date), and the connection's own
# (hop-by-hop, RFC 9110 §7.6.1: a server closes an idle connection when it likes).
NOT_THE_ANSWERS = frozenset({"date", "connection", "keep-alive", "proxy-connection", "te",
                              "trailer", "transfer-encoding", "upgrade"})


def features(response: Response) -> dict[str, Any]:
    """A response as the separate things a client can tell apart: the status, each header
    (but Date and the connection's own), the body's bytes and, for a JSON body, each
    member and value by its pointer. Comparing features rather than whole answers lets a
    judge set aside the ones that vary on every answer (a request id, a trace header, a
    correlation id): noise."""
    out: dict[str, Any] = {"status": response.status, "body": response.body}
    for name, value in response.headers.items():
        if name.lower() not in NOT_THE_ANSWERS:
            out["header " + name.lower()] = value
    if response.json is not None:
        _flatten("body ", response.json, out)
    return out


def _flatten(path: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        out[path + "{}"] = tuple(value)  # the members, in the order sent
        for k, v in value.items():
            _flatten(f"{path}/{k}", v, out)
    elif isinstance(value, list):
        out[path + "[]"] = len(value)
        for i, v in enumerate(value):
            _flatten(f"{path}/{i}", v, out)
    else:
        out[path] = json.dumps(value)


def noise_of(samples: Sequence[Response]) -> frozenset[str]:
    """The features that differ between answers to one and the same request: noise."""
    seen = [features(r) for r in samples]
    names = set().union(*seen) if seen else set()
    return frozenset(n for n in names if len({repr(f.get(n, _ABSENT)) for f in seen}) > 1)


_ABSENT = object()


def signature(response: Response, noise: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """What is left of a response once its noise is set aside: equal signatures are
    answers a client cannot tell apart."""
    return tuple(sorted((k, repr(v)) for k, v in features(response).items() if k not in noise))


def _with_lengths(found: dict[str, Any]) -> dict[str, Any]:
    """The features and, beside each text, its length: a value that varies on every
    answer is noise, but its length may still tell the groups apart (a request id
    longer for another tenant's run)."""
    out = dict(found)
    for name, value in found.items():
        if isinstance(value, str | bytes):
            out["length of " + name] = len(value)
    return out


def _separating(groups: Sequence[tuple[str, Sequence[Response]]]) -> list[str]:
    """Features constant within every group whose value differs between groups (an
    oracle). A feature that varies inside any group is noise and is set aside."""
    per = [[_with_lengths(features(r)) for r in responses] for _, responses in groups]
    names = set().union(*(f for group in per for f in group)) if per else set()
    out = []
    for name in sorted(names):
        values = [{repr(f.get(name, _ABSENT)) for f in group} for group in per]
        if all(len(v) == 1 for v in values) and len(set().union(*values)) > 1:
            out.append(name)
    return out


def indistinguishable(req: str, groups: Sequence[tuple[str, Sequence[Response]]]
                      ) -> Finding:
    """§C/Security: nothing the refused id decides is on the answer. Refusals of several
    kinds (an unknown id, another tenant's run, ...), several samples each, taken
    interleaved: what varies within a group is noise; what is constant within each group
    and differs between them tells the groups apart."""
    labels = ", ".join(f"{label} ({len(rs)})" for label, rs in groups)
    if len(groups) < 2 or any(len(rs) < 2 for _, rs in groups):
        return fail(req, f"indistinguishability needs two groups of two samples or more, had "
                    f"{labels}")
    split = _separating(groups)
    return check(req, not split,
                 f"refusals of {labels} are indistinguishable (what varies, varies within "
                 "each group)" if not split else
                 f"refusals of {labels} tell the groups apart by " + ", ".join(split[:4]),
                 {label: [_obs(r) for r in rs[:1]] for label, rs in groups})


# Where a value of the answer recurs unevenly between two groups of refusals, each group
# is asked FREQUENCY_SAMPLES times more, interleaved, and every such value's frequency is
# compared by Fisher's exact test (two-sided), Bonferroni over the values tested: a header
# on a third of another tenant's refusals and on none of an unknown id's tells them apart
# as surely as one on all of them, given enough asks.
FREQUENCY_SAMPLES = 64  # per group
FREQUENCY_ALPHA = 1e-4


def _occurrences(responses: Sequence[Response]) -> collections.Counter[str]:
    """Each feature's value, once per answer that carries it (absent is a value too)."""
    per = [_with_lengths(features(r)) for r in responses]
    names = set().union(*per) if per else set()
    out: collections.Counter[str] = collections.Counter()
    for found in per:
        for name in names:
            value = found.get(name, _ABSENT)
            shown = "absent" if value is _ABSENT else repr(value)
            out[f"{name} = {shown[:60]}" + ("..." if len(shown) > 60 else "")] += 1
    return out


def uneven(groups: Sequence[tuple[str, Sequence[Response]]]) -> list[str]:
    """Values that recur (in two answers or more) and are spread unevenly between the two
    groups: what a frequency test is worth asking more for. A value on one answer only (a
    random request id) is not."""
    (_, xa), (_, xb) = groups
    ca, cb = _occurrences(xa), _occurrences(xb)
    return sorted(k for k in set(ca) | set(cb)
                  if ca[k] + cb[k] >= 2 and ca[k] * len(xb) != cb[k] * len(xa))


def fisher_exact(a: int, na: int, b: int, nb: int) -> float:
    """Two-sided p of Fisher's exact test: `a` of `na` answers against `b` of `nb` carry a
    value; the sum of the probabilities of every table as likely as this one or less."""
    k, total = a + b, na + nb
    denominator = math.comb(total, k)

    def prob(x: int) -> float:
        return math.comb(na, x) * math.comb(nb, k - x) / denominator
    seen = prob(a)
    return min(1.0, sum(p for x in range(max(0, k - nb), min(k, na) + 1)
                        if (p := prob(x)) <= seen * (1 + 1e-7)))


def frequencies_alike(req: str, groups: Sequence[tuple[str, Sequence[Response]]],
                      alpha: float = FREQUENCY_ALPHA) -> Finding:
    """Security (refsim's SHOULD reading): no value of the answer is more frequent on one
    group of refusals than on the other. Fisher's exact test on each recurring value,
    flagged below alpha / (values tested)."""
    (la, xa), (lb, xb) = groups
    ca, cb = _occurrences(xa), _occurrences(xb)
    tested = [k for k in set(ca) | set(cb) if ca[k] + cb[k] >= 2]
    bound = alpha / max(1, len(tested))
    told = sorted((k, p) for k in tested
                  if (p := fisher_exact(ca[k], len(xa), cb[k], len(xb))) < bound)
    figures = {"n": [len(xa), len(xb)],
               "told": [{"value": k, la: ca[k], lb: cb[k], "p": p} for k, p in told[:4]]}
    if told:  # the counts move from run to run: the message names what they show
        k = told[0][0]
        more = la if ca[k] * len(xb) > cb[k] * len(xa) else lb
        return fail(req, f"refusals of {la} and {lb} are told apart by how often a value "
                    f"shows: {k} (more often on {more}; Fisher's exact test, the figures "
                    "are in the observation)", figures)
    return ok(req, f"refusals of {la} ({len(xa)}) and {lb} ({len(xb)}): no value that recurs "
              "shows more often on either (Fisher's exact test)", figures)


def uniform(req: str, responses: Sequence[tuple[str, Response]], *, exact: bool,
            noise: frozenset[str] = frozenset()) -> Finding:
    """Refusals alike: the same status and code, or (exact) the same whole response, every
    header but Date and the body bytes, less the `noise` features (those that vary between
    answers to one and the same request on this host)."""
    def key(r: Response) -> Any:
        if exact:
            return signature(r, noise)
        body = r.json if isinstance(r.json, dict) else {}
        return (r.status, body.get("error"))
    distinct = {key(r) for _, r in responses}
    labels = ", ".join(label for label, _ in responses)
    if len(responses) < 2:
        return fail(req, f"uniformity needs at least two refusals to compare, had {labels}")
    how = ("identical (status, headers but Date, body bytes" + (
        ", less what varies on every answer)" if noise else ")") if exact else
        "the same status and code")
    detail = "" if len(distinct) == 1 else ": " + _difference(
        [r for _, r in responses], exact, noise)
    return check(req, len(distinct) == 1,
                 f"refusals for {labels} are {how}" if len(distinct) == 1 else
                 f"refusals for {labels} differ: they are not {how}{detail}",
                 {label: _obs(r) for label, r in responses})


def _difference(responses: Sequence[Response], exact: bool,
                noise: frozenset[str] = frozenset()) -> str:
    first = responses[0]
    for other in responses[1:]:
        if other.status != first.status:
            return f"status {first.status} vs {other.status}"
        if exact:
            a, b = features(first), features(other)
            names = sorted(k for k in set(a) | set(b) if k not in noise
                           and repr(a.get(k, _ABSENT)) != repr(b.get(k, _ABSENT)))
            heads = [n.removeprefix("header ") for n in names if n.startswith("header ")]
            if heads:
                return "header(s) " + ", ".join(heads)
            if names:
                return "body " + ", ".join("bytes" if n == "body" else
                                           n.removeprefix("body ") for n in names[:3])
        elif first.json != other.json:
            return "code"
    return "?"

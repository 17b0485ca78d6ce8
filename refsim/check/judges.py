"""Pure judges: observations in, findings out. No I/O, no host, no clock.

Each judge exists for one defect, and tests/test_judges.py shows it failing on it.
"""

from __future__ import annotations

import base64
import collections
import functools
import json
import math
import re
import statistics
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

import attrs

from refsim.check.findings import Finding, check, fail, ok
from refsim.check.observe import eval_suite_facet as eval_suite_facet
from refsim.domain.canonical import canonical, canonical_or_none, integral
from refsim.domain.ids import ProjectionError, parse_bound, project, unproject
from refsim.wire import schemas
from refsim.wire.errors import is_registered
from refsim.wire.response import Response
from refsim.wire.trace import quoted

# RFC 0081's content-free list for eval events and summaries (conformance EVAL_CONTENT_FORBIDDEN).
CONTENT_FORBIDDEN = frozenset({"taskOutput", "output", "rubric", "completion", "prompt", "body",
                               "secret", "credentials", "token", "apiKey", "toolResponses",
                               "response", "args", "inputs", "outcome"})


ECHO_WINDOW = 8  # an echo is any run of this many characters of the supplied id


@functools.lru_cache(maxsize=4096)
def id_forms(value: str) -> frozenset[str]:
    """Every encoding in which a supplied id could come back: bound, `~2F`-projected,
    percent-encoded (either case, or every byte), JSON-escaped, and its opaque segment.
    Remembered (bounded): a machine run asks for the same ids' forms after every step."""
    forms = {value, project(value), value.replace("/", "%2F"), value.replace("/", "%2f"),
             value.replace("/", "\\/"), quote(value, safe=""), quote(value, safe="").lower(),
             json.dumps(value, ensure_ascii=True)[1:-1]}
    parsed = parse_bound(value)
    if parsed is not None:
        forms.add(parsed.opaque)
    return frozenset(f for f in forms if len(f) >= 4)


@functools.lru_cache(maxsize=4096)
def encoded_forms(value: str) -> frozenset[str]:
    """The supplied id packed the ways a host could hide it: base64 (standard and URL-safe,
    from each of the three byte alignments, so that any stretch of the id shows), base32
    (both alphabets, either case, from each of the five alignments) and hex (either case).
    Their runs of ECHO_WINDOW characters count as an echo too."""
    raw = value.encode("utf-8")
    forms: set[str] = set()
    for start in range(3):
        chunk = raw[start:]
        if len(chunk) >= 6:
            forms.add(base64.b64encode(chunk).decode("ascii").rstrip("="))
            forms.add(base64.urlsafe_b64encode(chunk).decode("ascii").rstrip("="))
    for start in range(5):  # base32, standard and extended-hex alphabets, either case
        chunk = raw[start:]
        if len(chunk) >= 10:
            for coded in (base64.b32encode(chunk), base64.b32hexencode(chunk)):
                text = coded.decode("ascii").rstrip("=")
                forms |= {text, text.lower()}
    forms |= {raw.hex(), raw.hex().upper()}
    return frozenset(f for f in forms if len(f) >= ECHO_WINDOW)


def _windows(value: str, size: int = ECHO_WINDOW) -> set[str]:
    if len(value) <= size:
        return {value} if len(value) >= 4 else set()
    return {value[i:i + size] for i in range(len(value) - size + 1)}


@functools.lru_cache(maxsize=4096)
def _id_windows(supplied: str) -> frozenset[str]:
    """Every ECHO_WINDOW-character run of every form of `supplied`, plain and packed
    (remembered, bounded). A base64 form's last characters depend on what follows the id,
    so those of its windows that end within two characters of its end are left out."""
    plain = {w for form in id_forms(supplied) for w in _windows(form)}
    plain |= {w.lower() for w in plain}  # met in the case-folded decoding
    packed = {form[i:i + ECHO_WINDOW] for form in encoded_forms(supplied)
              for i in range(max(0, len(form) - ECHO_WINDOW - 2) + 1)}
    return frozenset(plain | packed)


# Between the decodings `echoed` searches at once: the first that no window of the
# supplied value holds (so a window found in the joined text lies inside one decoding).
_APART = ("\x00", "\ufffe", "\U0010fffe", "\U0010ffff", "\ufdd0")


@functools.lru_cache(maxsize=4096)
def _separator(supplied: str) -> str | None:
    """A character no window of `supplied` holds, or None (each window is then searched
    for in each decoding)."""
    windows = _id_windows(supplied)
    return next((c for c in _APART if not any(c in w for w in windows)), None)


# `echoed` cuts the decodings into runs when the id has more windows than this and the
# decodings hold at most _GRAMS_TEXT_MAX characters (the set of runs is then bounded).
_GRAMS_FROM = 16
_GRAMS_TEXT_MAX = 65_536


@functools.lru_cache(maxsize=4096)
def _lengths(supplied: str) -> tuple[int, ...]:
    """The lengths of `supplied`'s windows (ECHO_WINDOW, and shorter forms' own)."""
    return tuple(sorted({len(w) for w in _id_windows(supplied)}))


def _decodings(text: str) -> list[str]:
    """The text as sent, and as a reader would decode it: %XX, ~XX and JSON escapes undone;
    and read case-folded and backwards (an id upper-cased or reversed is still the id).
    Text every refusal carries is set aside by the controls, read the same ways."""
    out = [text, unquote(text)]
    try:
        out.append(unproject(text))
    except (ProjectionError, UnicodeError):
        out.append(re.sub(r"~([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text))
    out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
               .replace("\\/", "/"))
    out += [out[1].lower(), out[1][::-1]]
    return out


def echoed(text: str, supplied: str) -> list[str]:
    """The runs of ECHO_WINDOW or more characters of `supplied` that `text` carries, in any
    of the encodings `id_forms` names (so a partial echo, less a few characters, counts)."""
    texts = list(dict.fromkeys(_decodings(text)))  # most decodings of a refusal are alike
    windows = _id_windows(supplied)
    if len(windows) > _GRAMS_FROM and sum(map(len, texts)) <= _GRAMS_TEXT_MAX:
        # The text's own runs of each window length, once, looked up in the windows: a
        # refusal is short and an id has a thousand windows, each otherwise a search.
        grams = {t[i:i + n] for n in _lengths(supplied) for t in texts
                 for i in range(len(t) - n + 1)}
        return sorted(windows.intersection(grams))
    apart = _separator(supplied)
    if apart is not None:  # one search per window instead of one per window and decoding
        joined = apart.join(texts)
        return sorted(w for w in _id_windows(supplied) if w in joined)
    return sorted(w for w in _id_windows(supplied) if any(w in t for t in texts))


def strings_in(value: Any) -> list[str]:
    """The strings a JSON value holds, at any depth (itself, where it is one)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    return []


def _text(response: Response) -> str:
    head = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    return head + "\n" + response.body.decode("utf-8", "replace")


def whole(response: Response) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    """A response as a client sees all of it: status, every header but Date, the body bytes."""
    headers = tuple(sorted((k.lower(), v) for k, v in response.headers.items()
                           if k.lower() != "date"))
    return response.status, headers, response.body


def created(req: str, response: Response, what: str) -> Finding:
    return answered(req, response, 201, what)


def refused(req: str, response: Response, what: str, *, status: int = 400,
            code: str = "validation_error") -> list[Finding]:
    """Status, code, and a well-formed registered-code envelope."""
    out = [refused_as(req, response, what, status=status, code=code)]
    if response.status >= 400:
        out.append(envelope(req, response, what))
    return out


def refused_as(req: str, response: Response, what: str, *, status: int = 400,
               code: str = "validation_error") -> Finding:
    """Status and code, the envelope aside."""
    body = response.json if isinstance(response.json, dict) else {}
    got = body.get("error")
    answered = (f"{response.status} {got}" if got is not None else
        f"{response.status}, no error code")
    return check(req, response.status == status and got == code,
                 f"{what}: expected {status} {code}, got {answered}", _obs(response))


def undecodable(response: Response) -> bool:
    """Whether a path id was refused as malformed (400 validation_error) rather than as
    naming no run: a made-up id (a control) can be malformed where the host's ids carry a
    check the checker cannot make."""
    body = response.json if isinstance(response.json, dict) else {}
    return response.status == 400 and body.get("error") == "validation_error"


def answered(req: str, response: Response, status: int, what: str) -> Finding:
    """The status asked for, whatever the body."""
    return check(req, response.status == status,
                 f"{what}: expected {status}, got {response.status}", _obs(response))


def code_registered(req: str, response: Response) -> Finding:
    """An error answer's code is registered at its status (a success needs none)."""
    if response.status < 400:
        return ok(req, f"answered {response.status}")
    body = response.json if isinstance(response.json, dict) else {}
    code = str(body.get("error"))
    return check(req, is_registered(code, response.status),
                 f"error {code} is registered at {response.status}"
                 if is_registered(code, response.status)
                 else f"unregistered error {code} at {response.status}", _obs(response))


def refused_registered_any(req: str, response: Response, what: str) -> Finding:
    """Refused, by any error status, with a code registered at it."""
    body = response.json if isinstance(response.json, dict) else {}
    good = response.status >= 400 and is_registered(str(body.get("error")), response.status)
    return check(req, good, f"{what}: refused with {response.status} {body.get('error')}"
                 if good else f"{what} answered {response.status} {body}", _obs(response))


def no_foreign_run_ids(req: str, text: str, caller: str,
                       others: Iterable[tuple[str, str, Iterable[str]]]) -> Finding:
    """Isolation: an answer to `caller` carries no other tenant's run id. `others` holds
    (owner, run id, the strings any form of the id contains: `id_forms`, or the opaque
    segment every form shares)."""
    for owner, run_id, needles in others:
        if owner != caller and any(n in text for n in needles):
            return fail(req, f"a response to {caller} carries {owner}'s run id {run_id}")
    return ok(req, f"a response to {caller} carries no other tenant's run id")


def envelope(req: str, response: Response, what: str) -> Finding:
    body = response.json
    if not isinstance(body, dict) or not schemas.is_valid("error-envelope.schema.json", body):
        return fail(req, f"{what}: the error body is not a {{error, message, details?}} envelope",
                    _obs(response))
    return check(req, is_registered(body["error"], response.status),
                 f"{what}: code {body['error']!r} is registered at status {response.status}",
                 _obs(response))


def echo_windows(response: Response, supplied: Iterable[str]) -> set[str]:
    """The runs of ECHO_WINDOW characters of the supplied ids the response carries."""
    text = _text(response)
    return {w for value in supplied for w in echoed(text, value)}


def no_echo(req: str, response: Response, supplied: Iterable[str], what: str,
            controls: Sequence[Response] = (), same_as: Response | None = None) -> Finding:
    """§C: the refusal carries no run of 8 or more characters of the supplied id, in any
    encoding, in its headers or its body, that it carries because of this id.

    Text any refusal carries is not an echo: where a window of the id is found, the same
    request made with a control value in its place (`control_value`, same shape, no
    character in common) shows whether the host says it whatever the id is (the error
    code or a header value that happens to share characters with a tenant's name). An
    answer byte for byte `same_as`, the answer to another value, holds nothing that comes
    from this one: it is not searched."""
    if same_as is not None and whole(response) == whole(same_as):
        return ok(req, f"{what}: the answer is byte for byte the answer to another value, so "
                       "nothing in it comes from this one", _obs(response))
    values = list(supplied)
    found = echo_windows(response, values)
    fixed: set[str] = set()
    for control in controls:
        fixed |= echo_windows(control, values)
    leaked = sorted(found - fixed)
    return check(req, not leaked,
                 f"{what}: the response echoes the supplied id ({', '.join(leaked[:3])})"
                 if leaked else f"{what}: the supplied id appears in no form"
                 + (f" (text any refusal carries set aside: {', '.join(sorted(found)[:3])})"
                    if found else ""), _obs(response))


_CONTROL = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm5678901234")


def control_value(value: str) -> str:
    """A value of the same shape as `value` (separators kept) with every letter and digit
    replaced by another: it shares no ECHO_WINDOW run with `value`, so what the answer
    to it shares with the answer to `value` is text the host says whatever the value."""
    return value.translate(_CONTROL)


# ----------------------------------------------------------------------------- alike


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


# Two-sided Mann-Whitney U at this level: a correct host is flagged about once in ten
# thousand judgements, whatever its latency's distribution (the samples interleaved, so
# that drift in the host or the network reaches both groups alike).
LATENCY_ALPHA = 1e-4
# A difference of medians below this is not reported, however significant: a client
# timing refusals over a network cannot use a fraction of a millisecond.
LATENCY_MIN_EFFECT = 0.001
LATENCY_SAMPLES = 24  # per group


def latency_alike(req: str, a: tuple[str, Sequence[float]], b: tuple[str, Sequence[float]],
                  alpha: float = LATENCY_ALPHA) -> Finding:
    """Security (SHOULD): the time a refusal takes does not tell another tenant's run from
    no run. Two-sided Mann-Whitney U (normal approximation, ties corrected) on interleaved
    samples; flagged when p < `alpha` and the medians differ by LATENCY_MIN_EFFECT or more.
    A row making k such comparisons passes LATENCY_ALPHA / k (Bonferroni), so the row's
    false alarm rate stays under LATENCY_ALPHA."""
    (la, xa), (lb, xb) = a, b
    if len(xa) < 8 or len(xb) < 8:
        return fail(req, f"the latency judge needs 8 samples a group, had {len(xa)} and "
                    f"{len(xb)}")
    u, p = mann_whitney(xa, xb)
    ma, mb = statistics.median(xa), statistics.median(xb)
    effect = abs(ma - mb)
    told = p < alpha and effect >= LATENCY_MIN_EFFECT
    figures = {"n": [len(xa), len(xb)], "u": u, "p": p, f"{la} median ms": ma * 1000,
               f"{lb} median ms": mb * 1000}
    if told:  # the figures move from run to run: the message names what they show
        slower = lb if mb > ma else la
        return fail(req, f"refusal latency tells the groups apart: {slower} is refused "
                    f"slower (medians {LATENCY_MIN_EFFECT * 1000:g} ms or more apart, p < "
                    f"{alpha:g}; the figures are in the observation)", figures)
    return ok(req, f"refusal latency does not tell the groups apart: {la} median "
              f"{ma * 1000:.2f} ms, {lb} median {mb * 1000:.2f} ms (n = {len(xa)} + "
              f"{len(xb)}, U = {u:.0f}, p = {p:.2g})", figures)


# A slower tail (some refusals much slower) can leave the medians alike. Where any of the
# first samples lies beyond the pooled 75th percentile by LATENCY_MIN_EFFECT, TAIL_SAMPLES
# more a group are timed and their tails alone judged (fresh samples: the screen costs no
# false alarms). The screen asks only whether a tail exists at all, not whether it differs:
# a busy machine puts slow samples in both groups, and 24 a group then cannot tell a tail
# that one group has from the noise both have (a faulty host went unjudged that way).
TAIL_SAMPLES = 160  # per group


def _tail_line(xa: Sequence[float], xb: Sequence[float]) -> float:
    pooled = sorted([*xa, *xb])
    return pooled[(3 * len(pooled)) // 4] + LATENCY_MIN_EFFECT


def tail_seen(xa: Sequence[float], xb: Sequence[float]) -> bool:
    """Whether any sample of either group lies beyond the pooled 75th percentile by
    LATENCY_MIN_EFFECT or more (so the groups have a tail worth timing afresh)."""
    line = _tail_line(xa, xb)
    return any(x > line for x in (*xa, *xb))


def latency_tail_alike(req: str, a: tuple[str, Sequence[float]],
                       b: tuple[str, Sequence[float]], alpha: float = LATENCY_ALPHA
                       ) -> Finding:
    """Security (SHOULD): no group of refusals is slow more often than the other, judged
    on the tail (beyond the pooled 75th percentile by LATENCY_MIN_EFFECT or more)."""
    (la, xa), (lb, xb) = a, b
    line = _tail_line(xa, xb)
    na, nb = sum(x > line for x in xa), sum(x > line for x in xb)
    p = fisher_exact(na, len(xa), nb, len(xb))
    figures = {"n": [len(xa), len(xb)], "line ms": line * 1000, f"{la} beyond": na,
               f"{lb} beyond": nb, "p": p}
    if p < alpha:
        slower = la if na * len(xb) > nb * len(xa) else lb
        return fail(req, f"refusal latency tells the groups apart in its tail: {slower} is "
                    f"refused slow more often (beyond the pooled 75th percentile by "
                    f"{LATENCY_MIN_EFFECT * 1000:g} ms; Fisher p < {alpha:g}; the figures "
                    "are in the observation)", figures)
    return ok(req, f"refusal latency's tail does not tell the groups apart: {na} of "
              f"{len(xa)} and {nb} of {len(xb)} beyond {line * 1000:.2f} ms (p = {p:.2g})",
              figures)


def latency_and_tail(median: Finding, tail: Finding | None) -> Finding:
    """One finding for one pair of groups, whether or not their tail was timed afresh: a
    row judges alike (same findings, same digest) however busy the machine that timed it.
    A difference of medians stands; otherwise the tail, when timed, decides."""
    if not median.ok:
        return median
    if tail is None:
        return ok(median.requirement_id, f"{median.message}; no first sample lay beyond "
                  "the tail line, so no tail was timed", median.observation)
    observation = {"medians": median.observation, "tail": tail.observation}
    if not tail.ok:
        return fail(tail.requirement_id, tail.message, observation)
    return ok(median.requirement_id, f"{median.message}; {tail.message}", observation)


def mann_whitney(xa: Sequence[float], xb: Sequence[float]) -> tuple[float, float]:
    """U of the first sample and the two-sided p-value, by the normal approximation with
    the tie correction (exact enough from eight samples a group)."""
    na, nb = len(xa), len(xb)
    pooled = sorted([(x, 0) for x in xa] + [(x, 1) for x in xb])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    rank_a = sum(r for r, (_, g) in zip(ranks, pooled, strict=True) if g == 0)
    u = rank_a - na * (na + 1) / 2
    n = na + nb
    variance = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = (abs(u - na * nb / 2) - 0.5) / math.sqrt(variance)
    return u, math.erfc(max(z, 0.0) / math.sqrt(2))


def of_type(events: Sequence[Mapping[str, Any]], type_: str) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("type") == type_]


def _payload(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's payload; one that is not an object is judged as an empty one."""
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def echo(req: str, events: Sequence[Mapping[str, Any]], expected: Mapping[str, Any]) -> Finding:
    started = of_type(events, "eval.started")
    if len(started) != 1:
        return fail(req, f"expected exactly one eval.started, saw {len(started)}")
    got = _payload(started[0]).get("fixtureRuns")
    want = dict(expected)
    if got is None:
        return fail(req, "eval.started carries no fixtureRuns although the request did"
                    + ("" if isinstance(started[0].get("payload"), dict)
                       else " (its payload is not an object)"), {"expected": want, "got": got})
    # Verbatim is the map's value: the same members, the same values. A JSON object is
    # unordered (RFC 8259 §4), so member order is no part of it.
    same = isinstance(got, dict) and canonical(got) == canonical(want)
    return check(req, same, "eval.started.fixtureRuns echoes the accepted map verbatim"
                 if same else "eval.started.fixtureRuns differs from the accepted map",
                 {"expected": want, "got": got})


def outcomes_equal(req: str, source: Sequence[Mapping[str, Any]],
                   replay: Sequence[Mapping[str, Any]], agent_id: str) -> list[Finding]:
    """Each replayed agent.tool-returned carries the outcome (or error) the source recorded.

    A call whose outcome and error are on neither run's wire (a content-free lane) is a
    failing finding: nothing was compared, and the caller decides what that means.
    """
    def returned(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [_payload(e) for e in of_type(events, "agent.tool-returned")
                if _payload(e).get("agentId") == agent_id]

    def result(p: Mapping[str, Any]) -> dict[str, Any]:
        return {k: p[k] for k in ("outcome", "error") if k in p}
    src, rep = returned(source), returned(replay)
    if not src:
        return [fail(req, "the source run recorded no agent.tool-returned of the agent")]
    out = [check(req, len(src) == len(rep),
                 f"the replay returned {len(rep)} call(s), the source {len(src)}")]
    for index, (a, b) in enumerate(zip(src, rep, strict=False)):
        seen = {"source": result(a), "replay": result(b)}
        if not seen["source"] and not seen["replay"]:
            out.append(fail(req, f"call {index}: neither run carries an outcome or error on "
                            "the wire, so the outcomes cannot be compared", seen))
            continue
        same = canonical(seen["source"]) == canonical(seen["replay"])
        out.append(check(req, same, f"call {index}: the replayed outcome equals the source's"
                         if same else f"call {index}: the replayed outcome differs from the "
                         "source's", seen))
    return out


def named_twice(req: str, response: Response, source: Sequence[Mapping[str, Any]],
                served: Sequence[Mapping[str, Any]], agent_id: str, what: str
                ) -> list[Finding]:
    """§C, a task named twice in fixtureRuns (the caller's usable run beside a value that is
    not one): refused as any unusable source is (400 validation_error), or taken as one of
    the two; then the replay served the usable run's recording (`source`'s outcomes), never
    the other value's. `served` is the replay's events (none where it was refused)."""
    if response.status != 201:
        return refused(req, response, f"{what}, where not taken")
    return [ok(req, f"{what}: taken (201), as the usable run it names"),
            *(attrs.evolve(f, message=f"{what}: {f.message}")
              for f in outcomes_equal(req, source, served, agent_id))]


def outcomes_on_wire(events: Sequence[Mapping[str, Any]], agent_id: str) -> bool:
    """Whether the agent's lane puts outcomes on the wire at all (a content-free lane, with
    argsHash and no outcome, does not: its replay is witnessed by the counter alone)."""
    for e in of_type(events, "agent.tool-returned"):
        payload = e.get("payload")
        if (isinstance(payload, dict) and payload.get("agentId") == agent_id
                and ("outcome" in payload or "error" in payload)):
            return True
    return False


def counter_unchanged(req: str, before: int, after: int, what: str) -> Finding:
    return check(req, before == after,
                 f"{what}: the live counter did not move ({before})" if before == after else
                 f"{what}: the live counter moved from {before} to {after}",
                 {"before": before, "after": after})


def counter_moved(req: str, before: int, after: int, what: str) -> Finding:
    """A positive control: live calls do reach the counter, so a still counter means something."""
    return check(req, after > before,
                 f"{what}: the live counter moved {before} -> {after}" if after > before else
                 f"{what}: the live counter did not move ({before}); it cannot witness replay",
                 {"before": before, "after": after})


def scored(events: Sequence[Mapping[str, Any]], task_id: str) -> Mapping[str, Any] | None:
    found = [_payload(e) for e in of_type(events, "eval.scored")
             if _payload(e).get("taskId") == task_id]
    return found[0] if len(found) == 1 else None


def eval_events_alike(req: str, poll: Sequence[Mapping[str, Any]],
                      stream: Sequence[Mapping[str, Any]]) -> Finding:
    """Every channel the host offers shows the same eval: the eval.* events of a run's SSE
    stream are those of its poll, type and payload (the echo, each task's
    fixtureMissCount and passed), as many of each. Other events are left alone: a host may
    interleave what it likes."""
    def evals(events: Sequence[Mapping[str, Any]]) -> collections.Counter[str]:
        return collections.Counter(
            canonical([e.get("type"), _payload(e)]) for e in events
            if isinstance(e.get("type"), str) and str(e.get("type")).startswith("eval."))
    polled, streamed = evals(poll), evals(stream)
    missing = sorted((polled - streamed).elements())
    extra = sorted((streamed - polled).elements())
    return check(req, not missing and not extra,
                 f"the event stream shows the poll's {sum(polled.values())} eval events"
                 if not missing and not extra else "the event stream and the poll show "
                 f"different eval events: only polled {missing[:2]}, only streamed {extra[:2]}",
                 {"onlyPolled": missing, "onlyStreamed": extra})


def miss_count(req: str, events: Sequence[Mapping[str, Any]], summary: Any, task_id: str,
               expected: int) -> list[Finding]:
    """fixtureMissCount on eval.scored and in the summary: an integer (not a bool) equal to
    `expected`."""
    task = _summary_task(summary, task_id)
    return [scored_miss_count(req, events, task_id, expected),
            _count_is(req, None if task is None else task.get("fixtureMissCount"),
                      f"summary task {task_id} fixtureMissCount", expected)]


def scored_miss_count(req: str, events: Sequence[Mapping[str, Any]], task_id: str,
                      expected: int) -> Finding:
    """fixtureMissCount on the task's eval.scored: an integer (not a bool), `expected`."""
    score = scored(events, task_id)
    return _count_is(req, None if score is None else score.get("fixtureMissCount"),
                     f"eval.scored[{task_id}].fixtureMissCount", expected)


def _count_is(req: str, got: Any, field: str, expected: int) -> Finding:
    count = integral(got)  # 0.0 is the JSON integer 0; a bool or a string is no count
    kind = ("" if count is not None or got is None
            else f" (a {type(got).__name__}, not an integer)")
    return check(req, count == expected, f"{field} is {got!r}{kind}, expected {expected}")


def scored_once(req: str, events: Sequence[Mapping[str, Any]]) -> Finding:
    """An eval run of one task scores it once: one eval.scored event."""
    count = len(of_type(events, "eval.scored"))
    return check(req, count == 1, f"the eval run of one task has {count} eval.scored event(s)")


def passed_is(req: str, events: Sequence[Mapping[str, Any]], summary: Any, task_id: str,
              expected: bool) -> list[Finding]:
    task = _summary_task(summary, task_id)
    got_s = None if task is None else task.get("passed")
    return [scored_passed(req, events, task_id, expected),
            check(req, got_s is expected,
                  f"summary task {task_id} passed is {got_s}, expected {expected}")]


def scored_passed(req: str, events: Sequence[Mapping[str, Any]], task_id: str,
                  expected: bool) -> Finding:
    score = scored(events, task_id)
    got = None if score is None else score.get("passed")
    return check(req, got is expected,
                 f"eval.scored[{task_id}].passed is {got}, expected {expected}")


def suite_taken(req: str, taken: bool, suite_id: str) -> Finding:
    """A well-formed suite the checker registers is taken (else nothing it names can run)."""
    return check(req, taken, f"the host took suite {suite_id}" if taken
                 else f"the host refused suite {suite_id}")


def _summary_task(summary: Any, task_id: str) -> Mapping[str, Any] | None:
    if not isinstance(summary, dict):
        return None
    tasks = summary.get("tasks")
    if not isinstance(tasks, list):
        return None
    return next((t for t in tasks if isinstance(t, dict) and t.get("taskId") == task_id), None)


_SCORED_MEMBERS = ("fixtureMissCount", "passed", "score")


def summary_reread_alike(req: str, first: Any, again: Any) -> Finding:
    """The EvalSummary is a recorded fact: read again, each task reports the same
    fixtureMissCount, passed and score (3.0 and 3 alike), and the run the same passed."""
    def scored(summary: Any) -> Any:
        if not isinstance(summary, dict) or not isinstance(summary.get("tasks"), list):
            return None
        tasks = sorted((canonical_or_none([t.get("taskId"), *(t.get(m) for m in
                                                            _SCORED_MEMBERS)]) or "")
                       for t in summary["tasks"] if isinstance(t, dict))
        return [canonical_or_none(summary.get("passed")), tasks]
    was, now = scored(first), scored(again)
    return check(req, was == now, "the EvalSummary read again reports every task as the "
                 "first read did" if was == now else "the EvalSummary read again reports "
                 f"otherwise than the first read: {_brief(again)} after {_brief(first)}",
                 {"first": first, "again": again})


def _brief(doc: Any) -> str:
    text = canonical_or_none(doc) or repr(doc)
    return text if len(text) <= 300 else text[:297] + "..."


def content_free(req: str, summary: Any, events: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """eval-summary-no-content-leak: a closed summary and eval.* events with no content keys."""
    out = [check(req, schemas.is_valid("eval-summary.schema.json", summary),
                 "the EvalSummary matches the closed summary schema", summary)]
    for e in events:
        if str(e.get("type", "")).startswith("eval."):
            keys = _all_keys(e.get("payload"))
            bad = sorted(keys & CONTENT_FORBIDDEN)
            out.append(check(req, not bad, f"{e.get('type')} carries no content keys" if not bad
                             else f"{e.get('type')} carries content keys {bad}", e.get("payload")))
    bad = sorted(_all_keys(summary) & CONTENT_FORBIDDEN)
    out.append(check(req, not bad, "the summary carries no content keys" if not bad
                     else f"the summary carries content keys {bad}", summary))
    return out


def _all_keys(value: Any) -> set[str]:
    """Every key in `value`, except the keys of a fixtureRuns map: those are suite taskIds
    (any ^[a-z0-9][a-z0-9-]*$ name, `output` included), not content. Its values are still
    walked."""
    if isinstance(value, dict):
        keys = set(value)
        for k, v in value.items():
            if k == "fixtureRuns" and isinstance(v, dict):
                for run in v.values():
                    keys |= _all_keys(run)
            else:
                keys |= _all_keys(v)
        return keys
    if isinstance(value, list):
        return set().union(*(_all_keys(v) for v in value)) if value else set()
    return set()


def eval_order(req: str, events: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """RFC 0081: one eval.started, at least one eval.scored in between, one eval.completed
    before run.completed."""
    unsequenced = [f"{i} ({e.get('type')})" for i, e in enumerate(events)
                   if integral(e.get("sequence")) is None]
    if unsequenced:
        return [fail(req, f"event(s) at position {', '.join(unsequenced)} carry no integer "
                     "sequence, so the order cannot be judged")]
    seqs = {t: [int(e["sequence"]) for e in of_type(events, t)]
            for t in ("eval.started", "eval.scored", "eval.completed", "run.completed")}
    ordered = [e.get("sequence") for e in events] == list(range(len(events)))
    out = [check(req, ordered, "event sequences run 0, 1, 2, ... without gaps")]
    one = len(seqs["eval.started"]) == 1 and len(seqs["eval.completed"]) == 1
    out.append(check(req, one, "exactly one eval.started and one eval.completed"))
    out.append(check(req, bool(seqs["eval.scored"]),
                     f"at least one eval.scored ({len(seqs['eval.scored'])})"))
    if one:
        s, c = seqs["eval.started"][0], seqs["eval.completed"][0]
        inside = all(s < x < c for x in seqs["eval.scored"])
        out.append(check(req, inside, "eval.scored sits between started and completed"
                         if inside else "an eval.scored is not between started and completed"))
        done = s < c and all(c < x for x in seqs["run.completed"])
        out.append(check(req, done, "eval.started precedes eval.completed, which precedes "
                         "run.completed" if done else "eval.completed is not between "
                         "eval.started and run.completed"))
    return out


def facet_implies_matching(req: str, discovery: Any) -> Finding:
    """§A: recordedFixtures is advertised only together with fixtureMatching."""
    facet = eval_suite_facet(discovery)
    if not facet.get("recordedFixtures"):
        return ok(req, "recordedFixtures is not advertised, so nothing is implied", facet)
    return check(req, facet.get("fixtureMatching") is True,
                 "recordedFixtures is advertised with fixtureMatching"
                 if facet.get("fixtureMatching") is True else
                 "recordedFixtures is advertised without fixtureMatching", facet)


def no_secret_in(req: str, entries: Any, secrets: Iterable[str], what: str) -> Finding:
    """SR-1: no credential resolved at egress appears in (derived) content."""
    text = json.dumps(entries, sort_keys=True, default=str, ensure_ascii=False)
    # As it stands, or as JSON escapes it inside a string (quotes, backslashes, controls).
    found = sorted(s for s in secrets
                   if s and (s in text or json.dumps(s, ensure_ascii=False)[1:-1] in text))
    return check(req, not found, f"{what}: no egress credential present" if not found
                 else f"{what}: egress credential material present", {"found": found})


def no_reresolution(req: str, before: int, after: int, what: str) -> Finding:
    return check(req, before == after,
                 f"{what}: the source was not resolved again ({before})" if before == after
                 else f"{what}: the source was resolved again ({before} -> {after})")


def schema_vector(req: str, vector: Mapping[str, Any]) -> Finding:
    """A server-free vector: `instance` against `schema` must be `valid` as stated."""
    got = schemas.is_valid(str(vector["schema"]), vector["instance"])
    want = bool(vector["valid"])
    return check(req, got == want,
                 f"vector {vector['id']}: {'validates' if got else 'is refused'}"
                 f" (expected {'valid' if want else 'refused'})", dict(vector))


def _obs(response: Response) -> dict[str, Any]:
    """An answer as a finding quotes it; while a trace records, with the exchange that got
    it (a failed row's evidence: `refsim.check.evidence`)."""
    out = {"status": response.status, "body": response.json if response.json is not None
           else response.text}
    seq = quoted(response)
    if seq is not None:
        out["exchange"] = seq
    return out


# ----------------------------------------------------------------------------- content


_DERIVED_KEY_RE = re.compile(r'"(toolResponses|argsMatch)"\s*:')


def no_derived_entries(req: str, text: str, what: str) -> Finding:
    """§D: wire text carries no derived entry list (by the eval suite's own member names,
    `toolResponses` and an entry's `argsMatch`). A bare `tool` member proves nothing (a
    vendor member may name a tool); entries under any names are found by content
    (`no_entries_on_wire`)."""
    found = sorted(set(_DERIVED_KEY_RE.findall(text)))
    return check(req, not found, f"{what}: no derived entry or entry list" if not found
                 else f"{what}: carries derived-entry keys {found}", {"keys": found})


def recorded_content(events: Sequence[Mapping[str, Any]], agent_id: str) -> list[Any]:
    """The source's recorded tool content as the wire showed it: every structured input and
    outcome (or error) of the agent's calls. Scalars are left out: alone they say nothing."""
    out: list[Any] = []
    for e in events:
        p = _payload(e)
        if p.get("agentId") != agent_id:
            continue
        for key in ("inputs", "outcome", "error"):
            if key in p and isinstance(p[key], dict | list) and p[key]:
                out.append(p[key])
    return out


def _sub_values(value: Any) -> Iterable[Any]:
    stack = [value]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _parsed(doc: Any) -> Any:
    if isinstance(doc, Response):
        if doc.json is not None:
            return doc.json
        from refsim.wire.sse import parse_sse
        values = []
        for frame in parse_sse(doc.body.decode("utf-8", "replace")):  # an event stream
            try:
                values.append(json.loads(frame.data))
            except ValueError:
                continue
        return values
    return doc


def _other_lines(doc: Response) -> list[str]:
    """What a text body (an event stream, plain text) says outside JSON data lines: each
    other line's value (a comment, an `id:` or `event:` field, a line of text), to be read
    for content like any string."""
    if doc.json is not None:
        return []
    out = []
    for line in re.split(r"\r\n|\r|\n", doc.body.decode("utf-8", "replace")):
        if line.startswith("data:"):
            try:
                json.loads(line[5:])
                continue
            except ValueError:
                pass
        field, colon, value = line.partition(":")
        out.append(value.strip() if colon and len(field) < 16 else line.strip())
    return [line for line in out if line]


def no_recorded_content(req: str, documents: Sequence[tuple[str, Any]],
                        source_content: Sequence[Any], made: Sequence[Any]) -> list[Finding]:
    """§D: no recorded args or answers of a source appear anywhere in a response about the
    eval run, under any member name, except as the content of the calls that run made.

    Judged by content, not by key: every value at any depth of each document is compared
    (canonical JSON) with each recorded input and outcome the source's wire showed.
    """
    allowed = {canonical(v) for v in made}
    wanted = {canonical(v): v for v in source_content if canonical(v) not in allowed}
    if not wanted:
        return [fail(req, "no recorded content of the source is left to look for (the lane "
                     "is content-free on the wire, or the run made every recorded call), so "
                     "a leak cannot be judged")]
    out = []
    for what, doc in documents:
        found = sorted({canonical(v) for v in _sub_values(_parsed(doc))
                        if isinstance(v, dict | list) and canonical(v) in wanted})
        out.append(check(req, not found, f"{what}: carries no recorded call the run did not "
                         "make" if not found else f"{what}: carries recorded content the run "
                         f"never made: {', '.join(found[:2])}", {"found": found}))
    return out


def recorded_calls(events: Sequence[Mapping[str, Any]], agent_id: str
                   ) -> list[tuple[Any, Any]]:
    """The agent's calls as the wire showed them: (inputs, outcome or error), paired by
    callId. A call whose inputs or answer are not on the wire (a content-free lane) is
    left out: there is nothing of it to look for."""
    inputs: dict[Any, Any] = {}
    out: list[tuple[Any, Any]] = []
    for e in events:
        p = _payload(e)
        if p.get("agentId") != agent_id:
            continue
        if e.get("type") == "agent.tool-called" and "inputs" in p:
            inputs[p.get("callId")] = p["inputs"]
        elif e.get("type") == "agent.tool-returned" and p.get("callId") in inputs:
            answer = p.get("outcome", p.get("error"))
            if "outcome" in p or "error" in p:
                out.append((inputs[p.get("callId")], answer))
    return out


_BASE64_RE = re.compile(r"^[A-Za-z0-9+/_-]{16,}={0,2}$")


def _unpacked(value: Any, depth: int = 0) -> Iterable[Any]:
    """Every value in `value` at any depth, and in what its strings carry: JSON text (a
    document stringified into a member or a header) and base64 of JSON."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        yield item
        if isinstance(item, dict):
            stack.extend((v, level) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level) for v in item)
        elif isinstance(item, str) and level < 3 and len(item) >= 2:
            inner = _unpack_text(item.strip())
            if inner is not None:
                stack.append((inner, level + 1))


_HEX_RE = re.compile(r"^(?:[0-9a-fA-F]{2}){8,}$")


def _unpack_text(text: str) -> Any:
    """What a string carries, where it is a document in disguise: JSON text, percent-encoded
    or not, or JSON in base64 (either alphabet) or hex, plain or compressed (zlib, gzip);
    None otherwise.
    Bounded: a decompressed text is read to at most a megabyte."""
    if len(text) < 16 and "{" not in text and "[" not in text and "%" not in text:
        return None  # no JSON, nothing percent-encoded, too short for hex or base64 of JSON
    found = _json_text(text)
    if found is not None:
        return found
    if "%" in text:  # percent-encoded (a header value, a query): the document beneath
        decoded = unquote(text)
        if decoded != text:
            return _unpack_text(decoded)
    packed: bytes | None = None
    if _HEX_RE.match(text):
        packed = bytes.fromhex(text)
    elif _BASE64_RE.match(text):
        try:
            packed = base64.b64decode(text + "=" * (-len(text) % 4),
                                      altchars=b"-_" if "-" in text or "_" in text else None)
        except ValueError:
            return None
    if packed is None:
        return None
    for unpack in (lambda b: b, lambda b: zlib.decompressobj(47).decompress(b, 1 << 20)):
        try:
            found = _json_text(unpack(packed).decode("utf-8"))
        except (UnicodeDecodeError, zlib.error):
            continue
        if found is not None:
            return found
    return None


_DECODER = json.JSONDecoder()


def _json_text(text: str) -> Any:
    """A JSON document that is the text, or that the text carries after some words (the
    first object or array from which a whole document reads); None otherwise."""
    if not text:
        return None
    if text[0] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            pass
    for opener in "{[":
        at = text.find(opener, 1)
        if at < 0:
            continue
        try:
            return _DECODER.raw_decode(text, at)[0]
        except (ValueError, RecursionError):
            continue
    return None


def _readable(doc: Any) -> list[Any]:
    """What a response says, as values: its body (JSON, or an event stream's data lines,
    or text) and every header value."""
    if not isinstance(doc, Response):
        return [doc]
    return [_parsed(doc), *_other_lines(doc), *doc.headers.values()]


def _shape(value: Any) -> tuple[str, Any]:
    """What two values with one canonical form always share: their kind and size (every
    number one shape: 1 and 1.0 are one JSON value)."""
    if isinstance(value, dict):
        return ("object", len(value))
    if isinstance(value, list | tuple):
        return ("array", len(value))
    if isinstance(value, str):
        return ("string", len(value))
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", None)
    return ("other", type(value).__name__)


def no_entries_on_wire(req: str, documents: Sequence[tuple[str, Any]],
                       calls: Sequence[tuple[Any, Any]], made: Sequence[tuple[Any, Any]]
                       ) -> list[Finding]:
    """§D: derived entries are never on the wire. Looked for by content, anywhere in a
    response (any member, a JSON string, a header, base64): no object that carries a
    recorded call's inputs beside its answer (what an entry is, under any names), and no
    recorded input or answer of a source's call the run did not make. A run's own tool
    events carry the inputs and the answers of its calls apart, as they should."""
    pairs = {(canonical(i), canonical(o)) for i, o in calls}
    allowed = {canonical(v) for call in made for v in call}
    loose = {canonical(v): v for call in calls for v in call
             if isinstance(v, dict | list) and v and canonical(v) not in allowed}
    # Values whose canonical forms are equal share a `_shape`: a value of any other shape
    # is none of the recorded ones, and is not encoded to find that out (most of a long
    # run's answers, which this judge reads five times an eval).
    paired = {_shape(v) for call in calls for v in call}
    strayed = {_shape(v) for v in loose.values()}
    # By identity, the value kept beside its text: an id is not reused while it lives.
    memo: dict[int, tuple[Any, str]] = {}

    def canon(value: Any) -> str:
        if not isinstance(value, dict | list):
            return canonical(value)
        kept = memo.get(id(value))
        if kept is None:
            kept = memo[id(value)] = (value, canonical(value))
        return kept[1]

    out = []
    for what, doc in documents:
        entries: set[str] = set()
        strays: set[str] = set()
        for part in _readable(doc):
            for value in _unpacked(part):
                if pairs and isinstance(value, dict) and len(value) >= 2:
                    members = {canon(v) for v in value.values() if _shape(v) in paired}
                    if members:
                        entries |= {f"{i} -> {o}" for i, o in pairs
                                    if i in members and o in members}
                if (strayed and isinstance(value, dict | list) and value
                        and _shape(value) in strayed and canon(value) in loose):
                    strays.add(canon(value))
        found = sorted(entries) + sorted(strays)
        out.append(check(req, not found, f"{what}: carries no derived entry and no recorded "
                         "call the run did not make" if not found else
                         f"{what}: carries recorded content: {', '.join(found[:2])}",
                         {"entries": sorted(entries), "strays": sorted(strays)}))
    return out


def absent(req: str, response: Response, what: str) -> Finding:
    """A route that must not exist answers 404 or 405, never content."""
    return check(req, response.status in (404, 405),
                 f"{what}: does not exist ({response.status})" if response.status in (404, 405)
                 else f"{what}: answered {response.status}; the operation exists",
                 {"status": response.status})


def no_content_in(req: str, documents: Any, markers: Iterable[str], what: str) -> Finding:
    """No recorded content (tool answers, decisions) appears in what must stay content-free."""
    text = json.dumps(documents, sort_keys=True, default=str, ensure_ascii=False)
    found = sorted(m for m in markers if m and m in text)
    return check(req, not found, f"{what}: no recorded content" if not found
                 else f"{what}: carries recorded content {found}", {"found": found})


def present_in(req: str, documents: Any, needle: str, what: str) -> Finding:
    """A positive control: the material a check hunts for really exists where it should."""
    text = json.dumps(documents, sort_keys=True, default=str, ensure_ascii=False)
    return check(req, needle in text, f"{what}: present, as expected" if needle in text
                 else f"{what}: absent, so the check cannot witness anything")


def unchanged(req: str, before: Any, after: Any, what: str) -> Finding:
    same = canonical(before) == canonical(after)
    return check(req, same, f"{what}: unchanged" if same else f"{what}: changed",
                 {"before": before, "after": after})


def refused_registered(req: str, response: Response, what: str) -> list[Finding]:
    """Refused (4xx) with a registered code in a well-formed envelope."""
    return [check(req, 400 <= response.status < 500,
                  f"{what}: refused with {response.status}" if 400 <= response.status < 500
                  else f"{what}: answered {response.status}, not a refusal",
                  {"status": response.status, "body": response.json}),
            envelope(req, response, what)]


def copies_gone(req: str, remaining: Sequence[tuple[str, Any]], source: str,
                markers: Iterable[str]) -> list[Finding]:
    """Security: after erasure no stored copy is keyed under the source or holds its content."""
    keyed = [s for s, _ in remaining if s == source]
    text = json.dumps([e for _, e in remaining], sort_keys=True, default=str)
    held = sorted(m for m in markers if m in text)
    return [check(req, not keyed, "no derived copy is stored under the erased source" if not keyed
                  else f"{len(keyed)} derived copy(ies) still stored under the erased source"),
            check(req, not held, "no stored copy holds the erased source's content" if not held
                  else f"stored copies still hold the erased source's content {held}")]


def nothing_minted(req: str, response: Response, what: str,
                   before: int | None = None, after: int | None = None) -> Finding:
    """Refused before the run starts: the answer names no run (no runId, Location or
    eventsUrl), and, where the inside is visible, the host holds no more runs than before."""
    body = response.json if isinstance(response.json, dict) else {}
    named = [k for k in ("runId", "eventsUrl", "statusUrl") if k in body]
    if response.header("Location") is not None:
        named.append("Location")
    if before is not None and after is not None and after != before:
        return fail(req, f"{what}: (white box) the host holds {after} runs, {before} before")
    return check(req, not named, f"{what}: nothing was minted (no run named in the answer"
                 + (f"; {after} runs held, as before" if after is not None else "") + ")"
                 if not named else f"{what}: the refusal names a run ({', '.join(named)})",
                 _obs(response))


def no_new_runs(req: str, before: Mapping[str, str | None] | Sequence[str] | None,
                after: Mapping[str, str | None] | Sequence[str] | None, what: str,
                unrelated: frozenset[str] = frozenset()) -> Finding:
    """§B "before the run starts": the caller's run list (GET /runs) gains no run across a
    refusal. Judged as a change: runs listed before may come and go with other traffic,
    but none may appear that the refused request made. A new run the listing shows under
    one of the `unrelated` workflowIds (no refused request makes a run of those) is
    other traffic, set aside; any other counts."""
    if before is None or after is None:
        return fail(req, f"{what}: the run list could not be read before and after")
    shown = after if isinstance(after, Mapping) else dict.fromkeys(after)
    new = sorted(set(shown) - set(before))
    counted = [r for r in new if shown[r] is None or shown[r] not in unrelated]
    aside = len(new) - len(counted)
    note = (f"; {aside} new run(s) of other workflows set aside as other traffic" if aside
        else "")
    return check(req, not counted, f"{what}: the run list gained no run ({len(shown)} listed"
                 f"{note})" if not counted else f"{what}: the run list gained "
                 f"{len(counted)} run(s) across the refusal: {', '.join(counted[:2])}",
                 {"new": counted, "setAside": sorted(set(new) - set(counted))})


def counter_delta(req: str, before: int | None, after: int | None, expected: int,
                  what: str) -> Finding:
    """An effect judged as a change across the step that should cause it, never as an
    absolute value: a host that has served other traffic before still passes."""
    if before is None or after is None:
        return fail(req, f"{what}: the live counter cannot be observed")
    return check(req, after - before == expected,
                 f"{what}: the live counter moved by {after - before}"
                 + ("" if after - before == expected else f", expected {expected}"),
                 {"before": before, "after": after})


# ----------------------------------------------------------------------------- controls and counts


def completed(req: str, reached: bool, what: str) -> Finding:
    """A positive control: the run reached run.completed."""
    return check(req, reached, f"{what}: reached run.completed" if reached
                 else f"{what}: never reached run.completed")


def run_status_is(req: str, status: Any, want: str, what: str) -> Finding:
    """A run's status, as its snapshot shows it."""
    return check(req, status == want, f"{what}: {status}" if status == want
                 else f"{what}: {status}, expected {want}")


def readable(req: str, value: Any, what: str) -> Finding:
    """Something the host must still serve: it answered with a document."""
    return check(req, value is not None, f"{what}: it does" if value is not None
                 else f"{what}: it does not")


def count_is(req: str, got: int, want: int, what: str) -> Finding:
    return check(req, got == want, f"{what}: {got}" if got == want
                 else f"{what}: {got}, expected {want}", {"got": got, "want": want})


def at_least(req: str, got: int, least: int, what: str) -> Finding:
    """A positive control: there is something to judge (at least `least` of it)."""
    return check(req, got >= least, f"{what}: {got}" if got >= least
                 else f"{what}: {got}, fewer than {least}", {"got": got, "least": least})


def same_as(req: str, got: Any, want: Any, what: str) -> Finding:
    """Equal as JSON values (member order aside)."""
    same = canonical(got) == canonical(want)
    return check(req, same, what if same else f"{what}: no, {canonical(got)[:200]} is not "
                 f"{canonical(want)[:200]}", {"got": got, "want": want})


def done(req: str, took: bool, what: str) -> Finding:
    """A white-box action the check stands on (a deletion, a registration) took effect."""
    return check(req, took, what if took else f"{what}: it did not take effect")


def any_present_in(req: str, documents: Any, needles: Iterable[str], what: str) -> Finding:
    """A positive control: at least one of `needles` is in the documents."""
    found = any(present_in(req, documents, n, "").ok for n in needles)
    return check(req, found, what if found else f"{what}: none is there")


def nothing_of_run(req: str, response: Response, opaque: str, content: Iterable[Any],
                   what: str) -> Finding:
    """Isolation: an answer to another tenant carries neither the run's id (its opaque
    segment) nor any recorded content of it (a JSON object or array it holds)."""
    text = response.body.decode("utf-8", "replace")
    shown = [f"its id ({opaque})"] if opaque in text else []
    doc = canonical(response.json if response.json is not None else text)
    shown += [canonical(c) for c in content
              if isinstance(c, dict | list) and c and canonical(c) in doc]
    return check(req, not shown, f"{what}: the answer carries nothing of the run"
                 if not shown else f"{what}: the answer carries {shown[0]}", _obs(response))


def event_validates(req: str, events: Sequence[Mapping[str, Any]], type_: str, schema: str,
                    what: str) -> Finding:
    """One event of the type, whose payload validates against the schema."""
    found = of_type(events, type_)
    good = len(found) == 1 and schemas.is_valid(schema, found[0].get("payload"))
    return check(req, good, what if good else f"{what}: no ({len(found)} {type_} event(s))")


def erased_as_reported(req: str, response: Response, copies_made: int) -> list[Finding]:
    """The erase seam answers erased, and counts the copies it erased: every eval run that
    named the source derived one."""
    body = response.json if isinstance(response.json, dict) else {}
    copies = body.get("derivedCopiesErased")
    return [check(req, response.status == 200 and body.get("erased") is True,
                  f"the erase seam answers {response.status} erased={body.get('erased')}"),
            check(req, copies == copies_made,
                  f"derivedCopiesErased is {copies!r}: the copy of every eval run that named "
                  f"the source ({copies_made}) went too" if copies == copies_made else
                  f"derivedCopiesErased is {copies!r}, but {copies_made} eval run(s) derived "
                  "a copy from the source")]


def no_outcomes_on_wire(req: str, events: Sequence[Mapping[str, Any]], agent_id: str,
                        what: str) -> Finding:
    """No agent.tool-returned of the agent carries an outcome or error (redacted, or a
    content-free lane)."""
    shown = outcomes_on_wire(events, agent_id)
    return check(req, not shown, what if not shown else f"{what}: they still carry them")


def byte_identical(req: str, body: bytes, earlier: bytes, what: str) -> Finding:
    return check(req, body == earlier, f"{what}: byte-identical" if body == earlier
                 else f"{what}: it differs")


def succeeded(req: str, response: Response, want: int | None, what: str) -> Finding:
    """A step the row stands on answered as it must (`want`, or any 2xx): else the row
    cannot go on."""
    good = response.status == want if want else 200 <= response.status < 300
    return check(req, good, f"{what}: answered {response.status}"
                 + ("" if good else f", expected {want or '2xx'}; the row cannot go on"),
                 _obs(response))


def could_not_go_on(req: str, what: str, why: str) -> Finding:
    """A check that stopped before it could judge (what it needed was not there, or it
    raised): a failure, never a pass by omission."""
    return fail(req, f"{what}: {why}")


def leg_passed(req: str, leg: str, disposition: str, passed: bool) -> Finding:
    """The scenario row stands on its legs: each must pass."""
    return check(req, passed, f"{leg}: {disposition}")



def not_asked(req: str, label: str, ids: Sequence[str]) -> Finding:
    """A case built from a tenant part of the host's ids, said not to apply (never asked,
    never failed) where its ids carry none; a failure of refsim's where they do carry one
    (the case should have been asked)."""
    parted = [i for i in ids if "/" in i]
    return check(req, not parted,
                 f"{label}: not asked, as it does not apply to this host's id shape (its ids "
                 f"{', '.join(map(repr, ids))} carry no tenant part to take apart)" if not parted
                 else f"{label}: said not to apply, yet {parted[0]!r} carries a tenant part")

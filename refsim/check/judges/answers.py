"""Judges of what one answer says: its status, its error code and envelope, a refusal that
made nothing (no run minted, none listed), and a step answered as the row needs; `_obs`,
how a finding quotes an answer, which every judge module uses.

Part of `refsim.check.judges` (import the judges from there). A new judge of an answer's
status, code or envelope goes here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from refsim.check.findings import Finding, check, fail, ok
from refsim.wire import schemas
from refsim.wire.errors import is_registered
from refsim.wire.response import Response
from refsim.wire.trace import quoted


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


def envelope(req: str, response: Response, what: str) -> Finding:
    body = response.json
    if not isinstance(body, dict) or not schemas.is_valid("error-envelope.schema.json", body):
        return fail(req, f"{what}: the error body is not a {{error, message, details?}} envelope",
                    _obs(response))
    return check(req, is_registered(body["error"], response.status),
                 f"{what}: code {body['error']!r} is registered at status {response.status}",
                 _obs(response))


def _obs(response: Response) -> dict[str, Any]:
    """An answer as a finding quotes it; while a trace records, with the exchange that got
    it (a failed row's evidence: `refsim.check.evidence`)."""
    out = {"status": response.status, "body": response.json if response.json is not None
           else response.text}
    seq = quoted(response)
    if seq is not None:
        out["exchange"] = seq
    return out


def absent(req: str, response: Response, what: str) -> Finding:
    """A route that must not exist answers 404 or 405, never content."""
    return check(req, response.status in (404, 405),
                 f"{what}: does not exist ({response.status})" if response.status in (404, 405)
                 else f"{what}: answered {response.status}; the operation exists",
                 {"status": response.status})


def refused_registered(req: str, response: Response, what: str) -> list[Finding]:
    """Refused (4xx) with a registered code in a well-formed envelope."""
    return [check(req, 400 <= response.status < 500,
                  f"{what}: refused with {response.status}" if 400 <= response.status < 500
                  else f"{what}: answered {response.status}, not a refusal",
                  {"status": response.status, "body": response.json}),
            envelope(req, response, what)]


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


def succeeded(req: str, response: Response, want: int | None, what: str) -> Finding:
    """A step the row stands on answered as it must (`want`, or any 2xx): else the row
    cannot go on."""
    good = response.status == want if want else 200 <= response.status < 300
    return check(req, good, f"{what}: answered {response.status}"
                 + ("" if good else f", expected {want or '2xx'}; the row cannot go on"),
                 _obs(response))

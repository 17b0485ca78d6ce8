"""Maps v2 requests onto the host core: headers, auth, paths, bodies and the envelope.

Every input, however malformed, leaves as a response with a registered code.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from refsim._version import __version__
from refsim.domain.canonical import canonical, encoder, sha256_hex
from refsim.domain.core import WORKFLOWS, HostCore
from refsim.domain.ids import (
    TENANT_RE,
    WORKSPACE_RE,
    ProjectionError,
    RunId,
    parse_decoded,
    unproject,
)
from refsim.domain.owners import Owner, Tenant
from refsim.domain.refusals import Refusal, not_found, state_conflict, validation
from refsim.domain.runs import SCHEMA_VERSION, Event, RunRecord
from refsim.wire import catalog, limits, render, schemas
from refsim.wire.commands import create_command, fork_command
from refsim.wire.errors import checked
from refsim.wire.limits import LONG_POLL_MAX_SECONDS
from refsim.wire.response import Response, compact, encode
from refsim.wire.routes import JSON, Body, Refused, Route, RouteTable, unwrap
from refsim.wire.suite_docs import parse_suite

PROTOCOL_VERSION = "2.0"
MAX_IDEMPOTENCY_KEY = 255
MAX_SCHEMA_ISSUES = 100  # schema failures looked for before refusing (20 are reported)
CREATED_STATUSES = frozenset({"pending", "running", "waiting-approval", "waiting-input",
                              "waiting-external"})
_VERSION_RE = re.compile(r"([0-9]{1,6})(?:\.([0-9]{1,6}))?", re.ASCII)
_INT_RE = re.compile(r"-?[0-9]{1,12}", re.ASCII)
# GET /runs (listRuns): OpenWOP v2 bounds `limit` to 1..100 and defaults it to 50
# (limits.RUN_LIST_*), so a page renders at most 100 snapshots whatever the host holds.
# A listRuns cursor is the startedAt of the next run, base64url: a stamp is 24 ASCII bytes,
# so 32 characters and no padding. It names the caller's own next run by its time, never by
# id, and it reads the same after earlier runs are deleted.
_RUN_CURSOR_RE = re.compile(r"[A-Za-z0-9_-]{32}", re.ASCII)
_STAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z",
                       re.ASCII)


@attrs.frozen
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes | None
    memo: dict[Any, Any] = attrs.field(factory=dict, eq=False, repr=False)


# What a handler answers: a response, or a refusal the router makes into one.
Handler = Callable[["Router", "Call"], Response | Refusal]


def _json_response(status: int, body: Any, extra: dict[str, str] | None = None) -> Response:
    headers = {"Content-Type": "application/json", "OpenWOP-Version": PROTOCOL_VERSION}
    if extra:
        headers.update(extra)
    return Response(status, headers, body)


def refusal_response(refusal: Refusal) -> Response:
    """A refusal as its envelope, at the status the registry gives its code."""
    status, refusal = checked(refusal)
    extra = {"Retry-After": "1"} if refusal.code == "rate_limited" else None
    return _json_response(status, refusal.to_json(), extra)


def _etag_matches(header: str | None, etag: str) -> bool:
    """If-None-Match: a list of tags, weak or strong (weak comparison), or `*`."""
    if header is None:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or etag in (t.removeprefix("W/") for t in tags)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("a number too large for a double is not I-JSON")
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("an object names a member twice, which I-JSON forbids")
    return out


# A target urlsplit leaves as it is: one "/" then path characters, no query, fragment,
# authority ("//") or the tab and line breaks it strips.
_PLAIN_PATH = re.compile(r"/(?!/)[A-Za-z0-9._~%:@!$&'()*+,;=/-]*")

# Built once: `json.loads` and `json.dumps` with options build a decoder or an encoder on
# every call, a good part of the cost of a small document.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            object_pairs_hook=_unique_members)
_COMPACT_ASCII = encoder(compact=True)

_JSON_STRING_RE = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_INNERMOST_RE = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SURROGATE_ESCAPE_RE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_deep(raw: bytes) -> bool:
    """Whether a body that parsed as JSON nests deeper than limits.MAX_JSON_DEPTH.

    Done on the bytes at C speed, linear in the size: strings are cut out, everything but
    brackets dropped, then each pass removes the innermost pairs (one level).
    """
    if raw.count(b"[") + raw.count(b"{") <= limits.MAX_JSON_DEPTH:
        return False
    brackets = _JSON_STRING_RE.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(limits.MAX_JSON_DEPTH):
        if not brackets:
            return False
        brackets = _INNERMOST_RE.sub(b"", brackets)
    return bool(brackets)


def _has_lone_surrogate(raw: bytes, doc: Any) -> bool:
    """Whether a key or string holds a `\\ud800`-style escape with no partner, anywhere but
    in a value of `fixtureRuns`.

    Strict UTF-8 cannot carry a surrogate, so only an escape in the text can make one;
    re-encoding the document is done only when such an escape is there. A source id with a
    lone surrogate is an undecodable id like any other: RFC 0252 §C refuses it with the
    uniform refusal (no run can have that id), which the id parser gives; the body itself is
    refused as not I-JSON only for a surrogate elsewhere.
    """
    if not _SURROGATE_ESCAPE_RE.search(raw):
        return False
    runs = doc.get("fixtureRuns") if isinstance(doc, dict) else None
    if isinstance(runs, dict):  # the ids are judged as ids; their keys and the rest here
        doc = {**doc, "fixtureRuns": {key: value if not isinstance(value, str) else ""
                                      for key, value in runs.items()}}
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def script_size(script: Any) -> tuple[int, int]:
    """(steps, tool calls) of an agent script, nested delegate scripts included."""
    steps = calls = 0
    stack = [script]
    while stack:
        item = stack.pop()
        if not isinstance(item, list):
            continue
        for step in item:
            steps += 1
            if isinstance(step, dict):
                if "call" in step:
                    calls += 1
                if "script" in step:
                    stack.append(step["script"])
    return steps, calls


def suite_cap_refusal(body: dict[str, Any]) -> Refusal | None:
    """The work caps of the suite a seam body registers (docs/host-author.md); each refusal
    names the limit. Checked before the schema, so counting stays linear."""
    suite = body.get("suite")
    if not isinstance(suite, dict) or not isinstance(suite.get("tasks"), list):
        return None  # the schema says what is wrong
    tasks = suite["tasks"]
    if len(tasks) > limits.MAX_SUITE_TASKS:
        return validation(f"a suite holds at most {limits.MAX_SUITE_TASKS} tasks",
                          field="suite.tasks")
    trials = suite.get("trials", 1)
    if (not isinstance(trials, int) or isinstance(trials, bool) or
            not 1 <= trials <= limits.MAX_TRIALS):
        return validation(f"a suite's trials is an integer from 1 to {limits.MAX_TRIALS}",
                          field="suite.trials")
    if len(tasks) * trials > limits.MAX_RUN_TASK_TRIALS:
        return validation(f"tasks x trials is at most {limits.MAX_RUN_TASK_TRIALS} per run",
                          field="suite.trials")
    calls = size = 0
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            continue
        task_input = task.get("input")
        script = task_input.get("script") if isinstance(task_input, dict) else None
        steps, task_calls = script_size(script)
        if steps > limits.MAX_TASK_STEPS:
            return validation(f"a task's script has at most {limits.MAX_TASK_STEPS} steps, "
                              "delegates included", field=f"suite.tasks[{index}].input.script")
        calls += task_calls * trials
        # Scoring reads the expected value once per trial, as the script runs once.
        size += len(_COMPACT_ASCII([task_input, task.get("fixtures"), task.get("expected")]))
    if calls > limits.MAX_RUN_CALLS:
        return validation(f"a run of this suite would make {calls} tool calls (tasks x trials "
                          f"x calls); the limit is {limits.MAX_RUN_CALLS}", field="suite.tasks")
    if size * trials > limits.MAX_RUN_SCRIPT_BYTES:
        return validation(f"trials x the tasks' inputs, fixtures and expected values is at most "
                          f"{limits.MAX_RUN_SCRIPT_BYTES} bytes per run", field="suite.tasks")
    return None


_PAGE_WRAPPER_BYTES = 4096  # runId, lastSequence, status, isTerminal and the brackets


def _page(run: RunRecord, after: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Events after the cursor, at most `limit` of them and PAGE_MAX_BYTES in all (always
    at least one); and whether more follow."""
    # The page's candidates and one more (which only says that more follow): the scan
    # stops there, as the page does, however long the run.
    window = list(itertools.islice((e for e in run.events if e.sequence > after), limit + 1))
    # Most pages fit whole: one encoding of them all then says so (the list's text is the
    # events' texts, a comma after each but the last, and two brackets: the sum
    # `_page_by_event` counts, plus one), where that encodes each event alone.
    head = [e.to_json() for e in window[:limit]]
    if len(encode(head)) - 1 <= limits.PAGE_MAX_BYTES - _PAGE_WRAPPER_BYTES:
        return head, len(window) > limit
    return _page_by_event(window, limit)


def _run_cursor(run: RunRecord) -> str:
    return base64.urlsafe_b64encode(run.started_at.encode("ascii")).decode("ascii")


def _run_cursor_start(cursor: str) -> str | None:
    """The startedAt a listRuns cursor resumes at, or None when the host did not mint it."""
    if not _RUN_CURSOR_RE.fullmatch(cursor):
        return None
    try:
        stamp = base64.urlsafe_b64decode(cursor).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return stamp if _STAMP_RE.fullmatch(stamp) else None


def _run_list(runs: dict[RunId, RunRecord], caller: Owner, start: str | None,
              workflow_id: str | None, status: str | None, limit: int
              ) -> tuple[list[RunRecord], RunRecord | None]:
    """The runs the caller may read that match the filters, from `start` on, in creation
    order: at most `limit` of them, and the next one when more follow.

    Every run is made by `HostCore._new_run`, which stamps it with the next clock tick as it
    inserts it: creation order, `runs` order and startedAt order (fixed-width stamps,
    compared as text) are one order, so the runs before the cursor are a prefix. The scan
    stops at the run after the page.
    """
    page: list[RunRecord] = []
    for run in runs.values():
        if (not caller.can_read(run.owner) or (start is not None and run.started_at < start)
                or (workflow_id is not None and run.workflow_id != workflow_id)
                or (status is not None and run.status != status)):
            continue
        if len(page) == limit:
            return page, run
        page.append(run)
    return page, None


def _page_by_event(pending: list[Event], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The page rule event by event: each event's text and a comma count against the
    room left, and the first event is always taken."""
    events: list[dict[str, Any]] = []
    budget = limits.PAGE_MAX_BYTES - _PAGE_WRAPPER_BYTES
    for event in pending:
        doc = event.to_json()
        size = len(encode(doc)) + 1
        if len(events) >= limit or (events and size > budget):
            return events, True
        budget -= size
        events.append(doc)
    return events, False


@attrs.frozen
class Call:
    """A routed request as its handler gets it: the request, its row, the values of the
    pattern's holes, and the caller (None only on a route that needs none)."""

    request: Request
    route: Route[Handler]
    args: list[str]
    caller: Owner | None

    @property
    def owner(self) -> Owner:
        """The caller, on a route that needs one (every route but discovery)."""
        assert self.caller is not None
        return self.caller

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; raises Refused when it is not one."""
        return Router._json_body(self.request)

    def valid_json(self) -> dict[str, Any]:
        """The body as the row takes it: a JSON object within the row's caps and valid
        against its schema; raises Refused otherwise."""
        return Router._checked_body(self.request, self.route.body or JSON)


@attrs.define
class Router:
    core: HostCore
    lock: threading.RLock = attrs.Factory(threading.RLock)
    # Keyed by the whole owner triple and the key: a replay is the caller's own answer, never
    # one made for another workspace or subject of the same tenant (RFC 0252 §C: a source
    # the caller cannot read is refused, whoever made a run with the same key and body).
    _idempotency: dict[tuple[Owner, str], tuple[str, Response]] = attrs.Factory(dict)
    last_hold_seconds: float = 0.0  # how long the last request held the lock
    max_hold_seconds: float = 0.0  # the longest any request held it
    _discovery_memo: tuple[Any, dict[str, Any], str, str] | None = None

    # -- entry point

    def handle(self, method: str, target: str, headers: dict[str, str] | None,
               body: bytes | None) -> Response:
        """The answer to one request: a refusal, returned or raised on the way, becomes its
        envelope here and nowhere else."""
        try:
            answer = self._answer(method, target, headers or {}, body)
        except Refused as refused:
            answer = refused.refusal
        except Exception:  # a bug, not bad input: still an envelope, never a traceback
            answer = Refusal("internal_error", "the host failed while handling the request")
        return answer if isinstance(answer, Response) else refusal_response(answer)

    def _answer(self, method: str, target: str, headers: dict[str, str],
                body: bytes | None) -> Response | Refusal:
        request, route, args = self._prepare(method, target, headers, body)
        # Parsing and schema checks need no host state: done before the lock, which then
        # guards the in-memory transaction only.
        self._warm(request, route)
        with self.lock:
            started = time.perf_counter()
            try:
                return self._dispatch(request, route, args)
            finally:
                held = time.perf_counter() - started
                self.last_hold_seconds = held
                self.max_hold_seconds = max(self.max_hold_seconds, held)

    def _prepare(self, method: str, target: str, raw_headers: dict[str, str],
                 body: bytes | None) -> tuple[Request, Route[Handler], list[str]]:
        headers = {str(k).lower(): str(v) for k, v in raw_headers.items()}
        if not isinstance(target, str) or not target.startswith("/"):
            raise Refused(not_found("no such path on this host"))
        if _PLAIN_PATH.fullmatch(target):
            # A path and nothing else: what urlsplit would give back, without its work.
            # A method is case-sensitive (RFC 9110 §9.1): `get` is no GET.
            request = Request(str(method), target, {}, headers, body)
        else:
            try:
                parts = urlsplit(target)
            except ValueError:  # e.g. an unbalanced "[" read as an IPv6 authority
                raise Refused(not_found("no such path on this host")) from None
            request = Request(str(method), parts.path, parse_qs(parts.query), headers,
                              body)
        self._check_version(headers.get("openwop-version"))
        if body is not None and len(body) > limits.MAX_BODY_BYTES:
            raise Refused(Refusal("payload_too_large", "request bodies are limited to "
                                  f"{limits.MAX_BODY_BYTES} bytes"))
        # Reads the profile (which routes this host has), never state.
        found = ROUTES.find(self.core.profile, request.method, request.path.split("/")[1:])
        if found is None:
            raise Refused(not_found(f"no route for {request.method} on this path"))
        route, args = found
        return request, route, args

    @staticmethod
    def _warm(request: Request, route: Route[Handler]) -> None:
        """Parse the body and check it as the row says, memoised on the request; a refusal
        waits for the handler, which comes after authentication."""
        if request.body is None or route.body is None:
            return
        with contextlib.suppress(Refused):
            Router._checked_body(request, route.body)

    def _dispatch(self, request: Request, route: Route[Handler], args: list[str]
                  ) -> Response | Refusal:
        caller = None
        if route.auth:
            caller = self._authenticate(request.headers.get("authorization"))
            if caller is None:
                return Refusal("unauthenticated",
                               "a valid API key is required (Authorization: Bearer <key>)")
        return route.handler(self, Call(request, route, args, caller))

    @staticmethod
    def _check_version(value: str | None) -> None:
        if value is None:
            return
        match = _VERSION_RE.fullmatch(value.strip())
        if match is None:
            raise Refused(validation("OpenWOP-Version must be <major> or <major>.<minor>"))
        major, minor = int(match.group(1)), match.group(2)
        if major != 2 or (minor is not None and f"{major}.{int(minor)}" not in
                          (PROTOCOL_VERSION,)):
            raise Refused(Refusal("protocol_version_unsupported",
                                  f"this host speaks OpenWOP {PROTOCOL_VERSION} only"))

    def _authenticate(self, header: str | None) -> Owner | None:
        if header is None:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.core.caller(token.strip())

    # -- helpers (each raises Refused where it cannot go on)

    @staticmethod
    def _json_body(request: Request) -> dict[str, Any]:
        if "body" not in request.memo:
            request.memo["body"] = Router._parse_json_body(request)
        parsed: dict[str, Any] | Refusal = request.memo["body"]
        return unwrap(parsed)

    @staticmethod
    def _parse_json_body(request: Request) -> dict[str, Any] | Refusal:
        content_type = request.headers.get("content-type")
        if (content_type is not None and
                content_type.split(";")[0].strip().lower() != "application/json"):
            return Refusal("unsupported_media_type", "request bodies must be application/json")
        if not request.body:
            return validation("a JSON object body is required")
        try:
            text = request.body.decode("utf-8")
            if text.startswith("\ufeff"):  # as json.loads refuses it
                raise ValueError("a byte order mark before JSON")
            doc = _DECODER.decode(text)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return validation("the request body is not I-JSON: UTF-8 JSON with finite numbers "
                              "and unique member names")
        if not isinstance(doc, dict):
            return validation("the request body must be a JSON object")
        if _too_deep(request.body):
            return validation(f"the request body nests deeper than {limits.MAX_JSON_DEPTH} levels")
        if _has_lone_surrogate(request.body, doc):
            return validation("the request body is not I-JSON: a string holds a lone "
                              "surrogate escape")
        return doc

    @staticmethod
    def _checked_body(request: Request, spec: Body) -> dict[str, Any]:
        """The body parsed, then held to the caps and the schema `spec` names; the schema's
        verdict is memoised on the request."""
        body = Router._json_body(request)
        if spec.schema is None:
            return body
        if spec.caps is not None:
            refusal = spec.caps(body)
            if refusal is not None:
                raise Refused(refusal)
        key = ("schema", spec.schema)
        if key not in request.memo:
            request.memo[key] = Router._schema_refusal(spec.schema, body, spec.skip)
        refusal = request.memo[key]
        if refusal is not None:
            raise Refused(refusal)
        return body

    @staticmethod
    def _schema_refusal(ref: str, doc: Any, skip: Callable[[str], bool] | None = None
                        ) -> Refusal | None:
        found = [i for i in schemas.issues(ref, doc, MAX_SCHEMA_ISSUES, parsed=True)
                 if skip is None or not skip(i.pointer)]
        if not found:
            return None
        return validation("the request body does not match the schema",
                          issues=[{"pointer": i.pointer, "keyword": i.keyword}
                                  for i in found[:20]])

    def _run_arg(self, caller: Owner, segment: str) -> RunRecord:
        return unwrap(self.core.visible_run(caller, self._parse_run_segment(caller, segment)))

    @staticmethod
    def _parse_run_segment(caller: Owner, segment: str) -> RunId:
        try:
            bound = unproject(segment)  # decoded once, here
        except ProjectionError:
            if "~" in segment or "%" in segment:
                raise Refused(validation("the run id segment has an escape that is not two "
                                         "hex digits")) from None
            raise Refused(not_found()) from None
        rid = parse_decoded(bound, default_tenant=caller.tenant)
        if rid is None:
            raise Refused(not_found())
        return rid

    @staticmethod
    def _int_query(request: Request, name: str, default: int, message: str | None = None
                   ) -> int:
        """A query parameter that is an integer >= -1, or refused (with `message` if given)."""
        values = request.query.get(name)
        if not values:
            return default
        text = values[-1]
        if not _INT_RE.fullmatch(text) or int(text) < -1:
            raise Refused(validation(message or
                                     f"query parameter {name} must be an integer >= -1"))
        return int(text)

    @staticmethod
    def _str_query(request: Request, name: str) -> str | None:
        """The last value of a query parameter; an empty one is no value (parse_qs)."""
        values = request.query.get(name)
        return values[-1] if values else None

    def _created(self, run: RunRecord, extra: dict[str, Any] | None = None) -> Response:
        link = "/runs/" + run.run_id.projected
        body: dict[str, Any] = {"runId": run.run_id.bound}
        body.update(extra or {})
        # The 201 body names the status the run was accepted in, one of the active ones
        # (a closed enum in createRun's response); refsim runs to the end inside the POST,
        # so a finished run answers "running" and GET statusUrl tells the rest.
        status = run.status if run.status in CREATED_STATUSES else "running"
        body.update({"status": status, "eventsUrl": link + "/events", "statusUrl": link})
        return _json_response(201, body, {"Location": link})

    # -- handlers

    def _discovery(self, call: Call) -> Response:
        # The document changes only with the built-in suites and the profile: the hottest
        # route hashes it once, not per request.
        key = (id(self.core.profile), tuple(self.core.suites.fixture_ids))
        if self._discovery_memo is None or self._discovery_memo[0] != key:
            doc = self.discovery_document()
            text = Response(200, {}, doc).body.decode("utf-8")
            self._discovery_memo = (key, doc, '"' + sha256_hex(doc)[:32] + '"', text)
        _, doc, etag, text = self._discovery_memo  # shared: SimHost hands callers a copy
        if _etag_matches(call.request.headers.get("if-none-match"), etag):
            return Response(304, {"OpenWOP-Version": PROTOCOL_VERSION, "ETag": etag})
        response = _json_response(200, doc, {"ETag": etag})
        return attrs.evolve(response, text=text)  # the body, encoded once

    def discovery_document(self) -> dict[str, Any]:
        profile = self.core.profile
        doc: dict[str, Any] = {
            "protocolVersions": [PROTOCOL_VERSION], "preferredVersion": PROTOCOL_VERSION,
            "protocolVersion": PROTOCOL_VERSION,
            "implementation": {"name": "refsim", "version": __version__},
            "eventLogSchemaVersion": SCHEMA_VERSION,
            # The catalog's agents and tools beside its suites and workflows: this host
            # loaded the whole catalog (specs/fixtures/).
            "fixtures": sorted({*self.core.suites.fixture_ids, *WORKFLOWS,
                                *catalog.agent_and_tool_ids()}),
            # The seam rows this host has: a seam is advertised exactly where it answers.
            "conformance": {"seamsProfile": "openwop-conformance-seams-v2",
                            "seams": ROUTES.seams(profile)},
            "replay": {"status": "stable", "since": "2.0", "witness": "witnessable-gated"},
            # listRuns (GET /runs) is gated on this record: a client lists runs only where
            # discovery names the family.
            "runList": {"status": "stable", "since": "2.0", "witness": "witnessable-gated"},
        }
        family = render.agents_family(profile)
        if family is not None:
            doc["agents"] = family
        return doc

    def _create_run(self, call: Call) -> Response | Refusal:
        caller, body = call.owner, call.json()
        key = call.request.headers.get("idempotency-key")
        if key is not None:
            if not key or len(key) > MAX_IDEMPOTENCY_KEY:
                return Refusal("idempotency_key_invalid",
                               "Idempotency-Key must be 1 to 255 characters")
            cached = self._idempotency.get((caller, key))
            if cached is not None:
                if cached[0] != canonical(body):
                    return Refusal("idempotency_key_mismatch",
                                   "this Idempotency-Key was used with another body")
                replay = cached[1]
                return Response(replay.status,
                                {**replay.headers, "OpenWOP-Idempotent-Replay": "true"},
                                replay.json)
        response = self._create(caller, call.valid_json())
        if key is not None:
            self._idempotency[(caller, key)] = (canonical(body), response)
        return response

    def _create(self, caller: Owner, body: dict[str, Any]) -> Response:
        inputs = body.get("inputs")
        if isinstance(inputs, dict):
            steps, _ = script_size(inputs.get("script"))
            if steps > limits.MAX_TASK_STEPS:
                raise Refused(validation(
                    f"inputs.script has {steps} steps, delegates included; the limit is "
                    f"{limits.MAX_TASK_STEPS}", field="inputs.script"))
        return self._created(unwrap(self.core.create_run(caller, create_command(body))).run)

    def _get_run(self, call: Call) -> Response:
        run = self._run_arg(call.owner, call.args[0])
        snapshot = render.snapshot(run)
        etag = '"' + sha256_hex(snapshot)[:32] + '"'
        if _etag_matches(call.request.headers.get("if-none-match"), etag):
            return Response(304, {"OpenWOP-Version": PROTOCOL_VERSION, "ETag": etag})
        return _json_response(200, snapshot, {"ETag": etag})

    def _list_runs(self, call: Call) -> Response | Refusal:
        """listRuns: the caller's readable runs in creation order, paged by an opaque cursor."""
        request = call.request
        bounds = f"query parameter limit must be an integer from 1 to {limits.RUN_LIST_MAX_LIMIT}"
        limit = self._int_query(request, "limit", limits.RUN_LIST_DEFAULT_LIMIT, bounds)
        if not 1 <= limit <= limits.RUN_LIST_MAX_LIMIT:
            return validation(bounds)
        start = None
        cursor = self._str_query(request, "cursor")
        if cursor is not None:
            start = _run_cursor_start(cursor)
            if start is None:
                return validation("query parameter cursor is not a nextCursor this host gave")
        runs, following = _run_list(self.core.runs, call.owner, start,
                                    self._str_query(request, "workflowId"),
                                    self._str_query(request, "status"), limit)
        # Tags and metadata can make snapshots large: like an events page, a page stops
        # before PAGE_MAX_BYTES (always one run at least) and the cursor carries the rest.
        # Each run is rendered only once the page has room for it so far: a page of one
        # large run renders two, not `limit`.
        snapshots: list[dict[str, Any]] = []
        budget = limits.PAGE_MAX_BYTES - _PAGE_WRAPPER_BYTES
        for run in runs:
            doc = render.snapshot(run)
            budget -= len(encode(doc)) + 1
            if snapshots and budget < 0:
                following = run
                break
            snapshots.append(doc)
        return _json_response(200, render.run_list(
            snapshots, None if following is None else _run_cursor(following)))

    def _poll(self, call: Call) -> Response | Refusal:
        request = call.request
        run = self._run_arg(call.owner, call.args[0])
        after = self._int_query(request, "afterSequence", -1)
        # `timeout` is the long-poll wait; the HTTP face waits, in process it never does.
        timeout = self._int_query(request, "timeout", 0)
        if timeout > LONG_POLL_MAX_SECONDS:
            return validation(f"query parameter timeout is at most {LONG_POLL_MAX_SECONDS} "
                              "seconds")
        limit = self._int_query(request, "limit", limits.POLL_DEFAULT_LIMIT)
        if not 1 <= limit <= limits.POLL_MAX_LIMIT:
            return validation(f"query parameter limit must be 1 to {limits.POLL_MAX_LIMIT}")
        events, more = _page(run, after, limit)
        # A page that stops early (limit or size) is not the end: isTerminal says that
        # the run is over and this page holds its last event; lastSequence is the cursor.
        return _json_response(200, {"runId": run.run_id.bound, "events": events,
                                    "lastSequence": events[-1]["sequence"] if events else -1,
                                    "status": run.status,
                                    "isTerminal": run.terminal and not more})

    def _events_stream(self, call: Call) -> Response | Refusal:
        """Server-sent events of everything recorded so far, resumable by Last-Event-ID."""
        run = self._run_arg(call.owner, call.args[0])
        last = call.request.headers.get("last-event-id")
        after = -1
        if last is not None:
            by_id = {e.event_id: e.sequence for e in run.events}
            if last in by_id:
                after = by_id[last]
            elif _INT_RE.fullmatch(last):
                after = int(last)
            else:
                return validation("Last-Event-ID names no event of this run")
        chunks = []
        for event in run.events:
            if event.sequence > after:
                data = compact(event.to_json())
                chunks.append(f"id: {event.event_id}\nevent: {event.type}\ndata: {data}\n\n")
        return Response(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                              "OpenWOP-Version": PROTOCOL_VERSION}, None, "".join(chunks))

    def _eval_summary(self, call: Call) -> Response | Refusal:
        if not self.core.profile.eval_suite:
            return not_found("this host does not advertise agents.evalSuite")
        run = self._run_arg(call.owner, call.args[0])
        if run.eval is None:
            return not_found("the run is not an eval run")
        if not run.terminal or run.eval.summary is None:
            return state_conflict("the eval run has not finished", run.status)
        return _json_response(200, run.eval.summary)

    def _fork(self, call: Call) -> Response:
        body = call.valid_json()
        rid = self._parse_run_segment(call.owner, call.args[0])
        result = unwrap(self.core.fork(call.owner, rid, fork_command(body)))
        assert result.run.parent is not None
        return self._created(result.run, {"sourceRunId": result.run.parent.bound,
                                          "fromSeq": body.get("fromSeq", 0),
                                          "mode": body["mode"]})

    def _cancel(self, call: Call) -> Response:
        if call.request.body:
            call.json()  # an optional body, refused only when it is not a JSON object
        rid = self._parse_run_segment(call.owner, call.args[0])
        run = unwrap(self.core.cancel(call.owner, rid))
        return _json_response(200, {"runId": run.run_id.bound, "status": run.status})

    # -- seams (openwop-conformance-seams-v2 plus refsim's own)

    def _seam_counter(self, call: Call) -> Response | Refusal:
        key = (call.request.query.get("key") or [""])[-1]
        if not key:
            return validation("the counter seam needs ?key=K")
        count = self.core.gateway.counter_value(call.owner.tenant, key)
        return _json_response(200, {"key": key, "count": count})

    def _seam_erase(self, call: Call) -> Response | Refusal:
        rid = self._parse_run_segment(call.owner, call.args[0])
        # One scope only: the run's tool content and every copy derived from it (RFC 0252
        # Security SHOULD). A lapse that drops the held calls and keeps the copies breaks
        # that SHOULD: it lives in the zoo (keeps-copy-after-erasure), not on this host.
        scope = (call.request.query.get("scope") or ["all"])[-1]
        if scope != "all":
            return validation("the erase seam erases the run's tool content and every copy "
                              "derived from it; it takes no other scope")
        return _json_response(200, render.erasure(unwrap(self.core.erase(call.owner, rid))))

    def _seam_resolve(self, call: Call) -> Response:
        rid = self._parse_run_segment(call.owner, call.args[0])
        run = unwrap(self.core.resolve(call.owner, rid))
        return _json_response(200, {"runId": run.run_id.bound, "status": run.status})

    def _seam_suite(self, call: Call) -> Response | Refusal:
        body = call.valid_json()
        task_ids = [t["taskId"] for t in body["suite"]["tasks"]]
        if len(set(task_ids)) != len(task_ids):
            return validation("a suite's taskIds must be unique", field="suite.tasks")
        for index, task in enumerate(body["suite"]["tasks"]):
            task_input = task["input"]
            if (isinstance(task_input, dict) and "script" in task_input and
                    not schemas.valid_script(task_input["script"], parsed=True)):
                return validation("a task's input.script is not a valid agent script",
                                  field=f"suite.tasks[{index}].input.script")
        suite = parse_suite(body["suite"])
        if not self.core.suites.register(call.owner.tenant, suite):
            return Refusal("version_conflict", "a different suite with this suiteId is registered")
        return _json_response(201, {"suiteId": suite.suite_id, "evalSuiteRef": suite.suite_id})

    def _seam_tenant(self, call: Call) -> Response | Refusal:
        body, caller = call.json(), call.caller
        name, key, ws = body.get("name"), body.get("apiKey"), body.get("workspace")
        if (set(body) - {"name", "apiKey", "workspace"} or not isinstance(name, str)
                or not TENANT_RE.fullmatch(name) or not isinstance(key, str)
                or not 1 <= len(key) <= 256 or key != key.strip() or " " in key
                or (ws is not None
                    and (not isinstance(ws, str) or not WORKSPACE_RE.fullmatch(ws)))):
            return validation("a tenant is {name, apiKey, workspace?} with a v2 tenant id and a "
                              "key without spaces")
        tenant = Tenant(name, key, ws)
        existing = self.core.tenants.get(key)
        if existing is not None and existing != tenant:
            return validation("that API key already belongs to a tenant")
        if (existing is None and caller is not None and caller.tenant != name and
                any(t.name == name for t in self.core.tenants.values())):
            # Another key for an existing tenant (say, one scoped to a workspace) is only
            # that tenant's to mint: from anyone else it would hand over the tenant's runs.
            return validation("a tenant of that name exists already")
        self.core.add_tenant(tenant)
        return _json_response(201, {"name": name, "workspace": ws})


def _is_source_value(pointer: str) -> bool:
    # A fixtureRuns value that fails the runId grammar is an id that does not decode: it
    # is refused later, as an unknown source, with the uniform body (§C).
    return pointer.startswith("/fixtureRuns/") and pointer.count("/") == 2


# Every route, one row each: adding a route is a row, its handler and its body's schema.
# No two rows match the same request, so their order matters only to discovery, which
# advertises the seams in it. A wrong method on a known path is no route (404), as an
# unknown path is. An empty run id is no route where a pattern says `{run}`, and an id no
# run has (404 after authentication) where it says `{run?}`.
ROUTES: RouteTable[Handler] = RouteTable((
    Route("GET", "/.well-known/openwop", Router._discovery, auth=False),
    Route("POST", "/runs", Router._create_run,
          body=Body("create-run.schema.json", skip=_is_source_value)),
    Route("GET", "/runs", Router._list_runs),
    Route("GET", "/runs/{run}", Router._get_run),
    Route("POST", "/runs/{run?}:fork", Router._fork, body=Body("fork-run.schema.json")),
    Route("GET", "/runs/{run}/eval-summary", Router._eval_summary),
    Route("GET", "/runs/{run}/events", Router._events_stream),
    Route("GET", "/runs/{run?}/events/poll", Router._poll),
    Route("POST", "/runs/{run}/cancel", Router._cancel, body=JSON),
    Route("GET", "/conformance/seams/eval-counter", Router._seam_counter,
          when=lambda profile: profile.counter_seam, seam="eval-counter"),
    Route("POST", "/conformance/seams/runs/{run?}:erase", Router._seam_erase,
          seam="runs:erase"),
    Route("POST", "/conformance/seams/runs/{run?}:resolve", Router._seam_resolve,
          seam="runs:resolve"),
    Route("POST", "/conformance/seams/eval-suites", Router._seam_suite,
          body=Body("suite-seam.schema.json", caps=suite_cap_refusal), seam="eval-suites"),
    Route("POST", "/conformance/seams/tenants", Router._seam_tenant, body=JSON,
          seam="tenants"),
))

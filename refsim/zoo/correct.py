"""The other side of the zoo: correct hosts. Each is the reference host with one difference
that RFC 0252, OpenWOP v2 or HTTP allows, and its docstring (`allows`) quotes the line
that allows it. Every judge must pass every one of them: a row that fails here is a defect
of the checker, never of the host (`refsim mutants` prints the pass matrix).

The differences come in classes, not examples: what varies on every answer (a request
id, trace headers, a correlation id), names and id shapes other than refsim's, the lanes
and capabilities a host may leave out, other wording, paging, framing and timing, a host
that runs a run after answering, and the seams a host built elsewhere does not offer.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from typing import Any

import attrs

from refsim.check.assume import Reading
from refsim.domain.core import HostCore
from refsim.domain.ids import IdMinter, RunId, parse_bound, unproject
from refsim.domain.owners import DEFAULT_TENANTS, Owner
from refsim.domain.profile import HostProfile, profile_named
from refsim.domain.refusals import UNUSABLE_SOURCE_MESSAGE, validation
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.wire.router import Router
from refsim.wire.routes import Refused

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Asgi = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                Awaitable[None]]

KEY_A, KEY_B = DEFAULT_TENANTS[0].api_key, DEFAULT_TENANTS[1].api_key
REFERENCE = "reference"


@attrs.frozen
class Variant:
    """One correct host: the reference host built another allowed way.

    `build(seed, profile)` makes the host (a `SimHost`, maybe with an edge that rewrites
    its answers); `asgi` wraps the served app over HTTP (framing); `diff` says whether
    `refsim diff` against the reference host may find a difference, and why (None: it
    must find none, the difference being one of representation only)."""

    name: str
    allows: str
    build: Callable[[int, HostProfile], SimHost]
    asgi: Callable[[Asgi], Asgi] | None = None
    diff: str | None = None
    # What the variant leaves out that the checker uses (a seam, a capability): rows that
    # need it must say blocked or inapplicable, never fail.
    withholds: str | None = None
    # Why the simulator's inside cannot judge it (then in process it is judged from
    # outside too, as over HTTP).
    outside_only: str | None = None
    # Its answers wait by design (sleeps, a run that goes on after answering): most of its
    # judging is waiting, which the matrix overlaps with other hosts' work (`run_all`).
    waits: bool = False

    @property
    def doc(self) -> str:
        return self.allows

    def host(self, seed: int = 0, profile: HostProfile | None = None) -> SimHost:
        return self.build(seed, profile or HostProfile())

    # As a `refsim.check.runner.HostRecipe` (a correct host takes no reading: it is built
    # its one way):

    @property
    def flag(self) -> str:
        return "--variant"

    def read_as(self, readings: Sequence[Reading], seed: int, profile: HostProfile) -> SimHost:
        return self.build(seed, profile)

    def rebuilt(self) -> tuple[str, str]:
        return "from refsim.zoo.correct import variant", f"variant({self.name!r})"

    def __reduce__(self) -> tuple[Callable[[str], Variant], tuple[str]]:
        """To another process by name: its parts are functions."""
        return variant, (self.name,)

    @contextlib.contextmanager
    def served(self, seed: int = 0) -> Iterator[Any]:
        """The variant over HTTP, as `refsim serve` would serve it (framing included)."""
        from refsim.wire.server import background
        host = self.host(seed)
        if self.asgi is None:
            with background(host) as server:
                yield server
            return
        wrap = self.asgi
        with background(host, wrap_app=wrap) as server:
            yield server


def _plain(seed: int, profile: HostProfile) -> SimHost:
    return SimHost(seed=seed, profile=profile)


def _with_edge(edge: Callable[[], Edge]) -> Callable[[int, HostProfile], SimHost]:
    """A host whose answers an edge rewrites (a fresh edge per host: some keep state)."""
    def build(seed: int, profile: HostProfile) -> SimHost:
        return SimHost(seed=seed, profile=profile, edge=edge())
    return build


def _profiled(name: str) -> Callable[[int, HostProfile], SimHost]:
    """The reference host under one of its own profiles (rows that pin a profile keep it)."""
    def build(seed: int, profile: HostProfile) -> SimHost:
        chosen = profile_named(name) if profile == HostProfile() else profile
        return SimHost(seed=seed, profile=chosen)
    return build


def _json_answer(response: Response, doc: Any) -> Response:
    return Response(response.status, dict(response.headers), doc)


# ----------------------------------------------------------------------------- noise


def _request_id() -> Edge:
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        return attrs.evolve(response, headers={**response.headers,
                                               "X-Request-Id": str(uuid.uuid4())})
    return edge


def _trace_headers() -> Edge:
    rng = random.Random()

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        trace = f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01"
        timing = f"app;dur={rng.uniform(0.1, 9.9):.3f}"
        return attrs.evolve(response, headers={**response.headers, "traceparent": trace,
                                               "Server-Timing": timing})
    return edge


def _correlation_ids() -> Edge:
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if response.status < 400 or not isinstance(doc, dict) or "error" not in doc:
            return response
        details = dict(doc.get("details") or {})
        details["correlationId"] = uuid.uuid4().hex
        return _json_answer(response, {**doc, "details": details})
    return edge


def _canary() -> Edge:
    """A weighted round robin: every tenth answer comes from the canary replica."""
    count = iter(range(1, 1 << 62))

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        served = "api-2" if next(count) % 10 == 0 else "api-1"
        return attrs.evolve(response, headers={**response.headers, "X-Served-By": served})
    return edge


def _expires_now() -> Edge:
    """Expires and Last-Modified are the moment of the answer, to the second (RFC 9111
    §5.3), so they change now and then between two answers a millisecond apart."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        now = email.utils.formatdate(time.time(), usegmt=True)
        return attrs.evolve(response, headers={**response.headers, "Expires": now,
                                               "Last-Modified": now})
    return edge


# ----------------------------------------------------------------------------- names and ids


def _tenants(a: str, b: str) -> Callable[[int, HostProfile], SimHost]:
    """The two default keys name tenants called otherwise."""
    def build(seed: int, profile: HostProfile) -> SimHost:
        host = SimHost(seed=seed, profile=profile)
        host.core.tenants = {}
        host.add_tenant(a, KEY_A)
        host.add_tenant(b, KEY_B)
        return host
    return build


class _UuidMinter(IdMinter):
    def run_id(self, tenant: str) -> RunId:
        return RunId(tenant, self.uuid_like())


class _LongMinter(IdMinter):
    def run_id(self, tenant: str) -> RunId:
        return RunId(tenant, "r." + self.opaque(60) + "_" + self.opaque(60))


class _ShortMinter(IdMinter):
    def run_id(self, tenant: str) -> RunId:
        return RunId(tenant, self.opaque(16))


class _FullLengthMinter(IdMinter):
    """Opaque segments of the grammar's whole 128 characters, `.` and `_` among them and a
    `.` last."""

    def run_id(self, tenant: str) -> RunId:
        return RunId(tenant, "r." + self.opaque(62) + "_" + self.opaque(62) + ".")


def _minted_by(minter: type[IdMinter], tenants: tuple[str, str] | None = None
               ) -> Callable[[int, HostProfile], SimHost]:
    """A host whose run ids `minter` mints (under tenants named `tenants`, if given)."""
    def build(seed: int, profile: HostProfile) -> SimHost:
        host = (SimHost(seed=seed, profile=profile) if tenants is None
                else _tenants(*tenants)(seed, profile))
        host.core.minter = minter(seed)
        return host
    return build


# Tenant ids of the shape a host that names its tenants by UUID mints: the closest legal
# shape to a bare UUID run id (which is no runId: ids.schema.json's runId is
# `<tenantId>/<opaque>`), with the UUID minter's opaque segments after them.
UUID_TENANTS = ("0f8e2a64-5b1c-4d7e-9a3f-2c6b8d0e1f47", "7c1d9b30-e2f4-4a86-b5d1-93e0c4a2f6b8")
# anon: tenants (the one colon ids.schema.json admits, projected ~3A), with `.` and `_`.
ANON_TENANTS = ("anon:sess.3f9c_acme", "anon:sess.77ab_globex")


# ----------------------------------------------------------------------------- wording


def _other_wording() -> Edge:
    """§C's one refusal, and the §B ones, worded otherwise, with `details.field`."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if response.status != 400 or not isinstance(doc, dict):
            return response
        if doc.get("message") == UNUSABLE_SOURCE_MESSAGE:
            return _json_answer(response, {
                "error": "validation_error",
                "message": "One of the runs named in fixtureRuns is not available to you.",
                "details": {"field": "fixtureRuns"}})
        if "fixtureRuns" in str(doc.get("message")):
            return _json_answer(response, {"error": "validation_error",
                                           "message": "Invalid fixtureRuns: "
                                           + str(doc.get("message")).lower()})
        return response
    return edge


def _one_message() -> Edge:
    """Every validation_error carries the same message, whatever was wrong (errors.md:
    clients route on `error`, never `message`)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if (response.status == 400 and isinstance(doc, dict) and
                doc.get("error") == "validation_error"):
            return _json_answer(response, {"error": "validation_error",
                                           "message": "The request is invalid."})
        return response
    return edge

def _names_the_caller() -> Edge:
    """Refusals name the caller's own tenant (never the supplied id)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if response.status < 400 or not isinstance(doc, dict) or "message" not in doc:
            return response
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        owner = host.core.caller(auth.partition(" ")[2].strip())
        if owner is None:
            return response
        return _json_answer(response, {**doc, "message": f"{owner.tenant}: {doc['message']}"})
    return edge


def _gone_vendor_code() -> Edge:
    """A fork whose copy is gone: 410 and a vendor code of the host's own."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if isinstance(doc, dict) and doc.get("error") == "replay_source_missing":
            return Response(410, dict(response.headers), {
                "error": "refsim-host.recorded_fixtures_gone",
                "message": "the recorded fixtures of this eval run were erased"})
        return response
    return edge


# ----------------------------------------------------------------------------- documents


def _pretty_json() -> Edge:
    """Every JSON body indented, with a trailing newline (member order kept)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if response.json is None or (response.text is not None and not
                (response.header("Content-Type") or "").startswith("application/json")):
            return response
        text = json.dumps(response.json, indent=2, ensure_ascii=False) + "\n"
        return Response(response.status, dict(response.headers), response.json, text)
    return edge


def _sse_rewrite(text: str, data: Callable[[Any], Any], end: str = "\n",
                 preamble: str = "") -> str:
    """An event stream with each data line's JSON rewritten and every line ended by `end`."""
    lines = []
    for line in text.split("\n"):
        if line.startswith("data: "):
            try:
                line = "data: " + json.dumps(data(json.loads(line[6:])))
            except ValueError:
                pass
        lines.append(line)
    return preamble + end.join(lines)


def _rewritten(response: Response, change: Callable[[Any], Any]) -> Response:
    """A JSON answer or an event stream with every document passed through `change`."""
    if (response.text is not None and
            (response.header("Content-Type") or "").startswith("text/event-stream")):
        return attrs.evolve(response, text=_sse_rewrite(response.text, change))
    if response.json is None or response.text is not None:
        return response
    return _json_answer(response, change(response.json))


def _rewriting(change: Callable[[Any], Any]) -> Edge:
    """An edge that passes every document of every answer through `change`."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        return _rewritten(response, change)
    return edge


def _shuffled_members() -> Edge:
    """Every JSON object, at every depth, of every answer (the event stream's too), in a
    fresh random member order."""
    rng = random.Random()

    def shuffle(doc: Any) -> Any:
        if isinstance(doc, dict):
            keys = list(doc)
            rng.shuffle(keys)
            return {k: shuffle(doc[k]) for k in keys}
        if isinstance(doc, list):
            return [shuffle(v) for v in doc]
        return doc

    return _rewriting(shuffle)


def _integral_floats() -> Edge:
    """Every integer of every answer (counts, sequences, the event stream's too) written
    with a fraction: 0.0, 3.0 (a bool stays a bool)."""
    def as_float(doc: Any) -> Any:
        if isinstance(doc, dict):
            return {k: as_float(v) for k, v in doc.items()}
        if isinstance(doc, list):
            return [as_float(v) for v in doc]
        return float(doc) if isinstance(doc, int) and not isinstance(doc, bool) else doc

    return _rewriting(as_float)


def _vendor_members() -> Edge:
    """Each event's payload carries a vendor member (`x-host`, naming the tool on tool
    events) and each run resource an engine version, on the poll and the stream."""
    def with_vendor(event: Any) -> Any:
        if not isinstance(event, dict) or not isinstance(event.get("payload"), dict):
            return event
        payload = dict(event["payload"])
        vendor: dict[str, Any] = {"region": "eu-west", "shard": 3}
        if isinstance(payload.get("toolName"), str):  # as an MCP bridge would tell it
            vendor["tool"] = payload["toolName"]
            vendor["isError"] = "error" in payload
        payload["x-host"] = vendor
        return {**event, "payload": payload}

    def change(doc: Any) -> Any:
        if isinstance(doc, dict) and isinstance(doc.get("events"), list):
            return {**doc, "events": [with_vendor(e) for e in doc["events"]]}
        if isinstance(doc, dict) and "type" in doc and "payload" in doc:
            return with_vendor(doc)
        if isinstance(doc, dict) and "runId" in doc and "status" in doc:
            return {**doc, "engineVersion": "7.4.1"}
        return doc

    return _rewriting(change)


def _sse_bare_cr() -> Edge:
    """The event stream begins with a byte-order mark and a `retry:` line, carries a
    `: ping` comment, ends every line with a lone CR, and closes with an end frame whose
    data is no event (`data: [DONE]`)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (response.text is None or
                not (response.header("Content-Type") or "").startswith("text/event-stream")):
            return response
        text = _sse_rewrite(response.text, lambda d: d, "\r", "\ufeffretry: 3000\r: ping\r\r")
        return attrs.evolve(response, text=text + "event: end\rdata: [DONE]\r\r")
    return edge


def _busy_tenants() -> Edge:
    """The tenants are busy elsewhere: after every third read of a run's events, a run of
    the no-op workflow starts for the reader's tenant (a trigger, another client), and
    lists."""
    count = iter(range(1 << 62))

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        if (auth is not None and "/events/poll" in target and next(count) % 3 == 2
                and host.core.caller(
                auth.partition(" ")[2].strip()) is not None):
            host.router.handle("POST", "/runs", {"Authorization": auth,
                                                 "Content-Type": "application/json"},
                               b'{"workflowId": "conformance-noop"}')
        return response
    return edge


def _small_pages() -> Edge:
    """An events poll page holds at most two events, whatever `limit` asks (a host may
    page as it likes: the cursor is lastSequence, isTerminal only on the last page)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        doc = response.json
        if ("/events/poll" not in target or response.status != 200 or
                not isinstance(doc, dict) or len(doc.get("events", [])) <= 2):
            return response
        events = doc["events"][:2]
        return _json_answer(response, {**doc, "events": events,
                                       "lastSequence": events[-1]["sequence"],
                                       "isTerminal": False})
    return edge


class _ChattyCore(HostCore):
    """Beside RFC 0252's events, provider.usage and a vendor event after every agent
    invocation."""

    def _emit(self, run: Any, type_: str, payload: dict[str, Any]) -> Any:
        event = super()._emit(run, type_, payload)
        if type_ == "agent.invocation-completed":
            super()._emit(run, "provider.usage", {"agentId": payload.get("agentId"),
                                                  "inputTokens": 0, "outputTokens": 0})
            super()._emit(run, "refsim-host.trace",
                          {"span": f"invocation {payload.get('invocationId')}"})
        return event


def _with_core(core: type[HostCore]) -> Callable[[int, HostProfile], SimHost]:
    """The reference host on another core (a subclass that differs in one allowed way)."""
    def build(seed: int, profile: HostProfile) -> SimHost:
        host = SimHost(seed=seed, profile=profile)
        host.core = core(seed=seed, profile=profile, components=host.core.components,
                         builtin_suites=host.core.builtin_suites)
        host.router = Router(host.core)
        return host
    return build


_extra_events = _with_core(_ChattyCore)


# ----------------------------------------------------------------------------- time


class _Later:
    """A host that runs a run after answering its create: each run shows its events a
    few at a time (none on the first read), and reads as running until all are shown.
    Consistently so: a run still running is no usable source (§C), so an eval naming one
    (fixtureRuns, baselineRunId) is refused as an id no host minted is."""

    def __init__(self) -> None:
        self.shown: dict[str, int] = {}
        self.lock = threading.Lock()

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        if method != "POST" or target.split("?", 1)[0] != "/runs" or body is None:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if not isinstance(doc, dict):
            return body

        def settled(value: Any) -> Any:
            if not isinstance(value, str) or value not in self.shown:
                return value
            run = host.core.runs.get(parse_bound(value))  # type: ignore[arg-type]
            with self.lock:
                done = run is None or self.shown[value] >= len(run.events)
            bound = parse_bound(value)
            return value if done or bound is None else f"{bound.tenant}/{_NEVER_MINTED}"
        changed = dict(doc)
        if isinstance(doc.get("fixtureRuns"), dict):
            changed["fixtureRuns"] = {k: settled(v) for k, v in doc["fixtureRuns"].items()}
        if "baselineRunId" in doc:
            changed["baselineRunId"] = settled(doc["baselineRunId"])
        return body if changed == doc else json.dumps(changed).encode("utf-8")

    def __call__(self, host: SimHost, method: str, target: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        doc = response.json
        if (method == "POST" and response.status == 201 and isinstance(doc, dict)
                and isinstance(doc.get("runId"), str)):
            with self.lock:
                self.shown[doc["runId"]] = -1
            return _json_answer(response, {**doc, "status": "pending"})
        rid = _run_of(target)
        if rid is None or method != "GET" or rid not in self.shown:
            return response
        run = host.core.runs.get(parse_bound(rid))  # type: ignore[arg-type]
        if run is None:
            return response
        with self.lock:
            shown = self.shown[rid]
            if "/events/poll" in target:
                self.shown[rid] = shown = min(shown + 3, len(run.events)) if shown >= 0 else 0
        done = shown >= len(run.events)
        if done:
            return response
        if "/events/poll" in target and isinstance(doc, dict):
            events = [e for e in doc.get("events", []) if e.get("sequence", 0) < shown]
            return _json_answer(response, {
                **doc, "events": events, "status": "running", "isTerminal": False,
                "lastSequence": events[-1]["sequence"] if events else -1})
        if target.endswith("/eval-summary"):
            return Response(409, dict(response.headers), {
                "error": "run_state_conflict", "message": "the eval run has not finished",
                "details": {"runStatus": "running"}})
        if isinstance(doc, dict) and "status" in doc and "runId" in doc:
            return _json_answer(response, {**doc, "status": "running"})
        return response


_NEVER_MINTED = "never-minted-0000000000000000"


def _run_of(target: str) -> str | None:
    path = target.split("?", 1)[0]
    parts = path.split("/")
    if len(parts) < 3 or parts[1] != "runs" or not parts[2]:
        return None
    try:
        return unproject(parts[2].split(":", 1)[0])
    except Exception:
        return None


def _slow() -> Edge:
    """Every answer takes 0.5 to 3 ms longer, at random."""
    rng = random.Random()

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        time.sleep(rng.uniform(0.0005, 0.003))
        return response
    return edge


def _replicas() -> Edge:
    """A round robin over four replicas, the last two 3 ms farther away: latency follows
    the order of arrival, not what was asked."""
    count = iter(range(1 << 62))

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if next(count) % 4 in (2, 3):
            time.sleep(0.003)
        return response
    return edge


# ----------------------------------------------------------------------------- what is offered


def _seams(offered: frozenset[str], *, listed: frozenset[str] | None = None,
           replay: bool = True) -> Edge:
    """Only these conformance seams are served; discovery lists `listed` (default: the
    same). A seam that is listed but not served answers 404 (advertised but broken)."""
    shown = offered if listed is None else listed

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if target.startswith("/conformance/seams/"):
            if _seam_of(target) not in offered:
                return _not_found(response)
            return response
        if not replay and target.startswith("/runs/") and ":fork" in target.split("?")[0]:
            return _not_found(response)
        if target.startswith("/.well-known/openwop") and isinstance(response.json, dict):
            doc = dict(response.json)
            doc["conformance"] = {"seamsProfile": "openwop-conformance-seams-v2",
                                  "seams": sorted(shown)}
            if not replay:
                doc.pop("replay", None)
            return Response(response.status, {k: v for k, v in response.headers.items()
                                              if k.lower() != "etag"}, doc)
        return response
    return edge


def _seam_of(target: str) -> str:
    rest = target.split("?", 1)[0][len("/conformance/seams/"):]
    if rest.startswith("runs/"):
        return "runs:" + rest.rsplit(":", 1)[-1]
    return rest


def _not_found(response: Response) -> Response:
    return Response(404, {"Content-Type": "application/json", "OpenWOP-Version": "2.0"},
                    {"error": "not_found", "message": "no such path on this host"})


ALL_SEAMS = frozenset({"eval-counter", "runs:erase", "runs:resolve", "eval-suites", "tenants"})
CONFORMANCE_SEAMS = frozenset({"eval-counter", "runs:erase", "runs:resolve"})


# ----------------------------------------------------------------------------- framing


def _chunked(app: Asgi) -> Asgi:
    """Answers sent with Transfer-Encoding: chunked (no Content-Length), as HTTP/1.1 allows."""
    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        async def chunking(message: Message) -> None:
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [
                    (k, v) for k, v in message.get("headers", [])
                    if bytes(k).lower() != b"content-length"]}
            await send(message)
        await app(scope, receive, chunking)
    return wrapped


def _closing(app: Asgi) -> Asgi:
    """Every answer closes its connection (Connection: close), as HTTP/1.1 allows."""
    async def wrapped(scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        async def closing(message: Message) -> None:
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"connection", b"close")]}
            await send(message)
        await app(scope, receive, closing)
    return wrapped


@attrs.frozen
class _TenantWideReader(Owner):
    """An owner triple whose workspace key reads its workspace's runs and its tenant's
    tenant-wide ones too (a run made by a key scoped to no workspace)."""

    def can_read(self, other: Owner) -> bool:
        return self.tenant == other.tenant and (
            self.workspace is None or other.workspace in (None, self.workspace))


class _TenantWideCore(HostCore):
    def caller(self, api_key: str) -> Owner | None:
        found = super().caller(api_key)
        return None if found is None else _TenantWideReader(found.tenant, found.subject,
                                                            found.workspace)


_CHECK = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _check_char(text: str) -> str:
    return _CHECK[sum((i + 1) * ord(c) for i, c in enumerate(text)) % len(_CHECK)]


@attrs.define
class _CheckedMinter(IdMinter):
    """Opaque segments end with a public check character (a checksum of the rest)."""

    def run_id(self, tenant: str) -> RunId:
        body = self.opaque(19)
        return RunId(tenant, body + _check_char(f"{tenant}/{body}"))


class _ChecksumRouter(Router):
    """A path id of the caller's tenant whose check character is wrong is no id this host
    mints: it does not decode, 400 validation_error (the tenant part is judged first, so
    another tenant's id gets what any other tenant's does). The check is public: that an id
    decodes tells nothing of which runs exist."""

    def _parse_run_segment(self, caller: Owner, segment: str) -> RunId:  # type: ignore[override]
        rid = Router._parse_run_segment(caller, segment)
        if rid.tenant != caller.tenant or rid in self.core.runs:
            return rid
        if len(rid.opaque) < 2 or _check_char(f"{rid.tenant}/{rid.opaque[:-1]}") != (
                rid.opaque[-1]):
            raise Refused(validation("the run id does not decode"))
        return rid


def _checksummed(seed: int, profile: HostProfile) -> SimHost:
    host = SimHost(seed=seed, profile=profile)
    host.core.minter = _CheckedMinter(seed)
    host.router = _ChecksumRouter(host.core)
    return host


class _ReadsTheLastOfTwice:
    """A JSON parser that reads an object naming a member twice as its last value (as most
    parsers do, RFC 8259 §4), at every depth: the host judges and serves that one value."""

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        twice = False

        def last(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            nonlocal twice
            twice = twice or len({k for k, _ in pairs}) != len(pairs)
            return dict(pairs)
        try:
            doc = json.loads(body or b"", object_pairs_hook=last)
        except ValueError:
            return body
        return json.dumps(doc, ensure_ascii=False).encode("utf-8") if twice else body

    def __call__(self, host: SimHost, method: str, target: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response




# ----------------------------------------------------------------------------- the zoo

PASS_ZOO: tuple[Variant, ...] = (
    Variant("request-id-header",
            "RFC 9110 §5.1: a response may carry any extension field; X-Request-Id is fresh "
            "on every answer", _with_edge(_request_id)),
    Variant("trace-headers",
            "W3C Trace Context and RFC 9110 §5.1: traceparent (which the v2 SDK reads) and "
            "Server-Timing differ on every answer", _with_edge(_trace_headers)),
    Variant("canary-replica-header",
            "RFC 9110 §5.1: a response may carry any extension field; X-Served-By names the "
            "replica of a weighted round robin (every tenth answer the canary)",
            _with_edge(_canary)),
    Variant("expires-now",
            "RFC 9111 §5.3 and RFC 9110 §8.8.2: Expires and Last-Modified are HTTP-dates, "
            "to the second; here the moment of the answer", _with_edge(_expires_now)),
    Variant("correlation-id-in-errors",
            "errors.md: an error envelope may carry details, and details.correlationId is a "
            "non-empty string when present; RFC 0252 §C asks only the same status and code",
            _with_edge(_correlation_ids), diff="error bodies carry details.correlationId"),
    Variant("tenant-names-like-wire-text",
            "identity.md: a tenant id is any ^(anon:)?[A-Za-z0-9._~-]{1,128}$; these share "
            "runs of characters with the error code and the refusal message",
            _tenants("validation-errors", "fixtureRuns-names"),
            diff="the tenant names are data on the wire (owner.tenant, run ids)"),
    Variant("tenant-names-like-headers",
            "identity.md: a tenant id is any ^(anon:)?[A-Za-z0-9._~-]{1,128}$; these share "
            "runs of characters with header names and values",
            _tenants("application-json-team", "OpenWOP-Version-2"),
            diff="the tenant names are data on the wire (owner.tenant, run ids)"),
    Variant("uuid-run-ids",
            "ids.schema.json: a host-minted opaque segment is any "
            "^[A-Za-z0-9._~-]{16,128}$ (here a UUID)", _minted_by(_UuidMinter)),
    Variant("long-run-ids",
            "ids.schema.json: an opaque segment may be up to 128 characters of "
            "[A-Za-z0-9._-]", _minted_by(_LongMinter)),
    Variant("short-run-ids",
            "ids.schema.json: an opaque segment may be as short as 16 characters",
            _minted_by(_ShortMinter)),
    Variant("uuid-tenants-uuid-run-ids",
            "ids.schema.json: a runId is <tenantId>/<opaque>, a tenantId any "
            "^(anon:)?[A-Za-z0-9._~-]{1,128}$ and an opaque segment any "
            "^[A-Za-z0-9._~-]{16,128}$: here both are UUIDs (a bare UUID is no runId; this "
            "is the closest legal shape)", _minted_by(_UuidMinter, UUID_TENANTS),
            diff="the tenant names are data on the wire (owner.tenant, run ids)"),
    Variant("anon-tenants-full-length-ids",
            "ids.schema.json: a tenantId may carry the anon: prefix (the one colon admitted, "
            "RFC 0184 §A.3 widened runId to match; projected ~3A) and `.`/`_`, and an opaque "
            "segment may be 128 characters of [A-Za-z0-9._-]",
            _minted_by(_FullLengthMinter, ANON_TENANTS),
            diff="the tenant names are data on the wire (owner.tenant, run ids)"),
    Variant("gone-copy-run-expired",
            "RFC 0252 Security: a replay or fork whose copy is gone SHOULD be refused; any "
            "registered code (here 410 run_expired, replay.md's retention rule) refuses it",
            lambda seed, profile: SimHost(
                seed=seed, profile=attrs.evolve(profile, gone_copy_code="run_expired")),
            diff="a fork after erasure is answered 410 run_expired"),
    Variant("gone-copy-vendor-code",
            "errors.md: a host may answer with a vendor code <org>.<name>; RFC 0252 Security "
            "asks only that the fork be refused", _with_edge(_gone_vendor_code),
            diff="a fork after erasure is answered 410 with a vendor code"),
    Variant("content-free-lane",
            "RFC 0252 §C: agent.tool-called can carry argsHash alone and agent.tool-returned "
            "no outcome; the host holds the calls in its own store",
            _profiled("content-free-lane"),
            diff="the recorder's tool events carry argsHash and no outcome"),
    Variant("no-fixture-errors",
            "RFC 0252 §C: without fixtureErrors a source with a failed call is unusable and "
            "refused like the rest", _profiled("no-fixture-errors"),
            diff="a source with a failed call is refused",
            withholds="agents.evalSuite.fixtureErrors"),
    Variant("no-recorded-fixtures",
            "RFC 0252 §A: recordedFixtures is optional; a client MUST NOT send fixtureRuns "
            "to a host that does not advertise it", _profiled("no-recorded-fixtures"),
            diff="fixtureRuns is refused", withholds="agents.evalSuite.recordedFixtures"),
    Variant("no-baseline-selection",
            "RFC 0251 §A: evalModes and baselineRunId only with baselineSelection, which is "
            "optional", _profiled("no-baseline-selection"),
            diff="evalModes is refused", withholds="agents.evalSuite.baselineSelection"),
    Variant("other-wording",
            "RFC 0252 §C: the same status and the same code; the message is the host's to "
            "word (errors.md: clients route on error, never message), details allowed",
            _with_edge(_other_wording), diff="the refusals are worded otherwise"),
    Variant("names-the-caller",
            "RFC 0252 §C: the refusal must not echo the supplied id; it may name the "
            "caller's own tenant, which the caller knows",
            lambda seed, profile: _named_caller(seed, profile),
            diff="refusals name the caller's tenant"),
    Variant("one-message-for-all",
            "errors.md: clients route on `error`, never `message`; a host may word every "
            "validation_error alike", _with_edge(_one_message),
            diff="every validation_error reads 'The request is invalid.'"),
    Variant("pretty-json",
            "RFC 8259: whitespace between tokens is insignificant; members keep their order",
            _with_edge(_pretty_json)),
    Variant("shuffled-members",
            "RFC 8259 §4: an object is an unordered collection of members; the echo is the "
            "accepted map, not its member order", _with_edge(_shuffled_members)),
    Variant("integral-floats",
            "RFC 8259 §6 and JSON Schema 2020-12 Validation §6.1.1: 3.0 is the number 3, and "
            "an integer is any number with a zero fractional part (writing one without a "
            "fraction is a SHOULD of encoding, no RFC 0252 line)", _with_edge(_integral_floats)),
    Variant("vendor-members",
            "run-event.schema.json: payloads admit vendor members (x-*); a run resource may "
            "carry more than the schema names (clients ignore what they do not know)",
            _with_edge(_vendor_members),
            diff="events carry an x-host member and runs an engineVersion"),
    Variant("sse-bare-cr",
            "HTML (WHATWG) §9.2.6 event-stream parsing: a line ends at CRLF, LF or a lone CR; one "
            "leading BOM is dropped; comments and retry: are not events",
            _with_edge(_sse_bare_cr)),
    Variant("busy-tenants",
            "runs.md: listRuns lists every run of the caller's tenant, whoever started it; "
            "RFC 0252 §B's 'before the run starts' is about the refused request's own run",
            _with_edge(_busy_tenants), diff="the tenants' run lists hold runs of their own",
            outside_only="the inside's run count is the whole host's, which the tenants' "
                         "own runs move"),
    Variant("small-poll-pages",
            "runs.md: pollRunEvents pages by afterSequence and lastSequence; a host may "
            "return fewer events than `limit` asks", _with_edge(_small_pages),
            diff="poll pages hold two events"),
    Variant("extra-events",
            "run-event.schema.json: clients MUST tolerate event types they do not know; "
            "vendor types are <org>.<name>", _extra_events,
            diff="the runs carry provider.usage and vendor events"),
    Variant("runs-after-answering",
            "runs.md: createRun answers 201 with status pending|running; the run goes on "
            "after the answer and the events poll shows it progress", _with_edge(_Later),
            diff="a run reads as running until its events have been read", waits=True),
    Variant("slow-answers",
            "HTTP sets no time for an answer; here each takes 0.5 to 3 ms longer, at random",
            _with_edge(_slow), waits=True),
    Variant("round-robin-replicas",
            "HTTP sets no time for an answer; RFC 0252 §C's SHOULD is on foreign against "
            "unknown refusals: here every third and fourth answer, whatever it is, takes "
            "3 ms longer", _with_edge(_replicas), waits=True),
    Variant("no-replay-family",
            "runs.md: forkRun is gated on the replay family; a gated operation not "
            "advertised answers 404", _with_edge(lambda: _seams(ALL_SEAMS, replay=False)),
            diff="forks answer 404", withholds="the replay family (forkRun)"),
    Variant("conformance-seams-only",
            "conformance.md: a host offers the seams it lists in conformance.seams; "
            "refsim's own suite and tenant seams are refsim's (the catalog's fixtures serve "
            "instead)", _with_edge(lambda: _seams(CONFORMANCE_SEAMS)),
            diff="the suite and tenant seams answer 404",
            withholds="refsim's suite and tenant seams"),
    Variant("counter-seam-only",
            "conformance.md: a host offers the seams it lists in conformance.seams; here "
            "only the counter", _with_edge(lambda: _seams(frozenset({"eval-counter"}))),
            diff="every seam but the counter answers 404",
            withholds="the erase, resolve, suite and tenant seams"),
    Variant("no-seams",
            "conformance.md: conformance seams are optional and never part of the "
            "canonical API", _with_edge(lambda: _seams(frozenset())),
            diff="every seam answers 404", withholds="every conformance seam"),
    Variant("advertised-seams-broken",
            "RFC 0252 says nothing of refsim's seams: a seam that is listed but answers 404 "
            "breaks no line of it", _with_edge(lambda: _seams(frozenset(), listed=ALL_SEAMS)),
            diff="every seam answers 404", withholds="every conformance seam (listed, 404)"),
    Variant("chunked-answers",
            "RFC 9112 §6.1: an HTTP/1.1 answer may be framed with Transfer-Encoding: "
            "chunked instead of Content-Length", _plain, asgi=_chunked),
    Variant("connection-close",
            "RFC 9112 §9.6: a server may close the connection after any answer "
            "(Connection: close)", _plain, asgi=_closing),
    Variant("workspace-reads-tenant-wide",
            "RFC 0252 §C: a usable source is one 'the caller's owner triple can read', and "
            "which runs a triple reads is the host's: here a workspace key reads its "
            "tenant's tenant-wide runs too, on every route and as a source alike",
            _with_core(_TenantWideCore), diff="workspace keys read tenant-wide runs"),
    Variant("checksummed-ids",
            "ids.schema.json: an opaque segment is any ^[A-Za-z0-9._~-]{16,128}$ the host "
            "mints (here ending in a public check character); RFC 0252 §C names 'an id that "
            "does not decode': a path id of the caller's tenant that fails the check is 400 "
            "validation_error", _checksummed, diff="undecodable path ids 400"),
    Variant("named-twice-reads-the-last",
            "RFC 8259 §4: member names SHOULD be unique, and many parsers report the last "
            "pair only: a task named twice in fixtureRuns is read as its last value, which "
            "is judged and served alike",
            lambda seed, profile: SimHost(seed=seed, profile=profile,
                                          edge=_ReadsTheLastOfTwice()),
            diff="a member named twice is read as its last value"),
)


def _named_caller(seed: int, profile: HostProfile) -> SimHost:
    host = _tenants("acme-corporation", "globex-corporation")(seed, profile)
    host.edge = _names_the_caller()
    return host


def variant(name: str) -> Variant:
    for v in PASS_ZOO:
        if v.name == name:
            return v
    raise KeyError(f"no correct host {name!r}; known: {', '.join(v.name for v in PASS_ZOO)}")


def tenant_keys() -> dict[str, str]:
    """The keys every variant serves: the reference host's two default tenants' keys."""
    return {t.name: t.api_key for t in DEFAULT_TENANTS}


__all__ = ["PASS_ZOO", "Variant", "tenant_keys", "variant"]

"""Judges of content leaks (RFC 0081 and RFC 0252 §D): content keys in eval events and
summaries, recorded calls and derived entries found by content anywhere on the wire (JSON,
an event stream, a header, base64, hex, compressed), egress credentials, copies left after
erasure, and a run's content on another tenant's answer.

Part of `refsim.check.judges` (import the judges from there). A new judge of recorded
content where it must not be goes here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from refsim.check.findings import Finding, check, fail
from refsim.check.judges.answers import _obs
from refsim.check.judges.replays import _payload
from refsim.domain.canonical import canonical
from refsim.wire import schemas
from refsim.wire.response import Response

# RFC 0081's content-free list for eval events and summaries (conformance EVAL_CONTENT_FORBIDDEN).
CONTENT_FORBIDDEN = frozenset({"taskOutput", "output", "rubric", "completion", "prompt", "body",
                               "secret", "credentials", "token", "apiKey", "toolResponses",
                               "response", "args", "inputs", "outcome"})


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


def no_secret_in(req: str, entries: Any, secrets: Iterable[str], what: str) -> Finding:
    """SR-1: no credential resolved at egress appears in (derived) content."""
    text = json.dumps(entries, sort_keys=True, default=str, ensure_ascii=False)
    # As it stands, or as JSON escapes it inside a string (quotes, backslashes, controls).
    found = sorted(s for s in secrets
                   if s and (s in text or json.dumps(s, ensure_ascii=False)[1:-1] in text))
    return check(req, not found, f"{what}: no egress credential present" if not found
                 else f"{what}: egress credential material present", {"found": found})


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
        elif (isinstance(item, str) and level < 3 and len(item) >= 2
              and (len(item) >= 16 or "{" in item or "[" in item or "%" in item)):
            inner = _carried(item.strip())  # (shorter, and none of those: nothing carried)
            if inner is not None:
                stack.append((inner, level + 1))


# Texts up to this long have what they carry remembered (`_carried`): a run's answers say
# the same ids, messages and stringified documents again and again, and a judge that reads
# every answer of a long run would otherwise unpack each of them afresh every time.
_CARRIED_TEXT_MAX = 4096


def _carried(text: str) -> Any:
    """`_unpack_text(text)`, remembered for a short text. What it returns is shared between
    callers, who only read it."""
    return _carried_short(text) if len(text) <= _CARRIED_TEXT_MAX else _unpack_text(text)


@functools.lru_cache(maxsize=8192)
def _carried_short(text: str) -> Any:
    return _unpack_text(text)


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

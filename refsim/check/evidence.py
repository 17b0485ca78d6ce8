"""The exchanges behind a verdict (`refsim.wire.trace` keeps them, per check: a row of
`check`, a step of the machine), so that a red row or a counterexample comes with the
requests that show it, as HAR 1.2 and as curl lines.

API keys are never written in clear: every key the run was given is replaced, wherever it
shows (a header, a URL, a body), by the name of the environment variable that holds it.

Bounds: a row's evidence holds at most `MAX_EVIDENCE` exchanges, each body cut at
`MAX_EVIDENCE_BODY` bytes; a HAR file holds every exchange of its check the trace kept
(`refsim.wire.trace.MAX_KEPT` in all).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

import refsim
from refsim.check.findings import Disposition, Row
from refsim.check.judges import strings_in
from refsim.wire.trace import Exchange, Trace

MAX_EVIDENCE = 8
MAX_EVIDENCE_BODY = 4096
# The environment variables the keys of a run are named by (as `check --base-url` reads
# them), by tenant label.
KEY_VARIABLES = {"acme": "OPENWOP_API_KEY", "globex": "OPENWOP_TEST_TENANT_B_API_KEY"}


def redactions(keys: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(key, what replaces it) for every tenant key: the environment variable that holds it
    (`$OPENWOP_API_KEY`), longest key first."""
    out = {}
    for label, key in keys.items():
        if key:
            out[key] = "$" + KEY_VARIABLES.get(label, f"OPENWOP_KEY_{label.upper()}")
    return tuple(sorted(out.items(), key=lambda kv: -len(kv[0])))


def redact(text: str, secrets: Sequence[tuple[str, str]]) -> str:
    for key, name in secrets:
        text = text.replace(key, name)
    return text


# ----------------------------------------------------------------------------- choosing


_RUN_ID_KEY = "runId"


def _answers(observation: Any) -> Iterator[Mapping[str, Any]]:
    """The answers an observation holds ({status, body}), at any depth."""
    if isinstance(observation, Mapping):
        if "status" in observation and "body" in observation:
            yield observation
            return
        for value in observation.values():
            yield from _answers(value)
    elif isinstance(observation, list | tuple):
        for value in observation:
            yield from _answers(value)


def _same_answer(exchange: Exchange, answer: Mapping[str, Any]) -> bool:
    if "exchange" in answer:
        return bool(answer["exchange"] == exchange.seq)
    r = exchange.response
    if r.status != answer.get("status"):
        return False
    body = answer.get("body")
    return body == (r.json if r.json is not None else r.text)


def failing(exchanges: Sequence[Exchange], observations: Iterable[Any]) -> list[Exchange]:
    """The exchanges whose answers the first failed assertion that quotes any quotes (the
    latest of each), or, where none quotes one, the last refused answer, else the last
    exchange."""
    for observation in observations:
        chosen: dict[int, Exchange] = {}
        for answer in _answers(observation):
            match = next((e for e in reversed(exchanges) if _same_answer(e, answer)), None)
            if match is not None:
                chosen[match.seq] = match
        if chosen:
            return [chosen[k] for k in sorted(chosen)]
    if not exchanges:
        return []
    return [next((e for e in reversed(exchanges) if e.response.status >= 400),
                 exchanges[-1])]


def _minted(exchange: Exchange) -> str | None:
    body = exchange.response.json
    if exchange.response.status in (200, 201) and isinstance(body, dict):
        value = body.get(_RUN_ID_KEY)
        return value if isinstance(value, str) and value else None
    return None


def with_dependencies(chosen: Sequence[Exchange], every: Sequence[Exchange],
                      limit: int = MAX_EVIDENCE) -> list[Exchange]:
    """`chosen`, preceded by the requests that made the runs they name (and those that
    made the runs those name), in the order they were sent; at most `limit`, the chosen
    kept first."""
    by_run: dict[str, Exchange] = {}
    for e in every:
        run = _minted(e)
        if run is not None:
            by_run.setdefault(run, e)
    picked: dict[int, Exchange] = {e.seq: e for e in chosen}
    todo = list(chosen)
    while todo:
        e = todo.pop()
        text = e.url + " " + " ".join(strings_in(e.request_json()))
        for run, maker in by_run.items():
            if maker.seq < e.seq and maker.seq not in picked and run in text:
                picked[maker.seq] = maker
                todo.append(maker)
    ordered = [picked[k] for k in sorted(picked)]
    if len(ordered) <= limit:
        return ordered
    keep = {e.seq for e in chosen[-limit:]}
    rest = [e for e in ordered if e.seq not in keep][-(limit - len(keep)):] if (
        limit > len(keep)) else []
    return sorted([*rest, *(e for e in ordered if e.seq in keep)], key=lambda e: e.seq)


# ----------------------------------------------------------------------------- HAR 1.2


def _har_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _query(url: str) -> list[dict[str, str]]:
    from urllib.parse import parse_qsl, urlsplit
    return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query,
                                                          keep_blank_values=True)]


def har_entry(e: Exchange, secrets: Sequence[tuple[str, str]], *,
              body_limit: int | None = None) -> dict[str, Any]:
    """One HAR 1.2 entry (request, response, timings), keys redacted; bodies cut at
    `body_limit` bytes where given (marked so in a comment)."""
    def cut(data: bytes) -> tuple[str, str]:
        text = data.decode("utf-8", "replace")
        if body_limit is not None and len(data) > body_limit:
            return (redact(data[:body_limit].decode("utf-8", "replace"), secrets),
                    f"cut at {body_limit} of {len(data)} bytes")
        return redact(text, secrets), ""

    request: dict[str, Any] = {
        "method": e.method, "url": redact(e.url, secrets), "httpVersion": "HTTP/1.1",
        "cookies": [], "headers": [{"name": k, "value": redact(v, secrets)}
                                   for k, v in e.headers],
        "queryString": _query(redact(e.url, secrets)), "headersSize": -1,
        "bodySize": len(e.body) if e.body is not None else 0}
    if e.body is not None:
        text, note = cut(e.body)
        request["postData"] = {"mimeType": dict((k.lower(), v) for k, v in e.headers).get(
            "content-type", "application/json"), "text": text, **(
            {"comment": note} if note else {})}
    r = e.response
    raw = r.body
    text, note = cut(raw)
    headers = [{"name": k, "value": redact(str(v), secrets)} for k, v in r.headers.items()]
    mime = next((h["value"] for h in headers if h["name"].lower() == "content-type"), "")
    ms = round(e.elapsed * 1000, 3)
    return {
        "startedDateTime": _har_time(e.started), "time": ms, "request": request,
        "response": {"status": r.status, "statusText": "", "httpVersion": "HTTP/1.1",
                     "cookies": [], "headers": headers,
                     "content": {"size": len(raw), "mimeType": mime, "text": text,
                                 **({"comment": note} if note else {})},
                     "redirectURL": "", "headersSize": -1, "bodySize": len(raw)},
        "cache": {}, "timings": {"send": 0, "wait": ms, "receive": 0},
        "comment": f"exchange {e.seq}" + (f" of {e.segment}" if e.segment else ""),
    }


def har(exchanges: Sequence[Exchange], secrets: Sequence[tuple[str, str]],
        comment: str = "") -> dict[str, Any]:
    """A HAR 1.2 log of `exchanges`, keys redacted."""
    log: dict[str, Any] = {
        "version": "1.2", "creator": {"name": "refsim", "version": refsim.__version__},
        "pages": [], "entries": [har_entry(e, secrets) for e in exchanges]}
    if comment:
        log["comment"] = comment
    return {"log": log}


_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def write_har(directory: Path, name: str, exchanges: Sequence[Exchange],
              secrets: Sequence[tuple[str, str]], comment: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (_SLUG.sub("-", name).strip("-")[:120] + ".har")
    path.write_text(json.dumps(har(exchanges, secrets, comment), indent=1,
                               ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- curl


def curl(e: Exchange, secrets: Sequence[tuple[str, str]]) -> str:
    """A curl command that sends the request again, keys read from the environment."""
    parts = ["curl", "-sS", "-i"]
    if e.method != "GET" or e.body is not None:
        parts += ["-X", e.method]
    words = [shlex.quote(p) for p in parts] + [_quoted(redact(e.url, secrets))]
    for name, value in e.headers:
        if name.lower() == "user-agent":
            continue
        words += ["-H", _quoted(f"{name}: {redact(value, secrets)}")]
    if e.body is not None:
        words += ["--data-raw", _quoted(redact(e.body.decode("utf-8", "replace"), secrets))]
    return " ".join(words)


_VARIABLE = re.compile(r"(\$OPENWOP_[A-Z_]+)")


def _quoted(text: str) -> str:
    """One shell word: the text single-quoted, but for each `$OPENWOP_…` variable, left
    for the shell to expand ("$VARIABLE"), the pieces side by side."""
    pieces = [f'"{piece}"' if _VARIABLE.fullmatch(piece) else shlex.quote(piece)
              for piece in _VARIABLE.split(text) if piece]
    return "".join(pieces) or "''"


def evidence_json(exchanges: Sequence[Exchange], secrets: Sequence[tuple[str, str]]
                  ) -> list[dict[str, Any]]:
    """A row's evidence, as HAR entries with bounded bodies."""
    return [har_entry(e, secrets, body_limit=MAX_EVIDENCE_BODY) for e in exchanges]


def curl_lines(exchanges: Sequence[Exchange], secrets: Sequence[tuple[str, str]]
               ) -> list[str]:
    return [curl(e, secrets) for e in exchanges]



# ----------------------------------------------------------------------------- rows


def _exchanges_of(row: Row, trace: Trace) -> list[Exchange]:
    """A row's exchanges, in the order they were sent: those filed under its check, and for
    an invariant row under the example rows it takes as they were judged."""
    labels = {row.check_id or row.requirement_id}
    from refsim.check.invariants import load_invariants
    for inv in load_invariants():
        if inv.id == row.check_id:
            labels.update(inv.examples)
    return [e for e in trace.snapshot() if e.segment in labels]


def reproduce_note(chosen: Sequence[Exchange], shown: Sequence[Exchange]) -> str:
    """What running the printed curl lines shows, in one phrase."""
    if len(shown) == len(chosen):
        return ("with the keys in the environment, each line sends again a request whose "
                "answer breaks the line; where it names a run, the host must still hold it")
    return ("with the keys in the environment; the lines before the last made the runs it "
            "names (sent again they make new ones), the last names those of this run, and "
            "gets the failing answer again where the host still holds them")


def attach(rows: Sequence[Row], trace: Trace, keys: Mapping[str, str], *,
           remote: bool) -> list[Row]:
    """Every executed-fail row with its evidence: the exchanges its failed assertions quote
    (else its last refused one), after those that made the runs they name; over HTTP, with
    the curl lines that send them again."""
    secrets = redactions(keys)
    every = trace.snapshot()
    out = []
    for row in rows:
        if row.disposition is not Disposition.EXECUTED_FAIL:
            out.append(row)
            continue
        chosen = failing(_exchanges_of(row, trace),
                         [f.observation for f in row.findings if not f.ok])
        shown = with_dependencies(chosen, every)
        if not shown:
            out.append(row)
            continue
        out.append(attrs.evolve(
            row, evidence=tuple(evidence_json(shown, secrets)),
            curl=tuple(curl_lines(shown, secrets)) if remote else (),
            reproduce=reproduce_note(chosen, shown) if remote else ""))
    return out


def write_rows(directory: Path, rows: Sequence[Row], trace: Trace,
               keys: Mapping[str, str]) -> list[Path]:
    """`--trace DIR` for check: one HAR file per row with exchanges (numbered in the
    report's order), and the exchanges of no row (discovery, the key preflight) in
    000-host.har."""
    secrets = redactions(keys)
    written = []
    loose = trace.of("")
    if loose:
        written.append(write_har(directory, "000-host", loose, secrets,
                                 "exchanges of no row: discovery, the key preflight"))
    for index, row in enumerate(rows, 1):
        mine = _exchanges_of(row, trace)
        if mine:
            name = f"{index:03d}-{row.check_id or row.requirement_id}"
            written.append(write_har(directory, name, mine, secrets,
                                     f"{row.disposition.value} {row.requirement_id} "
                                     f"({row.check_id}): {row.detail[:500]}"))
    return written


__all__ = ["attach", "curl", "curl_lines", "evidence_json", "failing", "har", "redact",
           "redactions", "with_dependencies", "write_har", "write_rows"]

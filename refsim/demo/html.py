"""report.html: the demo as pictures, in one self-contained page (inline SVG and CSS, no
script, nothing fetched), written beside report.md from the same `DemoRun`.

Per chapter a sequence diagram over four lanes (acme, globex, the host, the live counter);
chapter 5's refusal bodies side by side with their SHA-256; the six legs linked to the
chapters that witness them. Everything shown is derived from the demo's exchanges.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any, Protocol

import attrs

from refsim.demo.chapters import Chapter
from refsim.demo.history import Exchange, RecordingClient
from refsim.wire.client import NO_BODY


class DemoView(Protocol):
    """What the page reads of a `refsim.demo.report.DemoRun` (named here, not imported, so
    the report module and this one do not import each other)."""

    @property
    def seed(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def chapters(self) -> tuple[Chapter, ...]: ...

    @property
    def runs(self) -> dict[str, str]: ...

    @property
    def client(self) -> RecordingClient: ...

    @property
    def failed(self) -> int: ...

    @property
    def blocked(self) -> list[str]: ...

    @property
    def passed(self) -> bool: ...

    def verdict(self) -> str: ...

    def legs(self) -> list[dict[str, Any]]: ...

    def run_labels(self) -> dict[str, str]: ...

COUNTER_TOOL = "conformance.eval:counter"
SEAM = "/conformance/seams/eval-counter"

# Lanes, left to right: (id, heading, second line); x is the lifeline.
LANES = (("acme", "acme", "tenant"), ("globex", "globex", "tenant"),
         ("host", "host", "refsim, in process"), ("counter", "live counter", COUNTER_TOOL))
X = {"acme": 76, "globex": 250, "host": 490, "counter": 872}
HEAD_WIDTH = {"acme": 140, "globex": 140, "host": 170, "counter": 220}
# The figure's width in its own units. The page draws it 1:1 where it fits (a 1300 px window)
# and never narrower than MIN_WIDTH px (the figure scrolls instead), so 13-unit text is never
# drawn smaller than 12 px.
WIDTH = 1260
FONT = 13  # the labels' font size, in the figure's units
MIN_WIDTH = 1170  # WIDTH * 12 / FONT is 1163.1; the least width the page draws it at
TOP = 68  # below the lane headings
LINE = 17  # label line height
CHAR = 7.9  # px per character of the 13px monospace labels, to clip labels to their arrow


def h(value: object) -> str:
    """Every string that reaches the page passes here: bodies and ids come from the host."""
    return escape(str(value), quote=True)


def _clip(text: str, width_px: float) -> str:
    n = max(8, int(width_px / CHAR))
    return text if len(text) <= n else text[: n - 1] + "…"


def fold_text(line: str, n: int) -> list[str]:
    """`line` in lines of at most n characters, broken after a space or before the `?` or
    `&` of a query; a longer piece before a `/` of its path, and only then anywhere."""
    pieces: list[str] = []
    for piece in re.split(r"(?<= )|(?=[?&])", line):
        while len(piece) > n:
            cut = max(piece.rfind("/", 1, n + 1), 0) or n
            pieces.append(piece[:cut])
            piece = piece[cut:]
        pieces.append(piece)
    out: list[str] = []
    current = ""
    for piece in pieces:
        if current and len((current + piece).rstrip()) > n:
            out.append(current.rstrip())
            current = piece.lstrip()
        else:
            current += piece
    return [*out, current.rstrip()] if current.strip() or not out else out


def _wrap(lines: Sequence[str], lane: str) -> tuple[str, ...]:
    """Label lines folded to the room between a tenant's lane and the host's."""
    n = max(8, int((X["host"] - X[lane] - 16) / CHAR))
    out: list[str] = []
    for line in lines:
        out += fold_text(line, n)
    return tuple(out)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------- what a figure shows
@attrs.frozen
class Step:
    """One row of a sequence diagram.

    kind: request | response | call | note. state: for a response ok or refused; for a call
    live, recording, miss or unrecorded (a served run's call the recording never held that
    still got an answer, so it reached the live tool); otherwise plain.
    """

    kind: str
    lane: str  # the tenant lane a request leaves from or a response returns to
    lines: tuple[str, ...]
    say: str  # the same row as a sentence, for the figure's <desc>
    state: str = "plain"
    seq: int = 0
    badge: str | None = None  # the live counter's value known after this row
    poll: str | None = None  # a request made only to observe: what it read (Derivation.poll)
    full: str = ""  # a request's line unwrapped: what the folded row's hover lists


@attrs.frozen
class Call:
    run: str
    tool: str
    key: tuple[str, str]  # (tool, canonical inputs or argsHash): what a fixture matches
    inputs: Any
    status: str
    answer: Any  # the outcome, or the error object


def _call_answer(payload: Mapping[str, Any]) -> Any:
    return payload.get("error") if payload.get("status") != "ok" else payload.get("outcome")


def calls_of(events: Iterable[Mapping[str, Any]]) -> list[Call]:
    """Tool calls in the order they returned, each paired with the call by callId."""
    called: dict[str, Mapping[str, Any]] = {}
    out: list[Call] = []
    for e in events:
        p = e.get("payload")
        if not isinstance(p, dict):
            continue
        if e.get("type") == "agent.tool-called":
            called[str(p.get("callId"))] = p
        elif e.get("type") == "agent.tool-returned":
            c = called.get(str(p.get("callId")), {})
            inputs = c.get("inputs", c.get("argsHash"))
            tool = str(p.get("toolName", c.get("toolName")))
            out.append(Call(str(e.get("runId")), tool, (tool, _canon(inputs)), inputs,
                            str(p.get("status")), _call_answer(p)))
    return out


class Derivation:
    """Reads the demo's exchanges once: which runs named which sources, what each source
    recorded, and the labels R1, R2, … of the runs."""

    def __init__(self, exchanges: Sequence[Exchange], labels: Mapping[str, str],
                 names: Mapping[str, str]) -> None:
        self.labels = labels
        self.names = names
        self.sources: dict[str, list[str]] = {}  # run id -> the source ids its request named
        events: dict[str, list[dict[str, Any]]] = {}
        for x in exchanges:
            for e in x.events:
                events.setdefault(str(e.get("runId")), []).append(e)
            if (x.method == "POST" and x.path == "/runs" and x.status == 201
                    and isinstance(x.body, dict) and isinstance(x.response, dict)
                    and isinstance(x.body.get("fixtureRuns"), dict)):
                self.sources[str(x.response.get("runId"))] = [
                    str(v) for v in x.body["fixtureRuns"].values()]
        # What each run recorded: (tool, inputs) -> the answers it got, as the wire showed.
        self.recorded = {run: {(c.key, c.status, _canon(c.answer)) for c in calls_of(evs)}
                         for run, evs in events.items()}
        self.seen: dict[tuple[str, str], int] = {}  # the counter's last observed values
        self.read: set[str] = set()  # every answer a GET got so far, as (path, status, body)
        # Longest first, so no id is replaced inside a longer one.
        self._ids = sorted(((rid, lab) for rid, lab in labels.items()), key=lambda p: -len(p[0]))

    def label(self, text: str) -> str:
        """Run ids (bound, `~2F`- or `%2F`-projected) replaced by their labels R1, R2, …"""
        for rid, lab in self._ids:
            for form in (rid, rid.replace("/", "~2F"), rid.replace("/", "%2F")):
                text = text.replace(form, lab)
        return text

    def observe(self, tenant: str, key: str, count: int) -> str:
        """A badge for an observed counter value, saying how it compares with the last
        observation of the same counter (steps are read in the demo's order)."""
        before = self.seen.get((tenant, key))
        self.seen[(tenant, key)] = count
        change = ("first reading" if before is None else "unchanged" if before == count
            else f"moved from {before}")
        return f"{tenant} {key} = {count} ({change})"

    def poll(self, x: Exchange) -> str | None:
        """What a request the checker made only to observe read, or None when it is part
        of the story. Read in the demo's order, once per exchange.

        A poll is a GET that changed nothing and showed nothing new: it caused no event and
        was not refused, and it reads a run's events (the events are drawn where the host
        emitted them), or asks again for a run or the discovery document and gets the
        answer already shown. The counter seam's readings are the story (the badges), and
        the first discovery answer is chapter 1's."""
        if x.method != "GET" or x.events or x.status >= 400:
            return None
        path = x.path.split("?", 1)[0]
        answer = _canon([path, x.status, x.response])
        again = answer in self.read
        self.read.add(answer)
        run = re.fullmatch(r"/runs/([^/]+)(/events(?:/poll)?)?", path)
        if run and run.group(2):
            return f"{self.label(run.group(1))} events"
        if run and again:
            return f"{self.label(run.group(1))} run"
        if path == "/.well-known/openwop" and again:
            return "discovery"
        return None

    def classify(self, call: Call) -> str:
        """How a call was answered, read off the wire.

        miss: the host answered fixture_miss. recording: the run's request named sources in
        fixtureRuns and one of them recorded this very call with this very answer. Anything
        else that was answered reached the live tool: a run that named no source (unrecorded
        when it named one). On the reference host this is exact: a task served from a
        recording is fail-closed, so its calls are either recorded ones or misses, and the
        counter readings around every run (badges) confirm nothing moved. A faulty host that
        ran the live tool and happened to return the recorded answer would be drawn as
        served; the seam reading after the run then shows the counter moved.
        """
        if (call.status != "ok" and isinstance(call.answer, dict)
                and call.answer.get("code") == "fixture_miss"):
            return "miss"
        named = self.sources.get(call.run)
        if named is None:
            return "live"
        fact = (call.key, call.status, _canon(call.answer))
        return ("recording" if any(fact in self.recorded.get(s, set()) for s in named)
            else "unrecorded")


def _tenant_lane(x: Exchange) -> str:
    return x.tenant if x.tenant in ("acme", "globex") else "acme"


def _body_line(d: Derivation, body: Any) -> str:
    if body is NO_BODY or body is None:
        return ""
    if not isinstance(body, dict):
        return d.label(json.dumps(body, ensure_ascii=False))
    parts = []
    if body.get("mode") is not None:
        parts.append(f"mode {body['mode']}")
    if body.get("evalSuiteRef") is not None:
        parts.append(f"suite {str(body['evalSuiteRef']).removeprefix('conformance-eval-')}")
    if body.get("workflowId") is not None:
        parts.append(f"workflow {body['workflowId']}")
    runs = body.get("fixtureRuns")
    if isinstance(runs, dict):
        named = ", ".join(f"{k}→{d.label(str(v))}" for k, v in runs.items())
        parts.append(f"fixtureRuns {{{named}}}")
    rest = {k: v for k, v in body.items()
            if k not in ("mode", "evalSuiteRef", "workflowId", "fixtureRuns", "agentId")}
    for k, v in sorted(rest.items()):  # nested values by their keys only: hover has none
        shown = ("{" + ", ".join(map(str, v)) + "}" if isinstance(v, dict) else
            "[…]" if isinstance(v, list) else d.label(_canon(v)))
        parts.append(f"{k} {shown}")
    return " · ".join(parts)


def _answer(d: Derivation, x: Exchange) -> tuple[tuple[str, ...], str, str | None]:
    """The response's label lines, its sentence, and the counter badge it gives (seam)."""
    r = x.response if isinstance(x.response, dict) else {}
    path = x.path.split("?", 1)[0]
    if x.status >= 400:
        code = str(r.get("error", "")) if r else ""
        lines: tuple[str, ...] = (f"✕ {x.status} {code}".rstrip(),)
        if r.get("message"):
            lines += (f"“{r['message']}”",)
        return lines, f"The host refuses it: {x.status} {code}, “{r.get('message', '')}”.", None
    if path == SEAM and isinstance(r.get("count"), int):
        badge = d.observe(str(x.tenant), str(r.get("key")), r["count"])
        return ((f"{x.status} count {r['count']}",),
                f"The host answers {x.status}: the live counter {r.get('key')} of {x.tenant} "
                f"reads {r['count']}.", badge)
    if x.method == "POST" and x.path == "/runs" and "runId" in r:
        lab = d.labels.get(str(r["runId"]), str(r["runId"]))
        name = d.names.get(str(r["runId"]))
        text = f"{x.status} {lab} {r.get('status', '')}".rstrip()
        return ((text,), f"The host answers {x.status}: run {lab}"
                + (f" ({name})" if name else "") + f", {r.get('status', '')}.", None)
    if path.endswith("/events/poll") and isinstance(r.get("events"), list):
        n = len(r["events"])
        return (f"{x.status} {n} events",), f"The host answers {x.status} with {n} events.", None
    if path.endswith("/eval-summary"):
        tasks = r.get("tasks")
        tasks = tasks if isinstance(tasks, list) else []
        misses = [t.get("fixtureMissCount") for t in tasks if isinstance(t, dict)]
        text = (f"{x.status} passed={_canon(r.get('passed'))} fixtureMissCount=" +
            ",".join(str(m) for m in misses))
        return ((text,), f"The eval summary: passed {_canon(r.get('passed'))}, "
            f"fixtureMissCount {','.join(str(m) for m in misses)}.", None)
    if path == "/.well-known/openwop":
        agents = r.get("agents")
        agents = agents if isinstance(agents, dict) else {}
        facet = agents.get("evalSuite")
        facet = facet if isinstance(facet, dict) else {}
        if not facet:
            return ((f"{x.status} agents.evalSuite not advertised",),
                    f"The host answers {x.status}; it advertises no agents.evalSuite.", None)
        text = (f"{x.status} recordedFixtures={_canon(facet.get('recordedFixtures'))} "
                f"fixtureMatching={_canon(facet.get('fixtureMatching'))}")
        return (text,), f"The discovery document says {text.split(' ', 1)[1]}.", None
    if path.endswith(":erase"):
        text = (f"{x.status} erased={_canon(r.get('erased'))} runsReached={r.get('runsReached')}"
                f" derivedCopiesErased={r.get('derivedCopiesErased')}")
        return (text,), f"The host answers {text}.", None
    return (f"{x.status}",), f"The host answers {x.status}.", None


def _call_step(d: Derivation, x: Exchange, call: Call) -> Step:
    run = d.labels.get(call.run, call.run)
    tenant = call.run.split("/", 1)[0]
    if isinstance(call.inputs, dict) and call.tool == COUNTER_TOOL:
        what = f"{call.inputs.get('op')} {call.inputs.get('key')}"
    else:
        what = f"{call.tool} {d.label(_canon(call.inputs))}"
    answer = call.answer
    if call.status == "ok" and isinstance(answer, dict) and "count" in answer:
        got = f"count {answer['count']}"
    elif isinstance(answer, dict) and "code" in answer:
        got = str(answer["code"])
    else:
        got = _canon(answer)
    state = d.classify(call)
    badge = None
    if (state in ("live", "unrecorded") and call.tool == COUNTER_TOOL and call.status == "ok"
            and isinstance(answer, dict) and isinstance(answer.get("count"), int)):
        # A call that reached the live counter returns the live count: exact. A served
        # call's outcome is the recording's, so it is never shown as the counter.
        badge = d.observe(tenant, str(answer.get("key")), answer["count"])
    first = f"{run} {what} → {got}"
    tag, say = {
        "live": ("LIVE: reached the live tool",
                 f"{run} calls {what}; the call reaches the live tool and gets {got}."),
        "recording": ("⟲ FROM THE RECORDING, no live call",
                      f"{run} calls {what}; it is served from the recording ({got}) and "
                      "reaches no live tool."),
        "miss": ("✕ MISS: fixture_miss, no live tool ran",
                 f"{run} calls {what}; no recorded call matches, so it misses (fixture_miss) "
                 "and reaches no live tool."),
        "unrecorded": ("! LIVE: the recording never made this call",
                       f"{run} calls {what}, a call the recording never made, and gets {got}: "
                       "it reached the live tool."),
    }[state]
    if badge and isinstance(answer, dict):
        say += f" The live counter {answer.get('key')} of {tenant} is now {answer['count']}."
    return Step("call", _tenant_lane(x), (first, tag), say, state, x.seq, badge)


def _note(d: Derivation, x: Exchange, e: Mapping[str, Any]) -> Step | None:
    p = e.get("payload") if isinstance(e.get("payload"), dict) else {}
    assert isinstance(p, dict)
    run = d.labels.get(str(e.get("runId")), "?")
    if e.get("type") == "eval.started" and isinstance(p.get("fixtureRuns"), dict):
        named = ", ".join(f"{k}→{d.label(str(v))}" for k, v in p["fixtureRuns"].items())
        text = f"{run} eval.started echoes fixtureRuns {{{named}}}"
        return Step("note", _tenant_lane(x), (text,), f"{text}.", seq=x.seq)
    if e.get("type") == "eval.scored":
        passed = p.get("passed") is True
        text = (f"{run} eval.scored {p.get('taskId')}: {'passed' if passed else '✕ FAILED'}, "
                f"fixtureMissCount {p.get('fixtureMissCount')}")
        return Step("note", _tenant_lane(x), (text,), f"{text}.", "plain" if passed else "failed",
                    x.seq)
    return None


def steps_of(d: Derivation, exchanges: Sequence[Exchange]) -> list[Step]:
    out: list[Step] = []
    for x in exchanges:
        poll = d.poll(x)
        who = x.tenant if x.tenant in ("acme", "globex") else "acme, without an API key,"
        first = d.label(f"{x.method} {x.path}") + ("" if x.tenant else "  (no API key)")
        body = _body_line(d, x.body)
        lane = _tenant_lane(x)
        out.append(Step("request", lane, _wrap((first, body) if body else (first,), lane),
                        ("The checker polls: " if poll else "")
                        + f"{who} sends {d.label(x.method + ' ' + x.path)}"
                        + (f" with {body}" if body else "") + ".", seq=x.seq, poll=poll,
                        full=" ".join(p for p in (first, body) if p)))
        calls = iter(calls_of(x.events))
        for e in x.events:
            if e.get("type") == "agent.tool-returned":
                out.append(_call_step(d, x, next(calls)))
            else:
                note = _note(d, x, e)
                if note is not None:
                    out.append(note)
        lines, say, badge = _answer(d, x)
        out.append(Step("response", lane, _wrap(lines, lane), say,
                        "refused" if x.status >= 400 else "ok", x.seq, badge, poll))
    return out


@attrs.frozen
class Fold:
    """Polls by the checker, one after another, drawn as one row of the folded figure."""

    lane: str
    steps: tuple[Step, ...]

    @property
    def count(self) -> int:
        return len({s.seq for s in self.steps})

    def what(self) -> str:
        """What they read, in order, each with how many times it was read."""
        seen: dict[str, int] = {}
        for s in self.steps:
            if s.kind == "request" and s.poll:
                seen[s.poll] = seen.get(s.poll, 0) + 1
        return ", ".join(f"{k} \u00d7{n}" for k, n in seen.items())

    def line(self) -> str:
        return f"⋯ {self.count} poll{'s' if self.count != 1 else ''} by the checker: {self.what()}"

    def reads(self) -> list[str]:
        return [s.full for s in self.steps if s.kind == "request"]

    def say(self) -> str:
        reads = "; ".join(self.reads())
        return (f"The checker polls the host {self.count} time(s) only to observe ({reads}); "
                "folded here, drawn in full when the polls are shown.")


def fold(steps: Sequence[Step]) -> list[Step | Fold]:
    """The figure's rows with each run of consecutive polls folded into one `Fold`."""
    out: list[Step | Fold] = []
    for s in steps:
        last = out[-1] if out else None
        if s.poll is None:
            out.append(s)
        elif isinstance(last, Fold) and last.lane == s.lane:
            out[-1] = Fold(s.lane, (*last.steps, s))
        else:
            out.append(Fold(s.lane, (s,)))
    return out


# ---------------------------------------------------------------------- drawing
def _text(x: float, y: float, line: str, cls: str, anchor: str = "start") -> str:
    return (f'<text x="{x:g}" y="{y:g}" class="{cls}" text-anchor="{anchor}">'
            f"{h(line)}</text>")


BADGE_X = X["counter"] + 10


def _badge_lines(text: str) -> list[str]:
    """A badge's text in one line, or two (the comparison on the second) when too long."""
    n = int((WIDTH - BADGE_X - 24) / CHAR)
    if len(text) <= n or " (" not in text:
        return [_clip(text, WIDTH - BADGE_X - 24)]
    first, rest = text.split(" (", 1)
    return [_clip(first + " ", WIDTH - BADGE_X - 24), _clip("(" + rest, WIDTH - BADGE_X - 24)]


def _badge(y: float, text: str) -> str:
    """The live counter's reading beside its lifeline; a second line grows it upwards, into
    its own row (`_pad` makes the room)."""
    lines = _badge_lines(text)
    top = y - 13 - LINE * (len(lines) - 1)
    spans = "".join(f'<tspan x="{BADGE_X + 8}" y="{top + 17 + LINE * i:g}">{h(line)}</tspan>'
                    for i, line in enumerate(lines))
    return (f'<g class="badge"><rect x="{BADGE_X}" y="{top:g}" width="{WIDTH - BADGE_X - 8}" '
            f'height="{22 + LINE * (len(lines) - 1)}" rx="4"/><text class="bt">{spans}</text></g>')


def _pad(s: Step) -> int:
    """Room added above a one-line request or answer for its two-line badge."""
    two = s.badge is not None and len(_badge_lines(s.badge)) > 1
    return LINE if two and s.kind in ("request", "response") and len(s.lines) == 1 else 0


FOLD_HEIGHT = 30


def _height(s: Step | Fold) -> int:
    if isinstance(s, Fold):
        return FOLD_HEIGHT
    if s.kind == "note":
        return LINE + 10
    if s.kind == "call":
        return 2 * LINE + 16
    return LINE * len(s.lines) + 18 + _pad(s)


def _draw_fold(f: Fold, y: int) -> str:
    """The polls of a Fold as one row: a dashed band across the tenant's arrows (longer
    when its text needs it), saying how many and what they read; the hover lists them."""
    lane, host = X[f.lane], X["host"]
    line = _clip(f.line(), X["counter"] - lane - 24)
    seqs = " ".join(str(s.seq) for s in f.steps if s.kind == "request")
    width = max(host - lane + 12, round(len(line) * CHAR) + 24)
    return (f'<g class="fold" data-polls="{f.count}" data-seqs="{seqs}">'
            f"<title>{h(f.count)} poll(s) by the checker, folded: "
            f'{h("; ".join(f.reads()))}</title>'
            f'<rect x="{lane - 6}" y="{y + 3}" width="{width}" height="{FOLD_HEIGHT - 6}" '
            f'rx="5" class="foldband"/>{_text(lane + 8, y + FOLD_HEIGHT / 2 + 5, line, "fold")}'
            "</g>")


def _draw(s: Step, y: int, fig: str) -> str:
    """One row whose top is y; a <title> carries the unclipped text for hovering."""
    host, counter = X["host"], X["counter"]
    full = " — ".join(line for line in s.lines)
    poll = f' poll" data-poll="{h(s.poll)}' if s.poll else ""
    parts = [f'<g class="step {s.kind} {s.state}{poll}" data-kind="{s.kind}" '
             f'data-state="{s.state}" data-seq="{s.seq}"><title>{h(full)}</title>']
    y += _pad(s)
    if s.kind in ("request", "response"):
        lane = X[s.lane]
        width = host - lane - 16
        for i, line in enumerate(s.lines):
            cls = "lbl" if i == 0 else "sub"
            parts.append(_text(lane + 8, y + LINE * (i + 1) - 3, _clip(line, width), cls))
        ay = y + LINE * len(s.lines) + 7
        if s.kind == "request":
            parts.append(f'<line x1="{lane}" y1="{ay}" x2="{host - 2}" y2="{ay}" class="arrow"'
                         f' marker-end="url(#{fig}-head)"/>')
        else:
            end = "cross" if s.state == "refused" else "open"
            parts.append(f'<line x1="{host}" y1="{ay}" x2="{lane + 2}" y2="{ay}" '
                         f'class="arrow back" marker-end="url(#{fig}-{end})"/>')
            if s.state == "refused":  # a shape as well as a colour: the ✕ box at the tenant
                parts.append(f'<rect x="{lane - 9}" y="{ay - 9}" width="18" height="18" '
                             f'class="stopbox"/><path d="M{lane - 5},{ay - 5} l10,10 m0,-10 '
                             f'l-10,10" class="stopx"/>')
        if s.badge:
            parts.append(_badge(ay, s.badge))
    elif s.kind == "call":
        ay = y + 2 * LINE + 7
        lx = host + 50 if s.state == "recording" else host + 10
        width = counter - lx - 8
        for i, line in enumerate(s.lines):
            parts.append(_text(lx, y + LINE * (i + 1) - 3, _clip(line, width),
                               "lbl" if i == 0 else "tag"))
        if s.state == "recording":  # a loop at the host: the answer never leaves it
            parts.append(f'<path d="M{host},{ay - 14} h34 v14 h-32" class="arrow" '
                         f'marker-end="url(#{fig}-head)"/>')
        elif s.state == "miss":  # the call stops short of the tool, under a cross
            mid = counter - 40
            parts.append(f'<line x1="{host}" y1="{ay}" x2="{mid}" y2="{ay}" class="arrow"/>'
                         f'<path d="M{mid - 7},{ay - 7} l14,14 m0,-14 l-14,14" class="cross"/>')
        else:
            parts.append(f'<line x1="{host}" y1="{ay}" x2="{counter - 2}" y2="{ay}" '
                         f'class="arrow" marker-end="url(#{fig}-head)"/>')
        if s.badge:
            parts.append(_badge(ay, s.badge))
    else:
        parts.append(_text(host + 10, y + LINE + 1, _clip(s.lines[0], WIDTH - host - 20),
                           "note"))
    parts.append("</g>")
    return "".join(parts)


def _defs(fig: str) -> str:
    return (f'<defs><marker id="{fig}-head" viewBox="0 0 10 10" refX="9" refY="5" '
            'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker>'
            f'<marker id="{fig}-open" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
            'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10" '
            'fill="none" stroke="context-stroke" stroke-width="1.5"/></marker>'
            f'<marker id="{fig}-cross" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="9" '
            'markerHeight="9" orient="auto"><path d="M1,1 L9,9 M9,1 L1,9" stroke="#fff" '
            'stroke-width="2"/></marker></defs>')


def sequence_svg(number: int, chapter: Chapter, steps: Sequence[Step], *,
                 folded: bool = True) -> str:
    """A chapter's figure: `folded`, the story with each run of the checker's polls in one
    row (class `sequence`, one per chapter); else every request (class `sequence-all`,
    the polls marked `poll`). Each has a <title> and a <desc> telling its rows in words."""
    fig = f"fig{number}" if folded else f"fig{number}-all"
    rows: Sequence[Step | Fold] = fold(steps) if folded else steps
    y = TOP + 8
    drawn = []
    for s in rows:
        drawn.append(_draw_fold(s, y) if isinstance(s, Fold) else _draw(s, y, fig))
        y += _height(s)
    if chapter.skipped:
        drawn.append(_text(X["host"], y + 18, f"skipped: {chapter.skipped}", "note", "middle"))
        y += 30
    height = y + 12
    lanes = []
    for lane, head, sub in LANES:
        x, w = X[lane], HEAD_WIDTH[lane]
        lanes.append(f'<g class="lane" data-lane="{lane}"><line x1="{x}" y1="{TOP - 8}" '
                     f'x2="{x}" y2="{height - 4}" class="life"/><rect x="{x - w // 2}" y="6" '
                     f'width="{w}" height="50" rx="6" class="head"/>'
                     f'{_text(x, 26, head, "lane", "middle")}'
                     f'{_text(x, 46, sub, "lanesub", "middle")}</g>')
    polls = sum(f.count for f in rows if isinstance(f, Fold))
    title = f"Chapter {number}: {chapter.title}, as a sequence diagram" + (
        f", the checker's {polls} poll(s) folded" if polls else
        ", every request" if not folded else "")
    desc = (" ".join(s.say() if isinstance(s, Fold) else s.say for s in rows)
        or "No request was sent in this chapter.")
    if chapter.skipped:
        desc += f" The chapter was skipped: {chapter.skipped}."
    return (f'<svg xmlns="http://www.w3.org/2000/svg" '
            f'class="{"sequence" if folded else "sequence-all"}" role="img" '
            f'aria-labelledby="{fig}-title {fig}-desc" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" data-chapter="{h(chapter.slug)}">'
            f'<title id="{fig}-title">{h(title)}</title><desc id="{fig}-desc">{h(desc)}</desc>'
            f'{_defs(fig)}{"".join(lanes)}{"".join(drawn)}</svg>')


def legend_svg() -> str:
    """The key to the diagrams, itself a figure with its text alternative."""
    fig = "key"
    items = [
        ('<line x1="10" y1="{y}" x2="110" y2="{y}" class="arrow" marker-end="url(#key-head)"/>',
         "request from a tenant to the host; a tool call that reached the live tool (LIVE)"),
        ('<line x1="110" y1="{y}" x2="12" y2="{y}" class="arrow back" '
         'marker-end="url(#key-open)"/>', "the host's answer, with its status"),
        ('<g class="refused"><line x1="110" y1="{y}" x2="12" y2="{y}" class="arrow back" '
         'marker-end="url(#key-cross)"/><rect x="1" y="{t}" width="18" height="18" '
         'class="stopbox"/><path d="M5,{t4} l10,10 m0,-10 l-10,10" class="stopx"/></g>',
         "✕ a refusal (4xx): red, a ✕ box at the tenant, ✕ and the status in the label"),
        ('<g class="recording"><path d="M10,{t} h34 v14 h-32" class="arrow" '
         'marker-end="url(#key-head)"/></g>',
         "⟲ a tool call served from the recording: a loop at the host, no live call"),
        ('<g class="miss"><line x1="10" y1="{y}" x2="80" y2="{y}" class="arrow"/><path '
         'd="M73,{t2} l14,14 m0,-14 l-14,14" class="cross"/></g>',
         "✕ MISS: a call no recorded call matches (fixture_miss); it stops short of the tool"),
        ('<g class="badge"><rect x="10" y="{t3}" width="100" height="22" rx="4"/></g>',
         "the live counter (tenant, key = count, and how it compares with the last "
         "reading), read through the counter seam or returned by a call that reached it"),
        ('<rect x="4" y="{t3}" width="112" height="22" rx="5" class="foldband"/>',
         "⋯ requests the checker made only to observe (event polls, a run or the discovery "
         "document read again), folded into one row; “show every request” draws them"),
    ]
    rows = []
    y = 24
    for shape, text in items:
        lines = fold_text(text, int((WIDTH - 140) / CHAR))
        rows.append(shape.format(y=y, t=y - 9, t2=y - 7, t3=y - 12, t4=y - 5) + "".join(
            _text(130, y + 5 + LINE * i, line, "lbl") for i, line in enumerate(lines)))
        y += 18 + LINE * len(lines)
    height = y - 8
    desc = " ".join(f"{t}." for _, t in items)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="legend" role="img" '
            f'aria-labelledby="{fig}-title {fig}-desc" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}"><title id="{fig}-title">How to read the '
            f'diagrams</title><desc id="{fig}-desc">{h(desc)}</desc>{_defs(fig)}'
            f'{"".join(rows)}</svg>')


# ---------------------------------------------------------------------- the page
CSS = """
:root { color-scheme: light; --ink: #1f2328; --muted: #57606a; --line: #d0d7de;
  --live: #9a3412; --rec: #1d4ed8; --bad: #b91c1c; --ok: #15803d; --bg: #ffffff; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  "Noto Sans", "Liberation Sans", sans-serif; }
main { max-width: 1320px; margin: 0 auto; padding: 24px 20px 64px; }
h1 { font-size: 1.7rem; margin: 0 0 8px; }
h2 { font-size: 1.3rem; margin: 40px 0 6px; border-bottom: 1px solid var(--line); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  "Liberation Mono", "DejaVu Sans Mono", monospace; font-size: 0.86em; }
a { color: #0550ae; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left;
  vertical-align: top; }
th { background: #f6f8fa; }
td.links a { white-space: nowrap; }
.meta { color: var(--muted); margin: 0 0 8px; }
.held { color: var(--ok); } .failed { color: var(--bad); font-weight: 600; }
.blocked, .skipped { color: #7c5800; }
figure { margin: 12px 0; overflow-x: auto; }
/* Drawn 1:1 where there is room; narrower only down to {min_width}px, so no text is drawn
   below 12 px: a narrower window scrolls the figure instead. */
figure svg { max-width: 100%; min-width: {min_width}px; height: auto; }
details.polls { margin: 0 0 6px; }
details.polls > summary { cursor: pointer; color: #0550ae; }
details.polls[open] ~ svg.sequence { display: none; }
figcaption { color: var(--muted); font-size: 0.9em; }
ul.checks { list-style: none; padding-left: 0; }
ul.checks li { margin: 2px 0; }
svg text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono",
  "DejaVu Sans Mono", monospace; font-size: 13px; fill: var(--ink);
  paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
svg text.lane { font: 600 15px system-ui, -apple-system, "Segoe UI", Roboto, Arial,
  "Liberation Sans", sans-serif; }
svg text.lanesub { fill: var(--muted); }
svg .head { fill: #f6f8fa; stroke: #8c959f; }
svg .life { stroke: #8c959f; stroke-dasharray: 4 4; }
svg .arrow { stroke: var(--ink); stroke-width: 1.5; fill: none; }
svg .arrow.back { stroke-dasharray: 6 3; stroke: var(--muted); }
svg text.sub, svg text.note { fill: var(--muted); }
svg .refused .arrow, svg .refused .arrow.back { stroke: var(--bad); stroke-width: 2; }
svg .refused text.lbl, svg .failed text, svg .miss text.tag, svg .unrecorded text.tag {
  fill: var(--bad); font-weight: 700; }
svg .stopbox { fill: var(--bad); }
svg .stopx { stroke: #fff; stroke-width: 2.5; fill: none; }
svg .live .arrow, svg .unrecorded .arrow { stroke: var(--live); stroke-width: 2; }
svg .live text.tag, svg .unrecorded text.tag { fill: var(--live); font-weight: 700; }
svg .recording .arrow { stroke: var(--rec); stroke-width: 2; }
svg .recording text.tag { fill: var(--rec); font-weight: 700; }
svg .miss .arrow { stroke: var(--bad); stroke-width: 2; stroke-dasharray: 2 3; }
svg .cross { stroke: var(--bad); stroke-width: 3; fill: none; }
svg .badge rect { fill: #fff7ed; stroke: var(--live); }
svg .badge text { font-weight: 700; }
svg .foldband { fill: #f6f8fa; stroke: #8c959f; stroke-dasharray: 4 3; }
svg text.fold { fill: var(--muted); font-style: italic; }
svg .poll text { fill: var(--muted); }
svg .poll .arrow { stroke: #8c959f; }
.refusals { display: grid; grid-template-columns: repeat(auto-fit, minmax(250px, 1fr));
  gap: 12px; margin: 12px 0; }
.refusal { border: 2px solid var(--bad); border-radius: 8px; padding: 8px 10px; }
.refusal h4 { margin: 0 0 4px; font-size: 1rem; }
/* The body's bytes as they came; a line breaks only at a space or between two JSON tokens
   (the <wbr> the page puts there), never inside a word: a word too long scrolls. */
.refusal pre { white-space: pre-wrap; word-break: normal; overflow-wrap: normal;
  hyphens: none; overflow-x: auto; background: #f6f8fa; padding: 6px; margin: 6px 0; }
.refusal .hash { word-break: break-all; }
.swatch { display: inline-block; width: 1.1em; height: 1.1em; vertical-align: -0.2em;
  border: 1px solid var(--ink); margin-right: 4px; }
.verdict-line { font-weight: 600; }
details pre { white-space: pre-wrap; background: #f6f8fa; padding: 8px; }
""".replace("{min_width}", str(MIN_WIDTH))


def _result_class(result: str) -> str:
    return ("failed" if result == "FAILED" else "blocked" if result.startswith("blocked")
        else "skipped" if result.startswith("not ") else "held")


def _mark(result: str) -> str:
    cls = _result_class(result)
    return {"failed": "✕", "blocked": "?", "skipped": "-", "held": "✓"}[cls]


def _legs_table(run: DemoView) -> str:
    rows = []
    for leg in run.legs():
        links = ", ".join(
            f'<a href="#chapter-{h(run.chapters[i - 1].slug)}">chapter {i}</a>'
            for i in leg["chapters"]) or "—"
        result = str(leg["result"])
        checks = f"{leg['checks']} check(s), " if leg["checks"] else ""
        rows.append(f'<tr data-leg="{h(leg["requirement_id"])}"><td><code>'
                    f'{h(leg["requirement_id"])}</code></td><td>{h(leg["title"])}</td>'
                    f'<td class="links">{links}</td><td class="{_result_class(result)}">'
                    f"{_mark(result)} {h(checks)}{h(result)}</td></tr>")
    return ('<table class="legs"><thead><tr><th>requirement</th><th>what it requires</th>'
            '<th>witnessed by</th><th>demo checks</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def json_breaks(text: str) -> str:
    """`text` escaped for the page, with a <wbr> (a place a line may break, that adds no
    character) between two JSON tokens: after `{ [ , :` and before `} ]`, outside strings.
    Inside a string a line breaks only at its spaces (CSS); nothing else is a break."""
    out: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "}]" and i:
            out.append("<wbr>")
        out.append(h(ch))
        if not in_string and ch in "{[,:" and i + 1 < len(text):
            out.append("<wbr>")
    return "".join(out)


def _refusal_panel(d: Derivation, exchanges: Sequence[Exchange]) -> str:
    """The refusals of a source, side by side: the bytes each answer carried and their hash."""
    cards, bodies = [], []
    for x in exchanges:
        if not (x.method == "POST" and x.path == "/runs" and x.status >= 400
                and isinstance(x.body, dict) and isinstance(x.body.get("fixtureRuns"), dict)):
            continue
        named = [str(v) for v in x.body["fixtureRuns"].values()]
        what = ", ".join(d.names.get(v, "an unknown id") for v in named)
        digest = hashlib.sha256(x.raw).hexdigest()
        bodies.append(x.raw)
        text = x.raw.decode("utf-8", "replace")
        # The id in any form a client could recognise: bound, projected, or its opaque part.
        echoed = [v for v in named if any(form in text for form in (
            v, v.replace("/", "~2F"), v.replace("/", "%2F"), v.rsplit("/", 1)[-1]))]
        cards.append(
            f'<div class="refusal" data-sha256="{digest}"><h4>{h(what)}</h4>'
            f'<p>acme names <code>{h(", ".join(named))}</code> '
            f'({h(", ".join(d.labels.get(v, "no such run") for v in named))})</p>'
            f'<p class="failed">✕ {x.status}</p><pre class="body">{json_breaks(text)}</pre>'
            f'<p class="hash"><span class="swatch" style="background:#{digest[:6]}"></span>'
            f'SHA-256 <code>{digest}</code></p>'
            f'<p>{"✕ the body echoes the id" if echoed else "✓ the id appears nowhere"}</p>'
            "</div>")
    if not cards:
        return ""
    same = len(set(bodies)) == 1
    line = (f"✓ All {len(bodies)} bodies are byte-identical: one SHA-256 (the swatch is its "
            "first six hex digits as a colour)." if same else
            f"✕ The {len(bodies)} bodies are not all the same: {len(set(bodies))} different "
            "SHA-256 values.")
    return (f'<h3>The refusals side by side</h3><div class="refusals">{"".join(cards)}</div>'
            f'<p class="verdict-line {"held" if same else "failed"}" '
            f'data-same="{str(same).lower()}">{h(line)}</p>')


def _figure(number: int, c: Chapter, steps: Sequence[Step], requests: int) -> str:
    """The chapter's figure with the checker's polls folded; when it made any, a toggle (no
    script: <details>) that draws every request instead."""
    polls = len({s.seq for s in steps if s.poll})
    caption = (f"Figure {number}. {requests} request(s)"
               + (f", {polls} of them polls by the checker, each run of them folded into "
                  "one ⋯ row" if polls else "")
               + "; hover a row for its full text, or read the narration below.")
    toggle = (f'<details class="polls" id="chapter-{h(c.slug)}-polls"><summary>'
              f"⋯ {polls} poll(s) by the checker folded: show every request</summary>"
              f"{sequence_svg(number, c, steps, folded=False)}</details>" if polls else "")
    return (f"<figure>{toggle}{sequence_svg(number, c, steps)}"
            f"<figcaption>{h(caption)}</figcaption></figure>")


def _chapter(run: DemoView, d: Derivation, number: int, c: Chapter) -> str:
    exchanges = [run.client.exchanges[seq - 1] for seq in c.exchanges]
    steps = steps_of(d, exchanges)
    failed = sum(not f.ok for f in c.findings)
    if c.skipped:
        status = f'<span class="skipped">- skipped: {h(c.skipped)}</span>'
    elif failed:
        status = f'<span class="failed">✕ {failed} of {len(c.findings)} checks failed</span>'
    else:
        status = f'<span class="held">✓ all {len(c.findings)} checks held</span>'
    reqs = ", ".join(f"<code>{h(r)}</code>" for r in c.requirements)
    checks = "".join(
        f'<li class="{"held" if f.ok else "failed"}">{"✓" if f.ok else "✕ FAILED"} '
        f"<code>{h(f.requirement_id)}</code>: {h(f.message)}</li>" for f in c.findings)
    blocked = "".join(f'<li class="blocked">? blocked <code>{h(req)}</code>: {h(why)}</li>'
                      for req, why in c.blocked)
    panel = _refusal_panel(d, exchanges) if c.slug == "refusals" else ""
    narration = "\n".join(c.lines)
    return (f'<section class="chapter" id="chapter-{h(c.slug)}" data-slug="{h(c.slug)}">'
            f"<h2>{number}. {h(c.title)}</h2>"
            f'<p class="meta">RFC 0252 {h(c.sections)} · {reqs} · {status}</p>'
            f"<p>{h(c.lede)}</p>"
            f"{_figure(number, c, steps, len(exchanges))}"
            f"{panel}"
            + (f'<ul class="checks">{checks}{blocked}</ul>' if checks or blocked else "")
            + (f"<details><summary>The narration, as <code>report.md</code> has it</summary>"
               f"<pre>{h(narration)}</pre></details>" if narration else "")
            + "</section>")


def render_report(run: DemoView) -> str:
    """The whole page. Pure in `run`: the same demo gives the same bytes."""
    labels = run.run_labels()
    d = Derivation(run.client.exchanges, labels, run.runs)
    verdict_cls = "held" if run.passed else "failed" if run.failed else "blocked"
    reproduce = f"refsim demo --seed {run.seed}" + (
        "" if run.host == "refsim:reference" else f" --profile {run.host.split(':', 1)[1]}")
    runs = "".join(f"<tr><td>{h(lab)}</td><td><code>{h(rid)}</code></td>"
                   f"<td>{h(run.runs.get(rid, ''))}</td></tr>" for rid, lab in labels.items())
    toc = "".join(f'<li><a href="#chapter-{h(c.slug)}">{h(c.title)}</a></li>'
                  for c in run.chapters)
    chapters = "".join(_chapter(run, d, i, c) for i, c in enumerate(run.chapters, 1))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # Nothing may be fetched: the page is read offline, from a folder.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'style-src \'unsafe-inline\'">'
        f"<title>refsim demo: RFC 0252, seed {run.seed}, {h(run.host)}</title>"
        f"<style>{CSS}</style></head><body><main>"
        "<h1>refsim demo: RFC 0252 on the built-in host</h1>"
        "<p>RFC 0252, <em>An eval task takes its fixtures from a recorded run</em>, lets an "
        "eval run name a prior run in <code>fixtureRuns</code>. The host serves that run's "
        "recorded tool calls as the task's fixtures, fail-closed: a replay answers what the "
        "recording answered and touches no live tool, a call the recording never made misses, "
        "and an unusable source is refused with one uniform <code>400 validation_error</code> "
        "that never echoes the id.</p>"
        f'<ul><li>Host <code>{h(run.host)}</code>, seed {run.seed}; tenants acme and globex.'
        f'</li><li class="{verdict_cls}">Verdict: {h(run.verdict())}.</li>'
        + "".join(f'<li class="blocked">Blocked: {h(b)}.</li>' for b in run.blocked)
        + f"<li>Reproduce: <code>{h(reproduce)}</code>. <code>report.md</code> tells the "
        "same story in text; <code>history.jsonl</code> holds every request, answer and "
        "event drawn here.</li></ul>"
        f'<nav aria-label="chapters"><ol class="toc">{toc}</ol></nav>'
        '<h2 id="legs">The six conformance legs</h2><p>Each leg of OpenWOP\'s '
        "<code>v2-eval-recorded-fixtures</code> scenario, with the chapters that witness "
        f"it.</p>{_legs_table(run)}"
        '<h2 id="runs">The runs</h2>'
        + (f"<table><thead><tr><th>label</th><th>run id</th><th>what it is</th></tr></thead>"
           f"<tbody>{runs}</tbody></table>" if runs else
           "<p>The demo started no run on this host.</p>")
        + '<h2 id="key">How to read the diagrams</h2><p>Each chapter is drawn as a sequence '
        "diagram: time runs down; the lanes are the two tenants, the host, and the live "
        "counter tool. Run ids are shortened to the labels above.</p>"
        f"<figure>{legend_svg()}</figure>"
        f"{chapters}</main></body></html>\n")

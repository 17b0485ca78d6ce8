"""`check` in process with the example table in a forked child (`refsim.check.forked`):
the same rows as one process, and exchanges numbered as one process would number them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from refsim.check import forked
from refsim.check.findings import Finding, Row
from refsim.wire.response import Response
from refsim.wire.trace import Exchange, Trace

# Run in a process of its own: a test worker has threads running, and `forked.usable`
# (rightly) declines to fork beside them.
_COMPARE = textwrap.dedent("""
    import json, sys
    from refsim.check import evidence, forked, report
    from refsim.check.observe import KEY_A, KEY_B
    from refsim.check.runner import PARTS, Target, run_parts
    from refsim.wire.trace import Trace, recording
    from refsim.zoo.faulty import mutant

    def answers(o):
        if isinstance(o, dict):
            if "status" in o and "body" in o:
                yield o
                return
            for v in o.values():
                yield from answers(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                yield from answers(v)

    out = {"usable": forked.usable()}
    for name in sys.argv[1:]:
        target = Target() if name == "reference" else Target(recipe=mutant(name))
        got = []
        for lanes in (2, 1):
            trace = Trace()
            with recording(trace):
                rows = run_parts(target, PARTS, lanes=lanes)
            by = {e.seq: e for e in trace.snapshot()}
            wrong = []
            for r in rows:
                for f in r.findings:
                    for a in answers(f.observation):
                        e = by.get(a.get("exchange"))
                        body = None if e is None else (
                            e.response.json if e.response.json is not None else e.response.text)
                        if "exchange" in a and (e is None or e.response.status != a["status"]
                                                or body != a["body"]):
                            wrong.append([r.check_id, a["exchange"]])
            rows = evidence.attach(rows, trace, {"acme": KEY_A, "globex": KEY_B},
                                   remote=False)
            got.append({
                "digest": report.to_json(rows, "x", "2026-01-01T00:00:00Z")["rowsSha256"],
                "rows": [[r.check_id, r.disposition.value, len(r.evidence)] for r in rows],
                # the latency leg times more answers where it saw a tail: load decides
                "segments": [e.segment for e in trace.snapshot()
                             if not e.segment.endswith("-latency")],
                "numbered": list(by) == list(range(1, len(by) + 1)), "wrong": wrong})
        out[name] = got
    print(json.dumps(out))
""")


def test_two_processes_judge_and_number_as_one() -> None:
    names = ["reference", "accepts-padded-id", "foreign-erases-eval-run",
             "named-twice-split-brain"]
    done = subprocess.run([sys.executable, "-c", _COMPARE, *names], capture_output=True,
                          text=True, timeout=600, check=True)
    out = json.loads(done.stdout)
    if not out["usable"]:  # a one-CPU machine: nothing here forks
        return
    for name in names:
        split, alone = out[name]
        assert split["rows"] == alone["rows"], name
        assert split["digest"] == alone["digest"], name
        # every exchange filed where one process files it, numbered 1.. without a gap,
        # and every answer a finding quotes is the exchange of that number
        assert split["segments"] == alone["segments"], name
        assert split["numbered"] and alone["numbered"], name
        assert split["wrong"] == [] and alone["wrong"] == [], name
    assert any(d == "executed-fail" for _, d, _ in out["accepts-padded-id"][0]["rows"])
    assert any(n > 0 for _, d, n in out["accepts-padded-id"][0]["rows"]
               if d == "executed-fail")  # red rows keep their evidence


_CHILD = textwrap.dedent("""
    import json, os
    from refsim.check import forked
    out = {}
    child = forked.Child(lambda: {"pid": os.getpid()})
    child.start()
    sent = child.wait()
    out["other"] = sent is not None and sent.result["pid"] != os.getpid()
    def boom():
        raise RuntimeError("refsim's own fault")
    child = forked.Child(boom)
    child.start()
    out["failed"] = child.wait() is None
    child = forked.Child(lambda: __import__("time").sleep(60))
    child.start()
    child.stop()
    out["stopped"] = True
    # Ctrl-C while waiting for a child with a minute of work left: it is ended at once
    import signal, time
    def interrupt(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, interrupt)
    child = forked.Child(lambda: time.sleep(60))
    child.start()
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        child.wait()
    except KeyboardInterrupt:
        out["interrupted_after"] = round(time.monotonic() - started)
    try:
        os.waitpid(-1, os.WNOHANG)
        out["children_left"] = True
    except ChildProcessError:
        out["children_left"] = False
    print(json.dumps(out))
""")


def test_a_child_that_fails_gives_nothing_and_the_work_is_the_callers() -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == {"other": True, "failed": True, "stopped": True,
                                       "interrupted_after": 0, "children_left": False}
    assert "Traceback" not in done.stderr or "refsim's own fault" in done.stderr


def _exchange(seq: int, label: str) -> Exchange:
    return Exchange(seq, label, 0.0, 0.0, "GET", f"http://h/{label}", (), None,
                    Response(200, {}, {"n": seq}))


def test_splice_numbers_as_one_process_would() -> None:
    trace = Trace()
    for seq, label in ((1, "a"), (2, "a"), (3, "c"), (4, "c")):
        trace.exchanges.append(_exchange(seq, label))
    trace._seq = 4
    moved = trace.splice(2, [_exchange(3, "b"), _exchange(4, "b"), _exchange(5, "b")])
    assert moved == 3
    assert [(e.seq, e.segment) for e in trace.snapshot()] == [
        (1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b"), (6, "c"), (7, "c")]
    assert trace.last == 7
    late = trace.snapshot()[-1]
    assert trace.seq_of(late.response) == 7


def test_splice_after_what_this_process_sent_in_the_childs_stead() -> None:
    # forked at 2; this process then sent 3-4 (rows it ran first) and 5 (a later part);
    # the child's 3-4 go after 4, numbered 5-6, and the later part's 5 becomes 7
    trace = Trace()
    for seq, label in ((1, "a"), (2, "a"), (3, "b1"), (4, "b1"), (5, "c")):
        trace.exchanges.append(_exchange(seq, label))
    trace._seq = 5
    moved = trace.splice(2, [_exchange(3, "b2"), _exchange(4, "b2")], after=4)
    assert moved == 2
    assert [(e.seq, e.segment) for e in trace.snapshot()] == [
        (1, "a"), (2, "a"), (3, "b1"), (4, "b1"), (5, "b2"), (6, "b2"), (7, "c")]
    assert trace.last == 7
    assert [trace.seq_of(e.response) for e in trace.snapshot()] == [1, 2, 3, 4, 5, 6, 7]


def test_splice_moves_later_exchanges_by_what_the_other_process_numbered() -> None:
    # the child numbered 3-6 but its trace kept only 5-6 (the oldest let go): the later
    # exchange 3 here becomes 7, as one process numbers it
    trace = Trace()
    for seq, label in ((1, "a"), (2, "a"), (3, "c")):
        trace.exchanges.append(_exchange(seq, label))
    trace._seq = 3
    assert trace.splice(2, [_exchange(5, "b"), _exchange(6, "b")], numbered=4) == 4
    assert [(e.seq, e.segment) for e in trace.snapshot()] == [
        (1, "a"), (2, "a"), (5, "b"), (6, "b"), (7, "c")]
    assert trace.last == 7


def test_exchanges_pack_by_marshal_and_by_pickle_where_marshal_cannot() -> None:
    from fractions import Fraction
    plain = ((1, "a", 0.5, 0.25, "GET", "/u", (("k", "v"),), None, 200, {"h": "1"},
              {"doc": [1, None, True]}, None, b"{}"),)
    packed = forked.pack(plain)
    assert packed[:1] == b"m" and forked.unpack(packed) == plain
    odd = ((Fraction(1, 3),),)  # no builtin marshal writes
    packed = forked.pack(odd)
    assert packed[:1] == b"p" and forked.unpack(packed) == odd


def test_an_exchange_travels_as_plain_values() -> None:
    e = Exchange(3, "x", 1.5, 0.25, "POST", "http://h/runs", (("a", "b"),), b"{}",
                 Response(400, {"content-type": "application/json"}, {"error": "x"}))
    assert Exchange.of_plain(e.plain()) == e
    # the answer's bytes as they came (spaces, order), never re-encoded from its document
    sent = b'{ "error" : "x",  "message": "m" }'
    came = Exchange(4, "x", 1.5, 0.25, "GET", "http://h/runs", (), None,
                    Response.of_bytes(400, {}, sent))
    assert Exchange.of_plain(came.plain()).response.body == sent


def test_shifted_moves_quoted_answers_and_never_a_body() -> None:
    body = {"status": 1, "body": 2, "exchange": 5}  # the host's own words: left alone
    row = Row.judged("r", "s", [Finding("r", True, "m", {
        "first": {"status": 400, "body": body, "exchange": 9},
        "rest": [{"status": 404, "body": None, "exchange": 10}, {"status": 200, "body": 1}]})])
    (moved,) = forked.shifted(row, 4).findings
    assert moved.observation == {
        "first": {"status": 400, "body": body, "exchange": 13},
        "rest": [{"status": 404, "body": None, "exchange": 14}, {"status": 200, "body": 1}]}
    assert forked.shifted(row, 0) is row

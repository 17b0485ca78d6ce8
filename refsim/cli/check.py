"""`refsim check` and its parts (`conformance`, `examples`, `invariants`) on the built-in host
or a host over HTTP, and `refsim list`: the rows, the report, the sample sizes, the evidence."""


from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from refsim.wire.client import HostClient

if TYPE_CHECKING:
    from refsim.check.findings import Row
    from refsim.wire.response import Response

from refsim.cli.common import EXIT_USAGE, keys_refused, remote_host, trace_folder


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector rests while a check runs in process: the check is bounded
    (about 1,600 requests to a fresh host) and short, and the collector's passes over what
    it allocates cost a tenth of it. The cycles it leaves are collected once, after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check_command(args: argparse.Namespace, parts: Sequence[str]) -> int:
    from refsim.check import report
    from refsim.check.assume import AssumptionError, parse
    from refsim.check.runner import Target, changes, explain, run_parts

    try:
        readings = tuple(parse(args.assume or []))
    except AssumptionError as exc:
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    target = Target(profile=args.profile, readings=readings, seed=args.seed)
    remote = remote_host(args)
    if isinstance(remote, int):
        return remote
    trace_dir = trace_folder(args)
    if isinstance(trace_dir, int):
        return trace_dir
    from refsim.check import evidence
    from refsim.check.observe import KEY_A, KEY_B
    from refsim.progress import EXIT_INTERRUPTED, Stopped
    from refsim.wire.trace import Trace, recording
    trace = Trace()  # every exchange, for a failed row's evidence (and --trace)
    keys = ({"acme": remote[1], "globex": remote[2] or ""} if remote is not None
            else {"acme": KEY_A, "globex": KEY_B})
    try:
        with recording(trace):
            if remote is None:
                with collector_paused():
                    rows = run_parts(target, parts, args.prefix, lanes=args.lanes)
            else:
                client, api_key, tenant_b = remote
                refused = keys_refused(client, api_key, tenant_b)
                if refused is not None:
                    print(f"refsim: {refused}", file=sys.stderr)
                    return EXIT_USAGE
                try:
                    rows = run_parts(target, parts, args.prefix, client=client,
                                     api_key=api_key, tenant_b_key=tenant_b, lanes=args.lanes,
                                     say=lambda line: print(f"refsim: {line}",
                                                            file=sys.stderr))
                finally:  # the lanes' keys are redacted as the caller's are
                    from refsim.check.lanes import minted
                    keys.update(minted(client))
    except ValueError as exc:  # HostUnreachable is one: a clear line, not a traceback
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Stopped as stopped:  # Ctrl-C: the rows judged by then, then PARTIAL
        done = evidence.attach(stopped.partial, trace, keys, remote=remote is not None)
        if done:
            print(report.to_text(done, remote[0].name if remote is not None
                                 else target.label))
        print(f"PARTIAL: stopped (Ctrl-C) during part {stopped.done + 1} of {stopped.total} "
              f"({', '.join(parts)}); {len(done)} row(s) judged before it are above, the "
              "rest were not judged")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # during the preflight, before any row
        print("PARTIAL: stopped (Ctrl-C) before any row was judged")
        return EXIT_INTERRUPTED
    rows = evidence.attach(rows, trace, keys, remote=remote is not None)
    label = target.label if remote is None else remote[0].name
    if not rows:
        print(f"refsim: no check matches {args.prefix!r}", file=sys.stderr)
        return EXIT_USAGE
    found = []
    if readings:
        baseline = run_parts(Target(profile=args.profile, seed=args.seed), parts, args.prefix)
        found = changes(baseline, rows)
    discovery = discovery_of(remote[0] if remote is not None else target.host())
    unobserved = nothing_observed(rows, discovery)
    if unobserved is not None and unobserved[0] == 0:
        print(f"refsim against {label}: {unobserved[1]}")  # the one verdict, once
    else:
        print(report.to_text(rows, label, changed={(c.row.requirement_id, c.row.check_id)
                                                   for c in found}))
    from refsim.check.sampled import sizes_line
    line = sizes_line(rows, args.seed)
    if line is not None:
        print(line)
    untested = untested_line(discovery)
    if readings:
        print()
        print(explain(readings, found))
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assumed = [{"name": r.name, "value": r.value, "reading": r.meaning} for r in readings]
    report.write_reports(rows, label, args.json, args.junit, generated_at=generated,
                         assumptions=assumed or None)
    with_sample(rows, args)
    if trace_dir is not None:
        written = evidence.write_rows(trace_dir, report.judged(rows), trace, keys)
        print(f"trace: {len(written)} HAR 1.2 file(s) in {trace_dir} (one per row that sent "
              "requests; keys redacted as the variables that hold them)")
    code = report.verdict(rows)
    if unobserved is not None and unobserved[0] != 0:
        if untested is not None:
            print(f"untested: {untested}")
        print(f"refsim: {unobserved[1]}")
        return unobserved[0]
    if untested is not None:
        print(f"untested: {untested}" + (" (--strict: exit 2)" if args.strict else ""))
        if args.strict and code == 0:
            return report.EXIT_UNKNOWN
    return code


def nothing_observed(rows: Sequence[Row], discovery: Response | None
                      ) -> tuple[int, str] | None:
    """Where no row observed a claim of RFC 0252 (none executed): the exit code and the one
    line that says so. A host whose discovery does not advertise recordedFixtures gets
    RFC 0252's verdict on it, inapplicable, once, with the reason (exit 0, as the OpenWOP
    gating rules have it); any other such run exits 2: nothing was judged. None where a
    row was executed."""
    from refsim.check import report
    from refsim.check.findings import Disposition
    from refsim.check.observe import gate
    judged = report.judged(rows)
    if not judged or any(r.disposition in (Disposition.EXECUTED_PASS,
                                           Disposition.EXECUTED_FAIL) for r in judged):
        return None
    gated = gate(discovery, fixtures=False) if discovery is not None else None
    if gated is not None and not gated.applies and not gated.unread:
        return 0, (f"inapplicable: {gated.reason}, and RFC 0252's rows apply only to a host "
                   f"that does ({len(judged)} rows, none run; the JSON report lists each)")
    counts = collections.Counter(r.disposition.value for r in judged)
    first = next((r for r in judged if r.disposition is Disposition.BLOCKED), judged[0])
    return report.EXIT_UNKNOWN, (
        "no row observed a claim of RFC 0252 on this host (" + ", ".join(
            f"{n} {d}" for d, n in sorted(counts.items())) + f"); the first: {first.detail}")


def with_sample(rows: Sequence[Row], args: argparse.Namespace) -> None:
    """The JSON report (where written) carries the seed and each class's sample size, so
    that `--seed` repeats the sample it judged."""
    from refsim.check.sampled import sample_sizes
    if args.json is None:
        return
    path = Path(args.json)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not a file that keeps what was written (/dev/null)
        return
    doc["sample"] = {"seed": args.seed, "sizes": sample_sizes(rows)}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def discovery_of(client: HostClient) -> Response | None:
    """The host's discovery answer, read once after the rows for what the verdict says of
    it (None where the host can no longer be reached)."""
    try:
        return client.request("GET", "/.well-known/openwop")
    except ValueError:  # HostUnreachable
        return None


def untested_line(discovery: Response | None) -> str | None:
    """An advertised capability the gate left unjudged (no conformance fixtures listed)."""
    from refsim.check.observe import gate
    return None if discovery is None else gate(discovery).untested


def list_command(args: argparse.Namespace) -> int:
    from refsim.check.registry import load_registry
    print(load_registry().format_list())
    return 0

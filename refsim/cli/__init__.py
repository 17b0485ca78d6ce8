"""The `refsim` command line: check, conformance, examples, invariants, list, demo, doc."""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refsim.domain.profile import PROFILES, profile_named
from refsim.wire.client import HostClient

if TYPE_CHECKING:
    from refsim.check.findings import Row
    from refsim.check.runner import HostRecipe
    from refsim.wire.response import Response

EXIT_USAGE = 2
# `refsim fuzz --jobs` starts this many processes at most: each runs its own machine.
MAX_FUZZ_JOBS = 64
# The options that name a file a command writes (the destinations argparse gives them).
_OUTPUT_OPTIONS = ("json", "junit", "html", "http_json", "write")


def _counts_refused(command: str, *counts: tuple[str, int, int, int | None]) -> bool:
    """Whether any (option, value, least, most) is out of range; says which, once."""
    for option, value, least, most in counts:
        if value < least or (most is not None and value > most):
            bound = f"{least} to {most}" if most is not None else f"at least {least}"
            print(f"refsim {command}: {option} takes a whole number, {bound}",
                  file=sys.stderr)
            return True
    return False


def _unwritable(path: str) -> str | None:
    """Why `path` cannot be written, or None: checked before a command spends minutes on
    what it would write there. The nearest folder that exists must be a writable folder
    (the writers make the missing ones below it), and the path itself no folder."""
    if not path.strip():
        return "the path is empty"
    target = Path(path)
    if target.is_dir():
        return "it is a folder"
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    try:  # what access() allows a file system may still refuse (/proc, a read-only mount)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"{folder} cannot hold a new file ({exc.strerror or exc})"
    return None


def _demo(args: argparse.Namespace) -> int:
    from refsim.demo import check_base, run_demo, summary_lines

    def pause() -> None:
        input("\n   [Enter] for the next chapter, Ctrl-C to stop ")

    base = Path(args.out)
    if not args.out.strip():
        print("refsim demo: --out needs a folder name", file=sys.stderr)
        return EXIT_USAGE
    if args.seed < 0:
        print("refsim demo: --seed takes a non-negative integer", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_base(base)
    except OSError as e:
        print(f"refsim demo: cannot write the demo folder under {base}: {e}", file=sys.stderr)
        return EXIT_USAGE
    stepping = args.step and sys.stdin.isatty()
    if args.step and not stepping:
        print("(--step ignored: stdin is not a terminal)")
    result = run_demo(seed=args.seed, profile=profile_named(args.profile),
                      echo=print, pause=pause if stepping else None)
    for line in summary_lines(result):
        print(line)
    try:
        folder = result.write(base)
    except OSError as e:
        print(f"refsim demo: cannot write the demo folder under {base}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {folder}  (report.md, report.html, history.jsonl, report.json, timeline.txt); "
          f"{base / 'latest'} points at it")
    return result.exit_code


def _doc(args: argparse.Namespace) -> int:
    import yaml

    from refsim.cli.doc import DEFAULT_OUT, render
    out = Path(args.out) if args.out else DEFAULT_OUT
    try:
        text = render()
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(f"refsim doc: cannot render the reference: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        current = out.read_text(encoding="utf-8") if out.exists() else None
    except OSError as e:
        print(f"refsim doc: cannot read {out}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        if current == text:
            print(f"{out} is current")
            return 0
        print(f"{out} is stale: run `refsim doc` to regenerate it from specs/ and "
              "invariants/", file=sys.stderr)
        return 1
    if current == text:
        print(f"{out} is already current")
        return 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"refsim doc: cannot write {out}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {out} ({len(text.splitlines())} lines)")
    return 0


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
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


def _run(args: argparse.Namespace, parts: Sequence[str]) -> int:
    from refsim.check import report
    from refsim.check.assume import AssumptionError, parse
    from refsim.check.runner import Target, changes, explain, run_parts

    try:
        readings = tuple(parse(args.assume or []))
    except AssumptionError as exc:
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    target = Target(profile=args.profile, readings=readings, seed=args.seed)
    remote = _remote(args)
    if isinstance(remote, int):
        return remote
    trace_dir = _trace_dir(args)
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
                with _collector_paused():
                    rows = run_parts(target, parts, args.prefix, lanes=args.lanes)
            else:
                client, api_key, tenant_b = remote
                refused = _keys_refused(client, api_key, tenant_b)
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
    discovery = _discovery(remote[0] if remote is not None else target.host())
    unobserved = _nothing_observed(rows, discovery)
    if unobserved is not None and unobserved[0] == 0:
        print(f"refsim against {label}: {unobserved[1]}")  # the one verdict, once
    else:
        print(report.to_text(rows, label, changed={(c.row.requirement_id, c.row.check_id)
                                                   for c in found}))
    from refsim.check.sampled import sizes_line
    line = sizes_line(rows, args.seed)
    if line is not None:
        print(line)
    untested = _untested(discovery)
    if readings:
        print()
        print(explain(readings, found))
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assumed = [{"name": r.name, "value": r.value, "reading": r.meaning} for r in readings]
    report.write_reports(rows, label, args.json, args.junit, generated_at=generated,
                         assumptions=assumed or None)
    _with_sample(rows, args)
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


def _nothing_observed(rows: Sequence[Row], discovery: Response | None
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


def _trace_dir(args: argparse.Namespace) -> Path | int | None:
    """The folder --trace names (made here), None without it; the usage exit code when it
    cannot be a folder."""
    if getattr(args, "trace", None) is None:
        return None
    path = Path(args.trace)
    if path.exists() and not path.is_dir():
        print(f"refsim: --trace names a folder for the HAR files; {path} is a file",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"refsim: cannot make the --trace folder {path}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE
    return path


def _with_sample(rows: Sequence[Row], args: argparse.Namespace) -> None:
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


def _keys_refused(client: HostClient, api_key: str, tenant_b: str | None) -> str | None:
    """Why the host at --base-url cannot be checked, in one line, or None: it answers no
    OpenWOP v2 discovery document (asked first: a server that is no host gets this line,
    never a table of rows), it cannot be reached, or the keys cannot drive it."""
    from refsim.check.observe import discovery_refused, keys_refused
    try:
        return discovery_refused(client) or keys_refused(client, api_key, tenant_b)
    except ValueError as exc:  # HostUnreachable: the URL the user gave, what went wrong
        return str(exc)


def _discovery(client: HostClient) -> Response | None:
    """The host's discovery answer, read once after the rows for what the verdict says of
    it (None where the host can no longer be reached)."""
    try:
        return client.request("GET", "/.well-known/openwop")
    except ValueError:  # HostUnreachable
        return None


def _untested(discovery: Response | None) -> str | None:
    """An advertised capability the gate left unjudged (no conformance fixtures listed)."""
    from refsim.check.observe import gate
    return None if discovery is None else gate(discovery).untested


def _remote(args: argparse.Namespace) -> tuple[HostClient, str, str | None] | int | None:
    """The HTTP host named by --base-url (or OPENWOP_BASE_URL), with its keys; None for
    the built-in host; an exit code when the options do not make sense."""
    if args.base_url is not None and not args.base_url.strip():
        print("refsim: --base-url is empty: give the host's URL, or leave the option out to "
              "check the built-in host", file=sys.stderr)
        return EXIT_USAGE
    base_url = args.base_url or os.environ.get("OPENWOP_BASE_URL")
    if not base_url:
        for option, given in (("--api-key", args.api_key),
                              ("--tenant-b-api-key", args.tenant_b_api_key)):
            if given is not None:
                print(f"refsim: {option} names a key of the host at --base-url; without "
                      "--base-url the built-in host is checked, with its own keys",
                      file=sys.stderr)
                return EXIT_USAGE
        return None  # the HTTP client and uvicorn stay unimported: most of a local check's start-up
    from refsim.wire.httpclient import HttpClient
    if getattr(args, "assume", None):
        print("refsim: --assume reads an open point in the built-in host; it cannot change "
              "a host at --base-url", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "profile", None) not in (None, "reference"):
        print("refsim: --profile builds the built-in host another way; it cannot change a "
              "host at --base-url", file=sys.stderr)
        return EXIT_USAGE
    api_key = args.api_key or os.environ.get("OPENWOP_API_KEY")
    if not api_key:
        print("refsim: --base-url needs --api-key (or OPENWOP_API_KEY)", file=sys.stderr)
        return EXIT_USAGE
    tenant_b = args.tenant_b_api_key or os.environ.get("OPENWOP_TEST_TENANT_B_API_KEY")
    try:
        return HttpClient(base_url), api_key, tenant_b
    except ValueError as exc:
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _fuzz(args: argparse.Namespace) -> int:
    from refsim.testing.fuzz import FuzzTarget

    if _counts_refused("fuzz", ("--jobs", args.jobs, 1, MAX_FUZZ_JOBS),
                       ("--max-examples", args.max_examples, 1, None),
                       ("--steps", args.steps, 1, None)):
        return EXIT_USAGE
    if args.duration is not None and not args.duration > 0:
        print("refsim fuzz: --duration takes a positive number of seconds", file=sys.stderr)
        return EXIT_USAGE
    from refsim.testing.fuzz import is_redis
    folder = args.database is not None and not is_redis(args.database)
    if folder and Path(args.database).exists() and not Path(args.database).is_dir():
        print(f"refsim fuzz: --database names a folder (an example database); "
              f"{args.database} is not one", file=sys.stderr)
        return EXIT_USAGE
    if args.replay and args.database is None:
        print("refsim fuzz: --replay reads the example database: give --database DIR (or "
              "redis://HOST:PORT/N)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.replay and (args.jobs > 1 or args.duration is not None):
        print("refsim fuzz: --replay runs what the database holds once; it takes no --jobs "
              "or --duration", file=sys.stderr)
        return EXIT_USAGE
    if args.replay and folder and not Path(args.database).is_dir():
        print(f"refsim fuzz: --replay reads an example database; {args.database} does not "
              "exist (a campaign run with --database DIR makes it)", file=sys.stderr)
        return EXIT_USAGE
    remote = _remote(args)
    if isinstance(remote, int):
        return remote
    if remote is None:
        recipe = _zoo_host(args)
        if isinstance(recipe, int):
            return recipe
        target = FuzzTarget(profile=args.profile, recipe=recipe)
    else:
        client, api_key, tenant_b = remote
        keys = {"acme": api_key, **({"globex": tenant_b} if tenant_b else {})}
        refused = _keys_refused(client, api_key, tenant_b)
        if refused is not None:
            print(f"refsim: {refused}", file=sys.stderr)
            return EXIT_USAGE
        print(f"fuzzing {client.name} over HTTP; it sends only what discovery advertises "
              "(seams, fixtures, capabilities); white-box checks skipped (derivation "
              "fidelity, egress credentials in derived entries, erasure reaching the copy "
              "store, re-resolution counts need the simulator's insides)")
        target = FuzzTarget(base_url=client.name, keys=keys)
    from refsim.check.observe import surface_of
    try:
        offered = surface_of(target.factory()())
    except ValueError as exc:  # HostUnreachable: one line, the URL given
        print(f"refsim fuzz: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not offered.advertises("recordedFixtures"):
        # Every rule of the machine rests on it: the run would send nothing and prove
        # nothing, so it is refused before it starts.
        print("refsim fuzz: the host does not advertise agents.evalSuite.recordedFixtures: "
              "RFC 0252 does not apply there and the machine would send it nothing (refsim "
              "check gives its rows the inapplicable verdict)", file=sys.stderr)
        return EXIT_USAGE
    from refsim.testing.fuzz import DatabaseUnavailable, database_entries, open_database
    database = args.database
    if database is not None:
        try:
            if folder:
                Path(database).mkdir(parents=True, exist_ok=True)
            open_database(database)
        except OSError as exc:
            print(f"refsim fuzz: cannot make the example database {database}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        except DatabaseUnavailable as exc:
            print(f"refsim fuzz: {exc}", file=sys.stderr)
            return EXIT_USAGE
        before = database_entries(database)
        print(f"example database: {database} ({before} entr{'y' if before == 1 else 'ies'} "
              "before this run)", flush=True)
    code = _fuzz_run(args, target, database)
    if database is not None:
        after = database_entries(database)
        print(f"example database: {database} holds {after} entr"
              f"{'y' if after == 1 else 'ies'} after this run (it had {before})")
    return code


def _fuzz_run(args: argparse.Namespace, target: Any, database: str | None) -> int:
    import random

    from refsim.progress import EXIT_INTERRUPTED, Progress
    from refsim.testing.fuzz import (
        campaign,
        print_reproduction,
        report,
        report_campaign,
        run_machine,
    )

    trace_dir = _trace_dir(args)
    if isinstance(trace_dir, int):
        return trace_dir
    if args.jobs > 1 or args.duration is not None:
        if trace_dir is not None:
            print("refsim fuzz: --trace writes the counterexample of one process; a "
                  "campaign's runs in another: replay it with --replay --database DIR "
                  "--trace DIR", file=sys.stderr)
            return EXIT_USAGE
        base_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(
            2**32)
        total, unit = (args.duration, "s") if args.duration is not None else (args.jobs,
                                                                              "batch")
        with Progress(total, "campaign", unit=unit, quiet=args.quiet) as bar:
            outcome = campaign(target, jobs=args.jobs, duration=args.duration,
                               max_examples=args.max_examples, steps=args.steps,
                               base_seed=base_seed, database=database, progress=bar,
                               sweep=not args.no_sweep)
        return report_campaign(outcome, sys.stdout, target=target, database=database,
                               steps=args.steps)
    with Progress(None if args.replay else args.max_examples, "examples", unit="example",
                  quiet=args.quiet) as bar:
        make = target.factory()

        def counted() -> Any:
            bar.advance()
            return make()
        result = run_machine(counted, max_examples=args.max_examples, steps=args.steps,
                             seed_value=args.seed, extended=target.extended,
                             keys=target.keys, database=target.database(database, args.steps),
                             replay_only=args.replay, stoppable=True,
                             programs=not args.no_sweep)
    if result.interrupted:
        machine = result.machine
        print(f"PARTIAL: stopped (Ctrl-C) after {machine.examples_run} example(s), "
              f"{machine.steps_taken} step(s), {machine.requests_made} request(s); no "
              "counterexample so far. Branches reached:")
        for branch, count in sorted(machine.branches.items()):
            print(f"  {branch:<28} {count}")
        return EXIT_INTERRUPTED
    if args.replay and result.passed and result.machine.examples_run == 0:
        from refsim.testing.fuzz import database_entries
        print(f"nothing to replay: the database at {database} holds no example of this "
              f"target ({target.label(args.steps)}); its {database_entries(str(database))} "
              "entr(y/ies) are other targets' (each target's are filed under the options "
              "that name it and --steps: replay with those)")
        return EXIT_USAGE
    if args.replay and result.passed:
        print(f"nothing failed: none of the {result.machine.examples_run} example(s) the "
              f"database at {database} holds for this target fails against this host")
        return 0
    code = report(result, sys.stdout, target)
    if not result.passed:
        print_reproduction(sys.stdout, target=target, database=database, steps=args.steps,
                           seed_value=args.seed)
        if trace_dir is not None and result.exchanges:
            from refsim.testing.fuzz import write_counterexample_har
            path = write_counterexample_har(result, trace_dir, target)
            print(f"trace: the failing example's {len(result.exchanges)} exchange(s) as HAR "
                  f"1.2 in {path} (keys redacted as the variables that hold them)")
    return code


def _bench(args: argparse.Namespace) -> int:
    if args.bench_target == "http":
        import importlib
        try:
            module = importlib.import_module("refsim.cli.bench_http")
        except ImportError as exc:
            print(f"refsim bench http: not available in this build ({exc})", file=sys.stderr)
            return EXIT_USAGE
        refused = module.arguments_refused(args.clients, args.seconds)
        if refused is not None:
            print(f"refsim bench http: {refused}", file=sys.stderr)
            return EXIT_USAGE
        code: int = module.run(clients=args.clients, seconds=args.seconds,
                               json_path=args.http_json, out=sys.stdout)
        return code
    from refsim.cli.bench import run
    return run(json_path=args.json, skip_slow=args.skip_slow, out=sys.stdout)


def _zoo_host(args: argparse.Namespace) -> HostRecipe | int | None:
    """The zoo host `--mutant` or `--variant` names (--mutant where both do, as it always
    was), or None; an unknown name is one line and the usage exit code."""
    from refsim.zoo.correct import variant
    from refsim.zoo.faulty import mutant
    found: list[HostRecipe] = []
    for name, look_up, where in ((args.variant, variant, "correct host named {!r} in the "
                                  "pass zoo"),
                                 (args.mutant, mutant, "faulty host named {!r} in the zoo")):
        if name is not None:
            try:
                found.append(look_up(name))
            except KeyError:
                print(f"refsim fuzz: no {where.format(name)}", file=sys.stderr)
                return EXIT_USAGE
    return found[-1] if found else None


def _mutants(args: argparse.Namespace) -> int:
    import math

    from refsim.zoo.faulty import ZOO
    from refsim.zoo.matrices import SHRINK_BUDGET, kill_matrix_json, print_matrix, write_json

    if _counts_refused("mutants", ("--machine-examples", args.machine_examples, 0, None),
                       ("--machine-steps", args.machine_steps, 1, None)):
        return EXIT_USAGE
    from refsim.zoo.correct import PASS_ZOO
    chosen = [m for m in ZOO if not args.only or m.name in args.only]
    if args.only and not chosen and not any(v.name in args.only for v in PASS_ZOO):
        print("refsim: no faulty or correct host matches --only", file=sys.stderr)
        return EXIT_USAGE
    if args.only and not chosen:
        args.pass_only = True
    budget = SHRINK_BUDGET if args.shrink_budget is None else args.shrink_budget
    if not (math.isfinite(budget) and budget >= 0):
        print("refsim mutants: --shrink-budget takes a non-negative number of seconds",
              file=sys.stderr)
        return EXIT_USAGE
    from refsim.progress import EXIT_INTERRUPTED, Progress, Stopped
    from refsim.zoo.matrices import pass_matrix_json, print_pass_matrix
    code = 0
    doc: dict[str, Any] = {"mutants": [], "requirements": []}
    stopped: Stopped | None = None
    if not args.pass_only:
        with Progress(len(chosen), "faulty hosts", unit="host", quiet=args.quiet) as bar:
            try:
                doc = kill_matrix_json(chosen, machine_examples=args.machine_examples,
                                       machine_steps=args.machine_steps,
                                       http=not args.no_http, jobs=args.jobs,
                                       shrink_budget=budget, progress=bar,
                                       programs=not args.no_sweep)
            except Stopped as exc:
                stopped, doc = exc, exc.partial
        code = print_matrix(doc, sys.stdout)
    if not args.no_pass and stopped is None:
        names = [v.name for v in PASS_ZOO if not args.only or v.name in args.only]
        print("\nThe pass matrix: correct hosts, each the reference host with one difference "
              "the RFC allows; every cell must pass", flush=True)
        with Progress(len(names), "correct hosts", unit="host", quiet=args.quiet) as bar:
            try:
                doc["correct"] = pass_matrix_json(
                    names, http=not args.no_http, machine=args.machine_examples > 0,
                    jobs=args.jobs, progress=bar)
            except Stopped as exc:
                stopped, doc["correct"] = exc, exc.partial
                doc["partial"] = {"correctJudged": exc.done, "of": exc.total}
        code = max(code, print_pass_matrix(doc["correct"], sys.stdout))
    if stopped is not None:
        print(f"\nPARTIAL: stopped (Ctrl-C) after {stopped.done} of {stopped.total} hosts of "
              "that matrix; what was judged is above" + (
                  ", and in " + " and ".join(filter(None, (args.json, args.html)))
                  if args.json or args.html else ""), flush=True)
    if args.json:
        write_json(doc, args.json)
    if args.html:
        from refsim.demo.matrix import render_matrix
        try:
            Path(args.html).write_text(render_matrix(doc), encoding="utf-8")
        except OSError as e:
            print(f"refsim mutants: cannot write {args.html}: {e}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_INTERRUPTED if stopped is not None else code


def _diff(args: argparse.Namespace) -> int:
    from refsim.check.assume import AssumptionError
    from refsim.testing.diff import Pair, every_reading, report, run_diff, summary_line, write_json

    if _counts_refused("diff", ("--max-examples", args.max_examples, 1, None),
                       ("--steps", args.steps, 1, None)):
        return EXIT_USAGE
    if args.all:
        pairs = every_reading()
    elif args.assume or args.against:
        pairs = [Pair(tuple(args.assume or ()), args.profile, args.against)]
    else:
        print("refsim diff: name what to diff: --assume NAME=VALUE, --profile A --against B, "
              "or --all", file=sys.stderr)
        return EXIT_USAGE
    from refsim.progress import EXIT_INTERRUPTED, Progress
    results = []
    total, unit = (len(pairs), "reading") if args.all else (args.max_examples, "example")
    stopped = False
    with Progress(total, "readings diffed" if args.all else "examples", unit=unit,
                  quiet=args.quiet) as bar:
        for pair in pairs:
            try:
                result = run_diff(pair, max_examples=args.max_examples, steps=args.steps,
                                  seed=args.seed,
                                  on_example=None if args.all else bar.advance)
            except AssumptionError as exc:
                print(f"refsim: {exc}", file=sys.stderr)
                return EXIT_USAGE
            except KeyboardInterrupt:
                stopped = True
                break
            results.append(result)
            if args.all:
                bar.advance(1, " ".join(pair.assume) or pair.label)
                bar.say(summary_line(result))
            else:
                bar.close()
                report(result, sys.stdout)
    if stopped:
        print(f"PARTIAL: stopped (Ctrl-C) after {len(results)} of {len(pairs)} reading(s) "
              "diffed" + ("; the one under way found nothing before it stopped"
                          if not args.all else ""))
    if args.json:
        try:
            write_json(results, args.json, every=args.all, partial={
                "diffed": len(results), "of": len(pairs)} if stopped else None)
        except OSError as e:
            print(f"refsim diff: cannot write {args.json}: {e}", file=sys.stderr)
            return EXIT_USAGE
    if stopped:
        return EXIT_INTERRUPTED
    if any(r.found for r in results):
        return 1
    return 2 if any(r.inconclusive for r in results) else 0


def _falsify(args: argparse.Namespace) -> int:
    from refsim.progress import EXIT_INTERRUPTED, Progress, Stopped
    from refsim.zoo.falsify import CACHE_PATH, compute, load_breaks, load_cache, report, write
    from refsim.zoo.faulty import ZOO

    try:
        load_breaks()  # the table's host list agrees with the zoo: said before any work
    except ValueError as exc:
        print(f"refsim falsify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    doc = load_cache() if args.cached else None
    stopped: Stopped | None = None
    if doc is None:
        with Progress(len(ZOO), "faulty hosts", unit="host", quiet=args.quiet) as bar:
            try:
                doc = compute(jobs=args.jobs, progress=bar)
            except Stopped as exc:
                stopped, doc = exc, exc.partial
    report(doc, sys.stdout)
    if stopped is not None and args.write:  # a partial table is no cache
        print(f"not written to {args.write}: the table is partial (--json keeps it)")
    for path in filter(None, (None if stopped else args.write, args.json)):
        try:
            write(doc, path)
        except OSError as e:
            print(f"refsim falsify: cannot write {path}: {e}", file=sys.stderr)
            return EXIT_USAGE
    if args.cached and not CACHE_PATH.exists():
        print(f"({CACHE_PATH} is missing: computed afresh)")
    if stopped is not None:
        print(f"PARTIAL: stopped (Ctrl-C) after {stopped.done} of {stopped.total} faulty hosts")
        return EXIT_INTERRUPTED
    return 0


def _list(args: argparse.Namespace) -> int:
    from refsim.check.registry import load_registry
    print(load_registry().format_list())
    return 0


def _add_check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", nargs="?", default=None,
                   help="only checks whose requirement id starts with or contains this "
                        "(e.g. 0252.source)")
    p.add_argument("--json", metavar="PATH", help="write the JSON report here")
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
    p.add_argument("--profile", default="reference", choices=sorted(PROFILES),
                   help="the built-in host's profile (default: reference)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the built-in host and check's sample of each class of "
                        "specs/classes.yaml: the same seed repeats the sample (default 0)")
    p.add_argument("--assume", action="append", metavar="NAME=VALUE",
                   help="read an open point another way (names in specs/assumptions.yaml); "
                        "the report then says which checks change and why")
    p.add_argument("--strict", action="store_true",
                   help="exit 2 when the host advertises a capability the checks could not "
                        "test (recordedFixtures without the conformance fixtures)")
    p.add_argument("--trace", metavar="DIR",
                   help="write every exchange as HAR 1.2, one file per row (keys redacted); "
                        "a failed row's evidence is in the JSON report either way")


def _add_remote_options(p: argparse.ArgumentParser, base_url_help: str,
                        tenant_b_help: str) -> None:
    p.add_argument("--base-url", help=base_url_help + " (also OPENWOP_BASE_URL)")
    p.add_argument("--api-key", help="tenant A's API key there (also OPENWOP_API_KEY)")
    p.add_argument("--tenant-b-api-key",
                   help=tenant_b_help + " (also OPENWOP_TEST_TENANT_B_API_KEY)")


def _lanes(text: str) -> int:
    from refsim.check.lanes import MAX_LANES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LANES:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to {MAX_LANES}, not {text!r}")
    return value


_CHECK_REMOTE = ("check a live v2 host over HTTP instead: every row the wire can witness",
                 "a second tenant's key, for the uniformity leg and tenant isolation")
_FUZZ_REMOTE = ("fuzz a live v2 host over HTTP instead: the machine sends only what its "
                "discovery advertises",
                "a second tenant's key: the machine then also asks for tenant B's runs "
                "from tenant A")

# Each subcommand's --help: what it does, then examples (`refsim --help` keeps the short
# line each parser is added with).
HELP: dict[str, tuple[str, tuple[str, ...]]] = {
    "check": ("Run the six conformance legs of v2-eval-recorded-fixtures (with refsim's "
              "two stricter uniformity rows and the scenario's own row: 9 rows), every row of the "
              "RFC example table, every invariant and a seeded sample of each class of "
              "specs/classes.yaml (its size printed; --seed repeats it), on the built-in "
              "reference host or, "
              "with --base-url, on any OpenWOP v2 host. One line per check, then the "
              "totals. Exit 0 when nothing failed or was blocked, 1 when a check failed, 2 "
              "when one was blocked.",
              ("refsim check", "refsim check 0252.source",
               "refsim check --assume merge-suite-fixtures=merge",
               "refsim check --base-url http://localhost:8080 --api-key KEY_A "
               "--tenant-b-api-key KEY_B --json report.json")),
    "conformance": ("Run only the six legs of v2-eval-recorded-fixtures (the conformance "
                    "scenario; with refsim's exact-body and latency rows and the scenario's "
                    "own row, 9 rows), with the options and exit codes of `refsim check`.",
                    ("refsim conformance", "refsim conformance --base-url http://h:8080 "
                     "--api-key KEY_A --tenant-b-api-key KEY_B")),
    "examples": ("Run only the RFC 0252 example table (specs/examples/), with the options "
                 "and exit codes of `refsim check`.",
                 ("refsim examples", "refsim examples rfc-0252.example-3")),
    "invariants": ("Run only the invariant rows (invariants/invariants.yaml), with the "
                   "options and exit codes of `refsim check`.",
                   ("refsim invariants", "refsim invariants eval-fixture")),
    "list": ("Print the terms used, every requirement id with its section, level, witness "
             "class and checks, then every RFC rule and what covers it. Runs nothing.",
             ("refsim list", "refsim list | less")),
    "fuzz": ("Run the stateful Hypothesis machine against the reference host, a faulty or "
             "correct host of the zoo, or any host over HTTP. It sends only what the host's "
             "discovery advertises. It runs every example row of the table as a program of "
             "the machine, then the class sweep, then searches at random; it checks refusal "
             "uniformity, fail-closed replay and every invariant row after every step, and "
             "prints the branch counts (exit 0), or a counterexample as a "
             "pasteable program (exit 1). Exit 2 when a critical branch was never reached "
             "(inconclusive); 130 when stopped with Ctrl-C.",
             ("refsim fuzz", "refsim fuzz --max-examples 300 --steps 40 --seed 7",
              "refsim fuzz --mutant serves-miss-live",
              "refsim fuzz --jobs 4 --duration 600 --database .refsim-db",
              "refsim fuzz --replay --database .refsim-db --steps 30")),
    "bench": ("Measure replay, recording, derivation, the machine, check and mutants, each "
              "beside a calibration measured in the same run and its target. Exit 1 if a "
              "target is not met.",
              ("refsim bench", "refsim bench --skip-slow --json bench.json",
               "refsim bench http --clients 8 --seconds 10")),
    "http": ("Measure the HTTP server under concurrent clients: requests per second and "
             "latency percentiles, beside a calibration.",
             ("refsim bench http", "refsim bench http --clients 16 --seconds 20")),
    "mutants": ("Run the checker (in process and over HTTP) and the machine against every "
                "faulty host of the zoo and print the kill matrix, then every correct host "
                "and the pass matrix. Exit 1 if a faulty host survives or a correct host "
                "gets a false verdict; 130 when stopped with Ctrl-C (what was judged is "
                "printed and written).",
                ("refsim mutants", "refsim mutants --machine-examples 0 --no-http",
                 "refsim mutants --only echoes-id --json m.json --html m.html")),
    "demo": ("Walk through RFC 0252 in seven narrated chapters on the built-in host and "
             "write a report folder: report.md, report.html (pictures, no script), "
             "report.json, history.jsonl and timeline.txt.",
             ("refsim demo", "refsim demo --out /tmp/d --step", "refsim demo --seed 3")),
    "doc": ("Regenerate specs/REFERENCE.md from specs/ and invariants/. With --check, write "
            "nothing and exit 1 if the file is stale.",
            ("refsim doc", "refsim doc --check", "refsim doc --out /tmp/REFERENCE.md")),
    "diff": ("Drive two hosts (two readings of an open point, or two profiles) side by side "
             "with the stateful machine and print the shortest program after which they "
             "answer differently. Exit 1 on a difference, 0 when none is found, 2 when "
             "inconclusive (a critical branch never reached).",
             ("refsim diff --assume gone-copy-code=run_expired --max-examples 300",
              "refsim diff --profile reference --against content-free-lane",
              "refsim diff --all --json diffs.json")),
    "falsify": ("Compute RFC 0252's falsifiability table from the zoo and print it beside "
                "the RFC's, flagging every disagreement.",
                ("refsim falsify", "refsim falsify --cached",
                 "refsim falsify --write specs/falsified.json")),
    "serve": ("Serve the reference host (or a faulty host of the zoo) over HTTP until "
              "Ctrl-C. Tenants acme (hk_test_acme) and globex (hk_test_globex) always "
              "exist; --tenant adds more.",
              ("refsim serve", "refsim serve --port 0 --tenant initech:hk_initech",
               "refsim serve --mutant echoes-id")),
}


def _describe(parser: argparse.ArgumentParser, name: str) -> None:
    text, examples = HELP[name]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = textwrap.fill(text, 78)
    parser.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)


class _Later:
    """A help-text value worked out when the help is printed (argparse formats `%(name)s`
    from the action's attributes then), not whenever a parser is built."""

    def __init__(self, make: Callable[[], str]) -> None:
        self._make = make

    def __str__(self) -> str:
        return self._make()


def build_parser() -> argparse.ArgumentParser:
    from refsim.check.lanes import DEFAULT_LANES, MAX_LANES
    from refsim.data.paths import install_hint
    parser = argparse.ArgumentParser(
        prog="refsim",
        description="Reference simulator and spec checker for OpenWOP RFC 0252.",
        epilog="`refsim COMMAND --help` gives each command's options and examples. Start "
               "with `refsim check` (the main job) or `refsim demo` (the tour).")
    from refsim._version import __version__
    parser.add_argument("--version", action="version", version=f"refsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, parts, text in (
            ("check", ("conformance", "examples", "invariants", "sampled"),
             "run the conformance legs, the RFC example table, the invariants and a "
             "seeded sample of each class of specs/classes.yaml"),
            ("conformance", ("conformance",), "run the v2-eval-recorded-fixtures legs"),
            ("examples", ("examples",), "run the RFC 0252 example table"),
            ("invariants", ("invariants",), "run the invariant rows")):
        p = sub.add_parser(name, help=text, description=text)
        _add_check_options(p)
        _add_remote_options(p, *_CHECK_REMOTE)
        p.add_argument("--lanes", type=_lanes, default=DEFAULT_LANES, metavar="N",
                       help="with --base-url: rows side by side in N lanes, each with "
                            "tenants of its own minted through the conformance seam tenants "
                            "(the latency leg has the host alone); in process, N > 1 lets "
                            "a second process take half the parts where the machine has "
                            "two CPUs; 1: one after another; "
                            f"default {DEFAULT_LANES}, at most {MAX_LANES}")
        p.set_defaults(func=lambda a, parts=parts: _run(a, parts))
    lst = sub.add_parser("list", help="print every requirement with its section and checks")
    lst.set_defaults(func=_list)
    fuzz = sub.add_parser("fuzz", help="run the stateful Hypothesis machine against the host")
    fuzz.add_argument("--max-examples", type=int, default=100,
                      help="examples per run (per batch of a campaign)")
    fuzz.add_argument("--steps", type=int, default=30, help="steps per example")
    fuzz.add_argument("--seed", type=int, default=None,
                      help="repeat a search; only on the same code (the printed program "
                           "and the example database reproduce a failure anywhere)")
    fuzz.add_argument("--profile", default="reference", choices=sorted(PROFILES),
                      help="the built-in host's profile (default: reference)")
    fuzz.add_argument("--mutant", metavar="NAME",
                      help="fuzz a faulty host of the zoo (refsim mutants) instead")
    fuzz.add_argument("--variant", metavar="NAME",
                      help="fuzz a correct host of the pass zoo (refsim mutants) instead")
    fuzz.add_argument("--jobs", type=int, default=1,
                      help="processes, each with its own seeds, over one example database "
                           f"(at most {MAX_FUZZ_JOBS})")
    fuzz.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                      help="keep starting batches of --max-examples until this many seconds "
                           "have passed (the batch under way finishes)")
    database = fuzz.add_argument(
                      "--database", metavar="DIR|redis://HOST:PORT/N",
                      help="a Hypothesis example database: a folder (shared by the jobs of "
                           "one machine) or a Redis (shared across machines; the redis "
                           "extra: %(install)s). A counterexample found is "
                           "saved there and "
                           "replayed first on the next run, wherever it runs")
    # Worked out only when the help is printed: finding how refsim was installed reads the
    # installed distributions, a tenth of `refsim check`'s start.
    database.install = _Later(lambda: install_hint("redis"))  # type: ignore[attr-defined]
    fuzz.add_argument("--replay", action="store_true",
                      help="only replay what --database holds; generate nothing")
    fuzz.add_argument("--trace", metavar="DIR",
                      help="write the failing example's exchanges as HAR 1.2 (keys "
                           "redacted); the counterexample's own are printed either way, as "
                           "curl lines over HTTP")
    fuzz.add_argument("--no-sweep", action="store_true",
                      help="skip the explicit programs run before anything random (every "
                           "example row of specs/examples/, and the class sweep: one program "
                           "per class of specs/classes.yaml): only random examples, whose "
                           "counterexamples --database keeps")
    _add_remote_options(fuzz, *_FUZZ_REMOTE)
    fuzz.add_argument("--quiet", action="store_true",
                        help="no progress bar (none is drawn when stderr is not a terminal)")
    fuzz.set_defaults(func=_fuzz)
    bench = sub.add_parser("bench", help="measure replay, recording, derivation, the machine, "
                                         "check and mutants beside calibrations; print "
                                         "each figure with its target")
    bench.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    bench.add_argument("--skip-slow", action="store_true",
                       help="leave out `refsim mutants` (minutes)")
    bench.set_defaults(func=_bench, bench_target=None)
    bench_sub = bench.add_subparsers(dest="bench_target")
    bench_http = bench_sub.add_parser("http", help="the HTTP server under concurrent clients")
    bench_http.add_argument("--clients", type=int, default=8,
                            help="concurrent clients (default 8)")
    bench_http.add_argument("--seconds", type=float, default=10.0,
                            help="how long the clients send requests (default 10)")
    bench_http.add_argument("--json", dest="http_json", metavar="PATH",
                            help="write the figures as JSON")
    mutants = sub.add_parser("mutants", help="run the checker and the machine against every "
                                             "faulty host of the zoo; print the kill matrix")
    mutants.add_argument("--json", metavar="PATH", help="write the kill matrix as JSON")
    mutants.add_argument("--html", metavar="PATH", help="draw the kill matrix as a page")
    mutants.add_argument("--machine-examples", type=int, default=25,
                         help="examples per faulty host for the machine, per seed, stopping "
                              "at the first counterexample (0: checker only)")
    mutants.add_argument("--no-http", action="store_true",
                         help="skip the over-HTTP column (serve each host, check --base-url)")
    mutants.add_argument("--jobs", type=int, default=None,
                         help="processes to spread the hosts over (default: one per core)")
    mutants.add_argument("--machine-steps", type=int, default=30,
                         help="steps per example of the machine")
    mutants.add_argument("--no-sweep", action="store_true",
                         help="the machine column without the explicit programs (every "
                              "example row, the class sweep): what the random search alone "
                              "kills, each kill shrunk for display")
    mutants.add_argument("--all-rows", action="store_true",
                         help="run every checker row on each faulty host, in process and "
                              "over HTTP, and name every requirement it breaks (default: "
                              "each column stops at its first failing row, the latency leg "
                              "last)")
    mutants.add_argument("--shrink-budget", type=float, default=None, metavar="SECONDS",
                         help="seconds to shrink each machine kill for display, after the "
                              "unshrunk run has decided it; the step count printed is the "
                              "shrunk one, beside the unshrunk (0: do not shrink; default 1 "
                              "s, mutants.SHRINK_BUDGET)")
    mutants.add_argument("--only", action="append", metavar="NAME",
                         help="only this faulty or correct host (repeatable)")
    mutants.add_argument("--no-pass", action="store_true",
                         help="leave out the pass matrix (the correct hosts)")
    mutants.add_argument("--pass-only", action="store_true",
                         help="only the pass matrix: every correct host through check, "
                              "fuzz and diff")
    mutants.add_argument("--quiet", action="store_true",
                        help="no progress bar (none is drawn when stderr is not a terminal)")
    mutants.set_defaults(func=_mutants)
    demo = sub.add_parser("demo", help="a narrated walk through RFC 0252 on the built-in "
                                       "host; writes a report folder")
    demo.add_argument("--out", default="refsim-demo", metavar="DIR",
                      help="where the run folders and the `latest` link go "
                           "(default: ./refsim-demo)")
    demo.add_argument("--step", action="store_true",
                      help="wait for Enter between chapters (when stdin is a terminal)")
    demo.add_argument("--seed", type=int, default=0,
                      help="seeds the built-in host: the same seed, the same run ids and "
                           "pictures (default 0)")
    demo.add_argument("--profile", default="reference", choices=sorted(PROFILES),
                      help="the built-in host's profile (default: reference)")
    demo.set_defaults(func=_demo)
    doc = sub.add_parser("doc", help="regenerate specs/REFERENCE.md from specs/ and invariants/")
    doc.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 if the file is stale")
    doc.add_argument("--out", metavar="PATH", help="write here instead of specs/REFERENCE.md")
    doc.set_defaults(func=_doc)
    diff = sub.add_parser("diff", help="drive two readings side by side with the stateful "
                                       "machine; print the shortest program after which "
                                       "they answer differently")
    diff.add_argument("--assume", action="append", metavar="NAME=VALUE",
                      help="B reads this open point another way (specs/assumptions.yaml)")
    diff.add_argument("--profile", default="reference", choices=sorted(PROFILES),
                      help="host A's profile (and B's, unless --against)")
    diff.add_argument("--against", choices=sorted(PROFILES), help="host B's profile")
    diff.add_argument("--all", action="store_true",
                      help="every alternative of every assumable row, one line each")
    diff.add_argument("--max-examples", type=int, default=100,
                      help="examples of the machine driving both hosts (default 100)")
    diff.add_argument("--steps", type=int, default=20, help="steps per example")
    diff.add_argument("--seed", type=int, default=0,
                      help="repeats the search on the same code (default 0)")
    diff.add_argument("--json", metavar="PATH", help="write the result(s) as JSON")
    diff.add_argument("--quiet", action="store_true",
                        help="no progress bar (none is drawn when stderr is not a terminal)")
    diff.set_defaults(func=_diff)
    falsify = sub.add_parser("falsify", help="compute RFC 0252's falsifiability table from "
                                             "the zoo and print it beside the RFC's")
    falsify.add_argument("--write", metavar="PATH",
                         help="write the computed table as JSON (specs/falsified.json is "
                              "the cache REFERENCE.md renders)")
    falsify.add_argument("--json", metavar="PATH", help="the same, anywhere")
    falsify.add_argument("--cached", action="store_true",
                         help="print specs/falsified.json instead of computing")
    falsify.add_argument("--jobs", type=int, default=None,
                         help="processes to spread the hosts over (default: one per core)")
    falsify.add_argument("--quiet", action="store_true",
                        help="no progress bar (none is drawn when stderr is not a terminal)")
    falsify.set_defaults(func=_falsify)
    from refsim.cli import http as cli_http
    cli_http.register(sub)
    for name, subparser in sub.choices.items():
        _describe(subparser, name)
    _describe(bench_http, "http")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the program itself: what the imports made lives as long as the
        gc.freeze()  # process, and no collection need walk it again
    parser = build_parser()
    args = parser.parse_args(argv)
    from refsim.cli import data_check
    problem = data_check.problem()  # one line naming the file, not a traceback mid-run
    if problem is not None:
        print(f"refsim: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from refsim.data import paths
    checkout = paths.unread_checkout()
    if checkout is not None:  # a spec author's edits there would be silently ignored
        print(f"refsim: note: reading the data installed with refsim ({paths.ROOT}), not "
              f"the specs/ and invariants/ of the checkout at {checkout}, which differ; to "
              f"read those: pip install -e {checkout} (or REFSIM_ROOT={checkout})",
              file=sys.stderr)
    for option in _OUTPUT_OPTIONS:
        path = getattr(args, option, None)
        problem = _unwritable(path) if isinstance(path, str) else None
        if problem is not None:
            print(f"refsim: cannot write {path}: {problem}", file=sys.stderr)
            return EXIT_USAGE
    from refsim.wire.client import HostUnreachable
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `refsim list | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0
    except HostUnreachable as exc:  # any command, any step: one line, not a traceback
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # the file system refused a write the check above allowed
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code

"""The commands that run campaigns and compare: `fuzz` (the machine, here or on a host over
HTTP), `mutants` (the kill and pass matrices), `diff`, `falsify` and `bench`."""


from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

from refsim.cli.common import (
    EXIT_USAGE,
    MAX_FUZZ_JOBS,
    counts_refused,
    keys_refused,
    remote_host,
    trace_folder,
    zoo_recipe,
)


def fuzz_command(args: argparse.Namespace) -> int:
    from refsim.testing.fuzz import FuzzTarget

    if counts_refused("fuzz", ("--jobs", args.jobs, 1, MAX_FUZZ_JOBS),
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
    remote = remote_host(args)
    if isinstance(remote, int):
        return remote
    if remote is None:
        recipe = zoo_recipe(args)
        if isinstance(recipe, int):
            return recipe
        target = FuzzTarget(profile=args.profile, recipe=recipe)
    else:
        client, api_key, tenant_b = remote
        keys = {"acme": api_key, **({"globex": tenant_b} if tenant_b else {})}
        refused = keys_refused(client, api_key, tenant_b)
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
    code = fuzz_run(args, target, database)
    if database is not None:
        after = database_entries(database)
        print(f"example database: {database} holds {after} entr"
              f"{'y' if after == 1 else 'ies'} after this run (it had {before})")
    return code


def fuzz_run(args: argparse.Namespace, target: Any, database: str | None) -> int:
    import random

    from refsim.progress import EXIT_INTERRUPTED, Progress
    from refsim.testing.fuzz import (
        campaign,
        print_reproduction,
        report,
        report_campaign,
        run_machine,
    )

    trace_dir = trace_folder(args)
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


def bench_command(args: argparse.Namespace) -> int:
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


def mutants_command(args: argparse.Namespace) -> int:
    import math

    from refsim.zoo.faulty import ZOO
    from refsim.zoo.matrices import SHRINK_BUDGET, kill_matrix_json, print_matrix, write_json

    if counts_refused("mutants", ("--machine-examples", args.machine_examples, 0, None),
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


def diff_command(args: argparse.Namespace) -> int:
    from refsim.check.assume import AssumptionError
    from refsim.testing.diff import Pair, every_reading, report, run_diff, summary_line, write_json

    if counts_refused("diff", ("--max-examples", args.max_examples, 1, None),
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


def falsify_command(args: argparse.Namespace) -> int:
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

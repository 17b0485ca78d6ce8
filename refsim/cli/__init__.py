"""The `refsim` command line: the parser, `main`, and the small commands (`demo`, `doc`).

Each command's work lives beside it: `check` and its parts in `check.py`, the campaigns
(`fuzz`, `mutants`, `diff`, `falsify`, `bench`) in `campaigns.py`, `serve` in `http.py`,
what they share in `common.py`. A new command goes in the module of its kind, and gets its
subparser in `build_parser` here."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

from refsim.cli.campaigns import (
    bench_command,
    diff_command,
    falsify_command,
    fuzz_command,
    mutants_command,
)
from refsim.cli.check import check_command, list_command
from refsim.cli.common import EXIT_USAGE, MAX_FUZZ_JOBS
from refsim.domain.profile import PROFILES, profile_named

# The options that name a file a command writes (the destinations argparse gives them).
_OUTPUT_OPTIONS = ("json", "junit", "html", "http_json", "write")


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
        p.set_defaults(func=lambda a, parts=parts: check_command(a, parts))
    lst = sub.add_parser("list", help="print every requirement with its section and checks")
    lst.set_defaults(func=list_command)
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
    fuzz.set_defaults(func=fuzz_command)
    bench = sub.add_parser("bench", help="measure replay, recording, derivation, the machine, "
                                         "check and mutants beside calibrations; print "
                                         "each figure with its target")
    bench.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    bench.add_argument("--skip-slow", action="store_true",
                       help="leave out `refsim mutants` (minutes)")
    bench.set_defaults(func=bench_command, bench_target=None)
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
                         help="processes to spread the hosts over (default: one per core; "
                              "with more than one, hosts whose answers wait by design run "
                              "in one more)")
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
                              "last; over HTTP the row that killed the host in process is "
                              "asked first)")
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
    mutants.set_defaults(func=mutants_command)
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
    diff.set_defaults(func=diff_command)
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
    falsify.set_defaults(func=falsify_command)
    from refsim.cli import http
    http.register(sub)
    for name, subparser in sub.choices.items():
        _describe(subparser, name)
    _describe(bench_http, "http")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the program itself: what the imports made lives as long as the
        gc.freeze()  # process, and no collection need walk it again
    try:
        return _run(argv)
    finally:
        if argv is None:  # nor, at the exit, what the command made: the collections
            gc.freeze()  # Python's finalization runs would walk it all (40-60 ms after check)


def _run(argv: Sequence[str] | None) -> int:
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

"""The `refsim` command line: check, conformance, examples, invariants, list, smoke."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from refsim.domain.profile import PROFILES, profile_named

EXIT_USAGE = 2


def _smoke(args: argparse.Namespace) -> int:
    from refsim.demo import smoke_run
    return smoke_run(profile_named(args.profile), seed=args.seed, out=sys.stdout)


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
    rows = run_parts(target, parts, args.prefix)
    if not rows:
        print(f"refsim: no check matches {args.prefix!r}", file=sys.stderr)
        return EXIT_USAGE
    print(report.to_text(rows, target.label))
    if readings:
        baseline = run_parts(Target(profile=args.profile, seed=args.seed), parts, args.prefix)
        print()
        print(explain(readings, changes(baseline, rows)))
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assumed = [{"name": r.name, "value": r.value, "reading": r.meaning} for r in readings]
    report.write_reports(rows, target.label, args.json, args.junit, generated_at=generated,
                         assumptions=assumed or None)
    return report.verdict(rows)


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
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--assume", action="append", metavar="NAME=VALUE",
                   help="read an open point another way (names in specs/assumptions.yaml); "
                        "the report then says which checks change and why")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refsim",
        description="Reference simulator and spec checker for OpenWOP RFC 0252.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, parts, text in (
            ("check", ("conformance", "examples", "invariants"),
             "run the conformance legs, the RFC example table and the invariants"),
            ("conformance", ("conformance",), "run the v2-eval-recorded-fixtures legs"),
            ("examples", ("examples",), "run the RFC 0252 example table"),
            ("invariants", ("invariants",), "run the invariant rows")):
        p = sub.add_parser(name, help=text, description=text)
        _add_check_options(p)
        p.set_defaults(func=lambda a, parts=parts: _run(a, parts))
    lst = sub.add_parser("list", help="print every requirement with its section and checks")
    lst.set_defaults(func=_list)
    smoke = sub.add_parser("smoke", help="record, replay and drift once on the built-in host")
    smoke.add_argument("--profile", default="reference", choices=sorted(PROFILES))
    smoke.add_argument("--seed", type=int, default=0)
    smoke.set_defaults(func=_smoke)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code

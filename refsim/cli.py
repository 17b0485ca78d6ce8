"""The `refsim` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from refsim.domain.profile import PROFILES, profile_named


def _smoke(args: argparse.Namespace) -> int:
    """Record a source, replay it and drift it on the built-in host; print what happened."""
    from refsim.demo import smoke_run
    return smoke_run(profile_named(args.profile), seed=args.seed, out=sys.stdout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="refsim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
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

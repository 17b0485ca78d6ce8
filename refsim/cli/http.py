"""`refsim serve`: the reference host over HTTP, for real clients such as openwop-client.

`register(sub)` adds the subcommand to the `refsim` parser.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

import attrs

from refsim.domain.ids import TENANT_RE
from refsim.domain.profile import PROFILES, profile_named
from refsim.wire.limits import HEADER_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from refsim.host import SimHost

DEFAULT_PORT = 8252
EXIT_USAGE = 2
EXIT_FAILED = 1


@attrs.frozen
class TenantSpec:
    name: str
    api_key: str


def parse_tenant(value: str) -> TenantSpec:
    """`NAME:API_KEY` (NAME may itself start with `anon:`); ValueError says what is wrong."""
    prefix = "anon:" if value.startswith("anon:") else ""
    name, sep, key = value[len(prefix):].partition(":")
    name = prefix + name
    if not sep or not name or not key:
        raise ValueError(f"--tenant expects NAME:API_KEY (e.g. initech:hk_test_initech), "
                         f"got {value!r}")
    if not TENANT_RE.fullmatch(name):
        raise ValueError(f"--tenant {value!r}: {name!r} is not a v2 tenant id "
                         "([A-Za-z0-9._~-]{1,128}, optionally after anon:)")
    if len(key) > 256 or any(c.isspace() for c in key) or not key.isprintable():
        raise ValueError(f"--tenant {value!r}: the API key must be 1 to 256 printable "
                         "characters without spaces")
    return TenantSpec(name, key)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the server as Ctrl-C does (only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _mutant_names() -> list[str]:
    from refsim.zoo.faulty import ZOO

    return [m.name for m in ZOO]


def tenant_lines(host: SimHost) -> list[str]:
    """What `serve` prints under its banner: each tenant and how to authenticate as it."""
    lines = []
    for tenant in host.core.tenants.values():
        where = f" (workspace {tenant.workspace})" if tenant.workspace else ""
        lines.append(f"  tenant {tenant.name}{where}: Authorization: Bearer {tenant.api_key}")
    return lines


def _serve(args: argparse.Namespace) -> int:
    from refsim.cli import data_check
    from refsim.host import SimHost
    from refsim.wire.server import serve_forever

    problem = data_check.problem(smoke=True)
    if problem is not None:  # refuse to start rather than answer every request with a 500
        print(f"refsim: {problem}; not serving", file=sys.stderr)
        return EXIT_FAILED
    try:
        tenants = [parse_tenant(v) for v in args.tenant or []]
    except ValueError as exc:
        print(f"refsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    warning: list[str] = []
    if args.mutant is not None:
        from refsim.zoo.faulty import mutant

        names = _mutant_names()
        if args.mutant not in names:
            print(f"refsim: --mutant {args.mutant!r} is not in the zoo; one of: "
                  f"{', '.join(names)}", file=sys.stderr)
            return EXIT_USAGE
        known_bad = mutant(args.mutant)
        # The whole faulty host: its swapped component, and its edge or discovery claim.
        host = known_bad.host(seed=args.seed, profile=profile_named(args.profile))
        warning = [f"  WARNING: a known-bad host (mutant {known_bad.name}): it breaks "
                   f"{known_bad.breaks}"]
        if known_bad.inside_only is not None:  # check --base-url will pass it: say why
            warning.append(f"  NOTE: its fault is invisible over HTTP ({known_bad.inside_only}"
                           "): refsim check --base-url passes it; only the checker in "
                           "process (refsim mutants) sees it")
    else:
        host = SimHost(seed=args.seed, profile=profile_named(args.profile))
    for tenant in tenants:
        try:
            host.add_tenant(tenant.name, tenant.api_key)
        except ValueError as exc:
            print(f"refsim: --tenant {tenant.name}:...: {exc}", file=sys.stderr)
            return EXIT_USAGE
    with _sigterm_as_interrupt():
        try:
            name = host.name + (f" (mutant {args.mutant})" if args.mutant else "")
            return serve_forever(host, args.host, args.port, name=name,
                                 lines=[*warning, *tenant_lines(host)],
                                 header_timeout=args.header_timeout)
        except OSError as exc:  # the address is taken, or not ours to bind
            print(f"refsim: cannot listen on {args.host}:{args.port}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return EXIT_FAILED


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= HEADER_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"seconds, more than 0 and at most {HEADER_TIMEOUT_SECONDS:g}, got {text!r}")
    return value


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free port), got {text!r}")
    return int(text)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `refsim serve` to the `refsim` command line."""
    text = "serve the reference host over HTTP until Ctrl-C"
    p = sub.add_parser("serve", help=text, description=text + (
        ". Tenants acme (hk_test_acme) and globex (hk_test_globex) always exist."))
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"the port (default: {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--tenant", action="append", metavar="NAME:API_KEY",
                   help="add a tenant and its API key (repeatable)")
    p.add_argument("--seed", type=int, default=0,
                   help="the seed for ids and the logical clock (default: 0)")
    p.add_argument("--profile", default="reference", choices=sorted(PROFILES),
                   help="the host's profile (default: reference)")
    p.add_argument("--mutant", metavar="NAME", default=None,
                   help="serve a known-bad host from the zoo instead (refsim mutants lists "
                        "them); the banner says what it breaks")
    p.add_argument("--header-timeout", type=_seconds, default=HEADER_TIMEOUT_SECONDS,
                   metavar="SECONDS",
                   help="close a connection whose request header is not complete within "
                        f"this (default: {HEADER_TIMEOUT_SECONDS:g})")
    p.set_defaults(func=_serve)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m refsim.cli.http ...`: the serve command alone (until cli.py wires it)."""
    parser = argparse.ArgumentParser(prog="refsim")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

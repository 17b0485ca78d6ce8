"""What the command line's commands share: the usage exit code, range checks on counts, the
host over HTTP a command names (`--base-url` and its keys), the zoo host it names, the
folder `--trace` writes to."""


from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from refsim.wire.client import HostClient

if TYPE_CHECKING:
    from refsim.check.runner import HostRecipe

EXIT_USAGE = 2
# `refsim fuzz --jobs` starts this many processes at most: each runs its own machine.
MAX_FUZZ_JOBS = 64


def counts_refused(command: str, *counts: tuple[str, int, int, int | None]) -> bool:
    """Whether any (option, value, least, most) is out of range; says which, once."""
    for option, value, least, most in counts:
        if value < least or (most is not None and value > most):
            bound = f"{least} to {most}" if most is not None else f"at least {least}"
            print(f"refsim {command}: {option} takes a whole number, {bound}",
                  file=sys.stderr)
            return True
    return False


def trace_folder(args: argparse.Namespace) -> Path | int | None:
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


def keys_refused(client: HostClient, api_key: str, tenant_b: str | None) -> str | None:
    """Why the host at --base-url cannot be checked, in one line, or None: it answers no
    OpenWOP v2 discovery document (asked first: a server that is no host gets this line,
    never a table of rows), it cannot be reached, or the keys cannot drive it."""
    from refsim.check.observe import discovery_refused, keys_refused
    try:
        return discovery_refused(client) or keys_refused(client, api_key, tenant_b)
    except ValueError as exc:  # HostUnreachable: the URL the user gave, what went wrong
        return str(exc)


def remote_host(args: argparse.Namespace) -> tuple[HostClient, str, str | None] | int | None:
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


def zoo_recipe(args: argparse.Namespace) -> HostRecipe | int | None:
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

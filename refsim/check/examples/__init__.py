"""The RFC 0252 example table as data (`specs/examples/*.yaml`) and the runner that executes it.

Each row runs on a fresh host built for its profile, and is judged into one report `Row`.
The vocabulary documents itself: the file and row keys (`TOP_KEYS`, `ROW_KEYS`,
`REQUEST_KEYS`, each with what it means), the actions (the `ActionKind` classes of
`refsim.check.examples.actions`) and the expectations (the `Expectation` classes of
`refsim.check.expectations`). `refsim doc` renders them as "The example vocabulary" in
specs/REFERENCE.md, the one manual of it. An unknown key anywhere is a `ValueError` naming
the file and the row.

This module runs the table (`run_examples`, `run_example`) and gathers the rest, which
other code imports from here: the rows as values (`refsim.check.examples.rows`), the
action kinds (`refsim.check.examples.actions`), loading and validating the files
(`refsim.check.examples.load`) and running one row (`RowRun`,
`refsim.check.examples.run`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from refsim.check.examples.actions import ACTIONS as ACTIONS
from refsim.check.examples.actions import ActionKind as ActionKind
from refsim.check.examples.actions import AddTenant as AddTenant
from refsim.check.examples.actions import CancelRun as CancelRun
from refsim.check.examples.actions import CreateEval as CreateEval
from refsim.check.examples.actions import CreateWorkflow as CreateWorkflow
from refsim.check.examples.actions import EraseRun as EraseRun
from refsim.check.examples.actions import ForkRun as ForkRun
from refsim.check.examples.actions import HttpRequest as HttpRequest
from refsim.check.examples.actions import RegisterSuite as RegisterSuite
from refsim.check.examples.actions import ResolveRun as ResolveRun
from refsim.check.examples.actions import RowContext as RowContext
from refsim.check.examples.actions import Unreadable as Unreadable
from refsim.check.examples.load import DEFAULT_DIRECTORY as DEFAULT_DIRECTORY
from refsim.check.examples.load import DEFAULT_TENANTS as DEFAULT_TENANTS
from refsim.check.examples.load import ID_RE as ID_RE
from refsim.check.examples.load import NAME_RE as NAME_RE
from refsim.check.examples.load import REQUEST_KEYS as REQUEST_KEYS
from refsim.check.examples.load import ROW_KEYS as ROW_KEYS
from refsim.check.examples.load import TOP_KEYS as TOP_KEYS
from refsim.check.examples.load import load_examples as load_examples
from refsim.check.examples.load import load_file as load_file
from refsim.check.examples.rows import FACET_MEMBERS as FACET_MEMBERS
from refsim.check.examples.rows import FAMILIES as FAMILIES
from refsim.check.examples.rows import Action as Action
from refsim.check.examples.rows import Example as Example
from refsim.check.examples.rows import Expected as Expected
from refsim.check.examples.rows import RowRequest as RowRequest
from refsim.check.examples.run import CONTROLS as CONTROLS
from refsim.check.examples.run import NOOP_WORKFLOW as NOOP_WORKFLOW
from refsim.check.examples.run import RowRun as RowRun
from refsim.check.findings import Disposition, Row, check_raised
from refsim.check.observe import Session, Unobservable, gate, inspector_of
from refsim.wire.client import HostClient
from refsim.wire.trace import segment

SCENARIO = "rfc-0252-examples"


HostFor = Callable[[str | None], HostClient]


def run_examples(make_host: HostFor, prefix: str | None = None, *,
                 examples: Sequence[Example] | None = None,
                 keys: Mapping[str, str] | None = None, remote: bool = False,
                 stop_on_fail: bool = False) -> list[Row]:
    """Run every row (or those `prefix` selects) on `make_host(row.profile)`, one host each
    (`stop_on_fail`: none after the first that fails).

    `make_host(None)` builds the target's own host: a row without `profile:` runs there.
    `remote`: the host is behind HTTP (one long-lived host, no inside): rows that need the
    inside are listed apart; `keys` then maps the tenant labels to that host's API keys.
    """
    chosen = load_examples() if examples is None else examples
    out = []
    for e in chosen:
        if not e.matches(prefix):
            continue
        with segment(e.id):  # its exchanges, for a failed row's evidence
            out.append(_run_one(e, make_host, keys, remote))
        if stop_on_fail and out[-1].disposition is Disposition.EXECUTED_FAIL:
            break
    return out


def _run_one(e: Example, make_host: HostFor, keys: Mapping[str, str] | None,
             remote: bool) -> Row:
    missing = e.tenants_missing(keys or DEFAULT_TENANTS)
    if remote:
        why = e.needs_inside()
        if why is not None:
            # A row whose requirement no outsider can witness may still make claims the
            # wire shows (a replayed answer, a status): a breach of those is a breach,
            # named; their holding proves nothing of the requirement, so it stays apart.
            if not missing and e.wire_claims_beside_the_inside():
                row = run_example(e, make_host(None), keys=keys)
                if row.disposition is Disposition.EXECUTED_FAIL:
                    return row
            return Row.apart_row(e.requirement_id, SCENARIO, why, check_id=e.id)
    if missing:
        return Row.unjudged(e.requirement_id, SCENARIO, Disposition.BLOCKED,
                            "no API key for tenant " + ", ".join(missing) +
                            " (a second tenant's key: --tenant-b-api-key or "
                            "OPENWOP_TEST_TENANT_B_API_KEY)", check_id=e.id)
    return run_example(e, make_host(None if remote else e.profile), keys=keys)


def run_example(example: Example, host: HostClient, *,
                keys: Mapping[str, str] | None = None) -> Row:
    """Judge one row on `host`. A row that names no profile is inapplicable on a host that
    does not advertise recordedFixtures: it has nothing to say about such a host. A row
    that needs what the host does not offer (a seam, a fixture) is blocked, naming it, and
    so is every row where the host's discovery could not be read."""
    session = Session(host, dict(keys or DEFAULT_TENANTS)["acme"])
    gated = gate(session.surface, fixtures=False)
    if gated.unread or (not example.every_host
                        and (example.profile is None or example.withholds)
                        and not gated.applies):
        return Row.unjudged(example.requirement_id, SCENARIO, gated.disposition,
                            f"the host ({host.name}): {gated.reason}, and the row names no "
                            "profile of its own", check_id=example.id)
    against = example.advertised_against(session.surface)
    if against:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}) advertises {', '.join(against)}; the "
                            "row judges a host without it", check_id=example.id)
    unmet = example.unmet(session.surface)
    if unmet:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}) does not advertise {', '.join(unmet)}, "
                            "which the row's claim rests on", check_id=example.id)
    run = RowRun(example, host, inspector_of(host), dict(keys or DEFAULT_TENANTS))
    try:
        for fixture in sorted(example.fixtures()):
            session.require_fixture(fixture)
        findings = run.run()
    except Unobservable as exc:
        return Row.unjudged(example.requirement_id, SCENARIO, exc.disposition,
                            f"the host ({host.name}): {exc.reason}", check_id=example.id)
    except Exception as exc:  # refsim's fault, never the host's: blocked, with where
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.BLOCKED,
                            check_raised(f"the row {example.id}", exc), check_id=example.id)
    if run.blocked:
        unseen = f"the host ({host.name}): " + "; ".join(run.blocked)
        if all(f.ok for f in findings):  # nothing it saw failed, yet not all was seen
            return Row.unjudged(example.requirement_id, SCENARIO, Disposition.BLOCKED,
                                unseen, check_id=example.id)
        failed = Row.judged(example.requirement_id, SCENARIO, findings, check_id=example.id)
        return attrs.evolve(failed, detail=f"{failed.detail}; and not judged: {unseen}")
    if findings and all(f.ok for f in findings) and run.claims == 0 and run.notes:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}): no claim of the row can be observed "
                            "there: " + "; ".join(run.notes), check_id=example.id)
    row = Row.judged(example.requirement_id, SCENARIO, findings, check_id=example.id)
    if run.notes and row.passed:
        row = attrs.evolve(row, detail=row.detail + "; not observable on this host: "
                           + "; ".join(run.notes))
    return row

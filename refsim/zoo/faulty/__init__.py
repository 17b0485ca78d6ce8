"""Faulty hosts, each breaking exactly one RFC 0252 rule by swapping one component.

Every mutant is the reference host with one part replaced, never a switch inside the
real host. Its `breaks` names the line it breaks; `refsim mutants` must kill them all.
`base` holds the `Mutant` class, `mutant` and the parts the families share; each family
module holds the hosts of one kind of fault with their parts (`usable_sources`,
`create_rules`, `refusal_oracles`, `echoed_ids`, `echo_and_leaks`, `replay`, `misses`,
`forks_and_copies`, `owner_routes`, `idempotency`), and this package puts them in the zoo's
order. A new host goes in its family's module, and its name in `ORDER`.
"""

from __future__ import annotations

from refsim.zoo.faulty import (
    create_rules,
    echo_and_leaks,
    echoed_ids,
    forks_and_copies,
    idempotency,
    misses,
    owner_routes,
    refusal_oracles,
    replay,
    usable_sources,
)
from refsim.zoo.faulty.base import Mutant, assemble, mutant

__all__ = ["ORDER", "ZOO", "Mutant", "mutant"]

# The zoo's order (the kill matrix's rows, the docs' list): by the round that found each
# host, the first one first; a new host's name goes at the end.
ORDER: tuple[str, ...] = (
    # -- the first hosts: one part of the reference host swapped for each RFC 0252 line
    "ignores-fixture-runs",
    "echoes-id",
    "foreign-403",
    "foreign-404",
    "accepts-foreign-source",
    "accepts-non-terminal",
    "serves-miss-live",
    "merges-suite-fixtures",
    "derives-delegates",
    "derives-egress-credential",
    "credential-in-vault-answer",
    "reresolves-on-fork",
    "keeps-copy-after-erasure",
    "omits-echo",
    "accepts-live-shadow",
    "accepts-without-mode",
    "accepts-failed-call-without-fixture-errors",
    "accepts-unheld-source",
    "accepts-empty-map",
    "drops-error-entries",
    "words-non-terminal-differently",
    "serves-out-of-order",
    "no-per-trial-reset",
    "never-consumes",
    # -- the blind spots: each broke RFC 0252 yet passed every check until the checker
    # learnt to see it
    "foreign-unminted-403",
    "check-order-oracle",
    "foreign-source-header",
    "derived-in-snapshot",
    "partial-echo",
    "echo-upper-cased",
    "echo-reversed",
    # -- broken parts the tests once kept to themselves: here the kill matrix counts them
    "leaks-entries-in-eval-started",
    "projects-echo",
    "forgets-misses",
    "counts-miss-calls-live",
    "plans-live",
    "derives-from-source-on-fork",
    "runs-live-when-copy-gone",
    "wipes-all-copies",
    "advertises-without-matching",
    "first-invocation-only",
    "every-task-served",
    "first-key-only",
    "first-conflict-only",
    "first-source-only",
    # -- quiet violators: each broke an RFC line yet passed every row and the machine,
    # until the checker judged the RFC rather than refsim; the kill matrix counts them, in
    # process only where the wire cannot show the fault (the reason is on the host)
    "check-order-oracle-live-shadow",
    "entries-in-snapshot-when-served-whole",
    "rederives-while-usable",
    "stores-egress-credential",
    "keeps-erased-copies",
    # -- ids and keys close to real ones
    "accepts-id-in-any-case",
    "accepts-padded-id",
    "accepts-id-prefix",
    "accepts-near-miss-key",
    # -- sources §C calls usable
    "refuses-eval-run-source",
    "refuses-cancelled-source",
    "refuses-content-free-source",
    # -- other tenants acting on an eval run
    "foreign-forks-eval-run",
    "foreign-reads-eval-summary",
    "foreign-streams-eval-events",
    "foreign-erases-eval-run",
    # -- what each channel shows
    "stream-projects-echo",
    "stream-leaks-entries",
    # -- where recorded content can hide
    "entries-in-header",
    "entries-in-string",
    "entries-in-vendor-member",
    # -- retries, runs left behind, time
    "accepts-foreign-on-retry",
    "leaves-a-failed-run",
    "slower-for-foreign-runs",
    # -- a second campaign: found by a hostile review after the first round, each
    # passed every row then
    "foreign-cancelled-refused-apart",
    "foreign-without-agent-refused-apart",
    "code-changes-on-retry",
    "rewords-on-retry",
    "branch-misses-live",
    "derives-last-eight-calls",
    "matches-numbers-as-text",
    "matches-lists-in-any-order",
    "matches-in-any-case",
    "matches-without-nulls",
    "entries-in-hex-header",
    "forgets-misses-on-reread",
    "localised-for-foreign",
    "entries-percent-encoded-in-header",
    "entries-compressed-in-header",
    "slower-for-foreign-waiting-runs",
    "accepts-with-idempotency-key",
    "echoes-id-base64-in-header",
    "echoes-id-hex-in-header",
    "longer-request-id-for-foreign",
    "echoes-id-base32-in-cookie",
    "entries-in-stream-comment",
    "stream-hides-misses",
    "misses-as-bool",
    "percent-path-skips-owner",
    "cache-hit-sometimes",
    "first-ask-marked",
    "slow-tail-for-foreign",
    "problem-json-oracle",
    # -- the RFC's classes (specs/classes.yaml): one host per class the zoo lacked, each
    # taking a member of a class the RFC refuses (a value of another type, a path spelling, a
    # compatibility form, a folded key, a route without its owner check, a retry cache keyed
    # too loosely)
    "accepts-id-in-a-list",
    "accepts-id-in-an-object",
    "decodes-body-ids-like-path-ids",
    "accepts-id-nfkc-folded",
    "folds-task-keys",
    "foreign-polls-eval-events",
    "foreign-reads-eval-snapshot",
    "foreign-cancels-eval-run",
    "idempotency-ignores-fixture-runs",
    "idempotency-shared-across-owners",
    # -- found by a hostile tester: faults of the classes issue 39 names, put behind the
    # reference host by a tester who saw no zoo and no check; each slipped past check and the
    # machine until its class grew
    "poll-continuation-skips-owner",
    "etag-before-owner",
    "bare-segment-any-tenant",
    "lists-foreign-runs-when-filtered",
    "accepts-id-with-fragment",
    "slug-folds-task-keys",
    "matches-nfkc-folded",
    "workspace-blind-routes",
    "idempotency-shared-across-workspaces",
    "named-twice-split-brain",
    "third-miss-live",
)

ZOO: tuple[Mutant, ...] = assemble(
    ORDER, usable_sources.HOSTS, create_rules.HOSTS, refusal_oracles.HOSTS, echoed_ids.HOSTS,
    echo_and_leaks.HOSTS, replay.HOSTS, misses.HOSTS, forks_and_copies.HOSTS,
    owner_routes.HOSTS, idempotency.HOSTS)

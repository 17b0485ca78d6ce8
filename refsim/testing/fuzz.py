"""Runs the stateful machine and reports: a counterexample with its requirement id and a
pasteable program, or the step and branch counts of a clean run; shrinks a counterexample
found without shrinking, for display, within a time budget; and campaigns of several
processes over one Hypothesis example database."""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import queue
import re
import shlex
import time
import unittest
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
)
from hypothesis.errors import Unsatisfiable
from hypothesis.internal.conjecture import engine as hypothesis_engine
from hypothesis.reporting import with_reporter

from refsim.check.evidence import failing, redact, with_dependencies
from refsim.check.runner import HostRecipe
from refsim.data.paths import install_hint
from refsim.progress import EXIT_INTERRUPTED, Progress, ignore_interrupts
from refsim.testing.stateful import (
    RecordedFixturesMachine,
    RequirementViolated,
    example_rows,
    focused_on,
    machine_for,
    machine_test,
    unreached,
)
from refsim.wire.client import HostClient
from refsim.wire.trace import Exchange, Trace, current, recording

INVARIANT_CALLS = ("after_every_step",)  # the machine's one invariant, not a step
# Without the shrink phase a failure is reported as found: enough where only "is it
# killed" matters, and seconds cheaper than a shrunk counterexample.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
# Shrinking without the explain phase: it reruns the shrunk program under a line tracer to
# annotate it ("Explanation:" notes), which the report leaves out; three quarters of a
# shrunk machine kill's cost otherwise.
SHRINK = tuple(p for p in Phase if p is not Phase.explain)
REPLAY_ONLY = (Phase.explicit, Phase.reuse)
# Shrinking a failure an earlier run saved: replay it from the database, then shrink it;
# nothing new is generated and nothing explained.
SHRINK_SAVED = (Phase.reuse, Phase.shrink)


@attrs.frozen
class FuzzResult:
    passed: bool
    requirement_id: str | None
    message: str
    program: tuple[str, ...]
    narrative: tuple[str, ...]
    machine: type[RecordedFixturesMachine]
    interrupted: bool = False  # Ctrl-C stopped the run (`stoppable`): passed so far
    # The explicit program (refsim.testing.programs) that failed, where one did: it is
    # shown as written, never shrunk.
    program_name: str | None = None
    # What the failed finding quoted; the exchanges that show the breach (after those that
    # made the runs they name), and every exchange of the failing example (--trace).
    observation: Any = attrs.field(default=None, eq=False)
    evidence: tuple[Exchange, ...] = attrs.field(default=(), eq=False)
    breach: frozenset[int] = attrs.field(default=frozenset(), eq=False)  # quoted: their seqs
    exchanges: tuple[Exchange, ...] = attrs.field(default=(), eq=False)

    @property
    def steps(self) -> int:
        """Rule steps in the (shrunk) counterexample, not counting invariant checks."""
        return sum(1 for line in self.pasteable if line.startswith(("state.", "runs_", "evals_",
                                                                    "tenants_"))
                   and "teardown" not in line)

    @property
    def pasteable(self) -> tuple[str, ...]:
        """The program as the report prints it: without the invariant checks."""
        return tuple(line for line in self.program if not _is_invariant_call(line))


# Where `--database` names a Redis rather than a folder: Hypothesis's own
# `RedisExampleDatabase` (the optional extra refsim[redis], hypothesis[redis]).
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
REDIS_PREFIX = b"hypothesis-example:"


class DatabaseUnavailable(Exception):
    """The example database named cannot be used; the message is one line for the user."""


def is_redis(spec: str | Path) -> bool:
    return isinstance(spec, str) and spec.startswith(REDIS_SCHEMES)


def open_database(spec: str | Path) -> ExampleDatabase:
    """The example database `spec` names: a folder (`DirectoryBasedExampleDatabase`), or
    `redis://HOST:PORT/N` (`RedisExampleDatabase`, for workers on several machines), which
    is asked once whether it answers. `DatabaseUnavailable` when it cannot be used."""
    if not is_redis(spec):
        return DirectoryBasedExampleDatabase(str(spec))
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise DatabaseUnavailable(
            f"--database {spec} needs the Redis client: {install_hint('redis')}"
        ) from None
    try:
        client = redis.Redis.from_url(str(spec), socket_connect_timeout=3, socket_timeout=10)
        client.ping()
    except (redis.exceptions.RedisError, ValueError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DatabaseUnavailable(f"cannot reach the Redis at {spec}: {first}") from None
    return RedisExampleDatabase(client, key_prefix=REDIS_PREFIX)


def database_entries(spec: str | Path) -> int:
    """How many examples an example database holds: a file each in a folder, a member of
    a set under Hypothesis's key prefix in a Redis."""
    if not is_redis(spec):
        return sum(1 for p in Path(spec).rglob("*") if p.is_file())
    db = open_database(spec)
    client = db.redis  # type: ignore[attr-defined]
    return sum(int(client.scard(key)) for key in client.scan_iter(match=REDIS_PREFIX + b"*"))


def example_database(database: ExampleDatabase | str | Path | None) -> ExampleDatabase | None:
    """A Hypothesis example database: a folder or a Redis URL (`open_database`). A folder
    is safe to share between the processes of one machine; a Redis between machines."""
    if database is None or isinstance(database, ExampleDatabase):
        return database
    return open_database(database)


class LabelledDatabase(ExampleDatabase):
    """An example database seen through a label: every key Hypothesis uses is prefixed
    with it, so several machines share one database (one directory) without meeting.

    Hypothesis keys a stateful test's entries by the machine class's source, which is the
    same whatever host the machine drives. Sharing a database between targets would then
    replay one host's counterexample against another, and Hypothesis deletes a saved
    example that no longer fails: a counterexample found against a faulty host would be
    gone after one run against a sound one."""

    def __init__(self, inner: ExampleDatabase, label: str) -> None:
        super().__init__()
        self.inner = inner
        self.label = label
        self._prefix = label.encode("utf-8") + b"\x00"

    def __repr__(self) -> str:
        return f"LabelledDatabase({self.inner!r}, {self.label!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelledDatabase) and (self.inner, self.label) == (
            other.inner, other.label)

    def __hash__(self) -> int:
        return hash((type(self.inner), getattr(self.inner, "path", id(self.inner)),
                     self.label))

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from self.inner.fetch(self._prefix + key)

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self._prefix + key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self._prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self._prefix + src, self._prefix + dest, value)

    # Change listeners (HypoFuzz's dashboard watches its database): the inner database's
    # changes under this label, with the label taken off.

    def _start_listening(self) -> None:
        self.inner.add_listener(self._inner_changed)

    def _stop_listening(self) -> None:
        self.inner.remove_listener(self._inner_changed)

    def _inner_changed(self, event: Any) -> None:
        kind, (key, value) = event
        if isinstance(key, bytes) and key.startswith(self._prefix):
            self._broadcast_change((kind, (key[len(self._prefix):], value)))


def run_machine(factory: Callable[[], HostClient], *, max_examples: int, steps: int,
                seed_value: int | None = None, extended: bool = True,
                keys: dict[str, str] | None = None, shrink: bool = True,
                database: ExampleDatabase | str | Path | None = None,
                replay_only: bool = False, phases: Sequence[Phase] | None = None,
                stoppable: bool = False, programs: bool = True) -> FuzzResult:
    """Run the machine once. `shrink=False` reports a failure as found (no shrink phase);
    `database` keeps failures there and replays them first (Hypothesis keys them by the
    machine class's source: the same in every process and run, and for every host, so give
    each target its own `LabelledDatabase`, as `FuzzTarget.database` does);
    `replay_only` runs only what the database holds; `phases`, when given, overrides the
    phases `shrink` and `replay_only` choose; `programs` runs the explicit programs first
    (with the generate phase only). `stoppable`: Ctrl-C ends the run with what it
    found so far (`interrupted`), instead of raising KeyboardInterrupt."""
    machine = machine_for(factory, extended=extended, keys=keys)
    if phases is None:
        phases = REPLAY_ONLY if replay_only else SHRINK if shrink else NO_SHRINK
    db = example_database(database)
    config = settings(max_examples=max_examples, stateful_step_count=steps, deadline=None,
                      database=db, print_blob=False, report_multiple_bugs=False,
                      phases=phases, suppress_health_check=list(HealthCheck))
    test = machine_test(machine, config)
    if seed_value is not None:
        test = _seeded(test, seed_value, db)
    from refsim.testing.stateful import JUDGED
    from refsim.wire.httpclient import HttpClient
    sent = HttpClient.sent
    judged_before = collections.Counter(JUDGED)
    trace = current() or Trace()  # each example's exchanges, for a counterexample's evidence
    try:
        with recording(trace):
            if programs and Phase.generate in phases:
                failed = run_programs(machine)
                if failed is not None:
                    return _with_evidence(failed, trace)
            return _with_evidence(_run_test(test, machine, stoppable), trace)
    finally:
        machine.http_sent = HttpClient.sent - sent
        machine.judged_counts = JUDGED - judged_before


def _with_evidence(result: FuzzResult, trace: Trace) -> FuzzResult:
    """A counterexample with its exchanges: those of its last step (where it failed) that
    the failed finding quotes, after those that made the runs they name; and every exchange
    of the failing example (the trace holds the last example run: the failing one)."""
    if result.passed or not trace.exchanges:
        return result
    every = list(trace.exchanges)
    last = trace.of(every[-1].segment)
    chosen = failing(last, [result.observation])
    return attrs.evolve(result, evidence=tuple(with_dependencies(chosen, every)),
                        breach=frozenset(e.seq for e in chosen), exchanges=tuple(every))


def run_programs(machine: type[RecordedFixturesMachine]) -> FuzzResult | None:
    """The explicit programs, before anything random: the class sweep of
    specs/classes.yaml, then every example row of the table as a program of the machine
    (`refsim.testing.programs`). Counted in `machine.programs_run` (a row that cannot run
    on the host in `machine.rows_apart`, with why); the first breach is the run's
    counterexample, shown as written.

    The sweep first: its few programs kill most of the zoo's faulty hosts that the machine
    kills (49 of 116 fell to a sweep program only after every table row had passed), and
    run first they took the kill matrix's machine column from 45-52 to 33-34 CPU-s."""
    from refsim.testing.programs import run_program, sweep, table
    for program in (*sweep(sorted(machine.tenant_keys)), *table()):
        result = run_program(machine, program)
        if result.apart is not None:
            machine.rows_apart[program.name] = result.apart
            continue
        machine.programs_run[program.name] += 1
        if not result.passed:
            where = (f"the example row {program.name!r} (specs/examples/), run as a program "
                     "of the machine" if program.row is not None else
                     f"the explicit program {program.name!r} of the class sweep "
                     "(specs/classes.yaml)")
            return FuzzResult(False, result.requirement_id, result.message, result.lines,
                              (f"{where}, step {result.steps_run}",), machine,
                              program_name=program.name, observation=result.observation)
    return None


def _run_test(test: Callable[[], None], machine: type[RecordedFixturesMachine],
              stoppable: bool) -> FuzzResult:
    try:
        test()
    except KeyboardInterrupt:
        if not stoppable:
            raise
        return FuzzResult(True, None, "", (), (), machine, interrupted=True)
    except unittest.SkipTest:
        # Only the reuse phase and nothing saved under this machine's key: nothing to run.
        return FuzzResult(True, None, "", (), (), machine)
    except RequirementViolated as exc:
        notes = tuple(getattr(exc, "__notes__", ()))
        # A step Hypothesis's printer wrapped (a long script) is one line again: it breaks
        # only inside brackets, so the joined line is the same Python.
        program = tuple(re.sub(r"\n\s*", " ", line) for line in notes if _is_program(line))
        narrative = tuple(line for line in notes if not _is_program(line)
                          and not line.startswith(("Falsifying", "Failing", "Explanation",
                                                   "    ")))
        return FuzzResult(False, exc.requirement_id, str(exc), program, narrative, machine,
                          observation=exc.observation)
    return FuzzResult(True, None, "", (), (), machine)


def _seeded(test: Callable[..., None], seed_value: int,
            db: ExampleDatabase | None) -> Callable[..., None]:
    """`@seed`, keeping the database. Hypothesis's `seed` turns the database off (a seeded
    run is meant to repeat, not to learn); a campaign wants both: its own seed per job and
    batch, and one shared database. The settings attribute is the one `seed` itself sets."""
    test = seed(seed_value)(test)
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if db is not None and isinstance(current, settings):
        test._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
            current, database=db)
    return test


def _is_program(line: str) -> bool:
    return line.startswith(("state", "runs_", "evals_", "tenants_"))


def _is_invariant_call(line: str) -> bool:
    return any(f"state.{name}()" in line for name in INVARIANT_CALLS)


# `refsim fuzz` exit codes: a counterexample (a requirement broken) is 1; a run that left
# critical branches unreached (inconclusive: the budget, or what the host offers) is 2.
EXIT_COUNTEREXAMPLE, EXIT_INCONCLUSIVE = 1, 2


def _print_counterexample(requirement_id: str | None, message: str, narrative: Sequence[str],
                          program: Sequence[str], steps: int, out: TextIO,
                          header: Sequence[str] = ()) -> None:
    print(f"COUNTEREXAMPLE for {requirement_id}", file=out)
    print(f"  {message}", file=out)
    print("\nWhat happened:", file=out)
    for line in narrative:
        print(f"  {line}", file=out)
    print(f"\nThe program ({steps} steps), pasteable into a test; it drives the same "
          "target:", file=out)
    for line in header or FuzzTarget().program_header():
        print(f"  {line}", file=out)
    for line in program:
        print(f"  {line}", file=out)


def _secrets(target: FuzzTarget) -> tuple[tuple[str, str], ...]:
    from refsim.check.evidence import redactions
    from refsim.check.observe import KEYS
    return redactions(target.tenant_keys() or dict(KEYS))


def print_exchanges(result: FuzzResult, out: TextIO, target: FuzzTarget) -> None:
    """Under a counterexample: the exchanges of its failing step that show the breach (after
    those that made the runs they name); over HTTP, as curl lines that send them again."""
    if not result.evidence:
        return
    from refsim.check.evidence import curl_lines, reproduce_note
    secrets = _secrets(target)
    print("\nThe exchanges that show it (the failing step's, after those that made the runs "
          "they name):", file=out)
    for e in result.evidence:
        body = " ".join((e.response.text or "").split())[:200]
        print(f"  {e.method} {redact(e.url, secrets)} -> {e.response.status} "
              f"{redact(body, secrets)}", file=out)
    if target.base_url is None:
        return
    chosen = [e for e in result.evidence if e.seq in result.breach]
    print(f"To reproduce over HTTP ({reproduce_note(chosen, result.evidence)}):", file=out)
    for line in curl_lines(result.evidence, secrets):
        print(f"  {line}", file=out)


def write_counterexample_har(result: FuzzResult, directory: Path, target: FuzzTarget) -> Path:
    """`fuzz --trace DIR`: the failing example's every exchange, as HAR 1.2."""
    from refsim.check.evidence import write_har
    return write_har(directory, f"counterexample-{result.requirement_id}", result.exchanges,
                     _secrets(target), f"COUNTEREXAMPLE for {result.requirement_id}: "
                     f"{result.message[:500]}")


def _print_branches(branches: collections.Counter[str], out: TextIO,
                    unoffered: dict[str, str] | None = None) -> int:
    for branch, count in sorted(branches.items()):
        print(f"  {branch:<28} {count}", file=out)
    missing = unreached(branches)
    if not missing:
        return 0
    offered = [b for b in missing if b not in (unoffered or {})]
    print("INCONCLUSIVE: critical branches never reached: " + ", ".join(missing), file=out)
    for branch in missing:
        if branch in (unoffered or {}):
            print(f"  {branch}: the host cannot reach it: {(unoffered or {})[branch]}",
                  file=out)
    if offered:
        print("  the others are within the host's reach: a larger --max-examples or "
              "--steps (or a campaign, --duration) reaches them", file=out)
    return EXIT_INCONCLUSIVE


def sent_over_http(sent: int, steps: int) -> str:
    """What the run really sent over HTTP, per step too ("" in process)."""
    if not sent:
        return ""
    return (f"; {sent} sent over HTTP in all (seam reads, polls and discovery included), "
            f"{sent / max(steps, 1):.1f} per step")


def report(result: FuzzResult, out: TextIO, target: FuzzTarget | None = None) -> int:
    machine = result.machine
    if not result.passed:
        _print_counterexample(result.requirement_id, result.message, result.narrative,
                              result.pasteable, result.steps, out,
                              (target or FuzzTarget()).program_header())
        print_exchanges(result, out, target or FuzzTarget())
        return EXIT_COUNTEREXAMPLE
    offered = machine.offered
    unoffered = offered.unoffered(len(machine.tenant_keys)) if offered is not None else {}
    # "passed" only for a run that passed: one that left a critical branch unreached
    # found no counterexample, and says so, but did not pass (exit 2, below).
    verdict = "passed" if not unreached(machine.branches) else (
        "no counterexample, but inconclusive (below)")
    print(f"{verdict}: {machine.examples_run} example(s), {machine.steps_taken} step(s), "
          f"{machine.requests_made} request(s) by its rules"
          + sent_over_http(machine.http_sent, machine.steps_taken), file=out)
    _print_drawn(machine, out)
    return _print_branches(machine.branches, out, unoffered)


def _print_drawn(machine: type[RecordedFixturesMachine], out: TextIO) -> None:
    """The explicit programs the run began with, and how many members of each class of
    specs/classes.yaml it drew (programs and random steps together)."""
    from refsim.check.classes import CLASS_NAMES, member_names
    rows = example_rows()
    ran = [name for name in machine.programs_run if name in rows]
    if ran or machine.rows_apart:
        print(f"example rows run as programs of the machine, before anything random: "
              f"{len(ran)} of {len(rows)} (specs/examples/); each step's expectations "
              "judged, the machine's invariants after it", file=out)
        apart: dict[str, list[str]] = {}
        for name, why in machine.rows_apart.items():
            if name not in ran:
                apart.setdefault(_reason(why), []).append(name)
        for why, names in sorted(apart.items(), key=lambda item: (-len(item[1]), item[0])):
            print(f"  {len(names)} not run: {why}: " + ", ".join(
                name.removeprefix("refsim.example.0252.") for name in sorted(names)), file=out)
    swept = [(name, count) for name, count in machine.programs_run.items()
             if name not in rows]
    if swept:
        print("explicit programs, before anything random (the class sweep): " + ", ".join(
            f"{name} x{count}" for name, count in swept), file=out)
    print("class members drawn (specs/classes.yaml):", file=out)
    for cls in CLASS_NAMES:
        names = member_names(cls)
        drawn = {n: c for key, c in machine.drawn.items()
                 for n in [key.split(": ", 1)[1]] if key.startswith(cls + ": ")}
        hit = sum(1 for n in names if drawn.get(n))
        print(f"  {cls:<16} {hit}/{len(names)} members, {sum(drawn.values())} draws", file=out)
    from refsim.check.invariants import load_invariants
    print("invariant rows (invariants/invariants.yaml), judged after the steps that bear on "
          "them: findings under the row's requirement, held/checked", file=out)
    for row in load_invariants():
        held = machine.judged_counts[(row.requirement_id, True)]
        checked = held + machine.judged_counts[(row.requirement_id, False)]
        print(f"  {row.id:<40} {held}/{checked}", file=out)


def _reason(why: str) -> str:
    """A row's reason to be left apart, without what names the row alone (its profile)."""
    return re.sub(r"the '[^']*' profile", "a profile", why)


# ------------------------------------------------------------------ shrinking for display

# Hypothesis's bound on the total time it spends shrinking one failure (five minutes),
# kept a module-level name in its engine so that users can monkeypatch it.
_SHRINK_BOUND = "MAX_SHRINKING_SECONDS"
# Where Hypothesis keeps, beside a key's failures, those it knows are not minimal (the
# engine's `secondary_key`: the key, a dot, "secondary").
_SECONDARY = b".secondary"


@contextlib.contextmanager
def shrink_time_limit(seconds: float) -> Iterator[bool]:
    """Hypothesis's bound on shrinking time set to `seconds` inside, restored after. Yields
    whether it could be set: False if this Hypothesis no longer has the name (the shrink
    then runs under Hypothesis's own bound). Process-wide: one shrink at a time per
    process."""
    before = getattr(hypothesis_engine, _SHRINK_BOUND, None)
    if before is None:
        yield False
        return
    setattr(hypothesis_engine, _SHRINK_BOUND, seconds)
    try:
        yield True
    finally:
        setattr(hypothesis_engine, _SHRINK_BOUND, before)


@attrs.frozen
class Shrunk:
    """A machine kill shrunk for display. `found` is the counterexample as the unshrunk
    run found it (the kill rests on it); `shown` the one to display: the shrunk
    counterexample, or `found` itself when shrinking was not asked for or did not end on
    the same requirement id (`note` says why)."""

    found: FuzzResult
    shown: FuzzResult
    budget: float
    seconds: float = 0.0
    complete: bool = False  # the shrinker finished within the budget
    shrunk: bool = False  # `shown` is the shrink run's counterexample
    note: str | None = None


def shrink_for_display(factory: Callable[[], HostClient], found: FuzzResult,
                       database: InMemoryExampleDatabase, *, budget: float, steps: int,
                       seed_value: int | None = None, extended: bool = True,
                       keys: dict[str, str] | None = None) -> Shrunk:
    """Shrink, within `budget` seconds, the counterexample `found` that a no-shrink
    `run_machine(..., database=database)` found and Hypothesis saved in `database` (a fresh
    one, holding that failure only; it is left as it is).

    The failure is replayed from a copy of the database, then shrunk (phases reuse and
    shrink: nothing new generated). Hypothesis does not shrink again a failure it replays
    exactly from its primary corpus (it takes it for one already shrunk), so the copy holds
    it in the secondary corpus instead, where Hypothesis keeps failures known not to be
    minimal. `budget` bounds the shrinker's own time (replaying costs a little more);
    when it runs out, the smallest counterexample so far is shown and `complete` is False.
    Hypothesis's warning about slow shrinking is kept off the terminal. `budget` 0 shrinks
    nothing."""
    if found.passed or budget <= 0:
        return Shrunk(found, found, budget)
    if found.program_name is not None:
        return Shrunk(found, found, budget, 0.0, True, False,
                      f"the explicit program {found.program_name!r}, shown as written")
    saved = InMemoryExampleDatabase()
    for key, values in database.data.items():
        for value in values:
            saved.save(key + _SECONDARY, value)
    reports: list[str] = []
    started = time.perf_counter()
    # Focused on the kill's requirement: a candidate that breaks another one first is no
    # shrink of this kill (Hypothesis would otherwise slip to any smaller failure).
    with shrink_time_limit(budget) as bounded, with_reporter(lambda text: reports.append(
            str(text))), focused_on(found.requirement_id):
        try:
            result: FuzzResult | None = run_machine(
                factory, max_examples=1, steps=steps, seed_value=seed_value,
                extended=extended, keys=keys, database=saved, phases=SHRINK_SAVED)
            raised = None
        except Unsatisfiable:  # every example broke only other requirements: rejected
            result, raised = None, None
        except Exception as exc:  # a different failure than a requirement, or Flaky
            result, raised = None, f"{type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.perf_counter() - started
    # What Hypothesis reports in a run of replaying and shrinking, with the failure's own
    # report kept in its notes, is the warning that the bound ran out ("...spent more than
    # five minutes working to shrink...", whatever the bound).
    ran_out = any("shrink" in text for text in reports)
    note = None if bounded else (f"this Hypothesis has no {_SHRINK_BOUND}: shrunk without "
                                 "the budget")
    if result is None or result.passed or result.requirement_id != found.requirement_id:
        what = (f"raised {raised}" if raised is not None
                else f"found no failure of {found.requirement_id}"
                if result is None or result.passed
                else f"reported {result.requirement_id} instead")
        return Shrunk(found, found, budget, seconds, False, False,
                      f"not shrunk: the shrink run {what}")
    if result.steps > found.steps:
        # Hypothesis orders counterexamples by their choices, not by rule steps: a budget
        # that runs out can leave one simpler by its order and longer to read.
        return Shrunk(found, found, budget, seconds, False, False,
                      f"not shrunk: the shrink ended on {result.steps} step(s)"
                      + (" when the budget ran out" if ran_out else ""))
    return Shrunk(found, result, budget, seconds, not ran_out, True, note)


# ----------------------------------------------------------------------------- campaigns


@attrs.frozen
class FuzzTarget:
    """The host a campaign fuzzes, in a form another process can rebuild: a profile of
    the built-in host, a host of the zoo (`recipe`, which travels by name), or a host over
    HTTP."""

    profile: str = "reference"
    recipe: HostRecipe | None = None
    base_url: str | None = None
    keys: dict[str, str] | None = None
    extended: bool = True

    def factory(self) -> Callable[[], HostClient]:
        from refsim.host import SimHost

        if self.base_url is not None:
            from refsim.wire.httpclient import HttpClient
            client = HttpClient(self.base_url)
            return lambda: client
        if self.recipe is not None:
            recipe = self.recipe
            return lambda: recipe.host()
        from refsim.domain.profile import profile_named
        profile = profile_named(self.profile)
        return lambda: SimHost(seed=0, profile=profile)

    def tenant_keys(self) -> dict[str, str] | None:
        """The keys the machine uses: given, or for a host over HTTP read from
        OPENWOP_API_KEY and OPENWOP_TEST_TENANT_B_API_KEY (None: the built-in tenants)."""
        if self.keys is not None or self.base_url is None:
            return self.keys
        import os
        found = {"acme": os.environ.get("OPENWOP_API_KEY", ""),
                 "globex": os.environ.get("OPENWOP_TEST_TENANT_B_API_KEY", "")}
        return {label: key for label, key in found.items() if key} or None

    def machine(self) -> type[RecordedFixturesMachine]:
        """The machine class over this target: what a printed program runs."""
        return machine_for(self.factory(), extended=self.extended, keys=self.tenant_keys())

    def program_header(self) -> list[str]:
        """The lines a printed program starts with, so that it drives this same target
        (the API keys of a host over HTTP come from the environment, never printed)."""
        lines = ["from refsim.testing.fuzz import FuzzTarget"]
        args = [f"profile={self.profile!r}"] if self.profile != "reference" else []
        if self.base_url is not None:
            lines.append("# API keys: OPENWOP_API_KEY, OPENWOP_TEST_TENANT_B_API_KEY")
            args = [f"base_url={self.base_url!r}"]
        elif self.recipe is not None:
            imported, expression = self.recipe.rebuilt()
            lines.append(imported)
            args = [f"recipe={expression}"]
        if not self.extended:
            args.append("extended=False")
        return [*lines, f"RecordedFixturesMachine = FuzzTarget({', '.join(args)}).machine()"]

    def label(self, steps: int) -> str:
        """What sets this target's entries in a shared database apart: the host, and the
        step count (a replay with fewer steps might not fail, and Hypothesis would delete
        the entry)."""
        return shlex.join(["refsim", "fuzz", *self.options(), "--steps", str(steps)]
                          + ([] if self.extended else ["(counter calls only)"]))

    def database(self, path: str | Path | None, steps: int) -> LabelledDatabase | None:
        """The example database at `path` (a folder or a Redis URL) as this target sees it
        (`label`): targets are kept apart there as in a folder."""
        if path is None:
            return None
        return LabelledDatabase(open_database(path), self.label(steps))

    def options(self) -> list[str]:
        """The `refsim fuzz` options that name this target (keys are never printed)."""
        if self.base_url is not None:
            return ["--base-url", self.base_url]
        if self.recipe is not None:
            return [self.recipe.flag, self.recipe.name]
        return ["--profile", self.profile]


def replay_command(target: FuzzTarget, database: str | Path, steps: int) -> str:
    """The command that replays, from the database, the counterexample a run saved there."""
    words = ["refsim", "fuzz", "--replay", "--database", str(database), "--steps", str(steps),
             *target.options()]
    return shlex.join(words)


@attrs.frozen
class Failure:
    requirement_id: str | None
    message: str
    program: tuple[str, ...]  # pasteable: without the invariant checks
    narrative: tuple[str, ...]
    steps: int
    job: int
    seed: int


@attrs.frozen
class JobOutcome:
    job: int
    seeds: tuple[int, ...]
    examples: int
    steps: int
    requests: int
    branches: dict[str, int]
    failure: Failure | None
    http_sent: int = 0


@attrs.frozen
class CampaignResult:
    jobs: int
    elapsed: float
    outcomes: tuple[JobOutcome, ...]
    first_failure: Failure | None
    interrupted: bool = False  # Ctrl-C: the outcomes are the batches finished by then

    @property
    def branches(self) -> collections.Counter[str]:
        total: collections.Counter[str] = collections.Counter()
        for outcome in self.outcomes:
            total.update(outcome.branches)
        return total

    @property
    def passed(self) -> bool:
        return self.first_failure is None


_STOP: Any = None  # a multiprocessing Event, set when any job finds a counterexample
_DONE: Any = None  # a multiprocessing Queue: each job's outcome so far, after each batch


def _init_job(stop: Any, done: Any = None) -> None:
    global _STOP, _DONE
    _STOP, _DONE = stop, done
    ignore_interrupts()  # the parent decides what Ctrl-C stops


def batch_seed(base_seed: int, job: int, jobs: int, batch: int) -> int:
    """Seeds never repeat between jobs or batches of one campaign."""
    return base_seed + batch * jobs + job


def run_job(target: FuzzTarget, *, job: int, jobs: int, base_seed: int, deadline: float | None,
            max_examples: int, steps: int, database: str | None,
            shrink: bool = True, sweep: bool = True) -> JobOutcome:
    """One process of a campaign: batches of `max_examples`, each with its own seed, until
    the deadline (time.time()) passes, another job has failed, or this one fails. The class
    sweep is the same program whatever the seed: job 0 runs it before its first batch, and
    no other batch runs it again (`sweep=False`: none)."""
    factory = target.factory()
    seeds: list[int] = []
    examples = steps_taken = requests = sent = 0
    branches: collections.Counter[str] = collections.Counter()
    failure = None
    batch = 0
    while True:
        seed_value = batch_seed(base_seed, job, jobs, batch)
        seeds.append(seed_value)
        result = run_machine(factory, max_examples=max_examples, steps=steps,
                             seed_value=seed_value, extended=target.extended,
                             keys=target.tenant_keys(),
                             database=target.database(database, steps), shrink=shrink,
                             programs=sweep and job == 0 and batch == 0)
        machine = result.machine
        examples += machine.examples_run
        steps_taken += machine.steps_taken
        requests += machine.requests_made
        sent += machine.http_sent
        branches.update(machine.branches)
        if not result.passed:
            failure = Failure(result.requirement_id, result.message, result.pasteable,
                              result.narrative, result.steps, job, seed_value)
            if _STOP is not None:
                _STOP.set()
        if _DONE is not None:  # what the parent keeps if the user stops the campaign
            _DONE.put(JobOutcome(job, tuple(seeds), examples, steps_taken, requests,
                                 dict(branches), failure, sent))
        if failure is not None:
            break
        batch += 1
        if deadline is None or time.time() >= deadline or (_STOP is not None
                                                           and _STOP.is_set()):
            break
    return JobOutcome(job, tuple(seeds), examples, steps_taken, requests, dict(branches),
                      failure, sent)


def campaign(target: FuzzTarget, *, jobs: int, duration: float | None, max_examples: int,
             steps: int, base_seed: int, database: str | None,
             shrink: bool = True, progress: Progress | None = None,
             sweep: bool = True) -> CampaignResult:
    """`jobs` processes over one example database, each starting batches until `duration`
    seconds have passed (the batch under way finishes); the first counterexample stops
    every job at its next batch. `shrink=False` reports counterexamples as found.
    `progress` counts seconds of the duration (or batches done, without one). Ctrl-C
    stops every job at once; the result then holds the batches finished by then
    (`interrupted`)."""
    started = time.time()
    deadline = None if duration is None else started + duration
    context = multiprocessing.get_context("spawn")  # no forked threads or locks
    stop, done = context.Event(), context.Queue()
    latest: dict[int, JobOutcome] = {}
    interrupted = False
    pool = context.Pool(processes=jobs, initializer=_init_job, initargs=(stop, done))

    def drain() -> None:
        while True:
            try:
                outcome = done.get_nowait()
            except queue.Empty:
                return
            latest[outcome.job] = outcome
            if progress is not None and duration is None:
                progress.to(sum(len(o.seeds) for o in latest.values()))
    try:
        pending = [pool.apply_async(run_job, (target,), dict(
            job=j, jobs=jobs, base_seed=base_seed, deadline=deadline,
            max_examples=max_examples, steps=steps, database=database, shrink=shrink,
            sweep=sweep))
            for j in range(jobs)]
        while not all(p.ready() for p in pending):
            time.sleep(0.2)
            drain()
            if progress is not None and duration is not None:
                progress.to(min(duration, time.time() - started),
                            f"{sum(o.examples for o in latest.values())} examples")
        for p in pending:
            latest[p.get().job] = p.get()
        pool.close()
    except KeyboardInterrupt:
        interrupted = True
        pool.terminate()
        drain()
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.join()
    outcomes = tuple(sorted(latest.values(), key=lambda o: o.job))
    first = next((o.failure for o in outcomes if o.failure is not None), None)
    return CampaignResult(jobs, time.time() - started, outcomes, first, interrupted)


def report_campaign(result: CampaignResult, out: TextIO, *, target: FuzzTarget,
                    database: str | None, steps: int) -> int:
    examples = sum(o.examples for o in result.outcomes)
    if result.interrupted:
        print(f"PARTIAL: stopped (Ctrl-C) after {result.elapsed:.1f} s; below, the batches "
              "each job had finished by then (a batch under way is lost)", file=out)
    print(f"campaign: {result.jobs} job(s), {result.elapsed:.1f} s, {examples} example(s), "
          f"{sum(o.steps for o in result.outcomes)} step(s), "
          f"{sum(o.requests for o in result.outcomes)} request(s) by its rules"
          + sent_over_http(sum(o.http_sent for o in result.outcomes),
                           sum(o.steps for o in result.outcomes)), file=out)
    for o in result.outcomes:
        verdict = "counterexample" if o.failure is not None else "passed"
        print(f"  job {o.job}: {len(o.seeds)} batch(es), seeds {o.seeds[0]}..{o.seeds[-1]}, "
              f"{o.examples} example(s): {verdict}", file=out)
    print("combined branch counts:", file=out)
    failure = result.first_failure
    if failure is None:
        from refsim.check.observe import surface_of
        from refsim.testing.stateful import Offered
        keys = target.tenant_keys()
        unoffered = Offered(surface_of(target.factory()())).unoffered(
            len(keys) if keys is not None else 2)
        code = _print_branches(result.branches, out, unoffered)
        return EXIT_INTERRUPTED if result.interrupted else code
    _print_branches(result.branches, out)
    print(f"\nfirst counterexample: job {failure.job}, seed {failure.seed}", file=out)
    _print_counterexample(failure.requirement_id, failure.message, failure.narrative,
                          failure.program, failure.steps, out, target.program_header())
    print_reproduction(out, target=target, database=database, steps=steps,
                       seed_value=failure.seed)
    return EXIT_INTERRUPTED if result.interrupted else EXIT_COUNTEREXAMPLE


def print_reproduction(out: TextIO, *, target: FuzzTarget, database: str | None, steps: int,
                       seed_value: int | None) -> None:
    """What reproduces the failure just printed, and how far each promise goes."""
    print("\nTo reproduce it:", file=out)
    print("  - the program above, pasted into a test: always", file=out)
    if database is not None:
        print(f"  - from the example database: {replay_command(target, database, steps)}",
              file=out)
    else:
        print("  - run with --database DIR to keep it in an example database and replay it "
              "from there", file=out)
    if seed_value is not None:
        print(f"  - --seed {seed_value} repeats the search only on this same code (refsim, "
              "Hypothesis and what they import), with no other modules of your own "
              "imported (Hypothesis draws some values from their constants)", file=out)

"""Runs the checker's parts against a host built from a profile and readings."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import attrs

from refsim.check.assume import Reading, build
from refsim.check.findings import Disposition, Row, matches
from refsim.check.observe import KEY_A, KEY_B, TENANT_A, TENANT_B
from refsim.check.scenario import (
    HOST_LEGS,
    LATENCY,
    SCENARIO_ROW,
    ScenarioConfig,
    run_scenario,
)
from refsim.domain.core import Components
from refsim.domain.profile import HostProfile, profile_named
from refsim.host import SimHost
from refsim.wire.client import HostClient

PARTS = ("conformance", "examples", "invariants", "sampled")
# The order `first_fail` runs the parts in (a kill matrix asks only whether a host is
# killed, and by what first). Measured on the zoo's 114 hosts that show on the wire, to each
# one's first kill over HTTP: the report's order sent 79,700 requests (86 CPU-s), this one
# 63,600 (61 CPU-s), the best of the five orders timed; in process 22 CPU-s became 15. The
# example table, the dearest part, comes last: the invariants then run the rows they name
# themselves, which costs less than the table's rows that kill no host.
FIRST_FAIL_ORDER = ("conformance", "sampled", "invariants", "examples")


class HostRecipe(Protocol):
    """A host built another way than the reference one: a faulty or a correct host of the
    zoo (`refsim.zoo`). The checker and the machine build it through this face alone; it
    travels to another process by name."""

    @property
    def name(self) -> str: ...

    @property
    def flag(self) -> str:
        """The command-line option that names it (`--mutant`, `--variant`)."""
        ...

    def host(self, seed: int = 0, profile: HostProfile | None = None) -> SimHost: ...

    def read_as(self, readings: Sequence[Reading], seed: int, profile: HostProfile) -> SimHost:
        """The host under `profile` and `readings` (an `--assume`)."""
        ...

    def rebuilt(self) -> tuple[str, str]:
        """The import and the expression that rebuild it in a printed program."""
        ...


@attrs.frozen
class Target:
    """The built-in host under a profile and readings, or a host of the zoo (`recipe`);
    every check gets a fresh one."""

    profile: str = "reference"
    readings: tuple[Reading, ...] = ()
    seed: int = 0
    base_components: Components | None = None
    recipe: HostRecipe | None = None

    def host(self, profile: str | None = None) -> SimHost:
        """A fresh host: under `profile` when a check pins one (an example row's `profile:`),
        else under the target's own profile, the one the report is labelled with."""
        chosen: HostProfile = profile_named(self.profile if profile is None else profile)
        if self.recipe is not None:
            return self.recipe.read_as(self.readings, self.seed, chosen)
        chosen, components = build(self.readings, chosen, self.base_components)
        return SimHost(seed=self.seed, profile=chosen, components=components)

    @property
    def label(self) -> str:
        extra = "".join(f" --assume {r}" for r in self.readings)
        zoo = f" {self.recipe.flag} {self.recipe.name}" if self.recipe is not None else ""
        return f"refsim:{self.profile}{zoo}{extra}"


def run_parts(target: Target, parts: Sequence[str], prefix: str | None = None,
              client: HostClient | None = None, tenant_b_key: str | None = KEY_B,
              api_key: str = KEY_A, first_fail: bool = False, lanes: int = 1,
              say: Callable[[str], None] | None = None) -> list[Row]:
    """The parts' rows on the built-in host (a fresh one per check), or, with `client`, on
    that one host (over HTTP): every row the wire can witness, the rest listed apart.

    `first_fail`: no row after the first that fails (a kill matrix needs only whether a
    host is killed, and by what first), the parts in `FIRST_FAIL_ORDER`; the latency leg,
    a tenth of a check's requests, then runs last, when nothing else has killed the host.

    `lanes` (with `client`, without `first_fail`): rows side by side, each lane with
    tenants of its own (`refsim.check.lanes`), where the host lets them be minted; `say`
    is told how the rows ran, and why one after another where they could not. In process
    (without `prefix` too), more than one lane lets a forked child take the example table
    while this process runs the rest (`_in_two`), where that is safe."""
    # The caller's keys by tenant label, for a host over HTTP.
    keys = {TENANT_A: api_key, **({TENANT_B: tenant_b_key} if tenant_b_key else {})}
    if client is not None and lanes > 1 and not first_fail:
        from refsim.check.lanes import mint
        minted = mint(client, api_key, lanes, tenant_b_key is not None)
        if isinstance(minted, list):
            if say is not None:
                say(f"{lanes} lanes side by side, each with tenants of its own minted "
                    "through the conformance seam tenants (--lanes 1: one after another)")
            return _side_by_side(target, parts, prefix, client, minted, keys)
        if say is not None:
            say(f"one row after another: {minted}")
    rows: list[Row] = []
    # Example rows judged by the examples part, which an invariant that names them takes as
    # they are (the same row on the same target, not run twice).
    ran: dict[str, Row] = {}
    config = ScenarioConfig(api_key, tenant_b_key)
    first = [r for r in HOST_LEGS if r != LATENCY] if first_fail else None
    if client is not None:
        remote = client
        runners: dict[str, Callable[[], list[Row]]] = {
            "conformance": lambda: run_scenario(remote, config, only=first,
                                                stop_on_fail=first_fail),
            "examples": lambda: _remote_examples(remote, keys, prefix, first_fail),
            "invariants": lambda: _remote_invariants(remote, keys, prefix, ran, first_fail),
            "sampled": lambda: _sampled(lambda: remote, prefix, keys, target.seed, first_fail),
            LATENCY: lambda: run_scenario(remote, config, only=(LATENCY,)),
        }
    else:
        if lanes > 1 and not first_fail and prefix is None:
            split = _in_two(target, parts, config)
            if split is not None:
                return split
        runners = {
            "conformance": lambda: run_scenario(target.host(), config, only=first,
                                                stop_on_fail=first_fail),
            "examples": lambda: _examples(target, prefix, first_fail),
            "invariants": lambda: _invariants(target, prefix, ran, first_fail),
            "sampled": lambda: _sampled(target.host, prefix, None, target.seed, first_fail),
            LATENCY: lambda: run_scenario(target.host(), config, only=(LATENCY,)),
        }
    order = list(parts)
    if first_fail:  # the parts that kill soonest first, the latency leg last
        order = sorted(parts, key=lambda p: FIRST_FAIL_ORDER.index(p)
                       if p in FIRST_FAIL_ORDER else len(FIRST_FAIL_ORDER))
        order += [LATENCY] if "conformance" in parts else []
    for index, part in enumerate(order):
        try:
            found = runners[part]()
        except KeyboardInterrupt:  # Ctrl-C: what the parts before this one judged
            from refsim.progress import Stopped
            raise Stopped(rows, index, len(order)) from None
        if part == "examples":
            ran.update((r.check_id, r) for r in found)
        rows += [r for r in found if matches(prefix, r)]
        if first_fail and any(r.disposition is Disposition.EXECUTED_FAIL for r in rows):
            break
    return rows


def run_like(row: Row, client: HostClient, tenant_b_key: str | None = KEY_B,
             api_key: str = KEY_A) -> list[Row]:
    """The row of `client`'s host that judges what `row` (of another host, or another way
    of judging) judged, and no other: its conformance leg alone, or the example, invariant
    or sampled class whose check id it carries (rows a prefix of that id also names come
    along). Stops at the first that fails. Nothing when `row` names none of these.

    The kill matrix asks its over-HTTP column first what killed the host in process: the
    row that found a breach there usually finds it on the wire, for a fraction of the
    requests that reaching it in `FIRST_FAIL_ORDER` would take."""
    config = ScenarioConfig(api_key, tenant_b_key)
    if row.check_id in HOST_LEGS:  # a leg's check id is its requirement id; an example
        # row or a sampled class filed under a leg's requirement is not that leg
        return run_scenario(client, config, only=(row.check_id,), stop_on_fail=True)
    if row.check_id == row.requirement_id:
        return []  # the shape or the scenario row: no prefix names it apart
    return run_parts(Target(), ("examples", "invariants", "sampled"), prefix=row.check_id,
                     client=client, tenant_b_key=tenant_b_key, api_key=api_key,
                     first_fail=True)


# The share of the example table `_in_two` runs here, before the invariants' checks and
# the sampled classes, while the child runs the rest: what evens out the two processes'
# work on the reference host (the child also pays for sending its exchanges back).
EXAMPLES_HERE = 0.25


def _in_two(target: Target, parts: Sequence[str], config: ScenarioConfig
            ) -> list[Row] | None:
    """`run_parts` in process with most of the example table (about half the work) in a
    forked child and the other parts here at once (`refsim.check.forked`): the rows, and
    the exchanges, one process would give. The table's first rows (`EXAMPLES_HERE`) and
    the invariants' own checks run here; each invariant row takes its examples as they
    ran. None where no child can take the work, or no other part is asked."""
    from refsim.check import forked
    from refsim.check.examples import load_examples, run_examples
    from refsim.check.invariants import run_checks, run_invariants
    from refsim.progress import Stopped
    from refsim.wire.trace import current
    if "examples" not in parts or len(parts) == 1:
        return None
    cut = list(parts).index("examples")
    before, after = parts[:cut], parts[cut + 1:]
    if "invariants" in before or not forked.usable():  # invariants take the examples run
        return None
    here: dict[str, Callable[[], list[Row]]] = {
        "conformance": lambda: run_scenario(target.host(), config),
        "sampled": lambda: _sampled(target.host, None, None, target.seed),
    }
    table = load_examples()
    ahead = round(len(table) * EXAMPLES_HERE)  # the first rows run here, the rest there
    child = forked.Child(lambda: run_examples(target.host, examples=table[ahead:]))
    found: dict[str, list[Row]] = {}
    checked: dict[str, Row] = {}
    try:
        # The parts before the examples first, with no child at work: the conformance
        # legs time the host's answers (the latency leg), and a child beside them would be
        # load on the same CPUs. The child's exchanges go right after those of the
        # examples run here.
        for part in before:
            found[part] = here[part]()
        child.start()
        first = run_examples(target.host, examples=table[:ahead])
        trace = current()
        mid = trace.last if trace is not None else 0
        for part in after:
            if part == "invariants":
                checked = run_checks(target.host)
            else:
                found[part] = here[part]()
        sent = child.wait()
        if sent is None:  # the child gave nothing: its rows run here, after the rest
            found["examples"] = first + run_examples(target.host, examples=table[ahead:])
        else:
            later = forked.adopt(sent, mid)
            moved = max(0, mid - sent.base)
            found.update({part: [forked.shifted(r, later) for r in found[part]]
                          for part in after if part in found},
                         examples=first + [forked.shifted(r, moved) for r in sent.result])
            checked = forked.shifted_all(checked, later)
        if "invariants" in parts:
            ran = {r.check_id: r for r in found["examples"]}
            found["invariants"] = run_invariants(target.host, ran=ran, checked=checked)
    except KeyboardInterrupt:  # Ctrl-C: the rows of the parts judged whole, in order
        child.stop()
        done = next((i for i, part in enumerate(parts) if part not in found), len(parts))
        raise Stopped([r for part in parts[:done] for r in found[part]], done,
                      len(parts)) from None
    except BaseException:
        child.stop()
        raise
    return [r for part in parts for r in found[part]]


def _side_by_side(target: Target, parts: Sequence[str], prefix: str | None,
                  client: HostClient, minted: Sequence[Mapping[str, str]],
                  caller: Mapping[str, str]) -> list[Row]:
    """`run_parts` over HTTP in lanes: each scenario, example, invariant and the sampled
    classes a unit of its own; the invariants after the examples they take as they ran."""
    from concurrent.futures import Future

    from refsim.check.examples import Example, load_examples, run_examples
    from refsim.check.invariants import Invariant, load_invariants, run_invariants
    from refsim.check.lanes import Lanes
    from refsim.check.sampled import run_sampled, wanted_classes
    from refsim.progress import Stopped
    futures: dict[str, list[Future[list[Row]]]] = {}
    noted: set[str] = set()  # sampled rows that say what their lane's keys did not do
    with Lanes(minted) as lanes:
        try:
            def example(e: Example, keys: Mapping[str, str]) -> list[Row]:
                return run_examples(lambda profile: client, examples=[e], keys=keys,
                                    remote=True)

            def sampled(cls: str, keys: Mapping[str, str]) -> list[Row]:
                return run_sampled(lambda: client, prefix, keys=keys, seed=target.seed,
                                   only=(cls,), noted=noted)

            def invariant(inv: Invariant, ran: Mapping[str, Row], keys: Mapping[str, str]
                          ) -> list[Row]:
                return run_invariants(lambda: client, invariants=[inv], keys=keys,
                                      remote=True, ran=ran)
            # The longest units first (the conformance legs, one after another, then each
            # sampled class), so that none of them starts last and runs on alone.
            if "conformance" in parts:
                futures["conformance"] = [lanes.submit(lambda keys: run_scenario(
                    client, ScenarioConfig(keys[TENANT_A], keys.get(TENANT_B),
                                           alone=lanes.floor.alone)))]
            if "sampled" in parts:  # a unit a class, each on its lane's tenants (one red,
                # unjudged or `noted` is drawn again on the caller's: `_again_alone`)
                futures["sampled"] = [lanes.submit(functools.partial(sampled, cls))
                                      for cls in wanted_classes(prefix)]
            if "examples" in parts:
                futures["examples"] = [lanes.submit(functools.partial(example, e))
                                       for e in load_examples() if e.matches(prefix)]
            if "invariants" in parts:
                ran = {r.check_id: r for r in Lanes.gather(futures.get("examples", []))}
                futures["invariants"] = [lanes.submit(functools.partial(invariant, inv, ran))
                                         for inv in load_invariants()
                                         if prefix is None or inv.matches(prefix)]
            found = {part: Lanes.gather(futures[part]) for part in parts if part in futures}
        except KeyboardInterrupt:  # Ctrl-C: the parts whose every row was judged
            done = {part: Lanes.gather(futures[part]) for part in parts
                    if part in futures and all(f.done() and not f.cancelled()
                                               and f.exception() is None
                                               for f in futures[part])}
            raise Stopped(_in_order(done, parts, prefix), len(done), len(parts)) from None
    try:
        _again_alone(found, client, caller, target.seed, noted)
    except KeyboardInterrupt:  # Ctrl-C while judging a red row again: as the lanes left it
        raise Stopped(_in_order(found, parts, prefix), len(found), len(parts)) from None
    return _in_order(found, parts, prefix)


def _in_order(found: Mapping[str, list[Row]], parts: Sequence[str], prefix: str | None
              ) -> list[Row]:
    """The rows of `found`, part by part in the order asked, those `prefix` selects."""
    return [r for part in parts for r in found.get(part, []) if matches(prefix, r)]


def _again_alone(found: dict[str, list[Row]], client: HostClient,
                 caller: Mapping[str, str], seed: int, noted: Collection[str] = ()) -> None:
    """Each row that failed in a lane or was not judged there (blocked, inapplicable) is
    judged again, one after another, on the caller's own tenants, with nothing else in flight
    (the latency leg apart: it had the host alone already); that judgement stands, and
    its exchanges are the row's evidence (curl lines that send them again with the
    caller's keys). A fault that reaches across tenants can show in a row whose lane
    shared the host with others; the row names it only if it shows again on its own. A
    sampled class is drawn again also where its lane's keys did less (`noted`)."""
    from refsim.check.examples import load_examples, run_examples
    from refsim.check.invariants import load_invariants, run_invariants
    from refsim.check.sampled import check_id, run_sampled, wanted_classes
    from refsim.check.scenario import scenario_row
    from refsim.wire.trace import current
    trace = current()

    def again(row: Row) -> bool:
        # Red, or not judged: a check raised under the load, or a lane's keys did less than
        # the caller's would (a seam that erases, resolves, mints or registers for the
        # caller's key alone), and a row judged on less than one after another must not
        # stand. A row the outside cannot judge (in process only) is skipped, not this.
        return row.disposition in (Disposition.EXECUTED_FAIL, Disposition.BLOCKED,
                                   Disposition.INAPPLICABLE)

    def forget(labels: set[str]) -> None:
        if trace is not None:
            trace.drop(labels)
    scenario = found.get("conformance", [])
    # The latency leg had the host alone already: judged twice, a timing fault would get
    # two chances to pass.
    legs = [r.requirement_id for r in scenario
            if again(r) and r.requirement_id in HOST_LEGS and r.requirement_id != LATENCY]
    if legs:
        forget(set(legs))
        rejudged = {r.requirement_id: r for r in run_scenario(
            client, ScenarioConfig(caller[TENANT_A], caller.get(TENANT_B)), only=legs)}
        scenario = [rejudged.get(r.requirement_id, r) for r in scenario]
        found["conformance"] = [scenario_row(scenario) if r.requirement_id == SCENARIO_ROW
                                else r for r in scenario]
    examples = {e.id: e for e in load_examples()}
    for index, row in enumerate(found.get("examples", [])):
        if again(row) and row.check_id in examples:
            forget({row.check_id})
            (found["examples"][index],) = run_examples(
                lambda profile: client, examples=[examples[row.check_id]], keys=caller,
                remote=True)
    ran = {r.check_id: r for r in found.get("examples", [])}
    invariants = {inv.id: inv for inv in load_invariants()}
    for index, row in enumerate(found.get("invariants", [])):
        if again(row) and row.check_id in invariants:
            inv = invariants[row.check_id]
            forget({inv.id, *(name for name in inv.examples if name not in ran)})
            (found["invariants"][index],) = run_invariants(
                lambda: client, invariants=[inv], keys=caller, remote=True, ran=ran)
    for index, row in enumerate(found.get("sampled", [])):
        # A class drawn on a lane's tenants is drawn again with the same seed on the
        # caller's, the host alone, also where it says what it did not ask or make (a
        # judged row, on less than one after another would judge).
        if again(row) or row.check_id in noted:
            forget({row.check_id})
            rows = run_sampled(lambda: client, keys=dict(caller), seed=seed,
                               only=[c for c in wanted_classes() if check_id(c) == row.check_id])
            found["sampled"][index] = next((r for r in rows if r.check_id == row.check_id),
                                           row)


def _examples(target: Target, prefix: str | None, stop_on_fail: bool = False) -> list[Row]:
    from refsim.check.examples import run_examples
    return run_examples(target.host, prefix, stop_on_fail=stop_on_fail)


def _remote_examples(client: HostClient, keys: dict[str, str], prefix: str | None,
                     stop_on_fail: bool = False) -> list[Row]:
    from refsim.check.examples import run_examples
    return run_examples(lambda profile: client, prefix, keys=keys, remote=True,
                        stop_on_fail=stop_on_fail)


def _remote_invariants(client: HostClient, keys: dict[str, str], prefix: str | None,
                       ran: Mapping[str, Row], stop_on_fail: bool = False) -> list[Row]:
    from refsim.check.invariants import run_invariants
    return run_invariants(lambda: client, prefix, keys=keys, remote=True, ran=ran,
                          stop_on_fail=stop_on_fail)


def _sampled(make_host: Callable[[], HostClient], prefix: str | None,
             keys: dict[str, str] | None, seed: int, stop_on_fail: bool = False) -> list[Row]:
    from refsim.check.sampled import run_sampled
    return run_sampled(make_host, prefix, keys=keys, seed=seed, stop_on_fail=stop_on_fail)


def _invariants(target: Target, prefix: str | None, ran: Mapping[str, Row],
                stop_on_fail: bool = False) -> list[Row]:
    from refsim.check.invariants import run_invariants
    return run_invariants(lambda: target.host(), prefix, ran=ran, stop_on_fail=stop_on_fail)


@attrs.frozen
class Change:
    row: Row
    before: Row | None


def changes(before: Sequence[Row], after: Sequence[Row]) -> list[Change]:
    """Rows whose disposition differs between two runs, keyed by requirement and check."""
    old = {(r.requirement_id, r.check_id): r for r in before}
    return [Change(r, old.get((r.requirement_id, r.check_id))) for r in after
            if (r.requirement_id, r.check_id) not in old
            or old[(r.requirement_id, r.check_id)].disposition is not r.disposition]


def explain(readings: Sequence[Reading], found: Sequence[Change]) -> str:
    """Each row a reading changed, once: how its disposition moved, then each failed
    finding with what the checker observed, in words."""
    lines = []
    for reading in readings:
        lines.append(f"Assuming {reading}: {reading.meaning}")
    if not found:
        lines.append("No check changes under this reading.")
    for change in found:
        was = change.before.disposition.value if change.before else "absent"
        row = change.row
        name = row.check_id if row.check_id != row.requirement_id else row.requirement_id
        under = f" ({row.requirement_id})" if name != row.requirement_id else ""
        lines.append(f"  {name}{under}: {was} -> {row.disposition.value}")
        shown: set[str] = set()
        for finding in row.findings:
            if finding.ok or finding.message in shown:
                continue
            shown.add(finding.message)
            lines.append(f"      because {finding.message}")
            observation = finding.observation
            words = None if observation is None or (  # a reason that gives both already
                isinstance(observation, Mapping) and set(observation) <= {"got", "expected"}
            ) else in_words(observation)
            # Said once per row, and only where it adds to the reason.
            if words is not None and words not in shown and not _said(observation, finding.message):
                shown.add(words)
                lines.append(f"        observed: {words}")
        if not row.findings and row.detail:
            lines.append(f"      because {row.detail}")
    return "\n".join(lines)


def _said(observation: object, message: str) -> bool:
    """Whether a reason already carries what the observation in words would add: every run
    id it names (read from the answers' documents, whatever shape the host's ids have)."""
    ids = _runs_named(observation)
    return bool(ids) and all(i in message for i in ids)


def _runs_named(observation: object) -> list[str]:
    """The run ids an observation names, as `in_words` tells them: the run an answer made,
    the runs a run list gained."""
    if not isinstance(observation, Mapping):
        return []
    if "status" in observation:
        body = observation.get("body")
        run = body.get("runId") if isinstance(body, Mapping) else None
        return [run] if isinstance(run, str) else []
    if "new" in observation:
        return [str(v) for v in observation.get("new") or []]
    if set(observation) == {"before", "after"}:
        return []
    answers = [_first_answer(value) for value in observation.values()]
    if not answers or any(a is None for a in answers):  # told as JSON, not as answers
        return []
    return [run for a in answers for run in _runs_named(a)]


def in_words(observation: object, limit: int = 240) -> str:
    """An observation as a sentence: an answer by its status, code, message and the run it
    names; a change of the run list by the runs it gained; anything else as compact JSON."""
    if isinstance(observation, Mapping):
        if "status" in observation:
            return _answer_in_words(observation, limit)
        if "new" in observation:
            new = list(observation.get("new") or [])
            aside = list(observation.get("setAside") or [])
            return (f"the run list gained {', '.join(map(str, new)) or 'nothing'}"
                    + (f" (set aside as the checker's own: {len(aside)})" if aside else ""))
        if set(observation) == {"before", "after"}:
            return f"{observation['before']} before, {observation['after']} after"
        answers = {label: _first_answer(value) for label, value in observation.items()}
        if answers and all(a is not None for a in answers.values()):
            return _clip("; ".join(f"{label}: " + _answer_in_words(a, limit).removeprefix(
                "the host answered ") for label, a in answers.items() if a is not None),
                limit * 2)
    return _clip(json.dumps(observation, sort_keys=True, default=repr), limit)


def _first_answer(value: object) -> Mapping[str, Any] | None:
    """An observed answer (or the first of a list of them), or None."""
    if isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, Mapping) and "status" in value else None


def _answer_in_words(answer: Mapping[str, Any], limit: int) -> str:
    status, body = answer.get("status"), answer.get("body")
    words = f"the host answered {status}"
    if isinstance(body, Mapping):
        if isinstance(body.get("error"), str):
            words += f" {body['error']}"
            if isinstance(body.get("message"), str):
                words += f' ("{body["message"]}")'
        elif isinstance(body.get("runId"), str):
            words += f", a run was made: {body['runId']}"
            if isinstance(body.get("status"), str):
                words += f" ({body['status']})"
        else:
            words += " with " + _clip(json.dumps(body, sort_keys=True, default=repr), limit)
    elif body not in (None, "", b""):
        words += " with " + _clip(str(body), limit)
    return words


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""The example table's rows (specs/examples/) as programs of the machine
(`ExampleRowRules`): `example_step` runs a row's next step on the machine's host and
takes what it made and moved into the model; the rows, loaded once (`example_rows`); and
the host as a row drives it, every exchange kept (`_Watched`).

What the machine does with a row of the table goes here; what a row expects is
`refsim.check.examples`'.
"""

from __future__ import annotations

from typing import Any, cast

import attrs

from refsim.check.examples import Example, RowRun, load_examples
from refsim.check.observe import Unobservable, nonce, share_surface
from refsim.testing.machine.state import WATCHED_KEYS, MachineState
from refsim.testing.machine.verdicts import judged
from refsim.testing.model import ModelRun
from refsim.wire.client import NO_BODY, HostClient
from refsim.wire.response import Response


class ExampleRowRules(MachineState):
    """The example rows as programs, mixed into `RecordedFixturesMachine`."""

    # -- the example table's rows, as programs of the machine

    def row_apart(self, example: Example) -> str | None:
        """Why the example row cannot run on this machine's host (None when it can): the
        row pins a profile of the built-in host, or, over HTTP, needs the simulator's
        inside; the host advertises what the row needs withheld, or not what it requires;
        or the row names a tenant the machine has no key for."""
        if not self.offer.recorded and not example.every_host:
            return "the host does not advertise recordedFixtures"
        if example.profile is not None:
            return (f"it runs on the {example.profile!r} profile of the built-in host, not "
                    "on the host under test")
        if self.inside is None:
            why = example.needs_inside()
            if why is not None:
                return why
        surface = self.offer.surface
        against = example.advertised_against(surface)
        if against:
            return f"the host advertises {', '.join(against)}; the row judges a host without"
        unmet = example.unmet(surface)
        if unmet:
            return f"the host does not advertise {', '.join(unmet)}"
        missing = example.tenants_missing(self.keys)
        if missing:
            return "no API key for tenant " + ", ".join(missing)
        return None

    def example_step(self, row: str) -> None:
        """The next step of the example row `row` (specs/examples/): its action sent to this
        machine's host, its expectations judged as `refsim check` judges them, then the
        machine's invariants (isolation and registered codes on every answer it got, every
        channel of an eval with fixtureRuns it made, the live counters).
        The model takes in what the step made and moved: the row's runs, so that no other
        tenant is shown their ids, and the row's counters, which its own expectations
        judge. The first call starts the row, the call after its last step starts it again.
        A program-only rule (`refsim.testing.programs.table`): not drawn at random, where
        each of its steps would cost an eval's worth of requests."""
        example = example_rows()[row]
        why = self.row_apart(example)
        if why is not None:
            type(self).rows_apart[row] = why
            return
        if row not in self._rows:
            tag = nonce() if self.inside is None else f"m{self._fresh()}"
            self._rows[row] = (RowRun(example, _Watched(self.client), self.inside,
                                      dict(self.keys), tag=tag), 0)
        run, index = self._rows[row]
        watched = cast(_Watched, run.host)
        watched.seen.clear()
        try:
            if index == 0:
                for fixture in sorted(example.fixtures()):
                    run.session("acme").require_fixture(fixture)
            found, go_on = run.step(index)
        except Unobservable as exc:
            del self._rows[row]
            type(self).rows_apart[row] = exc.reason
            self._take_in_row(run, watched.seen)
            return
        for finding in found:
            judged(finding)
        self._take_in_row(run, watched.seen)
        self._count("example:step")
        if go_on and index + 1 < run.length:
            self._rows[row] = (run, index + 1)
            return
        del self._rows[row]
        if go_on:
            type(self).rows_run[row] += 1

    def _take_in_row(self, run: RowRun, seen: list[_Sent]) -> None:
        """What a step of an example row made and moved, taken into the model and judged
        by the machine's invariants (see `example_step`)."""
        tenant_of_key = {key: label for label, key in self.keys.items()}
        for name, run_id in run.runs.items():
            owner = run.owners.get(name)
            if owner in self.keys and run_id not in self.model.runs:
                self._record(ModelRun(run_id, owner, "example", None, terminal=True))
        for sent in seen:
            caller = tenant_of_key.get(sent.api_key or "")
            if caller is None:
                type(self).requests_made += 1
                continue
            self._checked(caller, sent.response)
        for sent in seen:
            caller = tenant_of_key.get(sent.api_key or "")
            body = sent.body
            if (caller is None or sent.method != "POST" or sent.path != "/runs"
                    or not isinstance(body, dict)
                    or not isinstance(body.get("fixtureRuns"), dict)):
                continue
            r = sent.response
            if r.status == 201 and isinstance(r.json, dict) and isinstance(
                    r.json.get("runId"), str) and body.get("mode") is not None:
                eval_id = str(r.json["runId"])
                self._record(ModelRun(eval_id, caller, "example", None, terminal=True,
                                      fixture_runs=dict(body["fixtureRuns"])))
                session = self._session(caller)
                self._judge_wire(self.model.runs[eval_id], session.events(eval_id), session,
                                 modelled=False)
        keys = run.example.live_keys()
        if not keys:
            return
        if self._same_names and self.inside is not None and self.inside.counter_seam():
            for (tenant, key), count in self.inside.live_counters().items():
                if key in keys:
                    self.model.world.counters[(tenant, key)] = count
        watched = sorted(keys.intersection(WATCHED_KEYS))
        self._movable.update(watched)
        for tenant in self.keys:
            for key, got in self._readings(tenant, watched) if watched else ():
                if got is not None:
                    self.model.world.counters[(tenant, key)] = got
                    self._known.setdefault(tenant, {})[key] = got



@attrs.frozen
class _Sent:
    """One request an example row's step sent, and its answer."""

    method: str
    path: str
    api_key: str | None
    body: Any
    response: Response


@attrs.define(eq=False)  # compared by identity: a client, as its discovery is remembered
class _Watched:
    """The machine's host as an example row drives it: every request and answer kept, so
    that the machine's invariants judge them after the step."""

    client: HostClient
    seen: list[_Sent] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        # The host's discovery as its client read it: over HTTP one host answers every
        # example, and each example's rows would otherwise each ask it again.
        share_surface(self, self.client)

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def host(self) -> Any:  # the in-process host, where there is one (`inspector_of`)
        return getattr(self.client, "host", self.client)

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        r = self.client.request(method, path, api_key=api_key, json=json, headers=headers)
        self.seen.append(_Sent(method, path, api_key, None if json is NO_BODY else json, r))
        return r


_TABLE: dict[str, Example] = {}


def example_rows() -> dict[str, Example]:
    """The example rows of specs/examples/, by id (loaded once)."""
    if not _TABLE:
        _TABLE.update((e.id, e) for e in load_examples())
    return _TABLE

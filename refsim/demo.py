"""A short walk through RFC 0252 on the built-in host, printed as it goes."""

from __future__ import annotations

from typing import TextIO

from refsim.domain.agents import RECORDER
from refsim.domain.profile import HostProfile
from refsim.host import SimHost

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"


def _eval(suite: str, fixture_runs: dict[str, str] | None = None) -> dict[str, object]:
    body: dict[str, object] = {"mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    return body


def smoke_run(profile: HostProfile, seed: int, out: TextIO) -> int:
    host = SimHost(seed=seed, profile=profile)

    def counter() -> object:
        r = host.request("GET", "/conformance/seams/eval-counter?key=recorded-fixtures",
                         api_key=KEY_A)
        return r.json.get("count") if r.status == 200 else f"unobservable ({r.status})"

    def summary(run_id: str) -> dict[str, object]:
        path = "/runs/" + run_id.replace("/", "~2F") + "/eval-summary"
        task: dict[str, object] = host.request("GET", path, api_key=KEY_A).json["tasks"][0]
        return task

    failures = 0
    src = host.request("POST", "/runs", api_key=KEY_A,
                       json=_eval("conformance-eval-recorded-source"))
    print(f"source run        {src.status} {src.json.get('runId')}  counter={counter()}", file=out)
    if src.status != 201:
        return 1
    source_id = src.json["runId"]
    for label, suite in (("replay", "conformance-eval-recorded-replay"),
                         ("drift", "conformance-eval-recorded-drift")):
        before = counter()
        r = host.request("POST", "/runs", api_key=KEY_A, json=_eval(suite, {"record": source_id}))
        if r.status != 201:
            print(f"{label:<17} {r.status} {r.json}", file=out)
            failures += 1
            continue
        task = summary(r.json["runId"])
        print(f"{label:<17} {r.status} passed={task['passed']} "
              f"fixtureMissCount={task['fixtureMissCount']} counter {before} -> {counter()}",
              file=out)
    theirs = host.request("POST", "/runs", api_key=KEY_B,
                          json=_eval("conformance-eval-recorded-source"))
    print(f"globex's source   {theirs.status} {theirs.json.get('runId')}", file=out)
    bodies = []
    for label, value in (("unknown id", "acme/run-00000000000000000000"),
                         ("globex's run", str(theirs.json.get("runId")))):
        r = host.request("POST", "/runs", api_key=KEY_A,
                         json=_eval("conformance-eval-recorded-replay", {"record": value}))
        bodies.append((r.status, r.body))
        print(f"{label:<17} {r.status} {r.body.decode()}", file=out)
    alike = len(set(bodies)) == 1
    print(f"the two refusals are {'byte-identical' if alike else 'DIFFERENT'}", file=out)
    return 1 if failures or not alike else 0

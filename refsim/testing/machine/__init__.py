"""The stateful machine's parts, assembled into one class by `refsim.testing.stateful`:
`state` (the shared base: bundles, counts, seams, refusal bookkeeping), the rules by what
they drive (`sources`, `replays`, `refusals`, `owners`, and `table_rows`, the example rows
as programs), `invariants` (the checks after every step), `draws` (the classes of
specs/classes.yaml as strategies), `offered` (what the host offers) and `verdicts` (how a
step fails). A new rule goes in the module of what it drives; a new check after every step
in `invariants`."""

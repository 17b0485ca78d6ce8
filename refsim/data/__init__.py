"""refsim's own data, read from files: where `specs/` and `invariants/` are (`paths`), YAML
read through a parse cache (`yaml_data`), and the registered error codes (`registry_codes`).
The ground tier: it imports nothing else of refsim."""

"""The composition root: the CLI, the configuration, and the assembly of it all.

The only package that knows every part: it reads the configuration, opens the store,
builds each configured platform's adapter (`adapters/`) and a `Bridge` for it, and
runs them in one task group. Everything else in `bridge/` is platform-neutral and
never imports an adapter or a platform SDK (an import-linter contract in
pyproject.toml holds it to that; docs/design.md has the layers).
"""

"""What importing a pure core really loads, beside what import-linter reads.

The "pure-cores" contract in pyproject.toml lists the pure cores and what they may not
import. import-linter follows import statements; it does not see that Python runs a
package's `__init__.py` before any of its modules (importing `bridge.store.records`
runs `bridge/store/__init__.py`). So each pure core is also imported alone, in a fresh
interpreter, and what that loaded is checked against the same list. pydantic loads
some of the standard library's I/O modules for itself when it builds its first model
(socket and threading, through importlib.metadata): those count only when the pure
core loads them beyond what a model of pydantic's own does.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tomllib

from tests.support.paths import REPO

_CONTRACT = "pure-cores"
_BEFORE = "import json, sys\nbefore = set(sys.modules)\n"
_AFTER = "\nprint(json.dumps(sorted(set(sys.modules) - before)))\n"
# A model of pydantic's own, built and used: what pydantic loads, whoever uses it.
_PYDANTIC = """
import pydantic
class Model(pydantic.BaseModel):
    x: int
pydantic.TypeAdapter(Model).validate_json(b'{"x": 1}')
"""


def _contract() -> dict[str, list[str]]:
    with (REPO / "pyproject.toml").open("rb") as file:
        contracts = tomllib.load(file)["tool"]["importlinter"]["contracts"]
    found: dict[str, list[str]] = next(c for c in contracts if c["id"] == _CONTRACT)
    return found


def pure_cores(under: str) -> list[str]:
    """The pure cores the contract lists at or below `under` (a package's name)."""
    return [m for m in _contract()["source_modules"] if m == under or m.startswith(under + ".")]


def _loaded(code: str) -> set[str]:
    """The modules `code` loads, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _BEFORE + code + _AFTER],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return set(json.loads(done.stdout))


@functools.cache
def _pydantics() -> frozenset[str]:
    return frozenset(_loaded(_PYDANTIC))


def forbidden_loads(module: str) -> list[str]:
    """The modules the contract forbids that importing `module` alone loads, beyond
    what pydantic loads for itself."""
    forbidden = _contract()["forbidden_modules"]
    extra = _loaded(f"import {module}") - _pydantics()
    return sorted(m for m in extra if any(m == f or m.startswith(f + ".") for f in forbidden))

"""The bridge's own control commands (/new, /status, /model, …) and their pickers.

`registry` says what a command is and `table` declares each command once (both pure:
the router and the platforms' converters read them); `handling` and `handlers` carry
them out (`run`, `pick`); the handlers live by subject (`session`, `settings`,
`export`) and see the conversation only through the `Target` Protocol.

Python runs this file before any module of the package, so it imports only the pure
parts: `run` and `pick` are taken from `handlers` when first asked for. Better still,
import them from `bridge.controls.handlers` and the table from `bridge.controls.table`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.controls.table import COMMANDS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.controls.handlers import pick, run
    from bridge.controls.target import Target
    from bridge.model import Op


def __getattr__(name: str) -> Callable[[Target, str, str], Awaitable[list[Op]]]:
    """`run` and `pick`, imported from `handlers` on first use (see above)."""
    if name in ("run", "pick"):
        from bridge.controls import handlers

        found: Callable[[Target, str, str], Awaitable[list[Op]]] = getattr(handlers, name)
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "pick", "run"]

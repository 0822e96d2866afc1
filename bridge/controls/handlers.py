"""How the bridge's commands are carried out: `run` (a typed command) and `pick` (a
picker's button), from one table.

`HANDLERS` binds each control command of `table.py` to its handler and its pickers
(by subject in `session`, `sessions`, `settings`, `projects`, …); it is checked
against the table when imported. A press on a picker goes to the picker's own
`pressed`, refused while the agent works when its command is idle-only, as the
command itself is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.controls import (
    grants,
    projects,
    pull_requests,
    schedules,
    session,
    sessions,
    settings,
)
from bridge.controls.export import export
from bridge.controls.files import get
from bridge.controls.handling import Handlers, Handling, Personal
from bridge.controls.table import COMMANDS
from bridge.controls.usage import usage

if TYPE_CHECKING:
    from bridge.controls.handling import Asker, Handler
    from bridge.controls.target import Target
    from bridge.model import Op

BUSY = "The agent is working; /stop it first."


async def _help(target: Target, arg: str) -> list[Op]:
    return target.renderer.notice(COMMANDS.help(), markdown=True)


async def _plan(target: Target, arg: str) -> list[Op]:
    return await target.plans.command(arg)


HANDLERS = Handlers(
    COMMANDS,
    {
        "new": Handling(session.new),
        "status": Handling(session.status),
        "name": Handling(session.name),
        "fork": Handling(session.fork, (session.FORK,)),
        "clone": Handling(session.clone),
        "sessions": Handling(sessions.sessions, (sessions.RESUME,)),
        "export": Handling(export),
        "get": Handling(get),
        "queue": Handling(session.queue),
        "project": Handling(projects.project, (projects.CHOOSE, projects.DONE)),
        "diff": Handling(projects.diff),
        "model": Handling(settings.model, (settings.MODEL,)),
        "thinking": Handling(settings.thinking, (settings.THINKING,)),
        "compact": Handling(session.compact),
        "policy": Handling(settings.policy, (settings.POLICY,)),
        "verbose": Handling(settings.verbose, (settings.VERBOSE,)),
        "commands": Handling(session.commands),
        "grants": Handling(grants.grants, (grants.REVOKE,)),
        "help": Handling(_help),
        "pr": Handling(
            pull_requests.pr, (pull_requests.COMMIT, pull_requests.OPEN, pull_requests.REBASE)
        ),
        "every": Handling(Personal(schedules.every), (schedules.CONFIRM,)),
        "at": Handling(Personal(schedules.at), (schedules.CONFIRM_AT,)),
        "schedules": Handling(Personal(schedules.listing), (schedules.CHANGE,)),
        "tz": Handling(Personal(schedules.tz)),
        "usage": Handling(usage),
        "plan": Handling(_plan),
    },
)


async def run(target: Target, name: str, arg: str, asker: Asker | None = None) -> list[Op]:
    """Carry out control command `name` with `arg` (the rest of the line), asked by
    `asker` (a `Personal` command needs one)."""
    found = HANDLERS.handling(name)
    if found is None:
        return target.renderer.notice(f"Unknown command /{name}. Try /help.")
    command, handling = found
    if command.idle_only and target.busy:
        return target.renderer.notice(BUSY)
    return await _call(handling.handler, target, arg, asker)


async def pick(target: Target, kind: str, value: str, asker: Asker | None = None) -> list[Op]:
    """A button of a picker of `kind` was pressed: what the picker does with `value`.
    A `Personal` picker may raise `NotYours` before it does anything."""
    found = HANDLERS.picker(kind)
    if found is None:
        return target.renderer.notice("That button no longer does anything.")
    command, picker = found
    if command.idle_only and target.busy:
        return target.renderer.notice(BUSY)
    return await _call(picker.pressed, target, value, asker)


def personal(kind: str) -> bool:
    """Whether the picker of `kind` is told who pressed (and may refuse them)."""
    found = HANDLERS.picker(kind)
    return found is not None and isinstance(found[1].pressed, Personal)


async def _call(
    handler: Handler | Personal, target: Target, arg: str, asker: Asker | None
) -> list[Op]:
    if not isinstance(handler, Personal):
        return await handler(target, arg)
    if asker is None:
        return target.renderer.notice("That needs to know who asked; it cannot run here.")
    return await handler.handler(target, arg, asker)

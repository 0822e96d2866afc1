"""The bridge's commands, declared once, and the two ways they are carried out:
`run` (a typed command) and `pick` (a picker's button)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.controls import projects, session, sessions, settings
from bridge.controls.export import export
from bridge.controls.files import get
from bridge.controls.grants import grants
from bridge.controls.registry import Command, Registry

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

BUSY = "The agent is working; /stop it first."


async def _help(target: Target, arg: str) -> list[Op]:
    return target.renderer.notice(COMMANDS.help(), markdown=True)


COMMANDS = Registry(
    [
        Command("stop", "stop the current run", "talk", "stop", aliases=("abort", "cancel")),
        Command("later", "queue a message for after this run", "talk", "later",
                usage="text", aliases=("followup", "follow_up")),
        Command("steer", "steer the current run now", "talk", "steer", usage="text"),
        Command("new", "start a new session", "session", handler=session.new, idle_only=True),
        Command("status", "what the agent is doing", "session", handler=session.status),
        Command("name", "name the session", "session", handler=session.name, usage="<name>"),
        Command("fork", "fork from an earlier message", "session", handler=session.fork,
                idle_only=True),
        Command("clone", "clone the session", "session", handler=session.clone, idle_only=True),
        Command("sessions", "list this conversation's sessions to resume one", "session",
                handler=sessions.sessions, idle_only=True),
        Command("export", "export the session as HTML", "session", handler=export),
        Command("get", "send a file of the workspace", "session", handler=get,
                usage="<path>"),
        Command("queue", "show queued messages", "session", handler=session.queue,
                usage="[clear]"),
        Command("project", "work in a project's git worktree, or finish with it", "session",
                handler=projects.project, usage="[name|done]", idle_only=True),
        Command("diff", "what this conversation changed in its project", "session",
                handler=projects.diff),
        Command("model", "show or change the model", "settings", handler=settings.model,
                usage="[provider/id]"),
        Command("thinking", "show or change the thinking level", "settings",
                handler=settings.thinking, usage="[level]"),
        Command("compact", "compact the session's context", "settings",
                handler=session.compact, usage="[focus]", idle_only=True),
        Command("policy", "what a message does while the agent works", "settings",
                handler=settings.policy, usage="steer|follow_up|ask"),
        Command("verbose", "how tool calls are shown", "settings", handler=settings.verbose,
                usage="all|compact|off"),
        Command("commands", "the agent's own commands (sent as /name)", "settings",
                handler=session.commands),
        Command("grants", "commands and files allowed without asking", "settings",
                handler=grants, usage="[clear]"),
        Command("help", "what the bridge understands", "settings", handler=_help),
    ]
)  # fmt: skip


async def run(target: Target, name: str, arg: str) -> list[Op]:
    """Carry out control command `name` with `arg` (the rest of the line)."""
    command = COMMANDS.find(name)
    if command is None or command.handler is None:
        return target.renderer.notice(f"Unknown command /{name}. Try /help.")
    if command.idle_only and target.busy:
        return target.renderer.notice(BUSY)
    return await command.handler(target, arg)


async def pick(target: Target, kind: str, value: str) -> list[Op]:
    """A picker's button was pressed: the command it belongs to, with the value."""
    if kind == "model":
        return await settings.set_model(target, value)
    if kind == "thinking":
        return await settings.set_thinking(target, value)
    if kind == "fork":
        return target.renderer.notice(BUSY) if target.busy else await session.fork_at(target, value)
    if kind == "sessions":
        return target.renderer.notice(BUSY) if target.busy else await sessions.resume(target, value)
    if kind == "project_done":
        busy = target.renderer.notice(BUSY)
        return busy if target.busy else await projects.decided(target, value)
    return await run(target, kind, value)

"""/sessions: the conversation's session files, newest first, each with [Resume].

The list is read from the session dir (`bridge.controls.session_files`), not asked of the
agent, so it needs no live agent and works for the legacy one too. A button stands
for a file's name, never a path, and the name is checked again when pressed: only
a regular session file directly inside this conversation's session dir is resumed.

Resuming: a live agent that answers commands switches in place (`switch_session`,
0.73.1 and 0.87.1: no respawn through the live-agent cap, and an extension may
still cancel it as it can any switch); its new session file is then adopted as
after /new. Otherwise the file becomes the record's `session_file`, and a live
legacy agent (it knows no `switch_session`) is stopped: the next message starts it
with `--session <file>` (bridge/conversation/agent_lifetime.py `spec`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge.controls.common import MAX_PICKER, data, one_line, picker
from bridge.controls.handling import Picker
from bridge.controls.session_files import listing, read_summary, session_file
from bridge.rpc.commands import SwitchSession

if TYPE_CHECKING:
    from bridge.controls.session_files import SessionFile, Summary
    from bridge.controls.target import Target
    from bridge.model import Op

TITLE_CHARS = 30  # a session's name in the list
PROMPT_CHARS = 40  # its first prompt: 24 entries stay within one message
TITLE = "Sessions of this conversation, newest first:"
NONE_YET = "No saved sessions yet: a session is saved once the agent has answered."
GONE = "⚠️ That session is no longer in this conversation's session folder."
NO_WORKSPACE = "⚠️ That session was started in a workspace that is gone; it cannot be reopened."


async def sessions(target: Target, arg: str) -> list[Op]:
    """List the sessions with a [Resume n] button each."""
    record = target.record
    assert record is not None
    found = await anyio.to_thread.run_sync(listing, Path(record.session_dir), MAX_PICKER)
    if not found:
        return target.renderer.notice(NONE_YET)
    current = _current(record.session_file)
    lines = [entry(i, f, f.name == current) for i, f in enumerate(found, 1)]
    labels = [f"Resume {i}" for i in range(1, len(found) + 1)]
    text = "\n".join([TITLE, *lines])
    return picker(target, RESUME, text, [f.name for f in found], labels)


async def resume(target: Target, name: str) -> list[Op]:
    """A [Resume] button: make the session file `name` the conversation's session."""
    record = target.record
    assert record is not None
    path = await anyio.to_thread.run_sync(session_file, Path(record.session_dir), name)
    summary = await anyio.to_thread.run_sync(read_summary, path) if path else None
    if path is None or summary is None:
        return target.renderer.notice(GONE)
    if summary.cwd and not await anyio.Path(summary.cwd).is_dir():
        # pi would not start on it ("Stored session working directory does not exist").
        return target.renderer.notice(NO_WORKSPACE)
    if name == _current(record.session_file):
        return target.renderer.notice("That is already this conversation's session.")
    agent = target.agent
    if agent is not None and agent.alive and not agent.profile.is_legacy:
        response = await agent.request(SwitchSession(sessionPath=str(path)))
        if data(response.data).get("cancelled"):
            return target.renderer.notice("An extension cancelled the switch.")
        await target.adopt_session(agent)
    else:
        await target.save(session_file=str(path))
        if agent is not None and agent.alive:
            await target.reap()
    return target.renderer.notice(f"▶ Resumed {title(summary)}. Your next message continues it.")


RESUME = Picker("sessions", resume)


def entry(index: int, file: SessionFile, current: bool) -> str:
    """One session in the list: what it is, then when, how long and how costly."""
    summary = file.summary
    mark = "  ◀ current" if current else ""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(file.modified))
    more = "" if summary.complete else "+"
    facts = [when, f"{summary.messages}{more} message{'' if summary.messages == 1 else 's'}"]
    if summary.cost is not None:
        facts.append(f"${summary.cost:.2f}{more}")
    return f"{index}. {title(summary)}{mark}\n    {' · '.join(facts)}"


def title(summary: Summary) -> str:
    """A session as a person knows it: its name, and what it began with."""
    prompt = f"“{one_line(summary.first_prompt, PROMPT_CHARS)}”" if summary.first_prompt else ""
    if summary.name:
        name = one_line(summary.name, TITLE_CHARS)
        return f"{name} — {prompt}" if prompt else name
    return prompt or "(no messages yet)"


def _current(session_file: str | None) -> str | None:
    """The current session's file name (the list holds only the session dir's files)."""
    return Path(session_file).name if session_file else None

"""Commands about the session: /new, /status, /fork, /clone, /name, /compact,
/commands and /queue. Each maps to one or two RPC commands and a notice."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bridge.controls import projects
from bridge.controls.common import MAX_PICKER, data, one_line, picker
from bridge.controls.handling import Picker
from bridge.render.usage import context_of
from bridge.rpc.commands import (
    Clone,
    Compact,
    Fork,
    GetCommands,
    GetForkMessages,
    GetSessionStats,
    NewSession,
    SetSessionName,
)

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

COMPACT_LIMIT = 600.0  # compaction is one LLM call over the whole context


async def new(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    response = await agent.request(NewSession())
    await target.adopt_session(agent)
    if data(response.data).get("cancelled"):
        return target.renderer.notice("An extension cancelled the new session.")
    ops = target.renderer.notice("🆕 New session started.")
    if target.projects.tidy_on_new():  # a new task: its worktree is finished with
        ops += await projects.done(target)
    return ops


async def status(target: Target, arg: str) -> list[Op]:
    """What the agent is doing; without a live agent it says so rather than start one."""
    record, agent = target.record, target.agent
    settings = target.renderer.settings
    lines = [f"policy: {settings.busy_policy} · tools shown: {settings.verbosity}"]
    if agent is None or not agent.alive:
        session = record.session_file if record else None
        lines.insert(0, "💤 No agent running; the next message starts one.")
        lines.append(f"session: {Path(session).name if session else 'new'}")
        return target.renderer.notice("\n".join(lines))
    state = await agent.get_state()
    stats = data((await agent.request(GetSessionStats(), check=False)).data)
    model = data(state.get("model"))
    lines.insert(0, "⏳ working" if agent.state.busy else "✅ idle")
    model_name = f"{model.get('provider', '?')}/{model.get('id', '?')}"
    lines.append(f"model: {model_name} · thinking: {state.get('thinkingLevel', '?')}")
    name = state.get("sessionName") or Path(str(state.get("sessionFile") or "")).name or "?"
    lines.append(f"session: {name} · {state.get('messageCount', '?')} messages")
    tokens = data(stats.get("tokens"))
    if tokens:
        cost = stats.get("cost")
        spent = f" · ${cost:.2f}" if isinstance(cost, int | float) else ""
        lines.append(f"tokens: {tokens.get('total', '?')}{spent}")
    context = context_of(stats)
    if context is not None:
        lines.append(context.line())
    lines.append(f"agent: pid {agent.pid} · {agent.profile.name} protocol")
    return target.renderer.notice("\n".join(lines))


async def compact(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    target.notify("🗜 Compacting the conversation…")
    await agent.request(Compact(customInstructions=arg or None), limit=COMPACT_LIMIT)
    return target.renderer.notice("🗜 Compacted.")


async def fork(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    messages = data((await agent.request(GetForkMessages())).data).get("messages") or []
    points = [m for m in messages if isinstance(m, dict) and m.get("entryId")][-MAX_PICKER:]
    if not points:
        return target.renderer.notice("Nothing to fork from yet.")
    values = [str(m["entryId"]) for m in points]
    labels = [one_line(str(m.get("text", "")), 40) for m in points]
    return picker(target, FORK, "Fork from which message?", values, labels, one_per_row=True)


async def fork_at(target: Target, entry_id: str) -> list[Op]:
    """A fork point was picked."""
    agent = await target.ensure_agent()
    response = await agent.request(Fork(entryId=entry_id))
    await target.adopt_session(agent)
    text = one_line(str(data(response.data).get("text", "")), 200)
    return target.renderer.notice(f"🍴 Forked. The message you forked at was:\n{text}")


FORK = Picker("fork", fork_at)


async def clone(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    await agent.request(Clone())
    await target.adopt_session(agent)
    return target.renderer.notice("📄 Cloned: you are now in a copy of the session.")


async def name(target: Target, arg: str) -> list[Op]:
    if not arg:
        return target.renderer.notice("Use /name <session name>.")
    agent = await target.ensure_agent()
    await agent.request(SetSessionName(name=arg))
    return target.renderer.notice(f"🏷 Session named “{arg}”.")


async def commands(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    found = data((await agent.request(GetCommands())).data).get("commands") or []
    lines = [
        f"/{c.get('name')} — {one_line(str(c.get('description') or c.get('source') or ''), 80)}"
        for c in found
        if isinstance(c, dict)
    ]
    return target.renderer.notice(
        "\n".join(lines) if lines else "The agent has no commands of its own."
    )


async def queue(target: Target, arg: str) -> list[Op]:
    """The waiting messages with their buttons; `clear` withdraws them all."""
    if arg.strip().lower() == "clear":
        return await target.queued.clear()
    return target.queued.listing()

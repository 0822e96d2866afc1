"""The bridge's own control commands (/new, /status, /model, …) and their pickers.

Each command maps to one or two RPC commands and a rendered answer. Pickers
(model, thinking level, fork point) are messages with buttons whose opaque
tokens the conversation keeps in `pickers`; `pick()` carries out the choice.
Commands that need the agent start it (a /status of a conversation with no live
agent says so instead). /export posts a file the agent names, read with the
bridge's rights: only a regular file inside the conversation's session dir or
workspace, within `MAX_EXPORT_BYTES`, is ever posted (`read_export`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import anyio

from bridge.model import Button, Send, Upload, rows
from bridge.render.textbits import clip
from bridge.rpc.commands import (
    ClearQueue,
    Clone,
    Compact,
    ExportHtml,
    Fork,
    GetAvailableModels,
    GetAvailableThinkingLevels,
    GetCommands,
    GetForkMessages,
    GetSessionStats,
    NewSession,
    SetModel,
    SetSessionName,
    SetThinkingLevel,
    ThinkingLevel,
)
from bridge.rpc.errors import RpcError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation import Conversation
    from bridge.model import Op
    from bridge.rpc import AgentClient

HELP = """\
*Talking to the agent*
• a message starts a run; while it runs, a message steers it
• `>> text` or `/later text` — queue for after this run
• `/steer text` — steer now · `/stop` — stop the run
*Session*
`/new` new session · `/status` · `/name <name>` · `/fork` · `/clone` · `/export`
*Settings*
`/model [provider/id]` · `/thinking [level]` · `/compact [focus]`
`/policy steer|follow_up|ask` — what a message does while the agent works
`/verbose all|compact|off` — how tool calls are shown
`/queue [clear]` · `/commands` — the agent's own commands (sent as `/name`)"""

COMPACT_LIMIT = 600.0  # compaction is one LLM call over the whole context
# Read into memory and posted whole; under Telegram's 50 MB for bots, and a session's
# HTML export is a few MB even for long sessions.
MAX_EXPORT_BYTES = 20 * 2**20
NOT_IN_SESSION = "The agent's export is not a file in this conversation's session; not sent."
MAX_PICKER = 24  # buttons in one picker; more would not fit a phone screen
THINKING_LEVELS: tuple[str, ...] = get_args(ThinkingLevel)
POLICIES = ("steer", "follow_up", "ask")
VERBOSITY = ("all", "compact", "off")


async def run(conv: Conversation, name: str, arg: str) -> list[Op]:
    handler = _COMMANDS.get(name)
    if handler is None:
        return conv.renderer.notice(f"Unknown command /{name}. Try /help.")
    return await handler(conv, arg)


async def _help(conv: Conversation, arg: str) -> list[Op]:
    return conv.renderer.notice(HELP, markdown=True)


async def _live(conv: Conversation) -> AgentClient:
    return await conv.ensure_agent()


def _idle_only(conv: Conversation) -> list[Op] | None:
    if conv.busy:
        return conv.renderer.notice("The agent is working; /stop it first.")
    return None


async def _new(conv: Conversation, arg: str) -> list[Op]:
    if (busy := _idle_only(conv)) is not None:
        return busy
    agent = await _live(conv)
    response = await agent.request(NewSession())
    await conv.adopt_session(agent)
    if _data(response.data).get("cancelled"):
        return conv.renderer.notice("An extension cancelled the new session.")
    return conv.renderer.notice("🆕 New session started.")


async def _status(conv: Conversation, arg: str) -> list[Op]:
    record, agent = conv.record, conv.agent
    settings = conv.renderer.settings
    lines = [f"policy: {settings.busy_policy} · tools shown: {settings.verbosity}"]
    if agent is None or not agent.alive:
        session = record.session_file if record else None
        lines.insert(0, "💤 No agent running; the next message starts one.")
        lines.append(f"session: {Path(session).name if session else 'new'}")
        return conv.renderer.notice("\n".join(lines))
    state = await agent.get_state()
    stats = _data((await agent.request(GetSessionStats(), check=False)).data)
    model = _data(state.get("model"))
    lines.insert(0, "⏳ working" if agent.state.busy else "✅ idle")
    model_name = f"{model.get('provider', '?')}/{model.get('id', '?')}"
    lines.append(f"model: {model_name} · thinking: {state.get('thinkingLevel', '?')}")
    name = state.get("sessionName") or Path(str(state.get("sessionFile") or "")).name or "?"
    lines.append(f"session: {name} · {state.get('messageCount', '?')} messages")
    tokens = _data(stats.get("tokens"))
    if tokens:
        cost = stats.get("cost")
        spent = f" · ${cost:.2f}" if isinstance(cost, int | float) else ""
        lines.append(f"tokens: {tokens.get('total', '?')}{spent}")
    lines.append(f"agent: pid {agent.pid} · {agent.profile.name} protocol")
    return conv.renderer.notice("\n".join(lines))


async def _model(conv: Conversation, arg: str) -> list[Op]:
    agent = await _live(conv)
    if arg:
        return await _set_model(conv, agent, arg)
    models = _data((await agent.request(GetAvailableModels())).data).get("models") or []
    choices = [f"{m.get('provider')}/{m.get('id')}" for m in models if isinstance(m, dict)]
    if not choices:
        return conv.renderer.notice("The agent offers no models (is a provider configured?).")
    return _picker(conv, "model", "Pick a model:", choices)


async def _set_model(conv: Conversation, agent: AgentClient, arg: str) -> list[Op]:
    provider, _, model_id = arg.partition("/")
    if not model_id:
        return conv.renderer.notice("Use /model provider/model-id, or /model for a list.")
    await agent.request(SetModel(provider=provider, modelId=model_id))
    await conv.set_settings(conv.renderer.settings.model_copy(update={"model": arg}))
    return conv.renderer.notice(f"🧠 Model: {arg}")


async def _thinking(conv: Conversation, arg: str) -> list[Op]:
    agent = await _live(conv)
    if arg:
        return await _set_thinking(conv, agent, arg.lower())
    levels: list[str] = list(THINKING_LEVELS)
    try:
        data = _data((await agent.request(GetAvailableThinkingLevels())).data)
        levels = [str(level) for level in data.get("levels") or levels]
    except RpcError:
        pass  # 0.7x has no such command: offer every level
    return _picker(conv, "thinking", "Thinking level:", levels)


async def _set_thinking(conv: Conversation, agent: AgentClient, level: str) -> list[Op]:
    if level not in THINKING_LEVELS:
        return conv.renderer.notice(f"Thinking levels: {', '.join(THINKING_LEVELS)}")
    await agent.request(SetThinkingLevel(level=level))  # type: ignore[arg-type]
    await conv.set_settings(conv.renderer.settings.model_copy(update={"thinking": level}))
    return conv.renderer.notice(f"💭 Thinking: {level}")


async def _compact(conv: Conversation, arg: str) -> list[Op]:
    if (busy := _idle_only(conv)) is not None:
        return busy
    agent = await _live(conv)
    conv.notify("🗜 Compacting the conversation…")
    await agent.request(Compact(customInstructions=arg or None), limit=COMPACT_LIMIT)
    return conv.renderer.notice("🗜 Compacted.")


async def _fork(conv: Conversation, arg: str) -> list[Op]:
    if (busy := _idle_only(conv)) is not None:
        return busy
    agent = await _live(conv)
    messages = _data((await agent.request(GetForkMessages())).data).get("messages") or []
    points = [m for m in messages if isinstance(m, dict) and m.get("entryId")][-MAX_PICKER:]
    if not points:
        return conv.renderer.notice("Nothing to fork from yet.")
    labels = [(str(m["entryId"]), _clip(str(m.get("text", "")), 40)) for m in points]
    return _picker(
        conv, "fork", "Fork from which message?", [v for v, _ in labels], [t for _, t in labels]
    )


async def _clone(conv: Conversation, arg: str) -> list[Op]:
    if (busy := _idle_only(conv)) is not None:
        return busy
    agent = await _live(conv)
    await agent.request(Clone())
    await conv.adopt_session(agent)
    return conv.renderer.notice("📄 Cloned: you are now in a copy of the session.")


async def _name(conv: Conversation, arg: str) -> list[Op]:
    if not arg:
        return conv.renderer.notice("Use /name <session name>.")
    agent = await _live(conv)
    await agent.request(SetSessionName(name=arg))
    return conv.renderer.notice(f"🏷 Session named “{arg}”.")


async def _export(conv: Conversation, arg: str) -> list[Op]:
    """The agent writes the export where the bridge asks (its session dir; pi's own
    default is a relative name in its cwd), but its answer names the file: only a
    regular file inside this conversation's session dir or workspace is posted."""
    agent = await _live(conv)
    record = conv.record
    assert record is not None
    session_dir = Path(await anyio.Path(record.session_dir).resolve())
    cwd = Path(await anyio.Path(agent.spec.cwd).resolve())
    stem = Path(record.session_file).stem if record.session_file else "session"
    asked = session_dir / f"pi-session-{stem}.html"
    response = await agent.request(ExportHtml(outputPath=str(asked)))
    answer = str(_data(response.data).get("path") or "")
    try:
        path, data = await anyio.to_thread.run_sync(
            read_export, cwd / answer, (session_dir, cwd), MAX_EXPORT_BYTES
        )
    except ExportRefused as refused:
        return conv.renderer.notice(f"⚠️ {refused}")
    upload = Upload(
        slot=f"export:{conv.s.tokens()}", filename=path.name, data=data, caption="Session export"
    )
    return [upload]


class ExportRefused(Exception):
    """The agent's export answer names nothing the bridge may post; says why."""


def read_export(path: Path, roots: Sequence[Path], cap: int) -> tuple[Path, bytes]:
    """The contents of `path` (relative names taken from the agent's cwd) if it is a
    regular file of at most `cap` bytes inside one of `roots` once links and `..` are
    resolved; the bridge's own files (`/proc/self/environ`, its config) never are."""
    try:
        real = path.resolve(strict=True)
        if not _inside(real, roots):
            raise ExportRefused(NOT_IN_SESSION)
        # No link at the end, and no wait on a FIFO: the agent may swap the file meanwhile.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:
        raise ExportRefused(NOT_IN_SESSION) from exc
    data = b""
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or not _inside(_opened(fd, real), roots):
            raise ExportRefused(NOT_IN_SESSION)
        if status.st_size <= cap:
            with os.fdopen(fd, "rb", closefd=False) as file:
                data = file.read(cap + 1)  # one still growing is cut off here, not read on
    finally:
        os.close(fd)
    if status.st_size > cap or len(data) > cap:
        raise ExportRefused(f"The agent's export is larger than {cap / 2**20:g} MB; not sent.")
    return real, data


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def _opened(fd: int, fallback: Path) -> Path:
    """What `fd` really is: a folder on the way may have become a link after `resolve`."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # no /proc (not Linux): the resolved path is the best we know
        return fallback


async def _commands(conv: Conversation, arg: str) -> list[Op]:
    agent = await _live(conv)
    found = _data((await agent.request(GetCommands())).data).get("commands") or []
    lines = [
        f"/{c.get('name')} — {_clip(str(c.get('description') or c.get('source') or ''), 80)}"
        for c in found
        if isinstance(c, dict)
    ]
    return conv.renderer.notice(
        "\n".join(lines) if lines else "The agent has no commands of its own."
    )


async def _queue(conv: Conversation, arg: str) -> list[Op]:
    agent = conv.agent
    if agent is None or not agent.alive:
        return conv.renderer.notice("Nothing is queued.")
    if arg.strip().lower() == "clear":
        if not agent.profile.clear_queue:
            return conv.renderer.notice("This agent cannot clear its queue.")
        await agent.request(ClearQueue())
        return conv.renderer.notice("🧹 Queue cleared.")
    steering, follow = agent.state.steering, agent.state.follow_up
    if not steering and not follow:
        return conv.renderer.notice("Nothing is queued.")
    lines = [f"➡️ {_clip(t, 80)}" for t in steering] + [f"⏭ {_clip(t, 80)}" for t in follow]
    return conv.renderer.notice("Queued:\n" + "\n".join(lines))


async def _policy(conv: Conversation, arg: str) -> list[Op]:
    if arg not in POLICIES:
        return _picker(conv, "policy", "While the agent works, a message should…", list(POLICIES))
    await conv.set_settings(conv.renderer.settings.model_copy(update={"busy_policy": arg}))
    return conv.renderer.notice(f"While the agent works, messages now {arg.replace('_', ' ')}.")


async def _verbose(conv: Conversation, arg: str) -> list[Op]:
    if arg not in VERBOSITY:
        return _picker(conv, "verbose", "Show tool calls:", list(VERBOSITY))
    await conv.set_settings(conv.renderer.settings.model_copy(update={"verbosity": arg}))
    return conv.renderer.notice(f"Tool calls shown: {arg}.")


def _picker(
    conv: Conversation, kind: str, title: str, values: list[str], labels: list[str] | None = None
) -> list[Op]:
    buttons = []
    for value, label in zip(values[:MAX_PICKER], (labels or values)[:MAX_PICKER], strict=True):
        token = conv.s.tokens()
        conv.pickers[token] = (kind, value)
        buttons.append(Button(_clip(label, 40), token))
    per_row = 1 if kind in ("fork", "model") else conv.s.adapter.limits.max_buttons_per_row
    return [
        Send(slot=f"picker:{kind}:{conv.s.tokens()}", text=title, buttons=rows(buttons, per_row))
    ]


async def pick(conv: Conversation, kind: str, value: str) -> list[Op]:
    """A picker button was pressed."""
    if kind in ("policy", "verbose"):
        return await _COMMANDS[kind](conv, value)
    agent = await _live(conv)
    if kind == "model":
        return await _set_model(conv, agent, value)
    if kind == "thinking":
        return await _set_thinking(conv, agent, value)
    if kind == "fork":
        if (busy := _idle_only(conv)) is not None:
            return busy
        response = await agent.request(Fork(entryId=value))
        await conv.adopt_session(agent)
        text = _clip(str(_data(response.data).get("text", "")), 200)
        return conv.renderer.notice(f"🍴 Forked. The message you forked at was:\n{text}")
    return []


def _data(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clip(text: str, limit: int) -> str:
    """On one line (a picker label, a list entry), then clipped."""
    return clip(" ".join(text.split()), limit)


_COMMANDS: dict[str, Callable[[Conversation, str], Awaitable[list[Op]]]] = {
    "help": _help,
    "new": _new,
    "status": _status,
    "model": _model,
    "thinking": _thinking,
    "compact": _compact,
    "fork": _fork,
    "clone": _clone,
    "name": _name,
    "export": _export,
    "commands": _commands,
    "queue": _queue,
    "policy": _policy,
    "verbose": _verbose,
}

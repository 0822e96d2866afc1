"""A terminal chat with one agent, straight over the RPC client.

Lines typed while the agent works are steered into the run (`>> text` queues a
follow-up instead); `/stop` aborts; dialogs are answered by number. This is the
bridge's smallest front end; the platform adapters add routing and rendering.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio

from bridge.rpc import AgentClient, AgentGone, RpcError, RunEnded, RunStarted
from bridge.rpc.events import (
    AutoRetryStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from bridge.rpc.ui import ConfirmRequest, NotifyRequest, SelectRequest

if TYPE_CHECKING:
    from bridge.rpc import AgentEvent, AgentSpec


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def show(event: AgentEvent) -> None:
    if isinstance(event, MessageUpdate) and event.assistantMessageEvent.type == "text_delta":
        say(event.assistantMessageEvent.delta or "")
    elif isinstance(event, ToolExecutionStart):
        say(f"\n🔧 {event.toolName} {event.args}\n")
    elif isinstance(event, ToolExecutionEnd):
        say("❌ failed\n" if event.isError else "✅ done\n")
    elif isinstance(event, SelectRequest):
        choices = "  ".join(f"[{n}] {o}" for n, o in enumerate(event.options, 1))
        say(f"\n❓ {event.title}\n{choices}\n(answer: !N)\n")
    elif isinstance(event, ConfirmRequest):
        say(f"\n❓ {event.title} {event.message}\n[1] Yes  [2] No  (answer: !N)\n")
    elif isinstance(event, NotifyRequest):
        say(f"\n🔔 {event.message}\n")
    elif isinstance(event, AutoRetryStart):
        say(f"\n↻ retrying {event.attempt}/{event.maxAttempts}: {event.errorMessage}\n")
    elif isinstance(event, RunStarted):
        say("… working\n")
    elif isinstance(event, RunEnded):
        say("\n— done\n> ")
    elif isinstance(event, AgentGone):
        say(f"\nagent stopped (exit {event.returncode})\n{event.stderr_tail[-500:]}\n")


async def answer(agent: AgentClient, line: str) -> None:
    dialogs = list(agent.state.dialogs.values())
    if not dialogs or not line[1:].strip().isdigit():
        say("no dialog is waiting for that answer\n")
        return
    request, pick = dialogs[0].request, int(line[1:].strip())
    if isinstance(request, SelectRequest) and 1 <= pick <= len(request.options):
        await agent.answer_dialog(request.id, value=request.options[pick - 1])
    elif isinstance(request, ConfirmRequest):
        await agent.answer_dialog(request.id, confirmed=pick == 1)
    else:
        await agent.answer_dialog(request.id, cancelled=True)


async def handle(agent: AgentClient, line: str) -> None:
    if line == "/stop":
        await agent.abort()
    elif line.startswith("!"):
        await answer(agent, line)
    elif line.startswith(">>"):
        await agent.follow_up(line[2:].strip())
    elif agent.state.busy:
        await agent.steer(line)
    else:
        await agent.prompt(line)


async def chat(spec: AgentSpec) -> int:
    say(f"starting {' '.join(spec.argv)} in {spec.cwd}\n")
    async with AgentClient(spec) as agent, anyio.create_task_group() as tg:
        say(f"agent ready ({agent.profile.name} protocol). Type a message; /stop aborts.\n> ")

        async def pump() -> None:
            async for event in agent.events:
                show(event)
            tg.cancel_scope.cancel()

        tg.start_soon(pump)
        async for raw in anyio.wrap_file(sys.stdin):
            line = raw.strip()
            if not line:
                continue
            try:
                await handle(agent, line)
            except RpcError as exc:
                say(f"\n⚠️  {exc}\n> ")
        say("\n")
        tg.cancel_scope.cancel()
    return 0

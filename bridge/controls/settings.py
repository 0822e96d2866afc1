"""Commands that change how the conversation works: /model, /thinking, /policy,
/verbose. Without a value each offers a picker; the choice is remembered in the
conversation's settings (and so across restarts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from bridge.controls.common import data, picker
from bridge.controls.handling import Picker
from bridge.model import Verbosity
from bridge.rpc.commands import (
    GetAvailableModels,
    GetAvailableThinkingLevels,
    SetModel,
    SetThinkingLevel,
    ThinkingLevel,
)
from bridge.rpc.errors import RpcError

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op

THINKING_LEVELS: tuple[str, ...] = get_args(ThinkingLevel)
# What a message does while the agent works, as the picker and its answer say it.
POLICIES = {
    "steer": "steer the run",
    "follow_up": "wait for the end of the run",
    "ask": "ask first",
}
VERBOSITY: tuple[str, ...] = get_args(Verbosity)


async def model(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    if arg:
        return await set_model(target, arg)
    models = data((await agent.request(GetAvailableModels())).data).get("models") or []
    choices = [f"{m.get('provider')}/{m.get('id')}" for m in models if isinstance(m, dict)]
    if not choices:
        return target.renderer.notice("The agent offers no models (is a provider configured?).")
    return picker(target, MODEL, "Pick a model:", choices, one_per_row=True)


async def set_model(target: Target, arg: str) -> list[Op]:
    provider, _, model_id = arg.partition("/")
    if not model_id:
        return target.renderer.notice("Use /model provider/model-id, or /model for a list.")
    agent = await target.ensure_agent()
    await agent.request(SetModel(provider=provider, modelId=model_id))
    await target.set_settings(target.renderer.settings.model_copy(update={"model": arg}))
    return target.renderer.notice(f"🧠 Model: {arg}")


async def thinking(target: Target, arg: str) -> list[Op]:
    agent = await target.ensure_agent()
    if arg:
        return await set_thinking(target, arg.lower())
    levels: list[str] = list(THINKING_LEVELS)
    try:
        found = data((await agent.request(GetAvailableThinkingLevels())).data)
        levels = [str(level) for level in found.get("levels") or levels]
    except RpcError:
        pass  # 0.7x has no such command: offer every level
    return picker(target, THINKING, "Thinking level:", levels)


async def set_thinking(target: Target, level: str) -> list[Op]:
    if level not in THINKING_LEVELS:
        return target.renderer.notice(f"Thinking levels: {', '.join(THINKING_LEVELS)}")
    agent = await target.ensure_agent()
    await agent.request(SetThinkingLevel(level=level))  # type: ignore[arg-type]
    await target.set_settings(target.renderer.settings.model_copy(update={"thinking": level}))
    return target.renderer.notice(f"💭 Thinking: {level}")


async def policy(target: Target, arg: str) -> list[Op]:
    if arg not in POLICIES:
        title = "While the agent works, a message should…"
        return picker(target, POLICY, title, list(POLICIES), list(POLICIES.values()))
    await target.set_settings(target.renderer.settings.model_copy(update={"busy_policy": arg}))
    return target.renderer.notice(f"While the agent works, a message will now {POLICIES[arg]}.")


async def verbose(target: Target, arg: str) -> list[Op]:
    if arg not in VERBOSITY:
        return picker(target, VERBOSE, "Show tool calls:", list(VERBOSITY))
    await target.set_settings(target.renderer.settings.model_copy(update={"verbosity": arg}))
    return target.renderer.notice(f"Tool calls shown: {arg}.")


# A picked model or level is set as typed; a picked policy or verbosity is the command's value.
MODEL = Picker("model", set_model)
THINKING = Picker("thinking", set_thinking)
POLICY = Picker("policy", policy)
VERBOSE = Picker("verbose", verbose)

"""Usage and budgets end to end: the real agent against the scripted fake LLM (priced,
tests/support/agents.py `PRICES`), the whole bridge with a recording adapter.

What the chat shows and what the store keeps are checked against what the fake LLM
reported for each answer: /usage is the sum of it; a limit reached refuses a new run
(and an approver's press lifts it for today), stops a running one at its next tool,
and 80 % of a limit is told once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.app.metrics import Metrics
from bridge.spend.limits import Budgets, Limits
from bridge.spend.report import money, tokens
from tests.conftest import require_agent
from tests.support.agents import DEFAULT_VERSION, PRICES
from tests.support.bridge_harness import KEY, OWNER, STRANGER, options, running_bridge
from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from tests.support.agents import AgentHome
    from tests.support.bridge_harness import BridgeHarness
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

STEPS = 24  # tool calls scripted in a long run: more than any budget below lets happen


def bridge_options(home: AgentHome, tmp_path: Path, **kw: object) -> BridgeOptions:
    require_agent(DEFAULT_VERSION)
    return options(tmp_path / "data", home.argv(DEFAULT_VERSION), home.env(), **kw)


def reported(fake_llm: FakeLLM) -> tuple[int, int, float]:
    """Input and output tokens the fake LLM reported over all its answers, and what the
    agent makes of them at the fake model's prices."""
    answered = [r.usage for r in fake_llm.requests if r.status == 200 and r.usage]
    prompt = sum(int(u["prompt_tokens"]) for u in answered)
    completion = sum(int(u["completion_tokens"]) for u in answered)
    cost = (prompt * PRICES["input"] + completion * PRICES["output"]) / 1_000_000
    return prompt, completion, cost


async def spent(chat: BridgeHarness, person: str = OWNER.id) -> float:
    return (await chat.bridge.services.store.usage_totals("person", person, 0)).cost


def long_run(fake_llm: FakeLLM) -> None:
    steps = [
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo step{i}"})]) for i in range(STEPS)
    ]
    fake_llm.add("work", *steps, Reply(text="FINISHED-ALL"))


async def ended(chat: BridgeHarness, runs: int) -> None:
    """Until `runs` runs show their end: every answer of theirs was counted before it
    (the agent's state turns idle as its events are read, before they are handled)."""
    await chat.until(lambda: chat.all_text().count("✅ done") == runs)
    await chat.idle()


def requests_for(fake_llm: FakeLLM, keyword: str) -> int:
    return sum(1 for r in fake_llm.requests if r.rule == keyword)


async def test_usage_shows_the_sums_of_what_the_agent_reported(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    fake_llm.add(
        "list", Reply(tool_calls=[ToolCall("bash", {"command": "echo hi"})]), Reply(text="Listed.")
    )
    async with running_bridge(bridge_options(agent_home, tmp_path)) as chat:
        await chat.say("please list")
        await chat.shown("Listed.")
        await chat.idle()
        await chat.say("hello")
        await ended(chat, 2)
        await chat.say("/usage")
        table = await chat.shown("📊")
        metrics = Metrics()
        metrics.counting("test", chat.bridge)
        scraped = metrics.render()
        totals = await chat.bridge.services.store.usage_totals("conversation", KEY, 0)
    prompt, completion, cost = reported(fake_llm)
    assert len([r for r in fake_llm.requests if r.usage]) == 3  # two answers, then one
    assert (totals.messages, totals.input, totals.output) == (3, prompt, completion)
    assert totals.cost == pytest.approx(cost)
    # Today, this week and this month are the same here, for each of the three subjects.
    lines = table.split("\n")
    for label, figure in (
        ("cost", money(cost)),
        ("in", tokens(prompt)),
        ("out", tokens(completion)),
    ):
        rows = [line.split() for line in lines if line.split()[:1] == [label]]
        assert rows == [[label, figure, figure, figure]] * 3, table
    for subject in ("you (alice)", "this chat", "this conversation"):
        assert subject in lines
    # The metrics count the same spend, each answer once.
    assert f'pi_bridge_spend_tokens_total{{platform="test",kind="input"}} {prompt}' in scraped
    assert f'pi_bridge_spend_tokens_total{{platform="test",kind="output"}} {completion}' in scraped
    dollars = [line for line in scraped.splitlines() if line.startswith("pi_bridge_spend_dollars")]
    assert float(dollars[0].split()[-1]) == pytest.approx(cost)


async def test_a_reached_limit_refuses_a_run_until_an_approver_raises_it(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    budgets = Budgets(person=Limits(daily=0.01), raise_step=1000.0)  # a raise: +$10
    opts = bridge_options(agent_home, tmp_path, budgets=budgets, approvers=frozenset({STRANGER.id}))
    async with running_bridge(opts) as chat:
        await chat.say("first")  # nothing spent yet: it runs, and spends past the limit
        await ended(chat, 1)
        asked = len(fake_llm.requests)
        await chat.say("second")
        refusal = await chat.shown("⛔ Not started")
        await chat.bridge.outbox.flush()
        assert len(fake_llm.requests) == asked  # the agent never saw it
        over = await spent(chat)
        assert f"alice's daily budget is used up: {money(over)} of $0.01 today." in refusal
        assert "An approver can raise today's limit" in refusal
        # Only an approver's press counts; the button stays for them.
        await chat.press("Raise today's limit (+$10.00)", OWNER)
        await chat.until(lambda: any("Only an approver" in a[1] for a in chat.adapter.answers))
        await chat.press("Raise today's limit (+$10.00)", STRANGER)
        await chat.shown("mallory raised today's limit by $10.00")
        await chat.say("third")
        await ended(chat, 2)
        assert len(fake_llm.requests) == asked + 1
        await chat.say("/usage")
        table = await chat.shown("📊")
    assert "(+$10.00 today)" in table
    assert chat.all_text().count("⛔ Not started") == 1


@pytest.mark.parametrize(
    ("budgets", "why"),
    [
        (Budgets(chat=Limits(daily=0.01)), "this chat's daily budget is used up"),
        (Budgets(person=Limits(per_run=0.01)), "this run's budget is used up"),
    ],
    ids=["chat-daily", "per-run"],
)
async def test_a_running_run_stops_at_its_next_tool_once_a_limit_is_reached(
    budgets: Budgets, why: str, fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    long_run(fake_llm)
    async with running_bridge(bridge_options(agent_home, tmp_path, budgets=budgets)) as chat:
        await chat.say("work hard")
        stopped = await chat.shown("⛔ Stopped")
        await chat.idle()
        assert why in stopped
        await chat.shown("⏹ stopped")
    # The first answer spent past the limit; its tool was the boundary. The abort goes
    # at the tool's start: an `echo` may end, and the next request leave, before the
    # agent reads it (seen on a loaded machine), but never a third, nor the run's end.
    assert requests_for(fake_llm, "work") <= 2
    assert "FINISHED-ALL" not in chat.all_text()


async def test_80_percent_of_a_limit_is_told_once_then_the_run_stops_at_the_limit(
    fake_llm: FakeLLM, agent_home: AgentHome, tmp_path: Path
) -> None:
    # What one answer costs, measured first (the fake's prompts are mostly the
    # agent's system prompt): the limit is a dozen of them, so several answers and
    # tools of one run fall between 80 % and the limit.
    async with running_bridge(bridge_options(agent_home, tmp_path)) as chat:
        await chat.say("hello")
        await ended(chat, 1)
        one = await spent(chat)
    long_run(fake_llm)
    budgets = Budgets(person=Limits(daily=round(12 * one, 4)))
    async with running_bridge(bridge_options(agent_home, tmp_path, budgets=budgets)) as chat:
        await chat.say("work hard")
        await chat.shown("⛔ Stopped")
        await chat.idle()
        warnings = [m.text for m in chat.adapter.messages.values() if "⚠️" in m.text]
        assert len(warnings) == 1, chat.all_text()
        assert "alice's daily budget is" in warnings[0]
        assert " % used: " in warnings[0]
        # Checks in the band after the warning said nothing more: the run went on.
        assert requests_for(fake_llm, "work") >= 5
        # A new run is refused now, with no second warning.
        await chat.say("more")
        await chat.shown("⛔ Not started")
    assert len([m for m in chat.adapter.messages.values() if "⚠️" in m.text]) == 1

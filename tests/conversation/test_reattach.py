"""Agents that outlive the bridge (bridge/conversation/hosts.py), end to end with the real agent:
a bridge stops (drained, or cancelled as a SIGKILL leaves it) while a tool runs, the
next one on the same data dir takes the agent back, and the chat goes on in the same
messages, the answer shown once.

One recording platform lives across both bridges, as a chat outlives a restart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.conversation.hosts import alive, stop_all
from bridge.model import ButtonPress, ChatRef, Inbound
from bridge.options import ApprovalOptions
from bridge.platform import TransientError
from bridge.service import Bridge
from bridge.store import open_store
from tests.conftest import require_agent
from tests.support.bridge_harness import (
    CHAT,
    KEY,
    LIMITS,
    OWNER,
    STRANGER,
    WAIT,
    BridgeHarness,
    options,
)
from tests.support.fake_llm import Reply, ToolCall
from tests.support.journeys import tool_results
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.store import Store
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
ANSWER = "Job finished."


@pytest.fixture
def opts(agent_home: AgentHome, tmp_path: Path, fake_llm: FakeLLM) -> BridgeOptions:
    require_agent(VERSION)
    fake_llm.add(
        "slow job",
        Reply(tool_calls=[ToolCall("bash", {"command": "echo early; sleep 4; echo late"})]),
        Reply(text=ANSWER),
    )
    return options(tmp_path / "data", agent_home.argv(VERSION), agent_home.env(), on_stop="detach")


@contextlib.asynccontextmanager
async def stored(opts: BridgeOptions) -> AsyncIterator[Store]:
    store = await open_store("sqlite", opts.data_dir)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await stop_all(store)  # whatever a failed test left running
            await store.aclose()


async def test_a_drained_bridge_leaves_the_run_going_and_the_next_one_shows_its_end(
    opts: BridgeOptions,
) -> None:
    adapter = RecordingAdapter(limits=LIMITS)
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.say("run the slow job")
            await harness.shown("echo early")
        record = await store.get_conversation(KEY)
        assert record is not None
        assert record.host is not None
        assert alive(record.host), "the agent ended with the bridge"
        assert "interrupted" not in harness.all_text()
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.shown(ANSWER)
            await harness.shown("✅ done")
            await harness.idle()
        text = harness.all_text()
    assert text.count(ANSWER) == 1
    assert "interrupted" not in text
    done = [m for m in adapter.messages.values() if "✅ done" in m.text]
    assert len(done) == 1, "the run's end went to a new status message"
    # The run's time counts from its start, before the restart (its tool slept 4 s).
    took = re.search(r"✅ done · ([\d.]+) s", done[0].text)
    assert took is not None, done[0].text
    assert float(took.group(1)) >= 4
    assert "late" in text


async def test_a_question_open_across_a_restart_is_answered_with_its_old_button(
    agent_home: AgentHome, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    require_agent(VERSION)
    fake_llm.add(
        "risky job",
        Reply(tool_calls=[ToolCall("bash", {"command": "sudo reboot || echo spared"})]),
        Reply(text="Risky job handled."),
    )
    opts = options(
        tmp_path / "data",
        agent_home.argv(VERSION),
        agent_home.env(),
        on_stop="detach",
        approvals=ApprovalOptions(mode="dangerous"),
    )
    adapter = RecordingAdapter(limits=LIMITS)
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.say("do the risky job")
            old = await harness.button("⛔ Deny", "Approve this")
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            # Shown again as the run is replayed, in the same message, with new buttons.
            await harness.until(lambda: harness._button("⛔ Deny", "Approve") != old)
            assert len([m for m in adapter.messages.values() if "Approve this" in m.text]) == 1
            # The button from before the restart still answers it.
            press = ButtonPress(old.token, "p-old")
            await bridge.handle(Inbound(KEY, CHAT, OWNER, "e-old", press=press))
            await harness.shown("Risky job handled.")
            await harness.idle()
    assert [r for r in tool_results(fake_llm) if "Denied" in r]
    assert not [r for r in tool_results(fake_llm) if r.strip() == "spared"]  # never ran


async def test_agents_taken_back_are_counted_even_over_the_cap(
    opts: BridgeOptions,
) -> None:
    # One live agent at most, two running when the bridge stops: a bridge that waited
    # for a free slot to take the second back would not start until the first ended.
    opts = dataclasses.replace(opts, max_agents=1)
    other_key, other_chat = "test:2", ChatRef("2")
    adapter = RecordingAdapter(limits=LIMITS)
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.say("run the slow job")
            await harness.shown("echo early")
            # The cap is reached: the second run starts only under a raised cap.
            bridge.supervisor.slots.limit = 2
            await bridge.handle(
                Inbound(
                    other_key, other_chat, STRANGER, "e-2", text="run the slow job", message_id="u2"
                )
            )
            await harness.until(lambda: harness.all_text().count("echo early") >= 2)
        with anyio.fail_after(WAIT):
            async with Bridge(adapter, store, opts) as bridge:
                assert len(bridge.supervisor.slots.live) == 2
                harness = BridgeHarness(bridge, adapter)
                await harness.until(lambda: harness.all_text().count(ANSWER) == 2)


async def test_a_run_shown_to_its_end_is_not_reopened_when_it_is_replayed(
    opts: BridgeOptions, fake_llm: FakeLLM
) -> None:
    """A run's end is shown, but the next run begins before the run's last op (its
    reaction, retried here) went out: the run does not count as shown, and a restart
    replays it. Its status message says "✅ done" and must go on saying so: the
    replayed opening would edit it back to "⏳ working…" with [⏹ Stop] (issue 34)."""
    fake_llm.add("quick job", Reply(text="Quick answer."))
    adapter = RecordingAdapter(limits=LIMITS)
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            adapter.fail_next("react", TransientError("not now"), times=3)  # ≈ 3.5 s
            await harness.say("do the quick job")
            await harness.shown("Quick answer.")
            await harness.shown("✅ done")
            [first] = [m for m in adapter.messages.values() if "✅ done" in m.text]
            asked = adapter.calls_of("react")[0].ref
            await harness.say("run the slow job")
            await harness.shown("echo early")
            record = await store.get_conversation(KEY)
            assert record is not None
            assert record.host is not None
            assert record.host.runs == 0, "the first run counts as shown: nothing to test"
        before = len(adapter.calls)
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.shown(ANSWER)
            await harness.idle()
    later = [c for c in adapter.calls[before:] if c.ref in (first.ref, asked)]
    assert later == [], [(c.kind, c.text, c.buttons) for c in later]
    assert first.text.startswith("✅ done"), first.edits
    assert harness.all_text().count(ANSWER) == 1
    assert harness.all_text().count("Quick answer.") == 1

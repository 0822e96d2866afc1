"""A take-back starts from the snapshot of what the run has shown (bridge/rpc/shown.py,
bridge/conversation/hosts.py), end to end with the real agent and the fake model.

A run shows text, a tool's output, and a second tool that sleeps; once the store holds a
snapshot covering the second tool's first output (and the host, told so, has forgotten
what it covers), the bridge stops and another one on the same data dir takes the agent
back. The chat must end exactly as in the same run with no restart: the same messages,
in the same order, with the same text (durations and figures aside), no tool message
twice, the final answer complete. A bridge that ignored the snapshot would replay only
what the host still holds (no run start, no first tool); one that replayed the snapshot
and the host's records from the wrong point would show records twice.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import anyio
import pytest

from bridge.rpc.shown import Snapshot
from bridge.service import Bridge
from tests.conftest import require_agent
from tests.conversation.test_reattach import stored
from tests.support.bridge_harness import CHAT, KEY, LIMITS, WAIT, BridgeHarness, options
from tests.support.fake_llm import Reply, ToolCall
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from pathlib import Path

    from bridge.options import BridgeOptions
    from bridge.store import Store
    from tests.support.agents import AgentHome
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]

VERSION = "0.87.1"
ASK = "run the snapshot job"
WORDS = " ".join(f"w{n}" for n in range(1, 61))
ANSWER = f"All three steps are done: {WORDS} — the end."
# Their outputs are not in their commands, so seeing them means the tool got that far.
ONE = "printf 'one-%s\\n' out"
TWO = "printf 'two-%s\\n' out; sleep 6; printf 'three-%s\\n' out"


def script(fake_llm: FakeLLM) -> None:
    fake_llm.add(
        "snapshot job",
        Reply(text="Looking first.", tool_calls=[ToolCall("bash", {"command": ONE})]),
        Reply(
            text="Now the long part.",
            tool_calls=[ToolCall("bash", {"command": TWO})],
        ),
        Reply(text=ANSWER, delay=0.01),
    )


def opts_in(folder: Path, agent_home: AgentHome) -> BridgeOptions:
    return options(folder, agent_home.argv(VERSION), agent_home.env(), on_stop="detach")


def chat_of(adapter: RecordingAdapter) -> list[str]:
    """The chat as a reader sees it: each live message's text, in posting order, with
    its figures (durations, tokens, cost) as `#`."""
    return [re.sub(r"\d+(?:[.,]\d+)*", "#", m.text) for m in adapter.live(CHAT)]


async def snapshot_with(store: Store, text: bytes) -> Snapshot:
    with anyio.fail_after(WAIT):
        while True:
            stored_text = await store.get_shown(KEY)
            snapshot = Snapshot.decode(stored_text) if stored_text is not None else None
            if snapshot is not None and any(text in data for _, data in snapshot.records):
                return snapshot
            await anyio.sleep(0.1)


async def test_a_restart_after_a_snapshot_ends_the_chat_as_without_restart(
    agent_home: AgentHome, tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    require_agent(VERSION)
    script(fake_llm)
    # The same run with no restart: what the chat must end as.
    reference = RecordingAdapter(limits=LIMITS)
    async with stored(opts_in(tmp_path / "plain", agent_home)) as store:
        opts = opts_in(tmp_path / "plain", agent_home)
        async with Bridge(reference, store, opts) as bridge:
            harness = BridgeHarness(bridge, reference)
            await harness.say(ASK)
            await harness.shown("the end.")
            await harness.shown("✅ done")
            await harness.idle()
    expected = chat_of(reference)
    assert sum("two-out" in text for text in expected) == 1, expected

    opts = opts_in(tmp_path / "data", agent_home)
    adapter = RecordingAdapter(limits=LIMITS)
    caplog.set_level(logging.INFO, logger="bridge.conversation.hosts")
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.say(ASK)
            await harness.shown("two-out")
            snapshot = await snapshot_with(store, b"two-out")
        record = await store.get_conversation(KEY)
        assert record is not None
        assert record.host is not None
        assert record.host.applied < snapshot.through, "the run had ended: no test"
        assert not any("three-out" in text for text in chat_of(adapter))
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.shown("the end.")
            await harness.shown("✅ done")
            await harness.idle()
    got = chat_of(adapter)
    assert got == expected
    assert any("taken back from a snapshot" in r.getMessage() for r in caplog.records)
    assert ANSWER in adapter.find("the end.").text

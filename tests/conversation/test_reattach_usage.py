"""An agent's answers replayed to the bridge that takes the agent back (after a
restart, on the same sqlite store) are counted once: the run's usage equals what the
fake LLM reported for it, not what the chat was shown twice."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.service import Bridge
from tests.conversation.test_reattach import ANSWER, opts, stored
from tests.support.bridge_harness import KEY, LIMITS, BridgeHarness
from tests.support.recording_adapter import RecordingAdapter

if TYPE_CHECKING:
    from bridge.options import BridgeOptions
    from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.agent]
__all__ = ["opts"]  # the reattach tests' agent and script


async def test_answers_replayed_after_a_restart_are_counted_once(
    opts: BridgeOptions, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter(limits=LIMITS)
    async with stored(opts) as store:
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.say("run the slow job")
            await harness.shown("echo early")  # the first answer is in, its tool runs
            before = await store.usage_totals("conversation", KEY, 0)
        async with Bridge(adapter, store, opts) as bridge:
            harness = BridgeHarness(bridge, adapter)
            await harness.shown(ANSWER)
            await harness.shown("✅ done")
            await harness.idle()
            replayed = bridge.services.stats.spend_tokens["input"]
        after = await store.usage_totals("conversation", KEY, 0)
    reported = [r.usage for r in fake_llm.requests if r.usage]
    assert before.messages == 1
    assert len(reported) == after.messages == 2
    assert after.input == sum(int(u["prompt_tokens"]) for u in reported)
    # The second bridge measured only the answer it had not seen kept.
    assert replayed == int(reported[1]["prompt_tokens"])

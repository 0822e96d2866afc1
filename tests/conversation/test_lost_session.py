"""A session file the record names that is gone is told in the chat, and the agent
starts on a new session (bridge/conversation/agent_lifetime.py, `_tell_lost_session`).

The agent's start is worked out in a worker thread; the notice is told from the event
loop, where the outbox is: told from the thread, it failed the message's handling and
no agent started (seen in bench/pipeline.py, whose stand-ins name files they never
write)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.conversation.room import room, room_options

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

LOST = "history could not be resumed here"


async def test_a_lost_session_file_is_told_and_the_message_still_reaches_a_new_agent(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        record = chat.conversation.record
        assert record is not None
        gone = tmp_path / "gone.jsonl"
        chat.conversation.record = record.model_copy(update={"session_file": str(gone)})
        chat.say("hello")
        await chat.shown(LOST)
        await chat.until(lambda: [c.get("message") for c in chat.got("prompt")] == ["hello"])

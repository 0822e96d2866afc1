"""A conversation's intake (bridge/conversation/intake.py): messages taken in order from
a bounded inbox, their files fetched when their turn comes, each read once more then
because the files make its text.

A conversation of real parts (tests/conversation/room.py); its agent is the stand-in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.conversation.intake import FULL
from bridge.model import Attachment, Inbound
from tests.conversation.room import Room, room, room_options
from tests.support.bridge_harness import CHAT, KEY, OWNER

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

NOTICE = "[A file arrived, saved in your workspace as inbox/notes.txt (5 bytes).]"


async def five_bytes(cap: int) -> bytes:
    return b"notes"


def with_file(chat: Room, caption: str) -> None:
    attachment = Attachment("text/plain", 5, five_bytes, "file", "notes.txt")
    inbound = Inbound(KEY, CHAT, OWNER, "e-file", text=caption, attachments=(attachment,))
    chat.deliver(inbound)


def prompts(chat: Room) -> list[object]:
    return [c.get("message") for c in chat.got("prompt")]


async def test_a_file_whose_caption_is_a_command_reaches_the_agent_as_text_after_its_notice(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path)) as chat:
        with_file(chat, "/verbose off")
        await chat.until(lambda: prompts(chat) == [f"{NOTICE}\n/verbose off"])
        assert chat.conversation.renderer.settings.verbosity != "off"
        assert (chat.options.workspace(KEY) / "inbox" / "notes.txt").read_bytes() == b"notes"


async def test_a_message_past_a_full_inbox_is_refused_and_the_sender_told(
    tmp_path: Path,
) -> None:
    async with room(room_options(tmp_path, inbox_size=1)) as chat:
        taken: list[str] = []
        chat.services.taken = lambda inbound: taken.append(inbound.text)
        chat.say("first")  # waits in the inbox: nothing was taken from it yet
        chat.say("second")
        await chat.shown(FULL)
        assert taken == ["second"]  # refused in the chat: done with, as far as a worker goes
        await chat.until(lambda: prompts(chat) == ["first"])
        await chat.until(lambda: taken == ["second", "first"])

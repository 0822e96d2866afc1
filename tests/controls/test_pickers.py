"""What a picker of the bridge's commands says once a button is pressed: what the person
pressed, in words, never the value the button carries back (a grant's "revoke
command:…", a session's file name, a policy's `follow_up`). Whole bridges with the
recording adapter; none of these pickers needs an agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.store.records import Grant
from tests.controls.test_sessions import AT, saved
from tests.support.bridge_harness import KEY, OWNER, options, running_bridge

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.bridge_harness import BridgeHarness

pytestmark = pytest.mark.anyio

GRANTS = [
    Grant(kind="command", value="rm -rf build", by=OWNER.id, at=AT),
    Grant(kind="file", value="/srv/notes.txt", by=OWNER.id, at=AT),
]

# (command, the picker's title, the button pressed, what the picker says after,
#  what it must not say: the value the button carried back)
CLOSINGS = [
    ("/grants", "Allowed without asking", "🚫 `rm -rf build`", "🚫 Revoked: `rm -rf build`",
     "command:"),
    ("/grants", "Allowed without asking", "🚫 ✏️ /srv/notes.txt",
     "🚫 Revoked: ✏️ /srv/notes.txt", "file:"),
    ("/policy", "a message should", "wait for the end of the run",
     "✓ wait for the end of the run", "follow_up"),
    ("/verbose", "Show tool calls", "compact", "✓ compact", None),
    ("/sessions", "Sessions of this conversation", "Resume 1", "✓ Resume 1", ".jsonl"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "title", "pressed", "closing", "never"), CLOSINGS)
async def test_a_pressed_picker_says_what_was_pressed_in_words(
    tmp_path: Path, command: str, title: str, pressed: str, closing: str, never: str | None
) -> None:
    opts = options(tmp_path / "data", [], {})
    saved(opts, "pi-0.73.1-named.jsonl", AT)  # for /sessions
    async with running_bridge(opts) as harness:
        record = opts.new_record(KEY, OWNER.id, AT).model_copy(update={"grants": GRANTS})
        await harness.bridge.store.put_conversation(record)
        await harness.say(command)
        await harness.press(pressed, contains=title)
        await harness.until(lambda: closed(harness, title) is not None)
    shown = closed(harness, title)
    assert shown is not None
    assert shown.endswith(f"\n\n{closing}")
    assert never is None or never not in shown


def closed(harness: BridgeHarness, title: str) -> str | None:
    """The text of the picker titled `title` once it has lost its buttons (closed)."""
    for message in harness.adapter.messages.values():
        if title in message.text and not message.buttons and "\n\n" in message.text:
            return message.text
    return None

"""The console shows the renderer's Markdown with its line breaks, as chats do
(adapters/console.py `hard_breaks`): /help's lines stay lines."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from adapters.console import ConsoleAdapter, hard_breaks
from bridge.model import ChatRef

HELP = "Talking to the agent\n• a message starts a run\n• /stop — stop the current run"


@pytest.mark.parametrize(
    ("markdown", "kept"),
    [
        pytest.param("one\ntwo", "one  \ntwo", id="lines of a paragraph"),
        pytest.param("one\n\ntwo", "one  \n\ntwo", id="paragraphs"),
        pytest.param("```\na\nb\n```\nafter", "```\na\nb\n```\nafter", id="a fence as it is"),
        pytest.param("last line", "last line", id="one line"),
    ],
)
def test_each_line_break_outside_code_is_a_hard_break(markdown: str, kept: str) -> None:
    assert hard_breaks(markdown) == kept


@pytest.mark.anyio
async def test_help_shows_line_by_line_in_the_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, color_system=None, width=100)
    adapter = ConsoleAdapter(console)
    await adapter.send(ChatRef("console"), HELP, markup="formatted")
    shown = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    assert "Talking to the agent" in shown
    assert "• a message starts a run" in shown
    assert "• /stop — stop the current run" in shown

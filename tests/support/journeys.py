"""Scripted model turns that several end-to-end tests walk, on any platform.

- A steerable run: a prompt naming "slowly" starts a 2 s tool call; a message
  naming STEER-PURPLE while it runs must be steered into that run (the model
  then says "Switched to purple…", never "Done without steering.").
- A long run: a prompt naming `keyword` starts a 30 s tool call, which tests stop or
  kill; the model's next turn ("Should not get here.") must never show.
- An input dialog: the agent runs with the `ask-answer.ts` test extension, which
  opens an input (or editor) dialog before a bash command naming `ask-input`
  (`ask-editor`) and reports the answer back to the model as `answer=<value>`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support.fake_llm import Reply, ToolCall
from tests.support.paths import EXTENSIONS

if TYPE_CHECKING:
    from tests.support.fake_llm import FakeLLM

ASK_ANSWER = EXTENSIONS / "ask-answer.ts"
STEERED = "Switched to purple as you asked."
UNSTEERED = "Done without steering."


def script_steerable_run(llm: FakeLLM) -> None:
    llm.add(
        "slowly",
        Reply(
            text="Working on it.", tool_calls=[ToolCall("bash", {"command": "sleep 2; echo slept"})]
        ),
        Reply(text=UNSTEERED),
    )
    llm.add("STEER-PURPLE", Reply(text=STEERED))


NOT_REACHED = "Should not get here."
LONG_TOOL = Reply(tool_calls=[ToolCall("bash", {"command": "sleep 30; echo late"})])


def script_long_run(llm: FakeLLM, keyword: str) -> None:
    llm.add(keyword, LONG_TOOL, Reply(text=NOT_REACHED))


def requests_with(llm: FakeLLM, text: str) -> int:
    """How many model requests had `text` in their last user message."""
    return sum(1 for r in llm.requests if text in r.last_user_text)


def script_dialog(llm: FakeLLM, keyword: str, then: str, method: str = "input") -> None:
    """A prompt containing `keyword` opens a `method` dialog; once it is answered the
    model says `then`."""
    llm.add(
        keyword,
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo ask-{method}"})]),
        Reply(text=then),
    )


def agent_got(llm: FakeLLM, answer: str) -> bool:
    """Whether the extension's report of the dialog's answer reached the model."""
    return any(f"answer={answer}" in str(m) for r in llm.requests for m in r.messages)


def tool_results(llm: FakeLLM) -> list[str]:
    """The text of every tool result the model was sent, in order (repeats included):
    what a tool printed, or why it was blocked."""
    return [
        str(m.get("content"))
        for r in llm.requests
        for m in r.messages
        if isinstance(m, dict) and m.get("role") == "tool"
    ]

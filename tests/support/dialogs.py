"""The scripted input-dialog journey both platforms' end-to-end tests walk.

The agent runs with the `ask-answer.ts` test extension, which opens an input
(or editor) dialog before a bash command naming `ask-input` (`ask-editor`) and
reports the answer back to the model as `answer=<value>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.fake_llm import Reply, ToolCall

if TYPE_CHECKING:
    from tests.support.fake_llm import FakeLLM

ASK_ANSWER = Path(__file__).parent / "extensions" / "ask-answer.ts"


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

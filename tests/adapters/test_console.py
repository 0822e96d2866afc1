"""The terminal chat: messages still changing stay in a live region, the scrollback gets
each message once, in its final form.

The real renderer makes the ops (a streamed answer, a tool edited twice, a dialog, a
run whose status is deleted), a small carrier hands them to the real adapter the way
the outbox does (an Edit refused as gone is posted anew), and the adapter writes to a
rich Console on a StringIO. In the terminal case that output goes through `Terminal`,
a minimal VT100 screen, so the test reads what a user would scroll back through;
in the pipe case the output itself is the scrollback.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console

from adapters.console import CHAT, LIMITS, SETTLE, ConsoleAdapter
from bridge.model import (
    AnswerPress,
    Button,
    Delete,
    Edit,
    Keyboard,
    MessageRef,
    React,
    Send,
    Upload,
)
from bridge.platform import MessageGone, NotModified
from bridge.render import DialogChoice, Renderer
from bridge.rpc.decode import MalformedRecord, decode_record
from bridge.rpc.framing import OversizedRecord
from bridge.rpc.signals import RunEnded, RunStarted

if TYPE_CHECKING:
    from bridge.model import Inbound, Op
    from bridge.rpc.agent_event import AgentEvent

pytestmark = pytest.mark.anyio

WIDTH, HEIGHT = 70, 20
ANSWER = "I will clean the build directory."
DONE = "Done: the build directory is gone."
OUTPUT = "removed build/a\nremoved build/b"


class Terminal:
    """What a terminal shows for rich's output: text, CR, LF (as CR LF: a tty's onlcr),
    cursor up and down, erase line, cursor shown or hidden. Anything else fails."""

    TOKEN = re.compile(r"\x1b\[(\?25[hl]|\d*[AB]|2K)|\r|\n|[^\x1b\r\n]+")

    def __init__(self) -> None:
        self.lines = [""]
        self.row = 0
        self.col = 0

    def feed(self, data: str) -> None:
        pos = 0
        while pos < len(data):
            match = self.TOKEN.match(data, pos)
            assert match is not None, f"unknown terminal output {data[pos : pos + 12]!r}"
            self._one(match.group(0), match.group(1) or "")
            pos = match.end()

    def _one(self, token: str, code: str) -> None:
        if token == "\n":
            self.row, self.col = self.row + 1, 0
            self.lines += [""] * (self.row + 1 - len(self.lines))
        elif token == "\r":
            self.col = 0
        elif code == "2K":
            self.lines[self.row] = ""
        elif code.endswith(("A", "B")):
            step = int(code[:-1] or 1)
            self.row = max(0, self.row - step) if code.endswith("A") else self.row + step
            self.lines += [""] * (self.row + 1 - len(self.lines))
        elif not code:
            line = self.lines[self.row].ljust(self.col)
            self.lines[self.row] = line[: self.col] + token + line[self.col + len(token) :]
            self.col += len(token)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines).strip("\n")

    def below_the_text(self) -> bool:
        """The cursor is on the line after the last text, with nothing left under it."""
        last = max(i for i, line in enumerate(self.lines) if line.strip())
        return (self.row, self.col) == (last + 1, 0) and not "".join(self.lines[last + 1 :])


class Scene:
    """The real renderer and console adapter, a fake clock, and a carrier between them."""

    def __init__(self, *, terminal: bool, height: int = HEIGHT) -> None:
        self.now = 100.0
        self.buffer = io.StringIO()
        console = Console(
            file=self.buffer,
            force_terminal=terminal,
            force_interactive=terminal,
            color_system=None,
            width=WIDTH,
            height=height,
        )
        self.adapter = ConsoleAdapter(console, clock=lambda: self.now)
        tokens = itertools.count(1)
        self.renderer = Renderer(
            limits=LIMITS, formatter=self.adapter.format, tokens=lambda: f"tok{next(tokens)}"
        )
        self.refs: dict[str, MessageRef] = {}
        self.screen = Terminal() if terminal else None
        self._read = 0

    async def feed(self, *events: AgentEvent, step: float = 0.05) -> None:
        for one in events:
            self.now += step
            await self.carry(self.renderer.apply(one, self.now))

    async def carry(self, ops: list[Op]) -> None:
        """As the outbox carries ops out, in order."""
        adapter = self.adapter
        for op in ops:
            if isinstance(op, Send):
                self.refs[op.slot] = await adapter.send(
                    CHAT, op.text, buttons=op.buttons, force_reply=op.force_reply, silent=op.silent
                )
            elif isinstance(op, Edit):
                try:
                    await adapter.edit(self.refs[op.slot], op.text, buttons=op.buttons)
                except NotModified:
                    pass
                except MessageGone:  # the outbox's fallback: post it anew
                    self.refs[op.slot] = await adapter.send(CHAT, op.text, buttons=op.buttons)
            elif isinstance(op, Delete):
                await adapter.delete(self.refs.pop(op.slot))
            elif isinstance(op, Upload):
                self.refs[op.slot] = await adapter.upload(CHAT, op.filename, op.data)
            elif isinstance(op, AnswerPress):
                await adapter.answer_press(op.press_id, op.text)
            elif isinstance(op, React):
                await adapter.react(CHAT, op.message_id, op.state)

    def typed(self, line: str) -> Inbound | None:
        if self.screen is not None:
            self.buffer.write(line + "\n")  # the terminal's echo of the typed line
        return self.adapter.inbound(line, f"e{self.now}")

    def shown(self) -> str:
        """The screen and scrollback now (terminal), or everything printed (pipe)."""
        output = self.buffer.getvalue()
        if self.screen is None:
            return output
        self.screen.feed(output[self._read :])
        self._read = len(output)
        return self.screen.text()


# --- agent events as the agents write them ---------------------------------------------------


def event(**fields: Any) -> AgentEvent:
    decoded = decode_record(json.dumps(fields).encode())
    assert not isinstance(decoded, MalformedRecord | OversizedRecord), decoded
    return decoded


def assistant(text: str = "", stop: str = "stop") -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {"role": "assistant", "content": content, "stopReason": stop}


def message_start() -> AgentEvent:
    return event(type="message_start", message=assistant(stop="pending"))


def delta(text: str) -> AgentEvent:
    step = {"type": "text_delta", "contentIndex": 0, "delta": text}
    return event(type="message_update", assistantMessageEvent=step)


def message_end(text: str) -> AgentEvent:
    return event(type="message_end", message=assistant(text))


def tool_start(command: str, call: str = "call_1") -> AgentEvent:
    return event(
        type="tool_execution_start", toolCallId=call, toolName="bash", args={"command": command}
    )


def tool_update(output: str, call: str = "call_1") -> AgentEvent:
    result = {"content": [{"type": "text", "text": output}]}
    return event(
        type="tool_execution_update", toolCallId=call, toolName="bash", partialResult=result
    )


def tool_end(output: str, call: str = "call_1") -> AgentEvent:
    result = {"content": [{"type": "text", "text": output}]}
    return event(
        type="tool_execution_end", toolCallId=call, toolName="bash", result=result, isError=False
    )


def confirm(request_id: str, title: str) -> AgentEvent:
    return event(type="extension_ui_request", id=request_id, method="confirm", title=title)


async def a_run_with_a_stream_a_tool_and_a_dialog(scene: Scene) -> None:
    """A streamed answer, a tool edited twice, a dialog answered with `!N`, a second
    answer, the run's end; then a run of an extension command, whose status is deleted."""
    await scene.feed(RunStarted(), event(type="agent_start"), message_start(), delta("I"))
    await scene.feed(delta(ANSWER[1:]), message_end(ANSWER), step=0.6)
    await scene.feed(tool_start("rm -rf build"))
    await scene.feed(tool_update(OUTPUT.split("\n")[0]), tool_update(OUTPUT), step=0.6)
    await scene.feed(tool_end(OUTPUT))
    await scene.feed(confirm("req-1", "Allow rm -rf build?"))
    assert "[!2] Yes  [!3] No" in scene.shown()  # [!1] is the run's Stop
    press = scene.typed("!2")
    assert press is not None
    assert press.press is not None
    choice = scene.renderer.pressed(press.press.token)
    assert isinstance(choice, DialogChoice)
    assert choice.confirmed is True
    await scene.carry(scene.renderer.close_dialog("req-1", "✓ Yes"))
    await scene.feed(message_start(), delta(DONE), message_end(DONE), step=SETTLE)
    await scene.feed(event(type="agent_end", messages=[]), RunEnded())
    await scene.feed(RunStarted(), RunEnded())  # no agent loop: the status is deleted


def assert_each_final_text_once(transcript: str) -> None:
    assert transcript.count(ANSWER) == 1
    assert "I" not in transcript.splitlines()  # no partial line of the stream
    assert transcript.count("removed build/a") == 1  # the tool's output, once
    assert transcript.count("✅ bash  `rm -rf build`") == 1
    assert "🔧" not in transcript  # the running tool's form never reached the scrollback
    assert transcript.count("✓ Yes") == 1
    assert transcript.count(DONE) == 1
    assert transcript.count("✅ done") == 1
    assert "⏳ working" not in transcript  # neither the live status nor the deleted one
    order = [ANSWER, "✅ bash", "✓ Yes", DONE, "✅ done"]
    assert [transcript.index(text) for text in order] == sorted(
        transcript.index(text) for text in order
    )


# --- the terminal -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def a_capable_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich writes no cursor codes where TERM says the terminal cannot take them."""
    monkeypatch.setenv("TERM", "xterm-256color")


async def test_in_a_terminal_the_scrollback_holds_each_message_once_in_its_final_form() -> None:
    scene = Scene(terminal=True)
    await a_run_with_a_stream_a_tool_and_a_dialog(scene)
    scene.adapter.close()
    transcript = scene.shown()
    assert_each_final_text_once(transcript)
    assert transcript.count("!2") == 1  # the typed line, moved above the live region
    assert "[!" not in transcript  # final forms have no buttons left
    assert "\x1b[1A" in scene.buffer.getvalue()  # it did redraw in place
    assert scene.screen is not None
    assert scene.screen.below_the_text()  # the live region is gone, blank lines and all


async def test_a_streamed_answer_is_redrawn_in_place_while_it_grows() -> None:
    scene = Scene(terminal=True)
    await scene.feed(RunStarted(), event(type="agent_start"), message_start(), delta("I"))
    assert scene.shown().splitlines()[-4:] == ["I", "", "⏳ working…", "[!1] ⏹ Stop"]
    await scene.feed(delta(" will clean"), step=0.6)
    await scene.feed(delta(" the build directory."), step=0.6)
    lines = scene.shown().splitlines()
    assert lines.count(ANSWER) == 1
    assert "I" not in lines
    assert "I will clean" not in lines
    assert lines[-2:] == ["⏳ working…", "[!1] ⏹ Stop"]


async def test_a_live_region_taller_than_the_screen_shows_its_end_and_prints_all() -> None:
    scene = Scene(terminal=True, height=10)
    long = "\n".join(f"line {n}" for n in range(30))
    await scene.feed(RunStarted(), event(type="agent_start"), message_start(), delta(long))
    screen = scene.shown().splitlines()
    assert "line 29" in screen
    assert "line 0" not in screen
    assert any("more lines above" in line for line in screen)
    await scene.feed(message_end(long), event(type="agent_end", messages=[]), RunEnded())
    transcript = scene.shown().splitlines()
    assert [transcript.count(f"line {n}") for n in range(30)] == [1] * 30
    assert not any("more lines above" in line for line in transcript)


# --- pipes, files, CI ---------------------------------------------------------------------------


async def test_without_a_terminal_each_message_is_printed_once_when_final() -> None:
    scene = Scene(terminal=False)
    await a_run_with_a_stream_a_tool_and_a_dialog(scene)
    output = scene.shown()
    assert "\x1b" not in output  # no cursor movement, no colour
    assert_each_final_text_once(output)
    # The question is shown when asked, with its choices, so it can be answered.
    asked = output.index("[!2] Yes  [!3] No")
    assert output.index("Allow rm -rf build?") < asked < output.index("✓ Yes")


async def test_a_long_run_prints_what_is_done_before_the_run_ends() -> None:
    scene = Scene(terminal=False)
    await scene.feed(RunStarted(), event(type="agent_start"))
    await scene.feed(message_start(), delta(ANSWER), message_end(ANSWER))
    await scene.feed(tool_start("make"), tool_end("built"))
    await scene.feed(message_start(), delta("Next I"), step=SETTLE)
    output = scene.shown()
    assert output.count(ANSWER) == 1  # a newer answer began: this one is final
    assert "make" not in output  # no newer tool yet: it might still change
    assert "Next I" not in output
    await scene.feed(delta(" test."), message_end("Next I test."), step=0.6)
    await scene.feed(event(type="agent_end", messages=[]), RunEnded())
    output = scene.shown()
    assert output.count("✅ bash  `make`") == output.count("Next I test.") == 1
    assert output.index(ANSWER) < output.index("`make`") < output.index("Next I test.")


async def test_an_edit_of_a_printed_message_is_refused_as_gone_and_posted_anew() -> None:
    scene = Scene(terminal=False)
    await scene.carry([Send("compaction:1", "🗜 compacting the context…", silent=True)])
    assert "compacting" in scene.shown()  # outside a run: final at once
    with pytest.raises(MessageGone):
        await scene.adapter.edit(scene.refs["compaction:1"], "🗜 context compacted")
    await scene.carry([Edit("compaction:1", "🗜 context compacted")])
    output = scene.shown()
    assert output.count("compacting the context") == output.count("context compacted") == 1


async def test_a_message_deleted_while_live_is_never_printed() -> None:
    scene = Scene(terminal=False)
    stop = keyboard(("⏹ Stop", "tok1"))
    status = await scene.adapter.send(CHAT, "⏳ working…", buttons=stop, silent=True)
    draft = await scene.adapter.send(CHAT, "a draft")
    await scene.adapter.delete(draft)
    await scene.adapter.edit(status, "✅ done")  # the run's end: everything is final
    output = scene.shown()
    assert "a draft" not in output
    assert output.count("✅ done") == 1
    with pytest.raises(MessageGone):
        await scene.adapter.edit(draft, "a draft, edited")


# --- typed lines ---------------------------------------------------------------------------------


async def test_numbered_choices_press_buttons_and_bang_a_answers_the_reply_prompt() -> None:
    scene = Scene(terminal=False)
    await scene.feed(RunStarted(), event(type="agent_start"))
    await scene.feed(event(type="extension_ui_request", id="req-2", method="input", title="Name?"))
    answer = scene.typed("!2")  # [!1] is Stop; [!2] ✍️ Answer, [!3] ✖ Cancel
    assert answer is not None
    assert answer.press is not None
    choice = scene.renderer.pressed(answer.press.token)
    assert isinstance(choice, DialogChoice)
    assert (choice.request_id, choice.label) == ("req-2", "Answer")
    await scene.carry(scene.renderer.ask_reply("req-2", "console"))
    assert "(answer with: !a your text)" in scene.shown()
    reply = scene.typed("!a Ada")
    assert reply is not None
    assert (reply.text, reply.reply_to) == ("Ada", scene.refs["reply:req-2"].message_id)
    assert scene.typed("!9") is None
    assert "no such choice" in scene.shown()
    hello = scene.typed("hello")
    assert hello is not None
    assert (hello.text, hello.press) == ("hello", None)


async def test_bang_a_without_a_question_waiting_says_so() -> None:
    scene = Scene(terminal=False)
    assert scene.typed("!a maybe") is None
    assert "no question is waiting for a reply" in scene.shown()


async def test_no_color_keeps_the_choices_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = {}
    for no_color in ("", "1"):
        monkeypatch.delenv("NO_COLOR", raising=False)
        if no_color:
            monkeypatch.setenv("NO_COLOR", no_color)
        buffer = io.StringIO()
        adapter = ConsoleAdapter(Console(file=buffer, force_terminal=True, width=WIDTH))
        await adapter.send(CHAT, "Allow?", buttons=keyboard(("Yes", "tok1")))
        adapter.close()
        outputs[no_color] = buffer.getvalue()
    assert "36m" in outputs[""]  # the choice numbers are cyan
    assert "36m" not in outputs["1"]
    assert "[!1]" in outputs["1"]


def keyboard(*buttons: tuple[str, str]) -> Keyboard:
    return (tuple(Button(label, token) for label, token in buttons),)

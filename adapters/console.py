"""The terminal adapter: the whole bridge (router, renderer, outbox) in a terminal.

The renderer edits its messages in place (a streamed answer, a tool's output, the
run's status); a terminal's scrollback cannot change, so messages live in two
places. While a message may still change it is shown in a live region at the
bottom of the screen (`rich.live.Live`), redrawn on every edit; once it is final it
is printed above that region, once, and leaves it. Final means:

- a message with buttons, or asking for a reply, waits for the user: it stays
  live until an edit takes the question away. A silent one with buttons is a
  run's status ([⏹ Stop]): while one is live, a run is;
- outside a run every other message is final at once (nothing streams there);
- in a run, a message is final once a newer message of its kind (progress, sent
  silently: tools; or not: answers, notices) was sent after it and it has not
  changed for `SETTLE` s: the renderer starts the next assistant message or the
  next tool only after the previous one ended. This keeps the live region to what
  is still changing; the rest of the run is final when its status loses [⏹ Stop];
- a message deleted while live is never printed; an upload is final at once.

Final messages are printed in the order they were sent (one still changing holds
back the newer ones; questions hold back nothing), a run's status after the rest
of its run. An edit of a message already printed raises `MessageGone`: the outbox
then posts it anew (in practice: a status that learns why it was interrupted, the
end of a compaction outside a run). A line typed while the region is up is taken
back from below it and queued like a message, so it follows what it answers.
Buttons are numbered choices, pressed with `!N`; `!a text` answers the latest
question that asks for a reply. Without an interactive terminal (pipes, files,
TERM=dumb) there is no live region and no cursor movement: each message is printed
when final, and a question also when it is asked, so it can be answered. rich
honours NO_COLOR. One conversation, key "console", owned by the local user.

A formatted message (the renderer's Markdown: the agent's answers, questions, /help)
is rendered by rich's Markdown (bold, lists, code blocks highlighted) into styled
lines, so the live region still measures and trims plain `Text`; a plain message is
shown as written. Neither is ever read as rich's own markup.
"""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, TextIO

import anyio
from rich.cells import cell_len
from rich.console import Console, Group
from rich.control import Control
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from bridge.model import (
    ButtonPress,
    ChatRef,
    Inbound,
    Keyboard,
    Markup,
    Mention,
    MessageRef,
    PlatformLimits,
    ReactionState,
    Sender,
)
from bridge.platform import MessageGone, NotModified
from bridge.render.textsplit import split_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rich.segment import Segment

KEY = "console"
CHAT = ChatRef("console")
USER = Sender("console", "you")
LIMITS = PlatformLimits(max_text=8000, edit_interval=0.5, chat_rate=50.0, global_rate=100.0)
# Well over `LIMITS.edit_interval`: a message still streaming is edited more often.
SETTLE = 2.0
REPLY_HINT = "(answer with: !a your text)"
CODE_THEME = "ansi_dark"  # the terminal's own colours, legible on most backgrounds


@dataclass
class _Message:
    id: str
    seq: int  # the order sent
    text: str
    buttons: Keyboard
    markup: Markup  # "formatted": Markdown, rendered; "plain": shown as written
    silent: bool  # progress (tools, the status), not a result
    asking: bool  # waits for the user: buttons, or a reply not given yet
    status: bool  # a run's status: silent, sent with buttons
    changed: float
    done: bool = False  # cannot change any more (an upload)


class ConsoleAdapter:
    def __init__(
        self,
        console: Console | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        settle: float = SETTLE,
    ) -> None:
        # Text objects only: the agent's words are never read as rich markup.
        self.console = console or Console(markup=False, emoji=False, highlight=False)
        self.choices: dict[int, str] = {}  # number → token
        self._numbers: dict[str, int] = {}  # token → number
        self._clock = clock
        self._settle = settle
        self._open: dict[str, _Message] = {}  # live messages, in the order sent
        self._newest: dict[bool, int] = {True: 0, False: 0}  # last `seq` sent, by `silent`
        self._seqs = itertools.count(1)
        # Ids unique to this process: a restarted bridge edits the ids its predecessor
        # left live (`retire_after_crash`); those must not name this process's messages.
        self._process = secrets.token_hex(3)
        self._reply_to: str | None = None  # the latest message asking for a reply
        self._live: Live | None = None

    @property
    def out(self) -> IO[str]:
        return self.console.file

    @property
    def limits(self) -> PlatformLimits:
        return LIMITS

    def format(self, markdown: str, limit: int) -> list[str]:
        return split_text(markdown, limit)

    # --- the Adapter protocol ------------------------------------------------------------

    async def send(
        self,
        chat: ChatRef,
        text: str,
        *,
        markup: Markup = "plain",
        buttons: Keyboard = (),
        force_reply: bool = False,
        silent: bool = False,
        ping: Mention | None = None,
    ) -> MessageRef:
        # The person is at the terminal: a ping is shown like any message.
        asking = bool(buttons) or force_reply
        status = silent and bool(buttons)
        message = self._add(text, buttons, markup, silent, asking, status=status)
        if force_reply:
            self._reply_to = message.id
        if asking and not silent and not self._interactive:
            self._show([message])  # a question must be seen to be answered
        self._update()
        return MessageRef(chat, message.id)

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        message = self._open.get(ref.message_id)
        if message is None:  # printed already (or never sent): it cannot change
            raise MessageGone(ref.message_id)
        if message.text == text and message.buttons == buttons and message.markup == markup:
            raise NotModified(ref.message_id)
        self._number(buttons)
        message.text, message.buttons, message.asking = text, buttons, bool(buttons)
        message.markup = markup
        message.changed = self._clock()
        self._update()

    async def delete(self, ref: MessageRef) -> None:
        if self._open.pop(ref.message_id, None) is not None:
            self._update()
        if self._reply_to == ref.message_id:
            self._reply_to = None

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        # Queued like a message, so it follows the tool message it belongs to.
        text = f"📎 {filename} ({len(data)} bytes) {caption}".rstrip()
        message = self._add(text, (), "plain", True, False, status=False)
        message.done = True
        self._update()
        return MessageRef(chat, message.id)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        if text:
            self.say(f"  ({text})")
        self._update(changed=False)

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        """Typed lines cannot be marked; the status message says the same."""
        self._update(changed=False)

    # --- typed lines ---------------------------------------------------------------------

    def inbound(self, line: str, event_id: str) -> Inbound | None:
        """A typed line as an inbound; None (with a hint printed) when it makes no sense."""
        self._take_echo(line)
        if line.startswith("!a "):
            if self._reply_to is None:
                self.say("no question is waiting for a reply")
                return None
            return Inbound(KEY, CHAT, USER, event_id, text=line[3:], reply_to=self._reply_to)
        if line.startswith("!") and line[1:].isdigit():
            token = self.choices.get(int(line[1:]))
            if token is None:
                self.say("no such choice")
                return None
            return Inbound(KEY, CHAT, USER, event_id, press=ButtonPress(token, f"press-{event_id}"))
        return Inbound(KEY, CHAT, USER, event_id, text=line)

    def say(self, line: str) -> None:
        """A line of the console's own, printed at once (above the live region)."""
        self.console.print(Text(line), soft_wrap=True)

    def close(self) -> None:
        """Print every message still live as it is now, and end the live region."""
        final = sorted(self._open.values(), key=_print_order)
        self._open.clear()
        self._show(final)

    # --- what is final, and showing it ---------------------------------------------------

    @property
    def _interactive(self) -> bool:
        return self.console.is_interactive

    def _add(
        self,
        text: str,
        buttons: Keyboard,
        markup: Markup,
        silent: bool,
        asking: bool,
        *,
        status: bool,
    ) -> _Message:
        seq = next(self._seqs)
        name = f"{self._process}-{seq}"
        message = _Message(name, seq, text, buttons, markup, silent, asking, status, self._clock())
        self._number(buttons)
        self._open[message.id] = message
        self._newest[silent] = seq
        return message

    def _update(self, *, changed: bool = True) -> None:
        final = self._settled()
        if final or changed:
            self._show(final)

    def _settled(self) -> list[_Message]:
        """The live messages that are final now, taken out of the live region."""
        now = self._clock()
        in_run = any(m.status and m.asking for m in self._open.values())
        final: list[_Message] = []
        held = False  # a message still changing holds back the newer ones
        for message in list(self._open.values()):
            if message.asking:
                continue
            if not held and (not in_run or message.done or self._quiet(message, now)):
                final.append(self._open.pop(message.id))
            else:
                held = True
        return sorted(final, key=_print_order)

    def _quiet(self, message: _Message, now: float) -> bool:
        newer = self._newest[message.silent] > message.seq
        return newer and now - message.changed >= self._settle

    def _show(self, final: list[_Message]) -> None:
        """Redraw the live region with what is left, and print `final` above it."""
        live = self._region()
        if live is not None:
            # rich draws the region after a print only as of its last refresh.
            live.update(self._view(), refresh=True)
        if final:
            framed = (Text("\n") + self._block(message) for message in final)
            self.console.print(Group(*framed), soft_wrap=True)
        if live is not None and not self._open:
            live.stop()  # transient: the region is erased, the cursor back below `final`
            self._live = None

    def _region(self) -> Live | None:
        """The live region, started once something is live; never without an
        interactive terminal (rich would have no cursor to move)."""
        if self._live is None and self._open and self._interactive:
            self._live = Live(
                console=self.console,
                auto_refresh=False,  # redrawn on each change, in the bridge's own thread
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
            self.console.show_cursor(True)  # the user types below the region
        return self._live

    def _view(self) -> Group:
        """The live region: live messages (statuses last), tail kept to fit the screen,
        and an empty last line where typed text echoes."""
        messages = sorted(self._open.values(), key=_print_order)
        body = Text("\n\n").join(self._block(m) for m in messages)
        return Group(self._fit(body), Text(""))

    def _fit(self, body: Text) -> Text:
        width, height = self.console.size
        lines = list(body.wrap(self.console, width))
        room = max(2, height - 2)
        if len(lines) <= room:
            return body
        kept = lines[len(lines) - room + 1 :]
        above = Text(f"… {len(lines) - len(kept)} more lines above", style="dim")
        return Text("\n").join([above, *kept])

    def _block(self, message: _Message) -> Text:
        block = (
            self._rendered(message.text) if message.markup == "formatted" else Text(message.text)
        )
        for row in message.buttons:
            block.append("\n")
            for i, button in enumerate(row):
                block.append("  " if i else "")
                block.append(f"[!{self._numbers[button.token]}]", style="bold cyan")
                block.append(f" {button.label}")
        if message.asking and not message.buttons:
            block.append(f"\n{REPLY_HINT}", style="dim")
        return block

    def _rendered(self, markdown: str) -> Text:
        """`markdown` as rich renders it, as styled lines of the terminal's width."""
        options = self.console.options.update(width=max(20, self.console.width))
        rendered = Markdown(hard_breaks(markdown), code_theme=CODE_THEME, hyperlinks=False)
        lines = self.console.render_lines(rendered, options, pad=False)
        return Text("\n").join(_line(line) for line in lines)

    def _number(self, buttons: Keyboard) -> None:
        for row in buttons:
            for button in row:
                if button.token not in self._numbers:
                    number = len(self._numbers) + 1
                    self._numbers[button.token] = number
                    self.choices[number] = button.token

    def _take_echo(self, line: str) -> None:
        """The terminal echoed the typed line and its Enter below the live region,
        where rich does not know the cursor went: move back up over the echo and
        show the line as a message of its own, final, so it reaches the scrollback
        after the messages it answers."""
        if self._live is None:
            return
        rows = max(1, -(-cell_len(line) // max(1, self.console.width)))
        self.console.control(Control.move(y=-rows))
        seq = next(self._seqs)  # not a newer message of the bridge's: `_newest` stays
        self._open[f"typed-{seq}"] = _Message(
            f"typed-{seq}", seq, line, (), "plain", False, False, False, self._clock(), done=True
        )
        self._update()


def _line(segments: list[Segment]) -> Text:
    line = Text()
    for segment in segments:
        if not segment.control:
            line.append(segment.text, segment.style)
    line.rstrip()
    return line


def _print_order(message: _Message) -> tuple[bool, int]:
    return message.status, message.seq


async def chat(
    handle: Callable[[Inbound], Awaitable[None]], adapter: ConsoleAdapter, source: TextIO
) -> None:
    """Feed typed lines to the bridge until end of input."""
    adapter.say("Type a message. /help lists commands; /stop stops a run; Ctrl-D quits.")
    # Delivery ids are remembered across restarts: make this run's unique.
    run_id, numbers = secrets.token_hex(4), itertools.count(1)
    async for raw in anyio.wrap_file(source):
        line = raw.strip()
        if not line:
            continue
        inbound = adapter.inbound(line, f"{run_id}-{next(numbers)}")
        if inbound is not None:
            await handle(inbound)


def hard_breaks(markdown: str) -> str:
    """`markdown` with each line break kept, as chats show the renderer's Markdown
    (Telegram, Slack and Discord break lines where the text does; CommonMark joins
    lines of a paragraph, which ran /help into one block). Code fences are left as
    they are: their lines are kept anyway."""
    lines, fenced = markdown.split("\n"), False
    for n, line in enumerate(lines[:-1]):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line.strip():
            lines[n] = line + "  "  # CommonMark's hard break: two spaces at the line's end
    return "\n".join(lines)

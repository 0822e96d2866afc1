"""Pings: the only messages that notify, and whom.

Everything the renderer posts goes out without a notification where the platform
allows (progress, answers, notices); two events ping the person who started the
run (`[notify]`, `NotifySettings`):

- a question waiting for them (an agent dialog, an approval): the question's own
  message is the ping, posted with a mention of them (`question_ping`);
- the end of the run (done, failed, stopped): one short new message, "✅ done ·
  2 min · 5 tools: <the answer's first line>", unless the run took less than
  `quiet_under` seconds, since the person is then still looking (`end_ping`).

Pure, like the rest of the renderer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.model import Send
from bridge.render.text import joined, text_blocks
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from bridge.model import Mention, NotifySettings, Op
    from bridge.rpc.content import AssistantMessage

PING_SLOT = "ping:"  # ping:<run>: the end of run <run>
SUMMARY_MAX = 120  # characters of the answer's first line in the end ping


def question_ping(notify: NotifySettings, person: Mention | None) -> Mention | None:
    """Whom a question's message pings (None: nobody)."""
    return person if notify.questions else None


def end_ping(
    notify: NotifySettings,
    person: Mention | None,
    *,
    run: int,
    took: float,
    outcome: str,
    last: AssistantMessage | None,
) -> list[Op]:
    """The ping that a run is over: `outcome` is its status's final line; a run that
    ended well adds the first line of its answer."""
    if person is None or not notify.done or took < notify.quiet_under:
        return []
    text = outcome
    line = summary(last)
    if line and outcome.startswith("✅"):
        text = f"{outcome}: {line}"
    return [Send(f"{PING_SLOT}{run}", text, ping=person)]


def summary(message: AssistantMessage | None) -> str:
    """The first non-empty line of an answer, clipped ("" none)."""
    if message is None:
        return ""
    for line in joined(text_blocks(message)).splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return clip(line, SUMMARY_MAX)
    return ""

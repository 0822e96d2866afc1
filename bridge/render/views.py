"""Messages the renderer owns: what each shows, and when it may change.

A `Slot` is one chat message named by a stable string; it remembers the `View`
last sent for it, so the first change becomes a `Send`, later ones an `Edit`,
and an unchanged view no op at all. A `Pacer` spaces the edits of one message
(platforms throttle edits; the outbox coalesces, but fewer ops is cheaper for
everyone). `Context` is what every part shares: limits, formatter, token book.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from bridge.model import (
    Delete,
    Edit,
    Keyboard,
    Markup,
    Mention,
    NotifySettings,
    Op,
    PlatformLimits,
    Send,
    Task,
)
from bridge.render.textsplit import split_text

if TYPE_CHECKING:
    from bridge.platform import Formatter
    from bridge.render.choices import TokenBook


def in_run(ops: list[Op], run: str, task: Task | None = None, *, over: bool = False) -> list[Op]:
    """`ops` marked as run `run`'s ("" none): a chat that streams shows a run's text and
    `task` cards in one stream, which the op marked `over` ends (`Send.run`)."""
    if not run:
        return ops
    return [
        replace(op, run=run, task=task, run_over=over) if isinstance(op, Send | Edit) else op
        for op in ops
    ]


@dataclass(frozen=True, slots=True)
class View:
    text: str
    plain: str = ""
    markup: Markup = "plain"
    buttons: Keyboard = ()

    def with_buttons(self, buttons: Keyboard) -> View:
        return View(self.text, self.plain, self.markup, buttons)


@dataclass(slots=True)
class Slot:
    name: str
    silent: bool = False
    force_reply: bool = False
    ping: Mention | None = None  # its first post notifies this person (pings.py)
    gives_way: bool = False  # see `Send.gives_way`
    shown: View | None = None
    drafting: bool = False  # the last op left the text growing (`Send.draft`)

    def show(self, view: View, *, routine: bool = False, draft: bool = False) -> list[Op]:
        """The op that makes the message show `view` (none if it already does);
        `routine` marks an Edit as a refresh that may wait (see `Edit`), `draft` a
        text still growing. The first view without `draft` after drafts seals the
        slot even when unchanged: a draft must still become a message."""
        if view == self.shown:
            if not self.drafting or draft:
                return []
            self.drafting = False
            return [Edit(self.name, view.text, view.plain, view.markup, view.buttons, seal=True)]
        first = self.shown is None
        self.shown, self.drafting = view, draft
        if first:
            return [self._send(view, draft)]
        return [
            Edit(self.name, view.text, view.plain, view.markup, view.buttons, routine, draft=draft)
        ]

    def refresh(self) -> list[Op]:
        """The draft shown again unchanged, as a routine Edit: a draft the platform
        forgets after a while (Telegram: 30 s) stays up while its text stalls."""
        view = self.shown
        if view is None or not self.drafting:
            return []
        return [Edit(self.name, view.text, view.plain, view.markup, view.buttons, True, draft=True)]

    def _send(self, view: View, draft: bool = False) -> Send:
        return Send(
            self.name,
            view.text,
            plain=view.plain,
            markup=view.markup,
            buttons=view.buttons,
            force_reply=self.force_reply,
            silent=self.silent,
            draft=draft,
            ping=self.ping,
            gives_way=self.gives_way,
        )

    def remove(self) -> list[Op]:
        was_shown, self.shown = self.shown is not None, None
        return [Delete(self.name)] if was_shown else []


@dataclass(slots=True)
class Pacer:
    """At most one change per `interval`; `dirty` remembers a change held back."""

    interval: float
    last: float = -math.inf
    dirty: bool = False

    def due(self, now: float) -> bool:
        return now - self.last >= self.interval

    def sent(self, now: float) -> None:
        self.last = now
        self.dirty = False


@dataclass
class Context:
    limits: PlatformLimits
    formatter: Formatter
    book: TokenBook
    notify: NotifySettings = field(default_factory=NotifySettings)
    person: Mention | None = None  # who sent the latest prompt: whom pings are for

    def views(self, markdown: str) -> list[View]:
        """Markdown as formatted messages, each with its source slice as the fallback."""
        if not markdown.strip():
            return []
        chunks = self.formatter(markdown, self.limits.max_text)
        sources = split_text(markdown, self.limits.max_text)
        # The source slices line up with the chunks only when they split alike.
        plains = sources if len(sources) == len(chunks) else chunks
        return [View(c, p, "formatted") for c, p in zip(chunks, plains, strict=True)]

    def view(self, markdown: str) -> View:
        """One formatted message; callers clip their markdown so it fits."""
        views = self.views(markdown)
        return views[0] if views else self.plain(markdown)

    def plain(self, text: str) -> View:
        pieces = split_text(text, self.limits.max_text)
        return View(pieces[0] if pieces else "…")

    def plains(self, text: str) -> list[View]:
        return [View(p) for p in split_text(text, self.limits.max_text)]

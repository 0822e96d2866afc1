"""`DiscordAdapter`: the bridge's ops as Discord API calls through discord.py's `Client`.

Each call names its channel and message by id (`PartialMessageable`,
`PartialMessage`), so it needs nothing cached: a frontend that just connected, or one
making a call for a worker, calls the same way. Every message goes out with no
mention allowed (`AllowedMentions.none()`) and its link previews suppressed (tool
output is full of links); formatted text comes from `format.format_markdown` already
disarmed, plain text is escaped to show as written (format.py). Buttons become a
stopped `discord.ui.View`: discord.py then sends its components and keeps nothing
(a stopped view is never stored or dispatched), and presses reach the runner as
interactions. A button carrying a `Form` is remembered by token (in memory,
bounded), so a press on it can open the form as a modal at once (`form_for`).

Pacing: discord.py waits on each route's X-RateLimit headers and retries a 429
after its `retry_after` (topics/rate-limits); the outbox keeps to `LIMITS`, Discord's
documented per-channel figures, so that rarely happens. Failures become the
`PlatformError` tree (failures.py).

`react` marks the person's message (👀, then ✅ or ❌) and drives the typing
indicator (indicator.py): a chat is "typing" from its first 👀 to its last ✅/❌.
"""

from __future__ import annotations

import io
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

import discord

from adapters.discord.convert import parse_press_ref, posted_in, reacted_in
from adapters.discord.failures import Told, translated
from adapters.discord.format import (
    BUTTON_ID_OVERHEAD,
    CUSTOM_ID_MAX,
    MAX_BUTTONS_PER_ROW,
    MAX_TEXT,
    buttons,
    format_markdown,
    plain,
)
from adapters.discord.indicator import TypingIndicator
from bridge.model import ChatRef, MessageRef, PlatformLimits
from bridge.platform import MessageGone, PlatformError, TooLong

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bridge.model import Form, Keyboard, Markup, Mention, ReactionState

log = logging.getLogger(__name__)

# topics/rate-limits and the per-route limits Discord's answers name: 5 messages per
# 5 s per channel, edits likewise, 50 requests per second per bot.
LIMITS = PlatformLimits(
    max_text=MAX_TEXT,
    max_caption=MAX_TEXT,
    max_button_data=CUSTOM_ID_MAX - BUTTON_ID_OVERHEAD,
    max_buttons_per_row=MAX_BUTTONS_PER_ROW,
    edit_interval=1.0,
    chat_rate=1.0,
    # Under Discord's 50 a second: typing and a reaction's second call are not counted.
    global_rate=45.0,
    thread_lanes=True,  # a thread is a channel, with its own rate limits
)
UPLOAD_LIMIT = 10 * 2**20  # bytes per file where a server has no boost (reference#uploading-files)
REACTIONS: dict[ReactionState, str] = {"working": "👀", "done": "✅", "failed": "❌"}
FORMS_KEPT = 1_000  # forms of buttons sent by this process; older ones fall back to messages
NO_MENTIONS = discord.AllowedMentions.none()


class DiscordAdapter:
    """Implements `bridge.platform.Adapter` (and `DirectMessages`, `Forms`) for one bot."""

    def __init__(self, client: discord.Client, *, limits: PlatformLimits = LIMITS) -> None:
        self.client = client
        self._limits = limits
        self._forms: OrderedDict[str, Form] = OrderedDict()
        self.forms_elsewhere: Callable[[str], Awaitable[Form | None]] | None = None
        self.told = Told()
        self.typing = TypingIndicator(self._trigger_typing)

    @property
    def limits(self) -> PlatformLimits:
        return self._limits

    def format(self, markdown: str, limit: int) -> list[str]:
        return format_markdown(markdown, limit)

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
        # Discord has no ForceReply: an input dialog's answer is the next message.
        self._remember_forms(buttons)
        channel = posted_in(chat)
        view = _view(buttons)
        content, mentions = _content(text, markup), NO_MENTIONS
        if ping is not None and ping.user_id.isdigit():
            # The mention notifies that one person and nobody else the text names.
            content = f"<@{ping.user_id}> {content}"
            mentions = discord.AllowedMentions(
                everyone=False,
                roles=False,
                replied_user=False,
                users=[discord.Object(id=int(ping.user_id))],
            )
        with translated("send a message", channel, self.told):
            sent = await self._channel(channel).send(
                content=content,
                allowed_mentions=mentions,
                suppress_embeds=True,
                # SUPPRESS_NOTIFICATIONS (message flag 1 << 12) on all but a ping.
                silent=ping is None,
                view=view if view is not None else discord.utils.MISSING,
            )
        self.typing.posted(chat, new=True)
        return MessageRef(chat, str(sent.id))

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        self._remember_forms(buttons)
        channel = posted_in(ref.chat)
        with translated("edit a message", channel, self.told):
            # view=None takes the buttons away: "replace text and buttons".
            await self._message(channel, ref.message_id).edit(
                content=_content(text, markup),
                view=_view(buttons),
                allowed_mentions=NO_MENTIONS,
            )
        self.typing.posted(ref.chat, new=False)

    async def delete(self, ref: MessageRef) -> None:
        channel = posted_in(ref.chat)
        with translated("delete a message", channel, self.told):
            await self._message(channel, ref.message_id).delete()

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        """The file as an attachment; one over the upload limit where it goes becomes a
        message saying so (Discord would refuse it: 40005)."""
        channel = posted_in(chat)
        limit = self._upload_limit(channel)
        if len(data) > limit:
            return await self.send(chat, _over_limit(filename, len(data), limit))
        file = discord.File(io.BytesIO(data), filename=filename)
        try:
            with translated("upload a file", channel, self.told):
                sent = await self._channel(channel).send(
                    content=plain(caption) if caption.strip() else None,
                    file=file,
                    allowed_mentions=NO_MENTIONS,
                    suppress_embeds=True,
                    silent=True,  # a file is never a ping
                )
        except TooLong:
            return await self.send(chat, _over_limit(filename, len(data), limit))
        self.typing.posted(chat, new=True)
        return MessageRef(chat, str(sent.id))

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        """A note only the presser sees (an ephemeral followup of the interaction, which
        the runner acknowledged when it came). Discord has no toasts: `alert` changes
        nothing."""
        ref = parse_press_ref(press_id)
        if ref is None or not text:
            return
        application, token = ref
        hook = discord.Webhook.partial(int(application), token, client=self.client)
        # An interaction's webhook is an application's: ephemeral followups need it so.
        hook.type = discord.WebhookType.application
        with translated("answer a button", "interaction", self.told):
            await hook.send(plain(text), ephemeral=True, allowed_mentions=NO_MENTIONS)

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        """👀 on the person's message while the agent works on it, then ✅ or ❌ in its
        place. A message gone meanwhile stays unmarked."""
        if state == "working":
            self.typing.started(chat, message_id)
        else:
            self.typing.ended(chat, message_id)
        message = self._message(reacted_in(chat, message_id), message_id)
        try:
            with translated("react", reacted_in(chat, message_id), self.told):
                if state != "working" and self.client.user is not None:
                    await message.remove_reaction(REACTIONS["working"], self.client.user)
                await message.add_reaction(REACTIONS[state])
        except MessageGone as exc:
            log.debug("no reaction on message %s: %s", message_id, exc)

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        """The bot's direct message with a person; None for an id that is no user's
        (a role named among the approvers)."""
        if not user_id.isdigit():
            return None
        try:
            with translated("open a direct message", user_id, self.told):
                dm = await self.client.create_dm(discord.Object(int(user_id)))
        except PlatformError as exc:
            if exc.permanent:
                log.info("no direct message with %s: %s", user_id, exc)
                return None
            raise
        return ChatRef(str(dm.id))

    # --- forms (bridge.platform.Forms) -------------------------------------------------

    def _remember_forms(self, keyboard: Keyboard) -> None:
        for button in (b for row in keyboard for b in row):
            if button.form is not None:
                self._forms[button.token] = button.form
                self._forms.move_to_end(button.token)
        while len(self._forms) > FORMS_KEPT:
            self._forms.popitem(last=False)

    def form_for(self, token: str) -> Form | None:
        """The form of a button this process sent (None after a restart)."""
        return self._forms.get(token)

    async def find_form(self, token: str) -> Form | None:
        """`form_for`, else one another process sent (`forms_elsewhere`)."""
        form = self._forms.get(token)
        if form is None and self.forms_elsewhere is not None:
            form = await self.forms_elsewhere(token)
        return form

    # --- discord.py ----------------------------------------------------------------------

    def _channel(self, channel_id: str) -> discord.PartialMessageable:
        return self.client.get_partial_messageable(int(channel_id))

    def _message(self, channel_id: str, message_id: str) -> discord.PartialMessage:
        return self._channel(channel_id).get_partial_message(int(message_id))

    def _upload_limit(self, channel_id: str) -> int:
        """A server's limit (more with boosts), as far as the cache knows it."""
        channel = self.client.get_channel(int(channel_id))
        guild = getattr(channel, "guild", None)
        return max(UPLOAD_LIMIT, int(guild.filesize_limit)) if guild is not None else UPLOAD_LIMIT

    async def _trigger_typing(self, chat: ChatRef) -> None:
        channel = posted_in(chat)
        with translated("show typing", channel, self.told):
            await self._channel(channel).typing()


def _content(text: str, markup: Markup) -> str:
    if markup == "plain":
        return plain(text)
    return text if text.strip() else plain(text)


def _view(keyboard: Keyboard) -> discord.ui.View | None:
    """The keyboard as components; a stopped view, which discord.py sends and forgets."""
    if not keyboard:
        return None
    view = discord.ui.View(timeout=None)
    for spec in buttons(keyboard):
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            label=spec.label,
            custom_id=spec.custom_id,
            row=spec.row,
            style=discord.ButtonStyle.secondary,
        )
        view.add_item(button)
    view.stop()
    return view


def _over_limit(filename: str, size: int, limit: int) -> str:
    return (
        f"📎 {filename} ({size / 2**20:.1f} MB) is over Discord's upload limit here "
        f"({limit / 2**20:.0f} MB), so it was not sent."
    )

"""Discord in: messages and interactions → `handle(inbound)`, once each.

A message is converted (convert.py) and handed to the bridge, which returns at once.
A mention in a text channel first opens a thread from that message (for allowed
people only: a stranger's is refused where it was written, by the bridge, and no
thread is made for it); a bot that may not make threads there says so once per
channel, in the channel, or else to the person directly.

An interaction is answered first, always within Discord's 3 seconds
(interactions/receiving-and-responding: "within 3 seconds"), then handed on: a press
is acknowledged without a visible change (a deferred update; the bridge's answer,
if any, comes as a note only the presser sees, `DiscordAdapter.answer_press`), or,
on a button carrying a form, answered with the form as a modal (which can only be
the first answer), whose submission comes back as the press with the text. A slash
command is answered by showing it in the channel, as a typed message would be;
`/pi <task>` in a text channel shows "asked: <task>" and opens the thread from that
message.

Where the bot answers only in some channels (`allowed_channels`), messages elsewhere
are not seen, and a slash command there is told so, privately.

Discord does not deliver an event twice on one connection, but the gateway replays
what a session missed after a RESUME: deliveries are dropped by id here and by the
bridge's store. The bridge's store failing at admission is retried here
(`until_taken`), as Discord will not deliver the event again. Direct messages name
no member, so where roles may allow or approve (`roles_named`) a sender's roles are
looked up in the bot's servers.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import discord

from adapters.discord.convert import (
    START_COMMAND,
    Converted,
    Me,
    conversation_key,
    from_command,
    from_message,
    from_press,
    from_submission,
    in_thread,
    is_dm,
)
from adapters.discord.failures import THREAD_EXISTS, MissingPermission, translated
from adapters.discord.files import download
from adapters.discord.format import modal, plain
from adapters.discord.payloads import interaction_json, message_json, place_of
from adapters.discord.settings import THREAD_NAME_MAX
from adapters.malformed import counting_malformed
from bridge.admission import ADMIT_TRIES, refusal, retry_delay, until_taken
from bridge.model import Attachment
from bridge.platform import PlatformError
from bridge.render.textbits import clip

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from adapters.discord.adapter import DiscordAdapter
    from adapters.discord.convert import Place, Slash
    from bridge.model import Form, Inbound, Sender

log = logging.getLogger(__name__)

REMEMBERED = 10_000  # delivery ids and known threads kept in memory
FORM_WAIT = 1.5  # s to find a form another frontend posted: the modal must open within 3 s
MODAL_TIMEOUT = 15 * 60.0  # s discord.py keeps a modal it showed (never: ours are stopped)
ROLES_KEPT = 60.0  # s a DM sender's looked-up roles are reused
NO_THREADS = (
    "⚠️ I can't start a thread here: my role lacks the permission to create public "
    "threads (and to send messages in threads) in this channel. An admin can grant "
    '"Create Public Threads" and "Send Messages in Threads"; a direct message to me '
    "works meanwhile."
)
USAGE = (
    "`/pi <task>` starts a conversation with the coding agent in a new thread here "
    "(mentioning me works too). Write in that thread to go on; `/stop` there stops the "
    "agent, `/help` lists the other commands."
)
NOT_HERE = (
    "I'm not enabled in this channel. An admin can add it to DISCORD_ALLOWED_CHANNELS; "
    "a direct message to me works too."
)
NOT_A_CONVERSATION = (
    "Commands work in a conversation: mention me or use `/pi <task>` to start one in a "
    "thread, or write to me directly."
)


@dataclass
class Intake:
    """Discord events → `handle(inbound)`. `owns(key)` tells whether the bridge has a
    conversation for a thread this process has not seen (after a restart); None: only
    threads opened here count. `allowed` (users and roles; None: everyone) is checked
    here only before a thread is opened: the bridge screens everything."""

    adapter: DiscordAdapter
    me: Me
    handle: Callable[[Inbound], Awaitable[None]]
    undecodable: Callable[[], None]
    api_url: str
    owns: Callable[[str], Awaitable[bool]] | None = None
    allowed: Collection[str] | None = None
    roles_named: bool = False
    allowed_channels: Collection[str] | None = None  # None: every channel
    threads: OrderedDict[str, None] = field(default_factory=OrderedDict)
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    told: set[str] = field(default_factory=set)  # channels told they allow no threads
    _roles: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)

    # --- messages ------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        if str(message.author.id) == self.me.id:
            return  # the bot's own: nothing to look up
        place = place_of(message.channel)
        if not self._here(place):
            return
        key = conversation_key(place)
        threaded = place.kind in ("thread", "forum_post")
        if threaded and key not in self.threads and await self._owned(key):
            _remember(self.threads, key)
        with counting_malformed(self.undecodable):
            converted = from_message(message_json(message), place, self.me, self.threads)
        if converted is None:
            return
        if converted.opens_thread:
            opened = await self._open_thread(converted, message, place)
            if opened is None:
                return
            converted = opened
        await self._deliver(converted)

    async def _open_thread(
        self, converted: Converted, message: discord.Message, place: Place
    ) -> Converted | None:
        """The mention moved into a thread opened from it; a stranger's stays where it
        was (the bridge refuses it there); None when no thread could be opened."""
        if not self._allowed(converted.inbound.sender):
            return converted
        name = clip(" ".join(converted.inbound.text.split()), THREAD_NAME_MAX) or "pi"
        try:
            with translated("start a thread", place.channel_id, self.adapter.told):
                thread = await message.create_thread(name=name)
            thread_id = str(thread.id)
        except MissingPermission:
            await self._say_no_threads(message, place)
            return None
        except PlatformError as exc:
            if THREAD_EXISTS not in _codes(exc):
                log.warning("no thread for a mention in %s: %s", place.channel_id, exc)
                return None
            thread_id = str(message.id)  # a thread started from a message has its id
        return in_thread(converted, place, thread_id)

    async def _say_no_threads(self, message: discord.Message, place: Place) -> None:
        """Once per channel: in the channel, or where the bot may not even post there,
        to the person who mentioned it."""
        if place.channel_id in self.told:
            return
        self.told.add(place.channel_id)
        try:
            with translated("send a message", place.channel_id, self.adapter.told):
                await message.reply(plain(NO_THREADS), allowed_mentions=_NO_MENTIONS)
            return
        except PlatformError as exc:
            log.warning("could not say so in %s either: %s", place.channel_id, exc)
        try:
            with translated("send a direct message", str(message.author.id), self.adapter.told):
                await message.author.send(plain(NO_THREADS), allowed_mentions=_NO_MENTIONS)
        except PlatformError as exc:
            log.warning("could not tell %s by direct message: %s", message.author.id, exc)

    # --- interactions ----------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Presses and forms' submissions (slash commands come through `on_command`)."""
        kind = interaction.type
        if kind is discord.InteractionType.component:
            await self._press(interaction)
        elif kind is discord.InteractionType.modal_submit:
            await self._submission(interaction)

    async def _press(self, interaction: discord.Interaction[Any]) -> None:
        place = place_of(interaction.channel)
        with counting_malformed(self.undecodable):
            inbound = from_press(interaction_json(interaction), place, self.me)
        if inbound is None or inbound.press is None:
            return  # not one of the bridge's buttons
        form = await self._form(inbound.press.token)
        if form is not None and await self._open_form(interaction, form, inbound.press.token):
            return  # the answer comes with the form's submission
        await _acknowledge(interaction)
        await self._deliver(Converted(inbound))

    async def _form(self, token: str) -> Form | None:
        form = self.adapter.form_for(token)
        if form is None:
            with anyio.move_on_after(FORM_WAIT):
                form = await self.adapter.find_form(token)
        return form

    async def _open_form(
        self, interaction: discord.Interaction[Any], form: Form, token: str
    ) -> bool:
        spec = modal(form, token)
        shown = discord.ui.Modal(title=spec.title, custom_id=spec.custom_id, timeout=MODAL_TIMEOUT)
        shown.add_item(
            discord.ui.TextInput(
                label=spec.label,
                custom_id="answer",
                style=discord.TextStyle.paragraph if spec.multiline else discord.TextStyle.short,
                default=spec.default or None,
                placeholder=spec.placeholder or None,
                required=False,
                max_length=4000,
            )
        )
        shown.stop()  # the submission comes to `on_interaction`, not to the modal
        try:
            with translated("open a form", str(interaction.channel_id), self.adapter.told):
                await interaction.response.send_modal(shown)
        except PlatformError as exc:
            log.warning("the form could not be opened: %s", exc)
            return False
        return True

    async def _submission(self, interaction: discord.Interaction[Any]) -> None:
        place = place_of(interaction.channel)
        with counting_malformed(self.undecodable):
            inbound = from_submission(interaction_json(interaction), place, self.me)
        if inbound is None:
            return
        await _acknowledge(interaction)
        await self._deliver(Converted(inbound))

    async def on_command(self, interaction: discord.Interaction[Any]) -> None:
        """A slash command: shown in the channel (or a note to the user alone), then
        handed on."""
        place = place_of(interaction.channel)
        with counting_malformed(self.undecodable):
            slash = from_command(interaction_json(interaction), place, self.me)
        if slash is None:
            await _note(interaction, NOT_A_CONVERSATION)
            return
        starts = slash.name == START_COMMAND
        if not self._here(place):
            await _note(interaction, NOT_HERE)
        elif starts and not slash.text:
            await _note(interaction, USAGE)
        elif place.kind == "text" and not starts:
            await _note(interaction, NOT_A_CONVERSATION)
        elif place.kind == "text" and not self._allowed(slash.inbound.sender):
            await _note(interaction, refusal(slash.inbound.sender.id))
        else:
            await self._command(interaction, slash, place)

    async def _command(
        self, interaction: discord.Interaction[Any], slash: Slash, place: Place
    ) -> None:
        shown = f"asked: {slash.text}" if slash.name == START_COMMAND else slash.line
        try:
            with translated("answer a command", place.channel_id, self.adapter.told):
                await interaction.response.send_message(plain(shown), allowed_mentions=_NO_MENTIONS)
                root = await interaction.original_response()
        except PlatformError as exc:
            log.warning("a slash command could not be answered: %s", exc)
            return
        inbound = dataclasses.replace(slash.inbound, message_id=str(root.id))
        converted = Converted(inbound, adopts=place.kind in ("thread", "forum_post"))
        if place.kind == "text":
            opened = await self._open_thread(converted, root, place)
            if opened is None:
                return
            converted = opened
        await self._deliver(converted)

    # --- into the bridge -------------------------------------------------------------

    async def _deliver(self, converted: Converted) -> None:
        inbound = converted.inbound
        if not _first(self.seen, inbound.event_id):
            return
        if converted.adopts:
            _remember(self.threads, inbound.key)
        if not inbound.sender.groups and self.roles_named and is_dm(inbound.key):
            groups = await self._roles_of(inbound.sender.id)
            inbound = dataclasses.replace(
                inbound, sender=dataclasses.replace(inbound.sender, groups=groups)
            )
        files = tuple(
            Attachment(
                f.mime_type,
                f.size,
                functools.partial(download, f.url, self.api_url),
                kind=f.kind,
                name=f.name,
            )
            for f in converted.files
        )
        # Discord will not deliver it again: an inbound the bridge could not take in
        # is handed in again here (bridge/admission.py).
        await until_taken(self.handle, dataclasses.replace(inbound, attachments=files))

    def _here(self, place: Place) -> bool:
        """Whether the bot answers in `place`: a DM, or an allowed channel's."""
        if self.allowed_channels is None or place.kind == "dm":
            return True
        return (place.parent_id or place.channel_id) in self.allowed_channels

    def _allowed(self, sender: Sender) -> bool:
        return self.allowed is None or sender.named_in(self.allowed)

    async def _roles_of(self, user_id: str) -> frozenset[str]:
        """The user's roles in the bot's servers (a DM names none); kept a minute."""
        now = time.monotonic()
        kept = self._roles.get(user_id)
        if kept is not None and now - kept[0] < ROLES_KEPT:
            return kept[1]
        roles: set[str] = set()
        for guild in self.adapter.client.guilds:
            member = guild.get_member(int(user_id))
            if member is None:
                try:
                    member = await guild.fetch_member(int(user_id))
                except discord.HTTPException:
                    continue
            roles |= {str(r.id) for r in member.roles if not r.is_default()}
        self._roles[user_id] = (now, frozenset(roles))
        return frozenset(roles)

    async def _owned(self, key: str) -> bool:
        """Whether the store knows the thread; a failing store is asked again, as an
        admission is (bridge/admission.py), and at last counts as "no" (logged)."""
        if self.owns is None:
            return False
        for attempt in range(1, ADMIT_TRIES + 1):
            try:
                return await self.owns(key)
            except Exception as exc:  # whatever the store's backend raises
                if attempt == ADMIT_TRIES:
                    log.exception("thread %s left unanswered: the store did not say", key)
                    break
                log.warning("store failed looking up %s (try %d): %s", key, attempt, exc)
                await anyio.sleep(retry_delay(attempt))
        return False


_NO_MENTIONS = discord.AllowedMentions.none()


async def _acknowledge(interaction: discord.Interaction[Any]) -> None:
    """Answered without a visible change (a deferred update), within 3 s."""
    try:
        await interaction.response.defer()
    except (discord.HTTPException, discord.InteractionResponded) as exc:
        log.warning("an interaction could not be acknowledged: %s", exc)


async def _note(interaction: discord.Interaction[Any], text: str) -> None:
    """An answer only the user sees."""
    try:
        await interaction.response.send_message(
            plain(text), ephemeral=True, allowed_mentions=_NO_MENTIONS
        )
    except (discord.HTTPException, discord.InteractionResponded) as exc:
        log.warning("an interaction could not be answered: %s", exc)


def _codes(exc: BaseException) -> set[int]:
    cause = exc.__cause__
    return {cause.code} if isinstance(cause, discord.HTTPException) else set()


def _first(seen: OrderedDict[str, None], delivery: str) -> bool:
    if not delivery:
        return True
    if delivery in seen:
        return False
    _remember(seen, delivery)
    return True


def _remember(memory: OrderedDict[str, None], key: str) -> None:
    memory[key] = None
    memory.move_to_end(key)
    while len(memory) > REMEMBERED:
        memory.popitem(last=False)

"""Slack in: a bolt `AsyncApp` (Socket Mode by default, HTTP optional) feeding a bridge.

Listeners acknowledge at once (bolt acks Events API listeners before they run; an
action listener calls `ack()` first, well inside Slack's 3 s), then convert the
payload and hand it to `bridge.handle`, which returns quickly. A press on a
button with a form opens its modal first (the trigger_id lives 3 s) and reaches
the bridge only when the modal is submitted, as a press carrying the text; if
the form is unknown (a restart) or Slack refuses the modal, the plain press goes
through and the bridge asks for the answer as a message. Redeliveries are
dropped by `event_id` here and again by the bridge's store: Socket Mode marks
first deliveries with `x-slack-retry-num: "0"`, so headers are no guide
(docs/design.md, "Platform libraries"). How deliveries arrive is transport.py's.

A delivery bolt or a converter cannot read is acknowledged, counted and skipped
(adapters/slack/transport.py, adapters/malformed.py), never delivered again.

Here too, because they are Slack's notions: a sender's configured user groups are
looked up and put on the inbound (the bridge admits and lets approve by them),
and traffic from channels outside `allowed_channels` stops here, a mention there
answered once per person, privately.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.malformed import counting_malformed
from adapters.probe import post_json
from adapters.slack.adapter import LIMITS, SlackAdapter
from adapters.slack.convert import (
    ACTION_PREFIX,
    Converted,
    candidate_thread,
    from_action,
    from_event,
    is_dm,
)
from adapters.slack.forms import CALLBACK_ID, from_submission
from adapters.slack.groups import UserGroups
from adapters.slack.scopes import scope_note
from adapters.slack.slash import COMMAND, USAGE, as_inbound, from_command, root_text
from adapters.slack.transport import acknowledging, serve
from bridge.admission import ADMIT_TRIES, refusal, retry_delay, until_taken
from bridge.model import Attachment, Sender
from bridge.platform import PlatformError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping

    from slack_bolt.context.ack.async_ack import AsyncAck

    from adapters.slack.convert import Identity
    from adapters.slack.settings import SlackSettings
    from adapters.slack.slash import SlashTask
    from bridge.model import Inbound
    from bridge.platform import InboundHandler
    from bridge.store.base import Store

log = logging.getLogger(__name__)

REMEMBERED = 10_000  # delivery ids and owned threads kept in memory
PREFIXES = ("/", "!")  # Slack threads take "!stop": slash commands do not reach threads
NOT_HERE = (
    "I'm not enabled in this channel. An admin can add it to SLACK_ALLOWED_CHANNELS; "
    "a direct message to me works too."
)


@dataclass
class Intake:
    """Slack payloads → `handle(inbound)`, once per delivery, images still unfetched.

    `owns(key)` tells whether the bridge already has a conversation for a thread
    it has not seen in this process (e.g. after a restart); None: only threads
    started here count. `undecodable` counts a payload a converter refused."""

    adapter: SlackAdapter
    me: Identity
    handle: Callable[[Inbound], Awaitable[None]]
    undecodable: Callable[[], None]
    owns: Callable[[str], Awaitable[bool]] | None = None
    groups: UserGroups | None = None  # None: no user groups configured
    allowed_channels: Collection[str] | None = None  # None: every channel
    # Checked here only before `/pi` posts a thread root; the bridge screens everything.
    allowed_users: Collection[str] | None = None
    threads: OrderedDict[str, None] = field(default_factory=OrderedDict)
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    told: OrderedDict[str, None] = field(default_factory=OrderedDict)  # refused here

    async def on_event(self, body: Mapping[str, Any]) -> None:
        with counting_malformed(self.undecodable):  # once, whichever converter refused it
            await self._event(body)

    async def _event(self, body: Mapping[str, Any]) -> None:
        if not _first(self.seen, str(body.get("event_id") or "")):
            return
        key = candidate_thread(body, self.me)
        if key is not None and key not in self.threads and await self._owned(key):
            _remember(self.threads, key)
        converted = from_event(body, self.me, self.threads)
        if converted is None or not await self._channel_allowed(converted.inbound):
            return
        if (body.get("event") or {}).get("type") == "app_mention":
            _remember(self.threads, converted.inbound.key)
        await self._deliver(converted)

    async def on_action(self, body: Mapping[str, Any]) -> None:
        with counting_malformed(self.undecodable):
            converted = from_action(body, self.me)
        if converted is None or not _first(self.seen, converted.inbound.event_id):
            return
        if not await self._channel_allowed(converted.inbound):
            return
        press = converted.inbound.press
        form = await self.adapter.find_form(press.token) if press is not None else None
        trigger = str(body.get("trigger_id") or "")
        if form is not None and await self.adapter.open_form(trigger, form, converted.inbound):
            return  # the answer arrives with the modal's submission
        await self._deliver(converted)

    async def on_submission(self, body: Mapping[str, Any]) -> None:
        with counting_malformed(self.undecodable):
            converted = from_submission(body)
        if converted is not None and _first(self.seen, converted.inbound.event_id):
            await self._deliver(converted)

    async def on_command(self, task: SlashTask) -> None:
        """`/pi <task>`: post the thread's root, then the task as its first message."""
        if not _first(self.seen, task.delivery):
            return
        if not await self._in_allowed_channel(task.channel, task.user, task.private_reply):
            return
        if self.allowed_users is not None:
            sender = Sender(task.user, groups=await self._groups_of(task.user))
            if not sender.named_in(self.allowed_users):
                # Refused before anything public is posted.
                await self._tell(task.private_reply, refusal(task.user))
                return
        try:
            root = await self.adapter.post_root(task.channel, root_text(task))
        except PlatformError as exc:
            log.warning("/pi could not start a thread in %s: %s", task.channel, exc)
            await self._tell(task.private_reply, _cannot_post(str(exc)))
            return
        inbound = as_inbound(task, root)
        _remember(self.threads, inbound.key)
        await self._deliver(Converted(inbound))

    async def _tell(self, private_reply: str, text: str) -> None:
        try:
            await self.adapter.answer_press(private_reply, text)
        except PlatformError as exc:
            log.warning("a private note was not delivered: %s", exc)

    async def _groups_of(self, user: str) -> frozenset[str]:
        return await self.groups.of(user) if self.groups is not None else frozenset()

    async def _owned(self, key: str) -> bool:
        """Whether the store knows the thread. A failing store is asked again as an
        admission is (bridge/admission.py), not taken as "no": that would drop the
        message unseen. If it never answers, the thread counts as not the bridge's
        (logged), since answering in someone else's thread is worse."""
        if self.owns is None:
            return False
        for attempt in range(1, ADMIT_TRIES + 1):
            try:
                return await self.owns(key)
            except Exception as exc:  # whatever the store's backend raises
                if attempt == ADMIT_TRIES:
                    log.exception(
                        "thread %s left unanswered: the store could not say whether it is ours",
                        key,
                    )
                    break
                log.warning("store failed looking up %s (try %d): %s", key, attempt, exc)
                await anyio.sleep(retry_delay(attempt))
        return False

    async def _channel_allowed(self, inbound: Inbound) -> bool:
        private = inbound.private_reply or (inbound.press.press_id if inbound.press else "")
        person = not (inbound.from_self or inbound.sender.is_bot or inbound.is_edit)
        return await self._in_allowed_channel(
            inbound.chat.chat_id, inbound.sender.id, private if person else ""
        )

    async def _in_allowed_channel(self, channel: str, user: str, private: str) -> bool:
        """Whether the bot answers in `channel`; if not, `private` (where a note to
        the user goes; "": nowhere) is told so once."""
        if self.allowed_channels is None or channel in self.allowed_channels:
            return True
        if is_dm(channel):  # who may use the bot decides there, not the channel
            return True
        if private and _first(self.told, f"{channel}:{user}"):
            await self._tell(private, NOT_HERE)
        return False

    async def _deliver(self, converted: Converted) -> None:
        # Delivery ids under this bot's own name: two apps in one workspace sharing a
        # store must not drop each other's copy of the same event.
        inbound = converted.inbound
        self.adapter.recipients.note(inbound)  # whom an answer streamed here is for
        scoped = f"{self.me.team_id}:{self.me.user_id}:{inbound.event_id}"
        inbound = dataclasses.replace(inbound, event_id=scoped)
        if not (inbound.from_self or inbound.sender.is_bot):
            groups = await self._groups_of(inbound.sender.id)
            if groups:
                sender = dataclasses.replace(inbound.sender, groups=groups)
                inbound = dataclasses.replace(inbound, sender=sender)
        # Not downloaded here: the bridge fetches them once the message is admitted,
        # in the conversation's own task (see `bridge.model.Attachment`).
        files = tuple(
            Attachment(
                f.mime_type,
                f.size,
                functools.partial(self.adapter.download, f.url, image=f.kind == "image"),
                kind=f.kind,
                name=f.name,
                transcript=f.transcript,
            )
            for f in converted.shared_files
        )
        # Slack was acked already: an inbound the bridge could not take in is handed
        # in again here (bridge/admission.py).
        await until_taken(self.handle, dataclasses.replace(inbound, attachments=files))


def _cannot_post(error: str) -> str:
    if error in ("not_in_channel", "channel_not_found"):
        # Slack sends commands from channels the bot is not in; it cannot post there.
        return "I'm not in this channel yet: /invite me to it, then try again."
    return f"Could not start a thread here ({error}); please try again."


def _first(seen: OrderedDict[str, None], delivery: str) -> bool:
    """True the first time a delivery id shows up (empty ids are never duplicates)."""
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


def build_client(settings: SlackSettings) -> AsyncWebClient:
    return AsyncWebClient(token=settings.bot_token, base_url=settings.api_base_url)


def build_app(settings: SlackSettings, client: AsyncWebClient, intake: Intake) -> AsyncApp:
    app = AsyncApp(
        client=client,  # carries the bot token (bolt would warn if it were given twice)
        signing_secret=settings.signing_secret or None,
        # Socket Mode requests are not signed; bolt skips verification for them anyway.
        request_verification_enabled=bool(settings.signing_secret),
    )

    async def on_event(body: dict[str, Any]) -> None:
        await intake.on_event(body)

    async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await intake.on_action(body)

    async def on_submission(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()  # an empty ack closes the modal
        await intake.on_submission(body)

    async def on_command(ack: AsyncAck, body: dict[str, Any]) -> None:
        with counting_malformed(intake.undecodable):
            task = from_command(body, intake.me)
        if task is None:
            await ack(text=USAGE)  # shown to the user alone
            return
        await ack()
        await intake.on_command(task)

    app.event("app_mention")(on_event)
    app.command(COMMAND)(on_command)
    app.event("message")(on_event)
    app.action(re.compile("^" + re.escape(ACTION_PREFIX)))(on_action)
    app.view(CALLBACK_ID)(on_submission)
    app.error(acknowledging(intake.undecodable))
    return app


@contextlib.asynccontextmanager
async def slack_intake(
    settings: SlackSettings,
    handler: InboundHandler,
    adapter: SlackAdapter,
    owns: Callable[[str], Awaitable[bool]] | None = None,
    user_groups: Collection[str] = (),
) -> AsyncIterator[Intake]:
    """Slack traffic flowing into `handler` for the life of the block; `user_groups`:
    groups named in the bridge's options besides those in `settings` (per-chat
    approvers)."""
    groups = settings.user_groups | frozenset(user_groups)
    intake = Intake(
        adapter,
        await adapter.identity(),
        handler.handle,
        handler.undecodable,
        owns,
        groups=UserGroups(adapter, groups) if groups else None,
        allowed_channels=settings.allowed_channels,
        allowed_users=settings.allowed_users,
    )
    app = build_app(settings, adapter.client, intake)
    async with anyio.create_task_group() as tg:
        await tg.start(functools.partial(serve, undecodable=intake.undecodable), app, settings)
        try:
            yield intake
        finally:
            tg.cancel_scope.cancel()


def build_adapter(settings: SlackSettings) -> SlackAdapter:
    """The workspace's adapter (no call made yet)."""
    limits = dataclasses.replace(LIMITS, edit_rate=settings.edits_per_minute / 60)
    return SlackAdapter(
        build_client(settings),
        token=settings.bot_token,
        limits=limits,
        stream=settings.streaming == "stream",
    )


async def check(settings: SlackSettings) -> str:
    """`pi-bridge check`: Slack takes the bot token (auth.test) and it has the scopes
    the bridge needs; how answers will appear."""
    url = settings.api_base_url.rstrip("/") + "/auth.test"
    headers = {"Authorization": f"Bearer {settings.bot_token}"}
    body, answer = await post_json(url, settings.bot_token, headers=headers)
    if not body.get("ok"):
        raise RuntimeError(f"auth.test refused the bot token: {body.get('error', 'unknown')}")
    mode = "Socket Mode" if settings.socket_mode else "HTTP mode"
    who = body.get("user") or body.get("user_id")
    found = f"auth.test accepted the bot token (team {body.get('team')}, bot {who}; {mode})"
    answers = (
        "answers stream natively (chat.startStream) in threads and DMs"
        if settings.streaming == "stream"
        else 'answers appear by editing (streaming = "edit")'
    )
    return f"{found}{scope_note(answer)}; {answers}"


async def run_slack(
    settings: SlackSettings,
    bridge_for: Callable[[SlackAdapter], contextlib.AbstractAsyncContextManager[InboundHandler]],
    store: Store,
    *,
    stop: anyio.Event | None = None,
    user_groups: Collection[str] = (),
) -> None:
    """The bridge on Slack until `stop` is set (or cancelled): the CLI's `run` for Slack.

    `bridge_for(adapter)` builds the bridge (the caller chooses its options and may
    wrap its handler, e.g. to count messages); leaving it drains the bridge.
    """
    adapter = build_adapter(settings)

    async def owns(key: str) -> bool:
        # A thread the bridge answered before a restart is still its conversation.
        return await store.get_conversation(key) is not None

    async with (
        bridge_for(adapter) as handler,
        slack_intake(settings, handler, adapter, owns, user_groups),
    ):
        if stop is None:
            await anyio.sleep_forever()
        else:
            await stop.wait()

"""Run one bot: PTB's `Bot`, updates by long polling or a webhook, and the bridge they feed.

`serve()` initializes the bot (getMe gives the bot's name for the router),
registers the bridge's commands, opens the bridge, and takes updates until `stop`:

- Polling (no `webhook_url`): any webhook is cleared *without* dropping pending
  updates (docs/design.md, "Platform libraries": dropping them loses what was sent while the
  bridge was down). An update is confirmed (the next getUpdates' `offset`) only
  after `bridge.handle()` returned for it, so a crash redelivers instead of losing;
  the bridge drops redeliveries by `event_id`. This is why the loop is ours and not
  PTB's `Updater`, which confirms a batch as soon as it is queued.
- Webhook (`webhook_url` and `webhook_secret` set): setWebhook with the secret and
  the update types, then `webhook.WebhookServer` serves the POSTs. The webhook is
  left set on stop (Telegram keeps queueing updates for the next start).

Both hand each update to `Delivery` as JSON (decode, convert, `bridge.handle()`; a
photo goes along unfetched, for the bridge to fetch once the message is admitted).
`handle()` only admits the message and returns (the agent's run goes on in the
bridge's tasks). Updates are decoded one by one, not by PTB's `get_updates`, which
fails a whole batch on one update it cannot read (`KeyError: 'inline_keyboard'` for a
`reply_markup` of `{}`): such an update is logged, counted, confirmed and skipped
(adapters/malformed.py), where it used to end polling, and the bridge, at every start.

Shutdown is bounded: taking updates stops first (the webhook's queued updates are
still handed over), then the bridge drains (it still sends through the bot), then
polling confirms what was handled with one last getUpdates with timeout 0, then
the bot's HTTP clients close.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import warnings
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from telegram import Bot, BotCommand, Update
from telegram.error import InvalidToken, RetryAfter, TelegramError
from telegram.request import HTTPXRequest
from telegram.warnings import PTBUserWarning

from adapters.malformed import counting_malformed, skip_unreadable
from adapters.probe import post_json
from adapters.telegram.adapter import TelegramAdapter, retry_seconds
from adapters.telegram.convert import Me, convert
from adapters.telegram.webhook import WebhookServer
from bridge.admission import AdmissionFailed, retry_delay
from bridge.backoff import Backoff
from bridge.controls.table import COMMANDS as REGISTRY
from bridge.files.attachments import too_large
from bridge.model import Attachment, AttachmentRefused

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

    from adapters.telegram.settings import TelegramSettings
    from bridge.model import Inbound
    from bridge.platform import Adapter, InboundHandler

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
SHUTDOWN_TIMEOUT = 5.0  # the final offset confirmation and closing the HTTP clients
DOWNLOAD_TIMEOUT = 30.0  # one photo (getFile + download, ≤ 20 MB by Bot API rules)
POLL_BACKOFF = Backoff(first=1.0, cap=30.0)  # between failing polls: 1, 2, 4 … 30 s
HTTP_POOL = 16  # the outbox calls concurrently for different chats
POLL_READ_TIMEOUT = 5.0  # a long poll may take its `timeout` and this much more

# getUpdates goes through `do_api_request` on purpose (see `Poller.fetch`): PTB's advice
# to call `get_updates` instead is heard.
warnings.filterwarnings("ignore", "Please use 'Bot.getUpdates'", PTBUserWarning)

# The command menu, from the bridge's one command registry.
COMMANDS: tuple[tuple[str, str], ...] = tuple(REGISTRY.menu())


def make_bot(settings: TelegramSettings) -> Bot:
    request = HTTPXRequest(connection_pool_size=HTTP_POOL, pool_timeout=10.0)
    return Bot(
        settings.token,
        base_url=settings.base_url,
        base_file_url=settings.base_file_url,
        request=request,
        get_updates_request=HTTPXRequest(read_timeout=POLL_READ_TIMEOUT),
    )


def build_adapter(settings: TelegramSettings, bot: Bot | None = None) -> TelegramAdapter:
    """The bot's adapter (no call made yet)."""
    return TelegramAdapter(bot or make_bot(settings), drafts=settings.streaming == "draft")


async def check(settings: TelegramSettings) -> str:
    """`pi-bridge check`: Telegram takes the token (getMe); how answers will stream."""
    url = f"{settings.base_url}{settings.token}/getMe"
    body, _ = await post_json(url, settings.token)
    result = body.get("result")
    if not body.get("ok") or not isinstance(result, dict):
        raise RuntimeError(f"getMe refused: {body.get('description', 'no reason given')}")
    streaming = (
        "answers stream as drafts in private chats (sendMessageDraft; by editing in groups "
        "and topics, and in any chat that refuses a draft)"
        if settings.streaming == "draft"
        else 'answers stream by editing a sent message (streaming = "edit")'
    )
    return f"getMe accepted the token (@{result.get('username')}); {streaming}"


async def serve(
    settings: TelegramSettings,
    # (adapter, bot_name) → e.g. `Bridge(adapter, store, options, bot_name=bot_name)`
    bridge_factory: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]],
    *,
    stop: anyio.Event | None = None,
    poll_gate: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
) -> None:
    """Serve the bot until `stop` is set (or this task is cancelled). `poll_gate`
    runs the long poll when it may (one frontend of several polls, by lease), and
    cancels it when it may no longer."""
    # A webhook without its secret cannot get here: `TelegramSettings` refuses it when built.
    bot = make_bot(settings)
    await bot.initialize()  # getMe: fails fast on a bad token
    try:
        me = Me(bot.id, bot.username, settings.group_trigger)
        adapter = build_adapter(settings, bot)
        if settings.webhook_url:
            await _serve_webhook(settings, bot, me, adapter, bridge_factory, stop)
        else:
            await _serve_polling(settings, bot, me, adapter, bridge_factory, stop, poll_gate)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_TIMEOUT):
            await bot.shutdown()


async def _serve_polling(
    settings: TelegramSettings,
    bot: Bot,
    me: Me,
    adapter: Adapter,
    bridge_factory: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]],
    stop: anyio.Event | None,
    poll_gate: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
) -> None:
    await bot.delete_webhook(drop_pending_updates=False)
    await _register_commands(bot)
    # The task group closes (polling stops) before the bridge drains.
    async with bridge_factory(adapter, bot.username) as bridge, anyio.create_task_group() as tg:
        deliver = Delivery(bot, me, bridge.handle, bridge.undecodable)

        async def poll() -> None:
            # A new poller each time the gate opens: it starts from what Telegram has
            # not had confirmed, so nothing another frontend left unread is skipped.
            poller = Poller(bot, me, settings.poll_timeout)
            try:
                await poller.run(deliver)
            finally:
                await poller.confirm()  # shielded and bounded

        async def gated() -> None:
            await (poll() if poll_gate is None else poll_gate(poll))

        tg.start_soon(gated)
        if stop is not None:
            await stop.wait()
            tg.cancel_scope.cancel()


async def _serve_webhook(
    settings: TelegramSettings,
    bot: Bot,
    me: Me,
    adapter: Adapter,
    bridge_factory: Callable[[Adapter, str], AbstractAsyncContextManager[InboundHandler]],
    stop: anyio.Event | None,
) -> None:
    url, secret = settings.webhook_url or "", settings.webhook_secret or ""
    await _register_commands(bot)
    async with bridge_factory(adapter, bot.username) as bridge, anyio.create_task_group() as tg:
        server = WebhookServer(
            bot,
            url=url,
            secret=secret,
            host=settings.webhook_listen,
            port=settings.webhook_port,
            deliver=Delivery(bot, me, bridge.handle, bridge.undecodable),
        )
        await tg.start(server.run)
        # Listening before setWebhook: Telegram may POST as soon as it is set.
        await bot.set_webhook(url=url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
        if stop is not None:
            await stop.wait()
            await server.close()  # `run` returns once the queued updates are handed over


async def _register_commands(bot: Bot) -> None:
    """The command menu is a convenience: a failure to set it must not stop the bot."""
    try:
        await bot.set_my_commands([BotCommand(name, text) for name, text in COMMANDS])
    except TelegramError as exc:
        log.warning("could not set the command menu: %s", exc)


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One update, as JSON, into the bridge: decode, convert, `handle`.

    An update PTB or the converter cannot read is logged and counted (`undecodable`),
    and returns like a handled one, so it is confirmed. A file is not downloaded here:
    the inbound carries it as an `Attachment` that the bridge fetches after admission,
    in the conversation's task (a stranger's photo is never fetched, and no download
    holds up the update loop). Raises only `AdmissionFailed` (the bridge's store
    failed: deliver the update again); any other failure of one update is logged, not
    allowed to stop polling or the webhook.
    """

    bot: Bot
    me: Me
    handle: Callable[[Inbound], Awaitable[None]]
    undecodable: Callable[[], None]

    async def __call__(self, raw: object) -> None:
        update = self._decoded(raw)
        if update is None:
            return
        try:
            with counting_malformed(self.undecodable):
                incoming = convert(update.to_dict(), self.me)
            if incoming is None:
                return
            inbound = incoming.inbound
            if incoming.file_id is not None:
                fetch = functools.partial(self._download, incoming.file_id)
                file = Attachment(
                    incoming.mime_type,
                    incoming.file_size,
                    fetch,
                    kind=incoming.kind,
                    name=incoming.file_name,
                )
                inbound = dataclasses.replace(inbound, attachments=(file,))
            await self.handle(inbound)
        except AdmissionFailed:
            raise
        except Exception:
            log.exception("update %s could not be delivered", update.update_id)

    def _decoded(self, raw: object) -> Update | None:
        """The update as PTB reads it; None (logged, counted) when it cannot."""
        try:
            if not isinstance(raw, dict):
                raise TypeError(f"an update is an object, not {type(raw).__name__}")
            return Update.de_json(raw, self.bot)
        # Whatever PTB raises on it, one update must not stop the others (`Delivery`).
        except Exception as exc:  # noqa: BLE001 (RUF100: while BLE is not selected)
            skip_unreadable(f"telegram update {update_id(raw)}", exc, self.undecodable)
            return None

    async def _download(self, file_id: str, cap: int) -> bytes:
        """The file, at most `cap` bytes: refused before downloading when getFile
        announces more, and given up as soon as the body outgrows it anyway."""
        try:
            with anyio.fail_after(DOWNLOAD_TIMEOUT):
                file = await self.bot.get_file(file_id)
                if file.file_size is not None and file.file_size > cap:
                    raise too_large(cap, file.file_size)
                if not file.file_path:
                    raise AttachmentRefused("Telegram gave no file to download")
                return await _fetch_capped(file.file_path, cap)
        except TelegramError as exc:
            if "too big" in str(exc).lower():
                raise AttachmentRefused(TOO_BIG_FOR_THE_CLOUD) from exc
            raise AttachmentRefused(f"Telegram would not hand it over: {exc}") from exc


async def _fetch_capped(url: str, cap: int) -> bytes:
    """GET the file's URL, reading no further than `cap` bytes (PTB's own download
    reads a whole body before its size can be checked). The URL carries the bot
    token: it is never logged or shown."""
    data = bytearray()
    try:
        async with httpx.AsyncClient() as client, client.stream("GET", url) as response:
            if response.status_code != httpx.codes.OK:
                raise AttachmentRefused(
                    f"Telegram would not hand it over (HTTP {response.status_code})"
                )
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > cap:
                    raise too_large(cap)
    except httpx.HTTPError as exc:
        log.warning("file download failed: %s", type(exc).__name__)
        raise AttachmentRefused("it could not be fetched from Telegram") from exc
    return bytes(data)


TOO_BIG_FOR_THE_CLOUD = (
    "Telegram's cloud Bot API hands bots files of at most 20 MB; a local Bot API server "
    "(`[telegram] api_base_url`) serves larger ones"
)


def update_id(raw: object) -> int | None:
    """The update_id of an update as JSON, if it has one."""
    found = raw.get("update_id") if isinstance(raw, dict) else None
    return found if isinstance(found, int) else None


@dataclasses.dataclass
class Poller:
    """getUpdates in a loop; `offset` moves past an update only once it is handled
    (or skipped as unreadable)."""

    bot: Bot
    me: Me
    timeout: int
    offset: int | None = None
    confirmed: int | None = None
    _unconfirmed: dict[int, int] = dataclasses.field(default_factory=dict)  # id → tries

    async def run(self, deliver: Callable[[object], Awaitable[None]]) -> None:
        failures = 0
        while True:
            try:
                updates = await self.fetch(self.timeout, allowed_updates=list(ALLOWED_UPDATES))
            except InvalidToken:
                raise  # no retry can help
            except RetryAfter as exc:
                await anyio.sleep(retry_seconds(exc))
                continue
            except TelegramError as exc:  # also Conflict: another poller, or a webhook set
                failures += 1
                delay = POLL_BACKOFF.delay(failures)
                log.warning("getUpdates failed (%s); retrying in %g s", exc, delay)
                await anyio.sleep(delay)
                continue
            failures = 0
            self.confirmed = self.offset
            await self._deliver_all(updates, deliver)

    async def fetch(self, wait: int, **params: Any) -> Sequence[object]:
        """getUpdates from `offset`, waiting up to `wait` s, as JSON: PTB's `get_updates`
        would decode the batch and fail it whole on one update it cannot read
        (`Delivery` decodes each)."""
        params |= {"offset": self.offset, "timeout": wait}
        found = await self.bot.do_api_request(
            "getUpdates", api_kwargs=params, read_timeout=POLL_READ_TIMEOUT + wait
        )
        return found if isinstance(found, list) else []

    async def _deliver_all(
        self, updates: Sequence[object], deliver: Callable[[object], Awaitable[None]]
    ) -> None:
        """Each in turn; the offset stops before one the bridge could not take in, so
        the next getUpdates hands it out again (after a pause for the store)."""
        for update in updates:
            number = update_id(update)
            try:
                await deliver(update)
            except AdmissionFailed:
                assert number is not None  # only a decoded update reaches the bridge
                tries = self._unconfirmed.get(number, 0) + 1
                self._unconfirmed[number] = tries
                await anyio.sleep(retry_delay(tries))
                return
            if number is not None:
                self._unconfirmed.pop(number, None)
                self.offset = number + 1

    async def confirm(self) -> None:
        """Tell Telegram what was handled (bounded: it is one more getUpdates)."""
        if self.offset is None or self.offset == self.confirmed:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_TIMEOUT):
            try:
                await self.fetch(0, limit=1)
                self.confirmed = self.offset
            except TelegramError as exc:
                log.warning("could not confirm handled updates: %s", exc)

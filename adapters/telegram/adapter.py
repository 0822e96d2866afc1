"""`TelegramAdapter`: the bridge's `Adapter` protocol on python-telegram-bot's `Bot`.

It only calls the Bot API and translates: `Keyboard` → inline keyboards whose
callback_data is the button's opaque token, `Markup` → parse mode, and
`telegram.error` → the bridge's `PlatformError` tree (at the boundary, always
``raise … from exc``). Pacing is the outbox's job (docs/design.md, "Platform libraries": PTB's
`AIORateLimiter` has no per-chat edit limit and on a 429 holds back every chat),
so no rate limiter is installed here; `limits` tells the outbox the numbers,
for private chats and for groups.

PTB rewrites error texts ("Bad Request: " dropped, first letter capitalized), so
descriptions are matched case-insensitively on a fragment.

Text without a parse mode (the bridge's plain messages, the fallback of a message whose
MarkdownV2 Telegram refused, captions) carries agent text as well, and Telegram finds
mentions and `tg:` links in it by itself: it goes out through `format.plain`.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import TYPE_CHECKING

from telegram import ForceReply, InlineKeyboardButton, InlineKeyboardMarkup, MessageEntity, User
from telegram.constants import (
    FloodLimit,
    InlineKeyboardButtonLimit,
    MessageLimit,
    ParseMode,
)
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.helpers import escape_markdown
from telegram.warnings import PTBDeprecationWarning

from adapters import errors
from adapters.telegram.format import format_markdown, plain
from bridge.model import ChatRef, MessageRef, PlatformLimits
from bridge.platform import (
    BadFormatting,
    MessageGone,
    NotModified,
    PlatformError,
    RateLimited,
    TooLong,
    TransientError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from telegram import Bot, Message

    from bridge.model import Keyboard, Markup, Mention, ReactionState

# PTB 22 warns, on every RetryAfter, that `retry_after` will become a timedelta:
# `retry_seconds` takes either, so the warning says nothing to act on.
warnings.filterwarnings(
    "ignore", message=".*`retry_after` will be of type", category=PTBDeprecationWarning
)
log = logging.getLogger(__name__)

# Bot API FAQ: ~1 message/s per chat, 20 per minute in a group, ~30/s overall; edits of
# one message at most every second in a private chat, every 3 s in a group
# (docs/design.md). The outbox picks the group values for `ChatRef.is_group` chats.
PHOTO_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
PHOTO_MAX = 10 * 2**20  # sendPhoto takes at most 10 MB (core.telegram.org/bots/api#sendphoto)
LIMITS = PlatformLimits(
    max_text=int(MessageLimit.MAX_TEXT_LENGTH),
    max_caption=int(MessageLimit.CAPTION_LENGTH),
    max_button_data=int(InlineKeyboardButtonLimit.MAX_CALLBACK_DATA),
    edit_interval=1.0,
    chat_rate=float(FloodLimit.MESSAGES_PER_SECOND_PER_CHAT),
    global_rate=float(FloodLimit.MESSAGES_PER_SECOND),
    group_edit_interval=3.0,
    group_chat_rate=FloodLimit.MESSAGES_PER_MINUTE_PER_GROUP / 60,
)

# From the emoji Telegram allows as reactions (Bot API `ReactionTypeEmoji`).
REACTIONS: dict[ReactionState, str] = {"working": "👀", "done": "👍", "failed": "👎"}
# A chat that limits reactions ("REACTION_INVALID") or a message gone since.
_REACTION_REFUSED = ("reaction", "message to react not found")

# Fragments of Bot API error descriptions, lower-cased, → the bridge's error
# (matched by `adapters.errors.classify`; anything else is a plain PlatformError).
_BAD_REQUESTS: errors.Rules = (
    *errors.rules(NotModified, "message is not modified"),
    *errors.rules(BadFormatting, "can't parse entities", "can't find end of the entity"),
    *errors.rules(
        MessageGone,
        "message to edit not found",
        "message to delete not found",
        "message can't be edited",
        "message can't be deleted",
        "query is too old",
    ),
    *errors.rules(TooLong, "message is too long", "message_too_long", "caption is too long"),
)


class TelegramAdapter:
    """The `Adapter` for one bot; `bot` is initialized and shut down by its owner."""

    def __init__(self, bot: Bot, *, drafts: bool = True) -> None:
        self.bot = bot
        self._drafts = drafts  # [telegram] streaming = "draft"

    def drafts_in(self, chat: ChatRef) -> bool:
        """Drafts (`sendMessageDraft`) exist only in private chats, which have positive
        ids; a group or a forum topic posts and edits."""
        return self._drafts and not chat.is_group and chat.thread_id is None and _private(chat)

    async def draft(
        self, chat: ChatRef, draft_id: int, text: str, *, markup: Markup = "plain"
    ) -> None:
        """Show `text` as the chat's draft `draft_id` (Bot API `sendMessageDraft`): an
        ephemeral preview, animated while it grows, that the real message replaces."""
        with platform_errors():
            await self.bot.send_message_draft(
                chat_id=int(chat.chat_id),
                draft_id=draft_id,
                text=_shown(text, markup),
                parse_mode=_parse_mode(markup),
            )

    @property
    def limits(self) -> PlatformLimits:
        return LIMITS

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
        # One reply_markup per message: ForceReply (the input dialog's reply box)
        # wins over buttons; /stop still cancels such a dialog.
        reply_markup: ForceReply | InlineKeyboardMarkup | None = (
            ForceReply(selective=True) if force_reply else keyboard(buttons)
        )
        shown, entities = _shown(text, markup), None
        if ping is not None and not _private(chat):
            shown, entities = _mentioning(ping, shown, markup)
        with platform_errors():
            sent = await self.bot.send_message(
                chat_id=chat.chat_id,
                text=shown,
                parse_mode=_parse_mode(markup),
                reply_markup=reply_markup,
                message_thread_id=_thread(chat),
                # Only a ping notifies (docs/commands.md, "Notifications"): an edit
                # never does, and a message sent this way arrives without a sound.
                disable_notification=ping is None,
                entities=entities,
            )
        return _ref(chat, sent)

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        # Without reply_markup Telegram drops the keyboard: "replace text and buttons".
        with platform_errors():
            await self.bot.edit_message_text(
                text=_shown(text, markup),
                chat_id=ref.chat.chat_id,
                message_id=int(ref.message_id),
                parse_mode=_parse_mode(markup),
                reply_markup=keyboard(buttons),
            )

    async def delete(self, ref: MessageRef) -> None:
        with platform_errors():
            await self.bot.delete_message(chat_id=ref.chat.chat_id, message_id=int(ref.message_id))

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        caption = plain(caption, LIMITS.max_caption)
        if filename.lower().endswith(PHOTO_SUFFIXES) and len(data) <= PHOTO_MAX:
            # Shown in the chat as a picture; one Telegram will not take as a photo
            # (its size, its sides) still arrives, as the file it is.
            try:
                with platform_errors():
                    sent = await self.bot.send_photo(
                        chat_id=chat.chat_id,
                        photo=data,
                        caption=caption or None,
                        message_thread_id=_thread(chat),
                        disable_notification=True,  # a file is never a ping
                    )
                return _ref(chat, sent)
            except (RateLimited, TransientError):
                raise  # the platform's state, not the photo's: the outbox retries
            except PlatformError as exc:
                log.info("a photo went as a file instead: %s", exc)
        with platform_errors():
            sent = await self.bot.send_document(
                chat_id=chat.chat_id,
                document=data,
                filename=filename,
                caption=caption or None,
                message_thread_id=_thread(chat),
                disable_notification=True,
            )
        return _ref(chat, sent)

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        with platform_errors():
            await self.bot.answer_callback_query(press_id, text=text or None, show_alert=alert)

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        """A person's private chat with the bot has their user id (it works once they
        have started the bot; a send before that is refused, and only that send fails)."""
        return ChatRef(user_id) if user_id.isdigit() else None

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        """👀 on the user's message while the agent works on it, then 👍 or 👎 in its
        place (a bot's reaction replaces its earlier one). Where a chat does not allow
        that reaction, the message stays unmarked: the status message says the same."""
        try:
            with platform_errors():
                await self.bot.set_message_reaction(chat.chat_id, int(message_id), REACTIONS[state])
        except PlatformError as exc:
            if not any(s in str(exc).lower() for s in _REACTION_REFUSED):
                raise
            log.debug("no reaction in chat %s: %s", chat.chat_id, exc)

    async def typing(self, chat: ChatRef) -> None:
        """Show "typing…" for ~5 s (optional: the bridge does not need it)."""
        with platform_errors():
            await self.bot.send_chat_action(chat.chat_id, "typing", message_thread_id=_thread(chat))


def keyboard(buttons: Keyboard) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.token) for b in row] for row in buttons]
    )


@contextlib.contextmanager
def platform_errors() -> Iterator[None]:
    """Translate `telegram.error` into the bridge's `PlatformError` tree."""
    try:
        yield
    except RetryAfter as exc:
        raise RateLimited(retry_seconds(exc)) from exc
    except BadRequest as exc:
        raise _bad_request(exc.message) from exc
    except NetworkError as exc:  # TimedOut is a NetworkError
        raise TransientError(str(exc)) from exc
    except TelegramError as exc:  # Forbidden (blocked by the user), ChatMigrated, …
        raise PlatformError(str(exc)) from exc


def retry_seconds(exc: RetryAfter) -> float:
    """The wait a 429 names: PTB 22 gives an int unless PTB_TIMEDELTA is set (then a
    timedelta); `adapters.errors` reads either."""
    return errors.retry_after_seconds(exc.retry_after)


def _bad_request(description: str) -> PlatformError:
    return errors.error(errors.classify(description, _BAD_REQUESTS), description)


def _private(chat: ChatRef) -> bool:
    try:
        return int(chat.chat_id) > 0
    except ValueError:
        return False


def _shown(text: str, markup: Markup) -> str:
    return plain(text) if markup == "plain" else text


def _mentioning(
    ping: Mention, shown: str, markup: Markup
) -> tuple[str, list[MessageEntity] | None]:
    """`shown` opening with a mention of `ping` by id (a person without a username can
    be mentioned only so): a link in MarkdownV2, an entity in plain text."""
    name = ping.name or "you"
    if not ping.user_id.isdigit():
        return shown, None
    if markup == "formatted":
        return f"[{escape_markdown(name, version=2)}](tg://user?id={ping.user_id}) {shown}", None
    user = User(int(ping.user_id), name, is_bot=False)
    length = len(name.encode("utf-16-le")) // 2  # entity offsets count UTF-16 units
    return f"{name} {shown}", [MessageEntity(MessageEntity.TEXT_MENTION, 0, length, user=user)]


def _parse_mode(markup: Markup) -> str | None:
    return ParseMode.MARKDOWN_V2 if markup == "formatted" else None


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id is not None else None


def _ref(chat: ChatRef, message: Message) -> MessageRef:
    return MessageRef(chat, str(message.message_id))

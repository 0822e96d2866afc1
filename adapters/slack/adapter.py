"""`SlackAdapter`: the bridge's ops as Slack Web API calls over `AsyncWebClient`.

Messages go into the conversation's thread with unfurling off (tool output is
full of links). Buttons that carry a `Form` are remembered by token (in memory,
bounded), so a press on one can open the form as a modal at once (`open_form`:
the press's trigger_id expires in 3 s). slack_sdk errors never leave this
module: they become the `bridge.platform.PlatformError` tree (`failures.py`),
`raise … from exc`. The client is built by the caller (with `base_url` for
tests); this class only calls it.

A growing answer streams natively (`Streaming`: chat.start/append/stopStream, as
chunks of markdown and task cards) in threads of DMs and in channel threads whose
first writer the runner noted (`recipients.py`: Slack wants the reader outside DMs);
elsewhere, or with `stream=False`, answers are posted and edited. `set_status` is
the thread's status line (assistant.threads.setStatus).

Agent text is shown, never obeyed (format.py): a stream's text comes disarmed from the
outbox, and the mrkdwn fields that carry agent text, a file's caption
(`initial_comment`) and the status line (it names the running tool), are escaped
(`mrkdwn`). Slack does not say how it reads a status line; escaped, it holds no control
either way.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError

from adapters.slack.convert import Identity, is_dm, parse_press_ref
from adapters.slack.failures import translated
from adapters.slack.format import chunks, fallback_text, format_markdown, message_blocks, mrkdwn
from adapters.slack.forms import modal
from adapters.slack.recipients import Recipients
from bridge.files.attachments import too_large
from bridge.model import (
    MAX_ATTACHMENT,
    AttachmentRefused,
    ChatRef,
    Keyboard,
    Markup,
    MessageRef,
    PlatformLimits,
    ReactionState,
)
from bridge.platform import MessageGone, PlatformError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from slack_sdk.web.async_client import AsyncWebClient

    from bridge.model import Form, Inbound, Mention, Task

log = logging.getLogger(__name__)

# Slack limits each method on its own, "per API method per app per workspace"
# (docs.slack.dev/apis/web-api/rate-limits; the figures and pages are cited in
# docs/performance.md): only chat.postMessage is also paced per channel, so a
# channel's threads share that one pace and nothing else (`chat_methods`), and each
# thread is a lane of its own.
LIMITS = PlatformLimits(
    max_text=12_000,  # one markdown block per message (format.MARKDOWN_BLOCK_MAX)
    max_caption=4_000,
    max_button_data=2_000,  # Block Kit button `value`
    max_buttons_per_row=5,
    edit_interval=1.0,
    # chat.postMessage (special tier): "one message per second per channel", short
    # bursts allowed; a file's upload posts a message in the channel too.
    chat_rate=1.0,
    chat_burst=2,
    chat_methods=frozenset({"send", "upload"}),
    thread_lanes=True,
    global_rate=20.0,
    # chat.update is a Tier 3 method: 50+ a minute per workspace, bursts tolerated.
    # Streams in many threads share it (the outbox takes turns); each still edits
    # at most once a second.
    edit_rate=50 / 60,
    edit_burst=10,
    # chat.startStream / stopStream: Tier 2, 20+ a minute per workspace, each its own
    # budget; past it, edit.
    stream_rate=20 / 60,
    stream_burst=5,
    # chat.appendStream: Tier 4, 100+ a minute per workspace. setStatus has "special"
    # limits without a figure: the status line is a nicety, kept to Tier 3's pace.
    append_rate=100 / 60,
    append_burst=10,
    status_rate=50 / 60,
    # chat.delete and reactions.add / remove: Tier 3; chat.postEphemeral: Tier 4.
    method_rates=(("delete", 50 / 60, 10), ("react", 50 / 60, 10), ("answer_press", 100 / 60, 10)),
)
FILE_PREFIX = "file:"  # message ids of uploads are file ids: deleted with files.delete
MAX_IMAGE_BYTES = MAX_ATTACHMENT
# Where a file's URL may take the bot token: Slack's file host, or the Web API's own
# host (a self-hosted gateway, the tests' fake). Anything else gets no request at all.
SLACK_FILE_HOSTS = frozenset({"files.slack.com"})
DOWNLOAD_TIMEOUT = 30.0
DOWNLOAD_CHUNK = 64 * 1024
# The user's message while a run works on it, and after (emoji names, not characters).
REACTIONS: dict[ReactionState, str] = {"working": "eyes", "done": "white_check_mark", "failed": "x"}
FORMS_KEPT = 1_000  # forms of buttons sent by this process; older ones fall back to messages

_REACTION_DONE = frozenset({"already_reacted", "no_reaction"})


class SlackAdapter:
    """`bridge.platform.Adapter` for one Slack workspace, with the capabilities
    `Streaming`, `DirectMessages` and `Forms`."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        token: str = "",
        limits: PlatformLimits = LIMITS,
        stream: bool = True,
    ) -> None:
        self.client = client
        self._token = token or client.token or ""
        self._limits = limits
        self._forms: OrderedDict[str, Form] = OrderedDict()
        self.stream = stream  # False: answers are posted and edited, never streamed
        self.recipients = Recipients()
        self.forms_elsewhere: Callable[[str], Awaitable[Form | None]] | None = None

    @property
    def limits(self) -> PlatformLimits:
        return self._limits

    def format(self, markdown: str, limit: int) -> list[str]:
        return format_markdown(markdown, limit)

    async def identity(self) -> Identity:
        """Who the bot is (`auth.test`): needed to strip mentions and spot own messages."""
        with translated():
            found = await self.client.auth_test()
        return Identity(
            str(found.get("team_id") or ""),
            str(found.get("user_id") or ""),
            str(found.get("bot_id") or ""),
        )

    async def user_group_members(self, group: str) -> frozenset[str]:
        """The user ids in a user group (`usergroups.users.list`)."""
        with translated():
            found = await self.client.usergroups_users_list(usergroup=group)
        return frozenset(str(user) for user in found.get("users") or ())

    async def post_root(self, channel: str, mrkdwn: str) -> str:
        """A message starting a thread, as mrkdwn text (so mentions show); its ts."""
        with translated():
            sent = await self.client.chat_postMessage(
                channel=channel, text=mrkdwn, unfurl_links=False, unfurl_media=False
            )
        return str(sent["ts"])

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
        # Slack has neither ForceReply nor a silent flag: a reply in a thread notifies
        # only the thread's followers, edits and stream appends nobody; a ping is a new
        # message mentioning the person (a DM with the app notifies by itself).
        self._remember_forms(buttons)
        fallback, blocks = message_blocks(text, markup, buttons)
        if ping is not None and not is_dm(chat.chat_id):
            mention = f"<@{ping.user_id}>"
            fallback = f"{mention} {fallback}"
            blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": mention}}, *blocks]
        with translated(markup):
            sent = await self.client.chat_postMessage(
                channel=chat.chat_id,
                thread_ts=chat.thread_id,
                text=fallback,
                blocks=blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        return MessageRef(chat, str(sent["ts"]))

    async def edit(
        self, ref: MessageRef, text: str, *, markup: Markup = "plain", buttons: Keyboard = ()
    ) -> None:
        if ref.message_id.startswith(FILE_PREFIX):
            raise MessageGone("an uploaded file cannot be edited")
        self._remember_forms(buttons)
        fallback, blocks = message_blocks(text, markup, buttons)
        with translated(markup):
            await self.client.chat_update(
                channel=ref.chat.chat_id, ts=ref.message_id, text=fallback, blocks=blocks
            )

    # --- streams (bridge.platform.Streaming) ------------------------------------------------

    def streams_in(self, chat: ChatRef) -> bool:
        # A stream is a reply in a thread (chat.startStream takes a thread_ts): a
        # DM's top-level conversation is answered by posting and editing.
        if not self.stream or chat.thread_id is None:
            return False
        return is_dm(chat.chat_id) or self._recipient(chat) is not None

    def _recipient(self, chat: ChatRef) -> tuple[str, str] | None:
        """(team, user) a stream in `chat` is for: carried with the chat where the
        conversation began from a message (under the scale-out, the worker and the
        frontend making the call never saw it), else the thread's first writer noted."""
        if chat.reader and chat.reader.count(":") == 1:
            team, user = chat.reader.split(":")
            if team and user:
                return team, user
        return self.recipients.of(chat)

    async def start_stream(
        self, chat: ChatRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> MessageRef:
        args: dict[str, Any] = {"channel": chat.chat_id, "thread_ts": chat.thread_id}
        if content := chunks(markdown, tasks):  # a stream may start empty (nothing settled)
            args["chunks"] = content
        recipient = self._recipient(chat)
        if recipient is not None and not is_dm(chat.chat_id):
            args["recipient_team_id"], args["recipient_user_id"] = recipient
        with translated("formatted"):
            started = await self.client.chat_startStream(**args)
        return MessageRef(chat, str(started["ts"]))

    async def append_stream(
        self, ref: MessageRef, markdown: str, tasks: Sequence[Task] = ()
    ) -> None:
        with translated("formatted"):
            await self.client.chat_appendStream(
                channel=ref.chat.chat_id, ts=ref.message_id, chunks=chunks(markdown, tasks)
            )

    async def stop_stream(self, ref: MessageRef, markdown: str) -> None:
        with translated("formatted"):
            await self.client.chat_stopStream(
                channel=ref.chat.chat_id, ts=ref.message_id, chunks=chunks(markdown) or None
            )

    async def set_status(self, chat: ChatRef, text: str) -> None:
        if chat.thread_id is None:
            return
        with translated():
            await self.client.assistant_threads_setStatus(
                channel_id=chat.chat_id, thread_ts=chat.thread_id, status=mrkdwn(text)
            )

    async def delete(self, ref: MessageRef) -> None:
        with translated():
            if ref.message_id.startswith(FILE_PREFIX):
                await self.client.files_delete(file=ref.message_id.removeprefix(FILE_PREFIX))
            else:
                await self.client.chat_delete(channel=ref.chat.chat_id, ts=ref.message_id)

    async def upload(
        self, chat: ChatRef, filename: str, data: bytes, *, caption: str = ""
    ) -> MessageRef:
        with translated():
            done = await self.client.files_upload_v2(
                channel=chat.chat_id,
                thread_ts=chat.thread_id,
                filename=filename,
                title=filename,
                file=data,
                initial_comment=mrkdwn(caption) or None,
            )
        file = done.get("file") or {}
        return MessageRef(chat, FILE_PREFIX + str(file.get("id") or ""))

    async def answer_press(self, press_id: str, text: str = "", *, alert: bool = False) -> None:
        """An ephemeral message to the presser (Slack has no toasts; `alert` changes nothing)."""
        ref = parse_press_ref(press_id)
        if ref is None or not text:
            return  # the press was already acknowledged to Slack
        channel, user, thread = ref
        with translated():
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=fallback_text(text), thread_ts=thread or None
            )

    async def direct_chat(self, user_id: str) -> ChatRef | None:
        """The app's direct message with a person (`conversations.open`, needs
        `im:write`); None for an id that is no person's (a user group)."""
        if not user_id.startswith(("U", "W")):
            return None
        with translated():
            opened = await self.client.conversations_open(users=user_id)
        return ChatRef(str(opened["channel"]["id"]))

    async def react(self, chat: ChatRef, message_id: str, state: ReactionState) -> None:
        """:eyes: on the user's message while the agent works on it, then ✅ or ❌ in its
        place. A reaction already there (or already gone) is what was wanted."""
        if state != "working":
            await self._reaction(
                self.client.reactions_remove, chat, message_id, REACTIONS["working"]
            )
        await self._reaction(self.client.reactions_add, chat, message_id, REACTIONS[state])

    async def _reaction(
        self, call: Callable[..., Awaitable[Any]], chat: ChatRef, ts: str, name: str
    ) -> None:
        with translated():
            try:
                await call(channel=chat.chat_id, timestamp=ts, name=name)
            except SlackApiError as exc:
                if exc.response.get("error") not in _REACTION_DONE:
                    raise

    def _remember_forms(self, buttons: Keyboard) -> None:
        for button in (b for row in buttons for b in row):
            if button.form is not None:
                self._forms[button.token] = button.form
                self._forms.move_to_end(button.token)
        while len(self._forms) > FORMS_KEPT:
            self._forms.popitem(last=False)

    def form_for(self, token: str) -> Form | None:
        """The form of a button this process sent (None after a restart)."""
        return self._forms.get(token)

    async def find_form(self, token: str) -> Form | None:
        """`form_for`, else one another process sent (`forms_elsewhere`: a scale-out's
        frontends share theirs)."""
        form = self._forms.get(token)
        if form is None and self.forms_elsewhere is not None:
            form = await self.forms_elsewhere(token)
        return form

    async def open_form(self, trigger_id: str, form: Form, origin: Inbound) -> bool:
        """Open `form` as a modal for the press `origin`; False when Slack refused it
        (e.g. an expired trigger), so the caller hands the bridge a plain press."""
        view = modal(form, origin)
        if view is None or not trigger_id:
            return False
        try:
            with translated():
                await self.client.views_open(trigger_id=trigger_id, view=view)
        except PlatformError as exc:
            log.warning("views.open failed: %s", exc)
            return False
        return True

    async def download(self, url: str, cap: int = MAX_IMAGE_BYTES, *, image: bool = True) -> bytes:
        """A file from `url_private`, fetched with the bot token; at most `cap` bytes.

        Raises `AttachmentRefused` with the reason (for the person who sent it): a URL
        off Slack's file hosts (a remote file may name any URL, and the token must go
        to Slack alone), a refusal, an `image` that is not one, or one too large.
        """
        if not token_may_go_to(url, str(self.client.base_url)):
            log.warning("not fetching a file off Slack's hosts: %s", urlsplit(url).netloc)
            raise AttachmentRefused("it is not on Slack's file servers")
        headers = {"Authorization": f"Bearer {self._token}"}
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
        try:
            # A redirect is followed without the token when it leaves the origin
            # (aiohttp drops Authorization then; tests/adapters/slack/test_adapter.py checks it).
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                _check(response, cap, image=image)
                return await _read_capped(response.content, cap)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("file download failed: %s", exc)
            raise AttachmentRefused("it could not be fetched from Slack") from exc


def _check(response: aiohttp.ClientResponse, cap: int, *, image: bool) -> None:
    """Refuse before reading: not the file (an error, or, without files:read, Slack's
    HTML sign-in page: no image, and for other files refused as text/html, so an
    .html file a person shares is refused too), or a body announced over `cap`."""
    mime = response.headers.get("Content-Type", "").split(";")[0].strip()
    wrong = not mime.startswith("image/") if image else mime == "text/html"
    if response.status != 200 or wrong:
        log.warning("file download refused: HTTP %s, %s", response.status, mime)
        raise AttachmentRefused("Slack would not hand it over")
    if response.content_length is not None and response.content_length > cap:
        raise too_large(cap, response.content_length)


async def _read_capped(body: aiohttp.StreamReader, cap: int) -> bytes:
    """The whole body (one `read(n)` returns only what has arrived so far), given up
    as soon as it outgrows `cap`."""
    data = bytearray()
    async for chunk in body.iter_chunked(DOWNLOAD_CHUNK):
        data += chunk
        if len(data) > cap:
            raise too_large(cap)
    return bytes(data)


def token_may_go_to(url: str, api_base_url: str) -> bool:
    """Whether `url` is one of Slack's file hosts (https), or the API's own origin."""
    try:
        target, api = urlsplit(url), urlsplit(api_base_url)
    except ValueError:
        return False
    if target.scheme == "https" and target.hostname in SLACK_FILE_HOSTS and not target.port:
        return True
    return bool(target.netloc) and (target.scheme, target.netloc) == (api.scheme, api.netloc)

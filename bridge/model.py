"""The bridge's platform-neutral vocabulary: what comes in, what goes out.

Adapters translate platform updates into `Inbound` and carry out `Op`s through
the platform interface (`bridge.platform`: the `Adapter` protocol, its optional
capabilities and the `PlatformError` tree); everything between (router, renderer,
outbox, supervisor) speaks only these types. Messages the renderer creates are named
by a `slot` (a string the renderer chooses, e.g. ``"tool:call_1"``); the outbox
maps slots to the platform's message refs, so the renderer stays pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

ConversationKey = str  # "tg:<chat>", "tg:<chat>:<topic>", "slack:<team>:<channel>[:<ts>]"


# --- inbound ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where to post: the platform's chat id and, for threads/topics, the thread id.

    `is_group` marks a chat the platform paces more strictly (Telegram groups); the
    outbox then uses `PlatformLimits`' group values. It is not stored: a ChatRef is
    rebuilt from every inbound update.

    `reader` is whom an answer in the chat is for, in the platform's own words (Slack:
    "team:user", which a stream outside a DM must name). It travels with the chat, so a
    worker and whichever frontend makes its calls know it without having seen the
    message; it is no part of the chat's identity.
    """

    chat_id: str
    thread_id: str | None = None
    is_group: bool = False
    reader: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A message the bridge sent, as the platform names it."""

    chat: ChatRef
    message_id: str


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent an inbound. `groups` are the ids of the groups named in the
    configuration (Slack user groups) the sender belongs to: an allowed or
    approving group admits its members."""

    id: str
    name: str = ""
    is_bot: bool = False
    groups: frozenset[str] = frozenset()

    def named_in(self, ids: Collection[str]) -> bool:
        """Whether `ids` names this sender, directly or by one of their groups."""
        return self.id in ids or any(group in ids for group in self.groups)


@dataclass(frozen=True, slots=True)
class Image:
    data: bytes
    mime_type: str


MAX_ATTACHMENT = 20 * 1024 * 1024  # the Bot API's download limit; Slack's images are smaller


class AttachmentRefused(Exception):
    """A file could not be fetched; the message says why, for the person who sent it."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file a message carries, not fetched yet: the bridge fetches it only once the
    message is admitted, in its conversation's own task (never in the adapter's update
    loop), and only when its announced `size` is within the cap.

    `fetch(cap)` returns the bytes, or raises `AttachmentRefused` (too large, not
    reachable); it stops reading past `cap` bytes."""

    mime_type: str
    size: int | None  # as the platform announced it; None: unknown
    fetch: Callable[[int], Awaitable[bytes]] = field(compare=False, repr=False)
    # "image": shown to the agent; "file": saved in the workspace's inbox/; "voice": a
    # file too, and its transcript (the platform's own, or `bridge.files.transcription`) is text.
    kind: Literal["image", "file", "voice"] = "image"
    name: str = ""  # the file's name as sent (unsafe: `bridge.files.inbox.safe_filename`)
    transcript: str = ""


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A press on one of the bridge's buttons; `press_id` answers it privately."""

    token: str
    press_id: str
    message: MessageRef | None = None
    text: str | None = None  # an answer typed into the button's `Form` (Slack modals)


@dataclass(frozen=True, slots=True)
class Inbound:
    """One user action in a conversation, already normalised by the adapter.

    `event_id` is the platform's delivery id, used to drop redeliveries; `reply_to`
    is the platform id of the message this one replies to (dialog answers by reply);
    `private_reply`, where the platform can show a message to one user only (Slack's
    ephemeral messages), is the id `Adapter.answer_press` takes to answer the sender
    privately.
    """

    key: ConversationKey
    chat: ChatRef
    sender: Sender
    event_id: str
    text: str = ""
    images: tuple[Image, ...] = ()
    attachments: tuple[Attachment, ...] = ()  # images still to fetch (see `Attachment`)
    reply_to: str | None = None
    press: ButtonPress | None = None
    message_id: str | None = None  # the platform's id of this message (Slack ts)
    from_self: bool = False
    is_edit: bool = False
    private_reply: str = ""
    # A scheduled run (bridge/schedules/): the line the chat shows before it, "⏰ …".
    # Its text is a prompt to the agent whatever it starts with; when the agent is
    # busy it waits as a follow-up, whatever the busy policy. With no text it is only
    # that line (a missed run reported).
    scheduled: str = ""


# --- outbound -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Form:
    """A text field a platform may open for a button (a Slack modal): the press then
    carries the typed answer in `ButtonPress.text`. Platforms without forms ignore it."""

    title: str
    prefill: str = ""
    multiline: bool = False
    placeholder: str = ""


@dataclass(frozen=True, slots=True)
class Button:
    """A label and an opaque token (never option text: platforms cap its size)."""

    label: str
    token: str
    form: Form | None = None


Keyboard = tuple[tuple[Button, ...], ...]  # rows of buttons
Markup = Literal["formatted", "plain"]
TaskStatus = Literal["in_progress", "complete", "error"]


@dataclass(frozen=True, slots=True)
class Task:
    """A tool call as a task card, where the chat streams its run (Slack's
    task_update chunk); elsewhere the op's text shows the same call as a message."""

    id: str  # the toolCallId
    title: str
    status: TaskStatus
    output: str = ""  # a short tail of the output


@dataclass(frozen=True, slots=True)
class Mention:
    """The person a message pings: `user_id` as the platform names them, and the name
    shown where the platform needs one for the mention (Telegram groups)."""

    user_id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Send:
    """Post a new message for `slot`. `text` is already converted for the platform
    when `markup == "formatted"`; `plain` is the fallback sent if the platform
    rejects the formatting."""

    slot: str
    text: str
    plain: str = ""
    markup: Markup = "plain"
    buttons: Keyboard = ()
    force_reply: bool = False  # Telegram ForceReply: answers to input dialogs
    silent: bool = False  # progress, not a result (how a terminal orders what it prints)
    # A run's status: where the chat's posts are scarce (Slack's one a second per
    # channel, shared by its threads) it is posted only with a post to spare, after the
    # answers waiting for one (outbox/delivery.py), for at most `GIVE_WAY_LIMIT`.
    gives_way: bool = False
    # The one kind of message that notifies: it pings this person (bridge/render/pings.py);
    # every other message is posted without a notification where the platform allows.
    ping: Mention | None = None
    # The text is still growing (a streamed answer): where the chat shows drafts
    # (`Drafting`), it is shown as one, and the first op of the slot without `draft`
    # sends the real message; elsewhere the flag changes nothing.
    draft: bool = False
    # The run the op belongs to ("" none): where a chat streams (outbox/runs.py), a
    # run's text and its `task` cards share one stream, which `run_over` ends.
    run: str = ""
    task: Task | None = None
    run_over: bool = False


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace the text and buttons of the message already posted for `slot`."""

    slot: str
    text: str
    plain: str = ""
    markup: Markup = "plain"
    buttons: Keyboard = ()
    # A refresh nobody waits for (a live status's elapsed time): where the platform
    # limits edits over all chats, it goes only when that budget has a call to spare,
    # so under load the answers' own edits come first.
    routine: bool = False
    draft: bool = False  # as for `Send`
    # The slot's text is final as last shown: a draft is sent as the real message;
    # a message already sent is left alone (no call).
    seal: bool = False
    run: str = ""  # as for `Send`
    task: Task | None = None
    run_over: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    slot: str


@dataclass(frozen=True, slots=True)
class Upload:
    """A file attachment (long tool output, exports)."""

    slot: str
    filename: str
    data: bytes
    caption: str = ""


@dataclass(frozen=True, slots=True)
class AnswerPress:
    """A private answer to a button press (toast / ephemeral message), or to a
    message's sender through its `Inbound.private_reply`."""

    press_id: str
    text: str = ""
    alert: bool = False


ReactionState = Literal["working", "done", "failed"]


@dataclass(frozen=True, slots=True)
class React:
    """Mark the user's message `message_id` (its platform id) with a run's state:
    while the agent works on it, then done or failed. Platforms without
    reactions ignore it."""

    message_id: str
    state: ReactionState


Op = Send | Edit | Delete | Upload | AnswerPress | React


# --- platform limits -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlatformLimits:
    """Numbers the renderer and outbox read; adapters fill them from their SDK's
    constants where it has them."""

    max_text: int = 4096  # characters per message after conversion
    max_caption: int = 1024
    max_button_data: int = 64  # bytes of a button token
    max_buttons_per_row: int = 4
    edit_interval: float = 1.0  # seconds between edits of one message
    chat_rate: float = 1.0  # sends+edits per second per chat
    global_rate: float = 30.0  # calls per second over all chats
    # Edits per second over all chats (0: no such limit), after a burst of
    # `edit_burst`: Slack limits chat.update per workspace, not per message.
    edit_rate: float = 0.0
    edit_burst: int = 1
    # Native streams started (and stopped) per second over all chats, after a burst
    # (0: no limit): Slack's chat.startStream / stopStream are Tier 2 per workspace.
    stream_rate: float = 0.0
    stream_burst: int = 1
    # Appends to native streams (Slack Tier 4), and thread status lines, likewise.
    append_rate: float = 0.0
    append_burst: int = 1
    status_rate: float = 0.0
    # In chats with `ChatRef.is_group`; None: the same as in private chats.
    group_edit_interval: float | None = None
    group_chat_rate: float | None = None
    # Each thread paced as a chat of its own: a Discord thread is a channel with its own
    # limits, where a Slack thread or a Telegram topic shares its chat's.
    thread_lanes: bool = False
    # Where a platform limits each method by its own measure (Slack: "per API method
    # per app per workspace", only chat.postMessage per channel; bridge/rates.py): the
    # calls `chat_rate` holds to per chat, after a burst of `chat_burst`; every other
    # method only by its own budget (`method_rates`, and the edit, stream, append and
    # status rates above), so threads of one chat never wait for each other's pace.
    # Empty: the platform paces every call per chat (Telegram, Discord).
    chat_methods: frozenset[str] = frozenset()
    chat_burst: int = 1
    # Further workspace-wide budgets, per method of `bridge.platform.MEMBERS`:
    # (method, calls per second, burst).
    method_rates: tuple[tuple[str, float, int], ...] = ()

    def lane_of(self, chat: ChatRef) -> str:
        """What one lane of calls (and one chat's rate) is kept for."""
        if self.thread_lanes and chat.thread_id is not None:
            return f"{chat.chat_id}/{chat.thread_id}"
        return chat.chat_id

    def edit_interval_in(self, chat: ChatRef) -> float:
        if chat.is_group and self.group_edit_interval is not None:
            return self.group_edit_interval
        return self.edit_interval

    def chat_rate_in(self, chat: ChatRef) -> float:
        if chat.is_group and self.group_chat_rate is not None:
            return self.group_chat_rate
        return self.chat_rate


BusyPolicy = Literal["steer", "follow_up", "ask"]
Verbosity = Literal["all", "compact", "off"]


class ConversationSettings(BaseModel):
    """Per-conversation choices the user can change (persisted in the store)."""

    model_config = ConfigDict(frozen=True)

    busy_policy: BusyPolicy = "steer"
    verbosity: Verbosity = "all"
    model: str | None = None  # "provider/model-id"
    thinking: str | None = None
    timezone: str | None = None  # /tz: the zone its schedules' times are in


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Which events ping the person who started a run (`[notify]`): a question
    waiting for them, the end of the run; a run shorter than `quiet_under` seconds
    ends without a ping (the person is still looking)."""

    questions: bool = True
    done: bool = True
    quiet_under: float = 30.0

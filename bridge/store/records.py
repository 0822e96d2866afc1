"""What the store keeps: conversations, pending dialog buttons, approval audit entries and
the runs whose status message still shows its [⏹ Stop] button.

Plain pydantic models that round-trip through JSON unchanged (both backends store
`model_dump_json()` and read back with `model_validate_json()`), so adding a field with a
default is a compatible change. Times are unix seconds as floats. A dialog is identified by
its conversation `key` plus the agent's `request_id`; each of its buttons has its own
`token`, unique over the whole store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from bridge.model import ConversationSettings

MAX_TOKEN_BYTES = 64  # Telegram's callback_data limit; Slack allows more, never less


class Grant(BaseModel):
    """An "Always allow" of the approval gate (bridge/approvals): the tool calls it
    lets through without asking, for the rest of one conversation."""

    kind: Literal["command", "file"]  # a bash command, or an edit/write of one file
    value: str  # the command, whitespace-normalised; the file's absolute path
    by: str  # the user id who granted it
    at: float


class Checkout(BaseModel):
    """A conversation's git worktree in a project (bridge/projects/project.py)."""

    project: str
    path: str
    branch: str
    base: str


class PullRequestRecord(BaseModel):
    """A conversation's pull request (bridge/controls/pull_requests.py): the title and
    description proposed for it, then, once pushed, what was pushed and where it opened
    (`number` None: a remote with no forge the bridge speaks, or not opened yet)."""

    title: str = ""
    body: str = ""
    pushed: str = ""  # the commit last pushed; "" before the first push
    number: int | None = None
    url: str = ""


class HostRecord(BaseModel):
    """A conversation's agent host (bridge/reattach.py): how to find it again, and how
    far the chat shows what its agent wrote.

    Records up to `applied` are shown in full; a restarted bridge asks for the ones
    after it, through a renderer whose counters are set back to `runs` and `messages`
    (so the replay names its messages as before), with the messages already posted
    since (`slots`: slot → platform message id) adopted, so replaying edits them
    instead of posting them again; a run's status shown to its end since (`ended`)
    is not touched by the replay at all.
    """

    socket: str
    pid: int
    started: int  # the kernel's start time of `pid`: a reused pid is not the host
    profile: str  # the agent's protocol profile, found at its start
    chat_id: str
    thread_id: str | None = None
    is_group: bool = False
    reader: str | None = None  # ChatRef.reader: a stream taken back still names its reader
    applied: int = 0
    runs: int = 0
    messages: int = 0
    slots: dict[str, str] = Field(default_factory=dict)
    # Status slots among `slots` whose final line the chat shows: a replay leaves them
    # be (its run's opening would edit a "✅ done" back to "⏳ working…").
    ended: list[str] = Field(default_factory=list)


PlanPhase = Literal["planning", "ready", "revising", "executing"]


class PlanRecord(BaseModel):
    """A plan first (/plan, bridge/conversation/plans.py), while it lasts: the phase it
    is in, the task, the plan the agent wrote and its steps, the steps done, and the
    live tokens of its buttons (token → "execute" / "revise" / "cancel"), so a press
    still finds it after a restart or on another worker."""

    phase: PlanPhase
    task: str
    by: str  # who asked for it
    slot: str  # the outbox slot of the plan's message
    text: str = ""
    steps: list[str] = Field(default_factory=list)
    done: list[int] = Field(default_factory=list)  # 1-based step numbers
    tokens: dict[str, str] = Field(default_factory=dict)
    rounds: int = 0  # plans written so far (a revision makes another)


class ConversationRecord(BaseModel):
    """One chat conversation bound to an agent workspace and its session files."""

    key: str  # "tg:123", "slack:T1:C1:1700.1"
    workspace: str  # the agent's cwd
    session_dir: str
    session_file: str | None = None  # the agent's current session file, for --session resume
    owner: str | None = None  # user id that started it
    approvers: list[str] = Field(default_factory=list)
    settings: ConversationSettings = ConversationSettings()
    grants: list[Grant] = Field(default_factory=list)  # "Always allow" answers, kept
    # The project picked with /project: None follows the chat's binding, "" is none.
    project: str | None = None
    checkout: Checkout | None = None  # its worktree, once made: the agent's cwd
    pull_request: PullRequestRecord | None = None  # /pr's draft, then what it opened
    host: HostRecord | None = None  # its agent's host, while one holds it
    plan: PlanRecord | None = None  # a plan first, from /plan until it ends
    created_at: float
    last_active: float
    # Who started its current run: whose budget the run spends (bridge/conversation/ledger.py),
    # also when another process takes the run over.
    run_by: str | None = None


class DialogRecord(BaseModel):
    """One button (or reply target) of a pending agent dialog.

    All tokens of one dialog share `key` and `request_id`; `choice` is what pressing this
    token answers. The store keeps `expires_at` but does not act on it: whoever handles the
    press decides what an expired dialog means.
    """

    token: str
    key: str
    request_id: str  # the agent's extension_ui_request id
    method: str  # select / confirm / input / editor / stop / busy
    title: str = ""
    choice: str | None = None  # option value, "yes", "no", "cancel"
    requester: str | None = None  # the owner's user id
    expires_at: float | None = None
    message_chat: str | None = None
    message_thread: str | None = None
    message_slot: str | None = None  # the outbox slot of the dialog's message
    # Chats holding a copy of the question (approvers' direct messages): a press there
    # is carried to conversation `key`.
    copies: list[str] = Field(default_factory=list)
    created_at: float

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        # Records written before the rename call the slot message_id.
        if isinstance(data, dict) and "message_id" in data and "message_slot" not in data:
            data = {**data, "message_slot": data["message_id"]}
            del data["message_id"]
        return data

    @field_validator("token")
    @classmethod
    def _token_fits_a_button(cls, token: str) -> str:
        # Platforms cap button payloads; a longer token would be rejected at send time,
        # far from the code that made it.
        size = len(token.encode())
        if not 0 < size <= MAX_TOKEN_BYTES:
            raise ValueError(f"token must be 1..{MAX_TOKEN_BYTES} bytes, got {size}")
        return token


class AuditEntry(BaseModel):
    """Who answered which agent dialog, with what, and when."""

    at: float
    key: str
    user_id: str
    user_name: str = ""
    request_id: str
    title: str = ""
    choice: str


class LiveRunRecord(BaseModel):
    """A run whose status message is live: kept from the message's first send until the
    run's end, so that a bridge that died in between can retire the message on its next
    start. At most one per conversation (a conversation runs one prompt at a time)."""

    key: str
    chat_id: str
    thread_id: str | None = None
    is_group: bool = False  # the outbox paces group chats more strictly
    message_id: str  # the platform's id of the status message
    started_at: float
    # The user's messages marked as being worked on (👀): the prompt and any steered
    # into the run. Marked failed on retirement.
    working_on: list[str] = []


__all__ = [
    "MAX_TOKEN_BYTES",
    "AuditEntry",
    "ConversationRecord",
    "DialogRecord",
    "Grant",
    "LiveRunRecord",
]

"""One conversation's agent dialogs: opened, answered once by whoever may, closed.

A dialog the agent opens is recorded in the store (one claim per button, so a
press from before a restart still finds it) and answered at most once: the
store's `take_dialog` decides between a press, a typed reply and the deadline.
Deadlines have one owner, the agent client's run state (`RunState.expire_dialogs`):
it cancels a dialog that has no timeout of its own when the bridge's passes, and
reports both kinds as `DialogExpired`; a claim in progress holds the deadline.
Only the conversation's owner or an approver answers (`may_answer`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from bridge.model import AnswerPress
from bridge.store.records import AuditEntry, DialogRecord

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.conversation.routing import DialogReply, Press
    from bridge.conversation.shared import Services
    from bridge.model import ButtonPress, ChatRef, Op, Sender
    from bridge.render import DialogChoice, Renderer
    from bridge.rpc.client import AgentClient
    from bridge.rpc.signals import DialogExpired
    from bridge.rpc.ui import DialogRequest
    from bridge.store.records import ConversationRecord

NO_LONGER_ACTIVE = "This is no longer active."
NOT_YOURS = "Only the person who started this conversation or an approver can answer."


class Dialogs:
    def __init__(
        self,
        key: str,
        chat: ChatRef,
        services: Services,
        renderer: Renderer,
        record: Callable[[], ConversationRecord | None],
        submit: Callable[[Sequence[Op]], None],
    ) -> None:
        self.key = key
        self.chat = chat
        self.services = services
        self._renderer = renderer
        self._record = record
        self._submit = submit
        self._asked_at: dict[str, float] = {}  # open dialogs → when shown (answer latency)
        # Told of every answer (request id, value sent, who); returns what was decided
        # on, for the audit log (the approval gate's grants live there).
        self.on_settled: Callable[[str, str | None, Sender], Awaitable[str]] | None = None
        # Told of a dialog closed unanswered (its id; None: all of them, the agent went).
        self.on_closed: Callable[[str | None], None] | None = None

    def approvers(self) -> frozenset[str]:
        """Who may answer besides the owner: the configured approvers of this chat,
        and those named in the conversation's record."""
        record = self._record()
        configured = self.services.options.approvers_of(self.key)
        return configured if record is None else configured | set(record.approvers)

    def may_answer(self, sender: Sender) -> bool:
        record = self._record()
        owner = record.owner if record else None
        return sender.id == owner or sender.named_in(self.approvers())

    async def opened(self, request: DialogRequest, now: float, copies: Sequence[str] = ()) -> None:
        """The agent asked (the renderer has shown it, in this chat and in the chats
        `copies`): claims for its buttons go in the store, with when it expires (its own
        timeout, or the bridge's)."""
        self._asked_at[request.id] = now
        if request.timeout is not None and request.timeout > 0:
            lasts = request.timeout / 1000  # milliseconds
        else:
            lasts = self.services.options.dialog_timeout
        wall = self.services.wall()
        expires = wall + lasts
        claims: list[tuple[str, str | None]] = [
            (token, choice.label) for token, choice in self._renderer.dialog_tokens(request.id)
        ]
        if not claims:  # an input/editor dialog has no buttons, but take_dialog needs a claim
            claims = [(self.services.tokens(), None)]
        record = self._record()
        records = [
            DialogRecord(
                token=token,
                key=self.key,
                request_id=request.id,
                method=request.method,
                title=request.title,
                choice=label,
                requester=record.owner if record else None,
                expires_at=expires,
                message_chat=self.chat.chat_id,
                message_thread=self.chat.thread_id,
                message_slot=self._renderer.dialog_slot(request.id),
                copies=list(copies),
                created_at=wall,
            )
            for token, label in claims
        ]
        await self.services.store.put_dialogs(records)

    async def chosen(
        self, agent: AgentClient | None, press: Press, choice: DialogChoice, sender: Sender
    ) -> None:
        """A dialog's button was pressed."""
        if not self.may_answer(sender):
            self._submit([AnswerPress(press.press_id, NOT_YOURS, alert=True)])
            return
        typed = press.text if choice.form is not None else None
        if choice.form is not None and typed is None and not choice.typed_prefix:
            # [Answer] on a platform without forms: ask for the answer as a message.
            self._submit([AnswerPress(press.press_id, "")])  # the message it posts says why
            self._submit(self._renderer.ask_reply(choice.request_id, sender.id))
            return
        if agent is None or not await self._claim(agent, choice.request_id):
            await self.stale(agent, press)
            return
        value = choice.typed_prefix + typed if typed is not None else choice.value
        await agent.answer_dialog(
            choice.request_id, value=value, confirmed=choice.confirmed, cancelled=choice.cancelled
        )
        label = typed[:100] if typed is not None else choice.label
        if typed is not None and choice.typed_prefix:
            label = f"{choice.label} “{typed[:100]}”"
        self._submit([AnswerPress(press.press_id, f"✓ {label}")])
        await self._settled(choice.request_id, sender, label, value)

    async def replied(self, agent: AgentClient | None, reply: DialogReply, sender: Sender) -> None:
        """A message answered an input dialog."""
        if not self.may_answer(sender):
            self._submit(self._renderer.notice(NOT_YOURS))
            return
        if agent is None or not await self._claim(agent, reply.request_id):
            self._submit(self._renderer.notice("That question is no longer active."))
            return
        await agent.answer_dialog(reply.request_id, value=reply.text)
        await self._settled(reply.request_id, sender, reply.text[:100], reply.text)

    async def expired(self, event: DialogExpired) -> None:
        """Its deadline passed (the renderer closes the message): the claim goes."""
        request_id = event.dialog.request.id
        self._asked_at.pop(request_id, None)
        if self.on_closed is not None:
            self.on_closed(request_id)
        await self.services.store.take_dialog(request_id, self.key)

    async def agent_gone(self) -> None:
        """The agent stopped: none of its dialogs can be answered any more."""
        self._asked_at.clear()
        if self.on_closed is not None:
            self.on_closed(None)
        for dialog in await self.services.store.dialogs_for(self.key):
            await self.services.store.take_dialog(dialog.request_id, self.key)

    async def stale(
        self, agent: AgentClient | None, press: Press, sender: Sender | None = None
    ) -> None:
        def awaited(request_id: str) -> bool:
            return agent is not None and request_id in agent.state.dialogs

        # A button shown before a bridge restart, of a question its agent still waits
        # on (taken back under its host, bridge/conversation/hosts.py): the same answer as
        # shown now.
        record = await self.services.store.get_dialog(press.token) if sender is not None else None
        if sender is not None and record is not None and record.key == self.key:
            for token, choice in self._renderer.dialog_tokens(record.request_id):
                if awaited(record.request_id) and choice.label == record.choice:
                    await self.chosen(agent, replace(press, token=token), choice, sender)
                    return
        await dead_press(self.services, self.key, self.chat, press, awaited)

    async def _claim(self, agent: AgentClient, request_id: str) -> bool:
        """Take dialog `request_id` to answer it: from the store, so it is answered at
        most once, holding its deadline meanwhile so that its expiry does not cancel
        it while the answer is on its way. False if it is not there to take."""
        agent.state.hold_dialog(request_id)
        if await self.services.store.take_dialog(request_id, self.key):
            return True
        agent.state.hold_dialog(request_id, held=False)  # still the deadline's
        return False

    async def _settled(
        self, request_id: str, sender: Sender, label: str, value: str | None
    ) -> None:
        subject = await self.on_settled(request_id, value, sender) if self.on_settled else ""
        asked = self._asked_at.pop(request_id, None)
        if asked is not None:
            self.services.stats.dialog_answer.observe(self.services.clock() - asked)
        outcome = f"✅ {sender.name or sender.id} chose: {label}"
        self._submit(self._renderer.close_dialog(request_id, outcome))
        await self.services.store.audit(
            AuditEntry(
                at=self.services.wall(),
                key=self.key,
                user_id=sender.id,
                user_name=sender.name,
                request_id=request_id,
                title=subject,
                choice=label,
            )
        )


async def dead_press(
    services: Services,
    key: str,
    chat: ChatRef,
    press: Press | ButtonPress,
    awaited: Callable[[str], bool] = lambda _: False,
) -> None:
    """Answer a press on no live button of conversation `key` "no longer active".

    A press may carry any token (Telegram clients send arbitrary callback data): only
    `key`'s own dialog from before a restart, which no agent `awaited` any more, is
    retired in the store here; another conversation's is not the presser's to end.
    """
    # Retired before the answer goes out, so that once the presser sees "no longer
    # active" the store agrees (a second press finds nothing to retire).
    try:
        record = await services.store.get_dialog(press.token)
        if record is not None and record.key == key and not awaited(record.request_id):
            await services.store.take_dialog(record.request_id, key)
    finally:
        services.outbox.submit(key, chat, [AnswerPress(press.press_id, NO_LONGER_ACTIVE)])

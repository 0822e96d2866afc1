"""/grants: the approval gate's "Always allow" answers in this conversation.

Each grant is listed with a [🚫 revoke] button; `/grants clear` revokes them all. A
revoked call asks again the next time the agent makes it (the grants live in the
conversation's record, which is all the gate's decision reads:
bridge/conversation/approval_questions.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.approvals import describe
from bridge.controls.common import picker
from bridge.controls.handling import Picker

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op
    from bridge.store.records import Grant


def _name(grant: Grant) -> str:
    return f"{grant.kind}:{grant.value}"


async def grants(target: Target, arg: str) -> list[Op]:
    record = target.record
    held = list(record.grants) if record is not None else []
    word, _, rest = arg.strip().partition(" ")
    if word.lower() == "clear":
        await target.save(grants=[])
        return target.renderer.notice(f"🚫 Revoked {len(held)} grant(s); everything asks again.")
    if word.lower() == "revoke":
        gone = [g for g in held if _name(g) == rest]
        if not gone:
            return target.renderer.notice("That grant is no longer there.")
        await target.save(grants=[g for g in held if _name(g) != rest])
        return target.renderer.notice(
            f"🚫 Revoked {describe(gone[0])}: it asks for approval again."
        )
    if not held:
        return target.renderer.notice(
            "No grants: nothing runs without asking. ♾ Always allow on an approval adds one."
        )
    lines = [f"• {describe(g)}" for g in held]
    title = "♾ Allowed without asking in this conversation:\n" + "\n".join(lines)
    values = [f"revoke {_name(g)}" for g in held]
    labels = [f"🚫 {describe(g)}" for g in held]
    revoked = [f"🚫 Revoked: {describe(g)}" for g in held]
    return picker(target, REVOKE, title, values, labels, outcomes=revoked, one_per_row=True)


REVOKE = Picker("grants", grants)  # a [🚫 revoke] button: `/grants revoke <grant>`

"""/usage: tokens and cost of the person asking, this chat and this conversation, for
today, this week and this month, with the budgets that apply (bridge/spend/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.controls.target import Target
    from bridge.model import Op


async def usage(target: Target, arg: str) -> list[Op]:
    return target.renderer.notice(await target.ledger.report(), markdown=True)

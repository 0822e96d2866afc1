"""Button forms shared by all frontends (Slack's modal behind "Deny…", asking why).

A frontend keeps the form of each button it posted in its adapter's memory, and the
press opens the form there. Slack delivers the press to any frontend, so each
frontend also keeps the forms it posts in Redis for a day, and one that gets a press
for a button another frontend posted finds its form there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from bridge.model import Form

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from bridge.model import Keyboard

FORM_TTL = 24 * 60 * 60  # s: a question waits at most a day (`dialog_timeout` is less)
_FORM = TypeAdapter(Form)


class SharedForms:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._redis = client
        self._prefix = f"{prefix}form:"

    async def remember(self, buttons: Keyboard) -> None:
        forms = [(b.token, b.form) for row in buttons for b in row if b.form is not None]
        if not forms:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for token, form in forms:
                pipe.set(self._prefix + token, _FORM.dump_json(form), ex=FORM_TTL)
            await pipe.execute()

    async def find(self, token: str) -> Form | None:
        raw = await self._redis.get(self._prefix + token)
        if raw is None:
            return None
        try:
            return _FORM.validate_json(raw)
        except ValidationError:
            return None

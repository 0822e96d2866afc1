"""The shim that makes the legacy agent (pi 0.13) look like a current one.

The legacy protocol has no responses and no queue (docs/rpc.md, "Profiles"): a
command is answered by the shim itself, and a second prompt would run beside the
first one, which cannot be aborted. So while a run is on, the shim holds steers and
follow-ups (and prompts) and sends them as prompts, one per run, reporting the held
ones as a `queue_update` like a current agent would. Images travel as `attachments`.

It reaches the client only through what it is given: the run state, a way to write
a command, one to emit an event, and whether the client is still open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridge.rpc.commands import Command, LegacyAttachment, LegacyPrompt, Outgoing, Prompt
from bridge.rpc.errors import Unsupported
from bridge.rpc.events import QueueUpdate, Response
from bridge.rpc.profile import LEGACY, LEGACY_COMMANDS
from bridge.rpc.signals import RunStarted

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from bridge.rpc.content import ImageContent
    from bridge.rpc.decode import Decoded
    from bridge.rpc.signals import Signal
    from bridge.rpc.state import RunState


@dataclass(frozen=True)
class _Held:
    kind: str  # "prompt", "steer" or "follow_up"
    text: str
    images: tuple[ImageContent, ...]


class LegacyShim:
    def __init__(
        self,
        state: RunState,
        write: Callable[[Outgoing], Awaitable[None]],
        emit: Callable[[Decoded | Signal], Awaitable[None]],
        is_open: Callable[[], bool],  # neither closing nor exited: held ones may go
    ) -> None:
        self._state, self._write, self._emit, self._is_open = state, write, emit, is_open
        self._held: list[_Held] = []

    async def request(self, command: Command) -> Response:
        """Send a command the legacy agent knows; the shim answers it."""
        if command.type not in LEGACY_COMMANDS:
            raise Unsupported(command.type, LEGACY.name)
        if isinstance(command, Prompt):
            return await self.send("prompt", command.message, command.images or ())
        await self._write(command)
        return Response(type="response", command=command.type, success=True)

    async def send(self, kind: str, text: str, images: Sequence[ImageContent]) -> Response:
        """A prompt now, or held for the next run while one is on."""
        item = _Held(kind, text, tuple(images))
        if self._state.busy:
            self._held.append(item)
            await self._emit(self._queue_update())
        else:
            await self._prompt(item)
        return Response(type="response", command=kind, success=True)

    def clear(self) -> None:
        """Drop what is held (an abort, or the agent gone)."""
        self._held.clear()

    async def run_ended(self) -> None:
        """The next held message, if any, becomes the next run."""
        if self._held and self._is_open():
            item = self._held.pop(0)
            await self._emit(self._queue_update())
            await self._prompt(item)

    async def _prompt(self, item: _Held) -> None:
        attachments = [
            LegacyAttachment(
                id=f"img{n}",
                fileName=f"image{n}.{image.mimeType.rsplit('/', 1)[-1]}",
                mimeType=image.mimeType,
                size=len(image.data) * 3 // 4,
                content=image.data,
            )
            for n, image in enumerate(item.images, 1)
        ]
        if self._state.prompt_sent():
            await self._emit(RunStarted())
        await self._write(LegacyPrompt(message=item.text, attachments=attachments or None))

    def _queue_update(self) -> QueueUpdate:
        return QueueUpdate(
            type="queue_update",
            steering=[h.text for h in self._held if h.kind == "steer"],
            followUp=[h.text for h in self._held if h.kind != "steer"],
        )

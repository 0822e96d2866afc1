"""An inbound's attachments, fetched after admission and in its conversation's task
(so that a stranger's or a slow file holds up nobody else), and images as the
agent takes them."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from bridge.model import MAX_ATTACHMENT, AttachmentRefused, Image
from bridge.rpc.content import ImageContent

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from bridge.model import Inbound

# One image from the platform's file host: 20 MB at a slow few MB/s, with room to spare.
FETCH_TIMEOUT = 60.0


async def fetched(inbound: Inbound, tell: Callable[[str], None]) -> Inbound | None:
    """`inbound` with its attachments fetched as images; what could not be had is
    `tell`'s to say. None when nothing is left to send (an image alone that failed)."""
    if not inbound.attachments:
        return inbound
    images: list[Image] = []
    problems: list[str] = []
    for attachment in inbound.attachments:
        try:
            if attachment.size is not None and attachment.size > MAX_ATTACHMENT:
                raise AttachmentRefused(
                    f"it is {_mb(attachment.size)}, the limit is {_mb(MAX_ATTACHMENT)}"
                )
            with anyio.fail_after(FETCH_TIMEOUT):
                images.append(Image(await attachment.fetch(MAX_ATTACHMENT), attachment.mime_type))
        except AttachmentRefused as exc:
            problems.append(str(exc))
        except TimeoutError:
            problems.append(f"it did not arrive within {FETCH_TIMEOUT:g} s")
    if problems:
        rest = "your text went on without it" if inbound.text.strip() else "nothing was sent"
        tell(f"⚠️ Couldn't fetch your image ({'; '.join(problems)}); {rest}.")
    if not inbound.text.strip() and not images:
        return None
    return replace(inbound, images=(*inbound.images, *images), attachments=())


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def as_content(images: Sequence[Image]) -> list[ImageContent]:
    """Images as the agent's prompt content (base64, with their MIME type)."""
    return [
        ImageContent(data=base64.b64encode(i.data).decode("ascii"), mimeType=i.mime_type)
        for i in images
    ]

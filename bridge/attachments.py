"""An inbound's attachments, fetched after admission and in its conversation's task
(so that a stranger's or a slow file holds up nobody else): images go to the agent
as images; any other file is saved in the conversation's workspace under `inbox/`
(`bridge/inbox.py`), and the message tells the agent what arrived and where, with the
caption as the message. Nothing is unpacked or run."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from bridge.inbox import TooLarge, save
from bridge.model import MAX_ATTACHMENT, AttachmentRefused, Image
from bridge.rpc.content import ImageContent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from pathlib import Path

    from bridge.model import Attachment, Inbound
    from bridge.options import BridgeOptions

# One image from the platform's file host: 20 MB at a slow few MB/s, with room to spare.
FETCH_TIMEOUT = 60.0


async def fetched(
    inbound: Inbound, tell: Callable[[str], None], options: BridgeOptions
) -> Inbound | None:
    """`inbound` with its attachments fetched: images as images, other files saved in
    the workspace and named in the text; what could not be had is `tell`'s to say.
    None when nothing is left to send (a file alone that failed)."""
    if not inbound.attachments:
        return inbound
    images: list[Image] = []
    saved: list[str] = []
    problems: list[str] = []
    for attachment in inbound.attachments:
        file = attachment.kind == "file"
        cap = options.file_max_bytes if file else MAX_ATTACHMENT
        try:
            if attachment.size is not None and attachment.size > cap:
                raise AttachmentRefused(f"it is {_mb(attachment.size)}, the limit is {_mb(cap)}")
            with anyio.fail_after(FETCH_TIMEOUT):
                data = await attachment.fetch(cap)
            if file:
                saved.append(await _save(options.workspace(inbound.key), attachment, data, cap))
            else:
                images.append(Image(data, attachment.mime_type))
        except AttachmentRefused as exc:
            problems.append(str(exc))
        except TimeoutError:
            problems.append(f"it did not arrive within {FETCH_TIMEOUT:g} s")
        except (TooLarge, OSError) as exc:
            problems.append(f"it could not be saved ({type(exc).__name__})")
    if problems:
        files = any(a.kind == "file" for a in inbound.attachments)
        what = "take your file" if files else "fetch your image"
        rest = "your text went on without it" if inbound.text.strip() else "nothing was sent"
        tell(f"⚠️ Couldn't {what} ({'; '.join(problems)}); {rest}.")
    if not inbound.text.strip() and not images and not saved:
        return None
    text = "\n".join([*saved, inbound.text]).strip()
    return replace(inbound, text=text, images=(*inbound.images, *images), attachments=())


async def _save(workspace: Path, attachment: Attachment, data: bytes, cap: int) -> str:
    """Save a file in the workspace's inbox; the line that tells the agent of it."""

    async def one_chunk() -> AsyncIterator[bytes]:
        yield data

    await anyio.Path(workspace).mkdir(parents=True, exist_ok=True)  # before the agent starts
    where = await save(workspace, attachment.name or "file", one_chunk(), cap)
    return f"[A file arrived, saved in your workspace as {where} ({_size(len(data))}).]"


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    return f"{size / 1024:.1f} KB" if size < 2**20 else _mb(size)


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def as_content(images: Sequence[Image]) -> list[ImageContent]:
    """Images as the agent's prompt content (base64, with their MIME type)."""
    return [
        ImageContent(data=base64.b64encode(i.data).decode("ascii"), mimeType=i.mime_type)
        for i in images
    ]

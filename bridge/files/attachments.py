"""An inbound's attachments, fetched after admission and in its conversation's task
(so that a stranger's or a slow file holds up nobody else): images go to the agent
as images; any other file is saved in the conversation's workspace under `inbox/`
(`bridge/files/inbox.py`), and the message tells the agent what arrived and where, with the
caption as the message; a voice note is saved too, and its transcript
(`bridge/files/transcription.py`) becomes the message. Nothing is unpacked or run."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import anyio

from bridge.files.inbox import TooLarge, save
from bridge.files.transcription import TranscriptionFailed, transcribe
from bridge.model import MAX_ATTACHMENT, AnswerPress, AttachmentRefused, Image
from bridge.rpc.content import ImageContent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from pathlib import Path

    from bridge.model import Attachment, Inbound, Op
    from bridge.options import BridgeOptions

# One image from the platform's file host: 20 MB at a slow few MB/s, with room to spare.
FETCH_TIMEOUT = 60.0
NO_TRANSCRIPTION = (
    "🎤 Voice notes need a transcription service, and none is set up: the bridge's "
    "operator can set PI_BRIDGE_TRANSCRIBE_URL to an OpenAI-compatible "
    "/v1/audio/transcriptions endpoint (a hosted one, or a local whisper server). "
    "Your note is saved as {where}; nothing was sent to the agent."
)


class Workplace(Protocol):
    async def workspace(self) -> Path:
        """Where files are saved: the agent's cwd (a project's worktree, made if new)."""


async def fetched(
    inbound: Inbound,
    tell: Callable[[str], None],
    options: BridgeOptions,
    place: Workplace,
    submit: Callable[[list[Op]], None] | None = None,
) -> Inbound | None:
    """`inbound` with its attachments fetched: images as images, other files saved in
    the workspace and named in the text, voice notes saved and their transcript made
    the text; what could not be had is said to the sender alone where the platform
    can (`Inbound.private_reply` through `submit`), else `tell`'s to say. None when
    nothing is left to send (a file alone that failed, a voice note without a
    transcript)."""
    if submit is not None and inbound.private_reply:
        reply = inbound.private_reply
        tell = lambda text: submit([AnswerPress(reply, text)])  # noqa: E731
    if not inbound.attachments:
        return inbound
    images: list[Image] = []
    said: list[str] = []  # lines for the agent: files that arrived, transcripts
    problems: list[str] = []
    for attachment in inbound.attachments:
        problem = await _take_in(attachment, options, place, tell, images, said)
        if problem is not None:
            problems.append(problem)
    if problems:
        files = any(a.kind != "image" for a in inbound.attachments)
        what = "take your file" if files else "fetch your image"
        rest = "your text went on without it" if inbound.text.strip() else "nothing was sent"
        tell(f"⚠️ Couldn't {what} ({'; '.join(problems)}); {rest}.")
    if not inbound.text.strip() and not images and not said:
        return None
    text = "\n".join([*said, inbound.text]).strip()
    return replace(inbound, text=text, images=(*inbound.images, *images), attachments=())


async def _take_in(
    attachment: Attachment,
    options: BridgeOptions,
    place: Workplace,
    tell: Callable[[str], None],
    images: list[Image],
    said: list[str],
) -> str | None:
    """Fetch one attachment: an image joins `images`, a file or voice note is saved and
    its lines for the agent join `said`. What went wrong, if anything."""
    try:
        data = await download(attachment, options)
        if attachment.kind == "image":
            images.append(Image(data, attachment.mime_type))
            return None
        cap = cap_for(attachment, options)
        where = await _save(await place.workspace(), attachment, data, cap)
        if attachment.kind == "voice":
            said += await _heard(attachment, data, where, options, tell)
        else:
            said.append(
                f"[A file arrived, saved in your workspace as {where} ({_size(len(data))}).]"
            )
    except AttachmentRefused as exc:
        return str(exc)
    except TimeoutError:
        return f"it did not arrive within {FETCH_TIMEOUT:g} s"
    except (TooLarge, OSError) as exc:
        return f"it could not be saved ({type(exc).__name__})"
    return None


def cap_for(attachment: Attachment, options: BridgeOptions) -> int:
    """The most bytes an attachment of its kind may have."""
    return MAX_ATTACHMENT if attachment.kind == "image" else options.file_max_bytes


async def download(attachment: Attachment, options: BridgeOptions) -> bytes:
    """Its bytes, at most `cap_for` them: `AttachmentRefused` past that (before the
    download when the platform announced its size), TimeoutError after FETCH_TIMEOUT."""
    cap = cap_for(attachment, options)
    if attachment.size is not None and attachment.size > cap:
        raise too_large(cap, attachment.size)
    with anyio.fail_after(FETCH_TIMEOUT):
        return await attachment.fetch(cap)


async def _save(workspace: Path, attachment: Attachment, data: bytes, cap: int) -> Path:
    """Save a file in the workspace's inbox; where, relative to the workspace."""

    async def one_chunk() -> AsyncIterator[bytes]:
        yield data

    await anyio.Path(workspace).mkdir(parents=True, exist_ok=True)  # before the agent starts
    return await save(workspace, attachment.name or "file", one_chunk(), cap)


async def _heard(
    voice: Attachment, data: bytes, where: Path, options: BridgeOptions, tell: Callable[[str], None]
) -> list[str]:
    """A voice note's transcript as the message (shown to the sender as "🎤 …"): the
    platform's own, else the configured service's; without one, the sender is told
    how to have one, and the note stays in the inbox."""
    heard = voice.transcript
    if not heard and options.transcribe is None:
        tell(NO_TRANSCRIPTION.format(where=where))
        return []
    if not heard:
        assert options.transcribe is not None
        try:
            heard = await transcribe(options.transcribe, where.name, data, voice.mime_type)
        except TranscriptionFailed as exc:
            tell(f"⚠️ Couldn't transcribe your voice note ({exc}); it is saved as {where}.")
            return []
    tell(f"🎤 {heard}")  # (to the sender alone where the platform can)
    return [heard]


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    return f"{size / 1024:.1f} KB" if size < 2**20 else _mb(size)


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def too_large(cap: int, size: int | None = None) -> AttachmentRefused:
    """The refusal of a file over `cap` bytes: its announced `size`, or (None) one
    that outgrew the cap while it was being read. One wording for every platform."""
    if size is None:
        return AttachmentRefused(f"it is over the limit of {_mb(cap)}")
    return AttachmentRefused(f"it is {_mb(size)}, the limit is {_mb(cap)}")


def as_content(images: Sequence[Image]) -> list[ImageContent]:
    """Images as the agent's prompt content (base64, with their MIME type)."""
    return [
        ImageContent(data=base64.b64encode(i.data).decode("ascii"), mimeType=i.mime_type)
        for i in images
    ]

"""A real spoken clip for the voice tests: espeak-ng speaks the text, opusenc encodes it
as Ogg/Opus, the format of Telegram's voice notes (both installed by deploy/dev-setup.sh)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def spoken_ogg(text: str, where: Path) -> bytes:
    wav, ogg = where / "voice.wav", where / "voice.ogg"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    subprocess.run(["opusenc", "--quiet", str(wav), str(ogg)], check=True, capture_output=True)
    return ogg.read_bytes()

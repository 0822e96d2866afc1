"""Where things are, wherever a test module sits in tests/."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
# The recorded protocol documents and transcripts sit beside the repository.
PROTOCOL = REPO.parent / "shared" / "protocol"
TRANSCRIPTS = PROTOCOL / "transcripts"
EXTENSIONS = SUPPORT / "extensions"
# Recordings the project makes itself (tests/support/record_transcripts.py): pi 1.5.2.
FIXTURE_TRANSCRIPTS = TESTS / "fixtures" / "transcripts"


def transcript_dir(folder: str) -> Path:
    """A folder of recordings: the project's own (`p152`), else the shared ones."""
    own = FIXTURE_TRANSCRIPTS / folder
    return own if own.is_dir() else TRANSCRIPTS / folder

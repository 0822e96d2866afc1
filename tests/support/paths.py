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

"""`[chats."<key>"] plan_first` (docs/configuration.md): read from the file, applied to
the key and the keys under it, off by default, and a value that is not a boolean is
refused when the file loads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bridge.app.config import ConfigError
from tests.app.test_config import load

if TYPE_CHECKING:
    from pathlib import Path

CHATS = '[chats."slack:T1:C2"]\nplan_first = true\n[chats."tg:1"]\nverbosity = "off"\n'


@pytest.mark.parametrize(
    ("key", "plans_first"),
    [
        ("slack:T1:C2", True),
        ("slack:T1:C2:171.5", True),  # a thread of the channel
        ("slack:T1:C3", False),
        ("tg:1", False),  # a chat table without it
    ],
)
def test_plan_first_applies_to_its_key_and_those_under_it(
    tmp_path: Path, key: str, plans_first: bool
) -> None:
    chat = load(tmp_path, CHATS).options.chat(key)
    assert (chat is not None and chat.plan_first) is plans_first


def test_plan_first_must_be_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="plan_first"):
        load(tmp_path, '[chats."tg:1"]\nplan_first = "sometimes"\n')

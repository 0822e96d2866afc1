"""Message identities: unique across processes for what the bridge posts of its own
accord (bridge/identity.py), the same again for what a replay of the agent's records
shows (render/status.py `Numbering.note`)."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from bridge.identity import fresh_id
from bridge.model import Send
from bridge.render import PickerOption
from bridge.render.status import Numbering
from bridge.rpc.signals import RunStarted
from tests.render.test_renderer import Session, event, ui
from tests.support.paths import REPO

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bridge.model import Op

PRINT_IDS = "from bridge.identity import fresh_id; print(*(fresh_id() for _ in range(1000)))"


def ids_of_a_process() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PRINT_IDS], cwd=REPO, capture_output=True, check=True, text=True
    )
    return done.stdout.split()


def test_two_processes_never_give_the_same_identity() -> None:
    first, second = ids_of_a_process(), ids_of_a_process()
    assert len(set(first)) == len(first) == 1000
    assert not set(first) & set(second)
    assert not set(first) & {fresh_id() for _ in range(1000)}


def test_the_numbering_counts_notes_afresh_in_each_run_and_after_it() -> None:
    counts = Numbering()
    assert [counts.note(False), counts.note(False)] == ["0+1", "0+2"]
    counts.runs = 1
    assert [counts.note(True), counts.note(True), counts.note(False)] == ["1.1", "1.2", "1+1"]
    again = Numbering(
        runs=1
    )  # a renderer set back to the end of run 1 (bridge/conversation/hosts.py)
    assert again.note(False) == "1+1"


def sent(ops: Sequence[Op]) -> list[str]:
    return [op.slot for op in ops if isinstance(op, Send)]


def test_a_replay_names_the_agents_notices_as_before_and_the_bridges_anew() -> None:
    records = [RunStarted(), ui("notify", message="careful"), event(type="error", error="x")]
    first, second = Session(), Session()
    names = [sent(first.feed(*records)), sent(second.feed(*records))]
    assert names[0] == names[1]  # the replay edits the messages the first one posted
    own = [sent(s.renderer.notice("No grants.")) for s in (first, second)]
    choices = [PickerOption("all", "all")]
    pickers = [sent(s.renderer.pick("verbose", "Show:", choices, 1)) for s in (first, second)]
    assert not set(own[0]) & set(own[1])
    assert not set(pickers[0]) & set(pickers[1])

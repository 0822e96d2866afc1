"""Dialog deadlines have one owner, the run state: the agent's own timeout, or the
bridge's for a dialog that has none (cancelled by the client when it passes), and a
claim being answered holds either."""

from __future__ import annotations

import pytest

from bridge.rpc.state import RunState
from bridge.rpc.ui import DialogRequest, SelectRequest

BRIDGE_TIMEOUT = 60.0


def request(timeout: int | None) -> DialogRequest:
    return SelectRequest(
        type="extension_ui_request", id="d1", method="select", title="Pick", options=["A"],
        timeout=timeout,
    )  # fmt: skip


# (agent timeout ms, bridge timeout s) → (expires at, the client cancels it)
CASES: list[tuple[int | None, float | None, float | None, bool]] = [
    (5000, BRIDGE_TIMEOUT, 105.0, False),  # its own: the agent resolves it
    (5000, None, 105.0, False),
    (None, BRIDGE_TIMEOUT, 160.0, True),  # none of its own: the bridge's, cancelled
    (0, BRIDGE_TIMEOUT, 160.0, True),  # 0 means none
    (None, None, None, False),  # neither: it waits (until the run-time limit)
]


@pytest.mark.parametrize(("own", "bridge", "expires", "cancels"), CASES)
def test_each_dialog_gets_one_deadline(
    own: int | None, bridge: float | None, expires: float | None, cancels: bool
) -> None:
    state = RunState(dialog_timeout=bridge)
    state.apply(request(own), 100.0)
    dialog = state.dialogs["d1"]
    assert (dialog.expires_at, dialog.cancel_at_deadline) == (expires, cancels)
    if expires is None:
        assert state.expire_dialogs(10**9) == []
        return
    assert state.expire_dialogs(expires - 0.1) == []
    assert [d.request.id for d in state.expire_dialogs(expires)] == ["d1"]
    assert state.dialogs == {}
    assert state.expire_dialogs(expires + 1) == []


def test_a_claim_in_progress_holds_the_deadline_and_a_failed_claim_releases_it() -> None:
    state = RunState(dialog_timeout=BRIDGE_TIMEOUT)
    state.apply(request(None), 100.0)
    state.hold_dialog("d1")
    assert state.expire_dialogs(1000.0) == []  # the answer is on its way
    state.hold_dialog("d1", held=False)
    assert [d.request.id for d in state.expire_dialogs(1000.0)] == ["d1"]


def test_an_answered_dialog_never_expires() -> None:
    state = RunState(dialog_timeout=BRIDGE_TIMEOUT)
    state.apply(request(None), 100.0)
    state.hold_dialog("d1")
    state.dialog_answered("d1")
    state.hold_dialog("d1", held=False)  # a claim's release after the answer: no effect
    assert state.expire_dialogs(1000.0) == []

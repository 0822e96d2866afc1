"""The lineup of messages a busy agent has not taken yet
(bridge/conversation/pending_model.py): its state machine, the buttons each state offers,
and how the agent's queue reports are read."""

from __future__ import annotations

import itertools

import pytest

from bridge.conversation.pending_model import (
    WAITING,
    Entry,
    Event,
    Lineup,
    Removed,
    Status,
    actions,
    requeue,
    step,
)

S, E = Status, Event

# Every (status, event) pair: what it becomes, or None where the event means nothing.
STEPS: dict[tuple[Status, Event], Status | None] = {
    (S.HELD, E.TAKE): S.TAKEN,
    (S.HELD, E.CANCEL): S.CANCELLED,
    (S.HELD, E.PUSH): S.STEER,
    (S.HELD, E.GONE): S.DROPPED,
    (S.FOLLOW_UP, E.TAKE): S.TAKEN,
    (S.FOLLOW_UP, E.CANCEL): S.CANCELLED,
    (S.FOLLOW_UP, E.PUSH): S.STEER,
    (S.FOLLOW_UP, E.GONE): S.DROPPED,
    (S.STEER, E.TAKE): S.TAKEN,
    (S.STEER, E.CANCEL): S.CANCELLED,
    (S.STEER, E.PUSH): None,  # a steer is as early as it gets
    (S.STEER, E.GONE): S.DROPPED,
    **{(s, e): None for s in (S.TAKEN, S.CANCELLED, S.DROPPED) for e in Event},
}


def test_the_table_names_every_status_and_event() -> None:
    assert set(STEPS) == set(itertools.product(Status, Event))


@pytest.mark.parametrize(("status", "event"), list(STEPS), ids=lambda v: v.value)
def test_each_event_moves_an_entry_as_the_table_says(status: Status, event: Event) -> None:
    assert step(status, event) is STEPS[status, event]


@pytest.mark.parametrize(
    ("status", "withdraws", "offered"),
    [
        (S.HELD, False, ("steer_now", "cancel")),
        (S.HELD, True, ("steer_now", "cancel")),
        (S.FOLLOW_UP, True, ("steer_now", "cancel")),
        (S.FOLLOW_UP, False, ()),  # in a queue the agent never gives back
        (S.STEER, True, ("cancel",)),
        (S.STEER, False, ()),
        (S.TAKEN, True, ()),
        (S.CANCELLED, True, ()),
        (S.DROPPED, False, ()),
    ],
)
def test_an_entry_offers_the_buttons_of_the_steps_a_press_can_make(
    status: Status, withdraws: bool, offered: tuple[str, ...]
) -> None:
    assert actions(status, withdraws) == offered


def test_an_entry_that_stops_waiting_leaves_the_lineup_and_never_moves_again() -> None:
    lineup = Lineup()
    entry = lineup.add("later", (), "m1", S.HELD)
    assert lineup.get(entry.id) is entry
    assert lineup.move(entry, E.CANCEL)
    assert (entry.status, lineup.get(entry.id), lineup.waiting()) == (S.CANCELLED, None, [])
    assert not lineup.move(entry, E.TAKE)
    assert entry.status is S.CANCELLED


def test_a_pushed_follow_up_waits_on_as_a_steer() -> None:
    lineup = Lineup()
    entry = lineup.add("later", (), "m1", S.FOLLOW_UP)
    assert lineup.move(entry, E.PUSH)
    assert lineup.waiting(S.STEER) == [entry]
    assert entry.kind == "steer"


def _lineup(*entries: tuple[str, Status]) -> tuple[Lineup, list[Entry]]:
    lineup = Lineup()
    return lineup, [lineup.add(text, (), None, status) for text, status in entries]


# (entries, updates in order, texts taken after the last one)
LISTED = [
    pytest.param(
        [("a", S.FOLLOW_UP), ("b", S.FOLLOW_UP)],
        [([], ["a", "b"]), ([], ["b"])],
        ["a"],
        id="the agent takes follow-ups from the front",
    ),
    pytest.param(
        [("a", S.STEER)],
        [([], [])],
        [],
        id="an update before the agent listed it takes nothing",
    ),
    pytest.param(
        [("x", S.FOLLOW_UP), ("x", S.FOLLOW_UP)],
        [([], ["x", "x"]), ([], ["x"])],
        ["x"],
        id="of two alike, the older is the one taken",
    ),
    pytest.param(
        [("s", S.STEER), ("f", S.FOLLOW_UP)],
        [(["s"], ["f"]), ([], ["f"])],
        ["s"],
        id="each queue is read for its own kind",
    ),
    pytest.param(
        [("h", S.HELD)],
        [([], [])],
        [],
        id="a held follow-up is not the agent's to take",
    ),
]


@pytest.mark.parametrize(("entries", "updates", "taken"), LISTED)
def test_a_queue_update_shows_which_entries_the_agent_took(
    entries: list[tuple[str, Status]],
    updates: list[tuple[list[str], list[str]]],
    taken: list[str],
) -> None:
    lineup, _ = _lineup(*entries)
    found: list[Entry] = []
    for steering, follow_ups in updates:
        found = lineup.listed(steering, follow_ups)
    assert [e.text for e in found] == taken


def test_at_the_end_of_a_run_what_the_last_update_leaves_out_was_taken_even_unseen() -> None:
    lineup, (steer, later) = _lineup(("s", S.STEER), ("f", S.FOLLOW_UP))
    assert lineup.listed([], ["f"], settled=True) == [steer]
    assert later.seen


@pytest.mark.parametrize(
    ("entries", "text", "taken"),
    [
        ([("a", S.FOLLOW_UP), ("a", S.STEER)], "a", 1),  # the steer goes in first
        ([("a", S.FOLLOW_UP), ("b", S.FOLLOW_UP)], " b ", 1),
        ([("a", S.HELD)], "a", None),
        ([("a", S.FOLLOW_UP)], "c", None),
    ],
)
def test_a_user_message_in_the_run_is_the_first_entry_with_its_text(
    entries: list[tuple[str, Status]], text: str, taken: int | None
) -> None:
    lineup, made = _lineup(*entries)
    assert lineup.heard(text) is (made[taken] if taken is not None else None)


def test_what_clear_queue_removed_is_matched_in_order_and_the_rest_was_taken() -> None:
    lineup, (s1, f1, f2, h) = _lineup(
        ("s1", S.STEER), ("f1", S.FOLLOW_UP), ("f2", S.FOLLOW_UP), ("h", S.HELD)
    )
    removed, missing = lineup.removed(["s1", "other"], ["f2"])
    assert removed == [
        Removed("steer", "s1", s1),
        Removed("steer", "other", None),  # not the bridge's: it goes back all the same
        Removed("follow_up", "f2", f2),
    ]
    assert missing == [f1]
    assert h.status in WAITING


def _removed(lineup: Lineup) -> tuple[list[Removed], dict[str, Entry]]:
    entries = {e.text: e for e in lineup.waiting()}
    return lineup.removed(["s1", "s2"], ["f1", "f2", "f3"])[0], entries


@pytest.mark.parametrize(
    ("target", "event", "order"),
    [
        ("f2", E.CANCEL, ["s1", "s2", "f1", "f3"]),
        ("f2", E.PUSH, ["s1", "s2", "f2", "f1", "f3"]),  # the last steer, the others kept
        ("s1", E.CANCEL, ["s2", "f1", "f2", "f3"]),
        ("f1", E.PUSH, ["s1", "s2", "f1", "f2", "f3"]),
    ],
)
def test_after_a_withdrawal_the_others_go_back_in_their_order(
    target: str, event: Event, order: list[str]
) -> None:
    lineup, _ = _lineup(
        ("s1", S.STEER),
        ("f1", S.FOLLOW_UP),
        ("s2", S.STEER),
        ("f2", S.FOLLOW_UP),
        ("f3", S.FOLLOW_UP),
    )
    removed, entries = _removed(lineup)
    back = requeue(removed, entries[target], event)
    assert [r.text for r in back] == order
    kinds = {r.text: r.kind for r in back}
    assert kinds.get(target) == ("steer" if event is E.PUSH else None)
